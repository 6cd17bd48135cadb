-- refused_misses: refused misses per boot, by reason, status and method, with
-- what the same session did next (initialize: the client re-initialized within
-- window_s; same_session_again: it reused the refused id; nothing).
-- Server-recorded misses carry the server's reason and boot. A proxy-logged miss
-- is kept only when no server recorded the same one (same session key within 2 s):
-- its reason is inferred (unknown_after_boot when the session had a 2xx before,
-- never_seen otherwise) and its boot is the inferred restart before it.
WITH
server AS
(
    SELECT boot_id, sk, reason, http_status, t, http_method, mcp_method, next
    FROM server_refused(t_from = {t_from:DateTime64(6)}, t_to = {t_to:DateTime64(6)}, service = {service:String},
                        environment = {environment:String}, window_s = {window_s:Float64})
),
server_by_session AS (SELECT sk, groupArray(t) AS ts FROM server GROUP BY sk),
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
proxy AS
(
    SELECT m.t AS t, m.sk AS sk, m.http_method AS http_method, m.http_status AS http_status,
           if(m.had_ok = 1, 'unknown_after_boot', 'never_seen') AS reason,
           multiIf(
               arrayExists(x -> x >= m.t AND x <= m.t + {window_s:Float64} AND (m.next_t = 0 OR x <= m.next_t), i.ts), 'initialize',
               m.next_t > 0, 'same_session_again',
               'nothing') AS next
    FROM per_session AS m
    LEFT JOIN inits AS i ON i.client = m.client
    LEFT JOIN server_by_session AS s ON s.sk = m.sk
    WHERE m.refused AND NOT arrayExists(x -> abs(x - m.t) <= 2, s.ts)
)
SELECT
    'server' AS source,
    boot_id AS boot,
    CAST(NULL, 'Nullable(DateTime64(6, \'UTC\'))') AS boot_at,
    reason, http_status, http_method, mcp_method, next,
    count() AS misses,
    uniqExact(sk) AS sessions
FROM server
GROUP BY boot_id, reason, http_status, http_method, mcp_method, next
UNION ALL
SELECT
    'proxy' AS source,
    toString(arrayCount(x -> x <= t, b.at)) AS boot,
    if(boot = '0', NULL, toDateTime64(b.at[toUInt64(boot)], 6, 'UTC')) AS boot_at,
    reason, http_status, http_method, '' AS mcp_method, next,
    count() AS misses,
    uniqExact(sk) AS sessions
FROM proxy
CROSS JOIN boots AS b
GROUP BY boot, boot_at, reason, http_status, http_method, next
ORDER BY source DESC, boot, misses DESC
