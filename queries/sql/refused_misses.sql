-- refused_misses: refused misses per boot, by reason, status and method, with
-- what the same session did next (initialize: the client re-initialized within
-- window_s; same_session_again: it reused the refused id; nothing).
-- "Within window_s" includes its end and is exact to the microsecond (the events'
-- precision): an initialize exactly window_s after the miss is within it, one
-- microsecond later is not. The float seconds (t = µs / 1e6) are compared as
-- whole microseconds, round((later - earlier) * 1e6) <= round(window_s * 1e6):
-- before 2106 (2^32 s) each t is within 0.24 µs of its µs, so a difference is
-- within 0.48 µs and rounds to the exact µs. `later <= earlier + window_s` in
-- float seconds was not exact: an initialize 0.001 s after a miss in 2026 was
-- judged outside for about a third of the misses' microseconds (a whole number
-- of seconds only across 2^31 s).
-- Server-recorded misses carry the server's reason and boot. A proxy-logged miss
-- is kept only when no server recorded the same one (same session key within 2 s):
-- its reason is inferred (unknown_after_boot when the session had a 2xx before,
-- at any time, never_seen otherwise) and its boot is the inferred restart before it.
-- misses_active / sessions_active: of those, the misses on sessions that had a 2xx
-- in the range before the miss (a session the range's boot served, not one that
-- was stale already when the range began); for a server's miss, a successful
-- request on the session (server_refused.sql `active`); the server's reason stands.
-- requires: proxy_lines, proxy_signal_lines, proxy_refused, proxy_restarts, server_misses, refused_server_groups
WITH
-- the servers' misses: a proxy miss is kept only where no server recorded the same
-- one (same session key within 2 s, 2,000,000 µs either way: the server's latest miss
-- of the session at most 2 s after the proxy's is at least 2 s before it, one ASOF
-- join; the check proxy_misses_alone counts the proxy misses this keeps, by the same
-- rule). (Each proxy miss once looked through all its session's server misses:
-- quadratic for a client resending a dead session id in a loop. Times as whole µs:
-- t is µs / 1e6, so round(t * 1e6) gives them back.)
server_miss_times AS (SELECT skh, toInt64(round(t * 1e6)) AS us, toUInt8(1) AS found FROM server_misses),
-- the refused sessions with a 2xx before the range (the rollup proxy_sessions: an
-- hour that starts before t_from and whose first 2xx is before it). A proxy miss is
-- unknown_after_boot when its session had a 2xx before it, in the range
-- (proxy_refused's ok_in_range) or before the range (here), so its reason does not
-- depend on where the range starts. (Only this query reads it: in proxy_refused it
-- cost `restarts` about 0.1 s.)
(
    SELECT groupUniqArray(ps.h)
    FROM proxy_sessions AS ps
    INNER JOIN (SELECT DISTINCT skh AS h FROM proxy_refused) AS r ON r.h = ps.h
    WHERE ps.ts < {t_from:DateTime64(6, 'UTC')}
      AND ps.first_ok < toUnixTimestamp64Micro({t_from:DateTime64(6, 'UTC')}) / 1e6
      AND ({service:String} = '' OR ps.service = {service:String})
      AND ({environment:String} = '' OR ps.environment = {environment:String})
      AND ps.url_path IN {endpoint_paths:Array(String)}
) AS ok_before_range,
boots AS
(
    SELECT arraySort(groupArray(ifNull(up_at, down_from))) AS at
    FROM proxy_restarts
),
-- the proxy's misses come with their session's neighbours (proxy_refused):
-- a 2xx on the session before the miss (in the range, or before it: ok_before_range)
-- makes it unknown_after_boot; next_t = the session's next
-- request, 0 when none; inits: the initializes of the refused clients, one row
-- each (a miss finds the first one at or after it: an ASOF join, so memory and
-- work grow with the misses plus the initializes, not with their product when
-- one client, e.g. a hosted chat's egress address, holds thousands of sessions)
inits AS
(
    SELECT clienth, t, toUInt8(1) AS hit
    FROM proxy_signal_lines
    WHERE init AND clienth IN (SELECT clienth FROM proxy_refused)
),
proxy AS
(
    SELECT m.t AS t, m.skh AS skh, m.http_method AS http_method, m.http_status AS http_status,
           if(m.ok_in_range OR has(ok_before_range, m.skh), 'unknown_after_boot', 'never_seen') AS reason,
           m.ok_in_range AS ok_in_range,
           multiIf(
               -- the first initialize at or after the miss is the earliest witness
               i.hit = 1 AND round((i.t - m.t) * 1e6) <= round({window_s:Float64} * 1e6) AND (m.next_t = 0 OR i.t <= m.next_t), 'initialize',
               m.next_t > 0, 'same_session_again',
               'nothing') AS next
    FROM (SELECT *, toInt64(round(t * 1e6)) + 2000000 AS us_to FROM proxy_refused) AS m
    ASOF LEFT JOIN inits AS i ON i.clienth = m.clienth AND m.t <= i.t
    ASOF LEFT JOIN server_miss_times AS s ON s.skh = m.skh AND s.us <= m.us_to
    WHERE NOT (s.found = 1 AND s.us >= m.us_to - 4000000)
)
-- the two sources, then one total order over both (an ORDER BY after UNION ALL orders only its last SELECT)
SELECT *
FROM
(
    SELECT * FROM refused_server_groups
    UNION ALL
    SELECT
        'proxy' AS source,
        toString(arrayCount(x -> x <= t, b.at)) AS boot,
        if(boot = '0', NULL, toDateTime64(b.at[toUInt64(boot)], 6, 'UTC')) AS boot_at,
        reason, http_status, http_method, '' AS mcp_method, next,
        count() AS misses,
        uniqExact(skh) AS sessions,
        countIf(ok_in_range) AS misses_active,
        uniqExactIf(skh, ok_in_range) AS sessions_active
    FROM proxy
    CROSS JOIN boots AS b
    GROUP BY boot, boot_at, reason, http_status, http_method, next
)
ORDER BY source DESC, boot, misses DESC, reason, http_status, http_method, mcp_method, next
