-- refused_misses: refused misses per (inferred) boot, by reason, status and
-- method, with what the same session did next.
--   reason: unknown_after_boot when the session had a 2xx before (the server
--           forgot it), never_seen otherwise.
--   next:   initialize (the same client re-initialized within window_s),
--           same_session_again (the next request reused the refused id),
--           nothing (no further request on that session in the range).
WITH
r AS
(
    SELECT t, sk, client, ok, refused, init, http_method, http_status
    FROM proxy_requests(t_from = {t_from:DateTime64(6)}, t_to = {t_to:DateTime64(6)}, service = {service:String},
                        environment = {environment:String}, mcp_paths = {mcp_paths:Array(String)})
),
boots AS
(
    SELECT arraySort(groupArray(ifNull(up_at, down_from))) AS at
    FROM proxy_restarts(t_from = {t_from:DateTime64(6)}, t_to = {t_to:DateTime64(6)}, service = {service:String},
                        environment = {environment:String}, mcp_paths = {mcp_paths:Array(String)})
),
per_session AS
(
    SELECT t, sk, client, refused, http_method, http_status,
           max(toUInt8(ok)) OVER (PARTITION BY sk ORDER BY t ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS had_ok,
           leadInFrame(t, 1, 0.) OVER (PARTITION BY sk ORDER BY t ROWS BETWEEN CURRENT ROW AND 1 FOLLOWING) AS next_t
    FROM r
    WHERE sk != ''
),
inits AS (SELECT client, groupArray(t) AS ts FROM r WHERE init GROUP BY client),
misses AS
(
    SELECT m.t AS t, m.sk AS sk, m.http_method AS http_method, m.http_status AS http_status,
           if(m.had_ok = 1, 'unknown_after_boot', 'never_seen') AS reason,
           multiIf(
               arrayExists(x -> x >= m.t AND x <= m.t + {window_s:Float64} AND (m.next_t = 0 OR x <= m.next_t), i.ts), 'initialize',
               m.next_t > 0, 'same_session_again',
               'nothing') AS next
    FROM per_session AS m
    LEFT JOIN inits AS i ON i.client = m.client
    WHERE m.refused
)
SELECT
    arrayCount(x -> x <= t, b.at) AS boot,
    if(boot = 0, NULL, toDateTime64(b.at[boot], 6, 'UTC')) AS boot_at,
    reason,
    http_status,
    http_method,
    next,
    count() AS misses,
    uniqExact(sk) AS sessions
FROM misses
CROSS JOIN boots AS b
GROUP BY boot, boot_at, reason, http_status, http_method, next
ORDER BY boot, misses DESC
