-- refused_misses: refused misses per boot, by reason, status and method, with
-- what the same session did next (initialize: the client re-initialized within
-- window_s; same_session_again: it reused the refused id; nothing).
-- Server-recorded misses carry the server's reason and boot. A proxy-logged miss
-- is kept only when no server recorded the same one (same session key within 2 s):
-- its reason is inferred (unknown_after_boot when the session had a 2xx before,
-- never_seen otherwise) and its boot is the inferred restart before it.
-- requires: proxy_requests, proxy_restarts, server_refused
WITH
server AS
(
    SELECT boot_id, sk, reason, http_status, t, http_method, mcp_method, next
    FROM server_refused
),
server_by_session AS (SELECT sk, groupArray(t) AS ts FROM server GROUP BY sk),
r AS (SELECT t, sk, client, ok, refused, init, http_method, http_status FROM proxy_requests),
boots AS
(
    SELECT arraySort(groupArray(ifNull(up_at, down_from))) AS at
    FROM proxy_restarts
),
-- the refused misses, each with its session's neighbours found by ASOF joins (no
-- window over every request): had_ok = a 2xx on the session before the miss;
-- next_t = the session's next request, 0 when none
refused_rows AS (SELECT t, sk, client, http_method, http_status FROM r WHERE refused AND sk != ''),
inits AS (SELECT client, groupArray(t) AS ts FROM r WHERE init AND client IN (SELECT client FROM refused_rows) GROUP BY client),
proxy AS
(
    SELECT m.t AS t, m.sk AS sk, m.http_method AS http_method, m.http_status AS http_status,
           if(o.sk != '', 'unknown_after_boot', 'never_seen') AS reason,
           multiIf(
               arrayExists(x -> x >= m.t AND x <= m.t + {window_s:Float64} AND (n.t = 0 OR x <= n.t), i.ts), 'initialize',
               n.t > 0, 'same_session_again',
               'nothing') AS next
    FROM refused_rows AS m
    ASOF LEFT JOIN (SELECT sk, t FROM r WHERE ok AND sk != '') AS o ON o.sk = m.sk AND o.t < m.t
    ASOF LEFT JOIN (SELECT sk, t FROM r WHERE sk != '') AS n ON n.sk = m.sk AND n.t > m.t
    LEFT JOIN inits AS i ON i.client = m.client
    LEFT JOIN server_by_session AS s ON s.sk = m.sk
    WHERE NOT arrayExists(x -> abs(x - m.t) <= 2, s.ts)
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
