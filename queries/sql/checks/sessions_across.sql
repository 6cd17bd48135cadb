-- sessions_across check (queries/registry.ts countSessionsAcross): the sessions
-- that kept working across one restart: a keyed session whose first 2xx in the
-- range is before the restart's span and whose last 2xx in it is after the span,
-- both strict. The span runs from the earlier to the later of span_from (the old
-- instance's down_from) and span_to (the new one's up_at): where the instances
-- overlapped (the old one served after the new one booted), a session crossed only
-- if it was served before the new boot and after the old instance's end.
-- The sessions are those of the restart's service (span_service): for a server
-- restart, the server's 2xx (settlements with outcome ok) of that service and the
-- proxy's 2xx on the MCP endpoint labelled with it or unlabelled (as restarts.sql
-- matches a proxy restart to a server boot: the same service, or either
-- unlabelled); for a proxy-inferred restart, the proxy's lines with its label only.
-- The server's come from the hourly rollup server_sessions for the hours the range
-- covers whole and from the rows for the hours it cuts (schema/migrations/0008);
-- the proxy's from the rows, read with FINAL (proxy_lines: a relabelled line
-- counts under its newest label; the rollup keeps old labels). Every fact is a
-- minimum or a maximum, so a re-delivered copy of an event changes nothing.
-- session_continuity's survived_1 applies the same test to every restart span
-- of its range, over every service in scope.
-- requires: proxy_lines
WITH
{whole_hour_lo:UInt32} AS hour_lo,
{whole_hour_hi:UInt32} AS hour_hi,
hour_lo < hour_hi AS whole_hours,
{whole_from:DateTime64(6, 'UTC')} AS whole_from,
{whole_to:DateTime64(6, 'UTC')} AS whole_to,
{span_source:String} = 'server' AS server_restart,
least(toUnixTimestamp64Micro({span_from:DateTime64(6, 'UTC')}), toUnixTimestamp64Micro({span_to:DateTime64(6, 'UTC')})) / 1e6 AS span_lo,
greatest(toUnixTimestamp64Micro({span_from:DateTime64(6, 'UTC')}), toUnixTimestamp64Micro({span_to:DateTime64(6, 'UTC')})) / 1e6 AS span_hi
SELECT count() AS sessions
FROM
(
    SELECT h, min(first_ok) AS first_ok, max(last_ok) AS last_ok
    FROM
    (
        SELECT skh AS h, t AS first_ok, t AS last_ok
        FROM proxy_lines
        WHERE ok AND skh != 0 AND (service = {span_service:String} OR (server_restart AND service = ''))
        UNION ALL
        SELECT h, first_ok, last_ok
        FROM server_sessions
        WHERE server_restart AND whole_hours AND ts >= toDateTime(hour_lo, 'UTC') AND ts < toDateTime(hour_hi, 'UTC')
          AND service = {span_service:String}
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
          AND h != 0
        UNION ALL
        SELECT skh AS h, t AS first_ok, t AS last_ok
        FROM server_requests
        WHERE server_restart AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
          AND service = {span_service:String}
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
          AND NOT (whole_hours AND ts >= whole_from AND ts < whole_to)
          AND ok AND skh != 0
    )
    GROUP BY h
)
WHERE first_ok < span_lo AND last_ok > span_hi
