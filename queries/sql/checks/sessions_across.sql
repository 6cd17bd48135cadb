-- sessions_across check (queries/registry.ts countSessionsAcross): the sessions
-- with a 2xx before a restart and a 2xx after it, within the range: the keyed
-- session's first 2xx is before span_from (the restart's down_from) and its last
-- 2xx after span_to (its up_at), both strict, as session_continuity's survived_1
-- compares a session with each restart span. A session is its hashed key, and
-- its 2xx are the proxy's (an upstream 2xx on the MCP endpoint carrying the id)
-- and the server's (a settlement with outcome ok), as session_continuity's
-- first_ok and last_ok, from the same places: the hourly rollups proxy_sessions
-- and server_sessions for the hours the range covers whole, the rows for the
-- hours it cuts, and under a service or environment filter the proxy's rows for
-- every hour (read with FINAL: a relabelled line counts under its newest label;
-- schema/migrations/0008). Every fact is a minimum or a maximum, so a
-- re-delivered copy of an event changes nothing.
-- requires: proxy_lines
WITH
intDiv(greatest(toUnixTimestamp64Micro({t_from:DateTime64(6, 'UTC')}), 0) + 3599999999, 3600000000) * 3600 AS hour_lo,
least(intDiv(greatest(toUnixTimestamp64Micro({t_to:DateTime64(6, 'UTC')}), 0), 3600000000) * 3600, 4294965600) AS hour_hi,
hour_lo < hour_hi AS whole_hours,
whole_hours AND {service:String} = '' AND {environment:String} = '' AS proxy_rollup,
fromUnixTimestamp64Micro(hour_lo * 1000000) AS whole_from,
fromUnixTimestamp64Micro(hour_hi * 1000000) AS whole_to,
toUnixTimestamp64Micro({span_from:DateTime64(6, 'UTC')}) / 1e6 AS span_lo,
toUnixTimestamp64Micro({span_to:DateTime64(6, 'UTC')}) / 1e6 AS span_hi
SELECT count() AS sessions
FROM
(
    SELECT h, min(first_ok) AS first_ok, max(last_ok) AS last_ok
    FROM
    (
        SELECT h, first_ok, last_ok
        FROM proxy_sessions
        WHERE proxy_rollup AND ts >= toDateTime(hour_lo, 'UTC') AND ts < toDateTime(hour_hi, 'UTC')
          AND url_path IN {endpoint_paths:Array(String)} AND used = 1
        UNION ALL
        SELECT skh AS h, t AS first_ok, t AS last_ok
        FROM proxy_lines
        WHERE ok AND skh != 0 AND NOT (proxy_rollup AND ts >= whole_from AND ts < whole_to)
        UNION ALL
        SELECT h, first_ok, last_ok
        FROM server_sessions
        WHERE whole_hours AND ts >= toDateTime(hour_lo, 'UTC') AND ts < toDateTime(hour_hi, 'UTC')
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
          AND h != 0
        UNION ALL
        SELECT skh AS h, t AS first_ok, t AS last_ok
        FROM server_requests
        WHERE ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
          AND NOT (whole_hours AND ts >= whole_from AND ts < whole_to)
          AND ok AND skh != 0
    )
    GROUP BY h
)
WHERE first_ok < span_lo AND last_ok > span_hi
