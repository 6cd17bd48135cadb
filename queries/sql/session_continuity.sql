-- session_continuity: what happened to sessions, by user-agent family and origin.
--   minted_unused:       an initialize minted the id, no request ever carried it back
--                        (e.g. a browser client that never returns Mcp-Session-Id)
--   stale:               the session got at least one refused miss
--   recovered:           a refused session whose client re-initialized (an inferred pair)
--   unrecovered_stale:   a refused session never followed by such an initialize
--   abandoned_after_failure: the session's last request failed and the same client
--                        sent no initialize within window_s afterwards
--   survived_1/survived_2: sessions with 2xx both before and after at least one / two restarts
WITH
r AS
(
    SELECT t, sk, rk, client, ua_family, origin, ok, refused, init
    FROM proxy_requests(t_from = {t_from:DateTime64(6)}, t_to = {t_to:DateTime64(6)}, service = {service:String},
                        environment = {environment:String}, mcp_paths = {mcp_paths:Array(String)})
),
restarts AS
(
    SELECT groupArray((down_from, ifNull(up_at, down_from))) AS spans
    FROM proxy_restarts(t_from = {t_from:DateTime64(6)}, t_to = {t_to:DateTime64(6)}, service = {service:String},
                        environment = {environment:String}, mcp_paths = {mcp_paths:Array(String)})
),
pairs AS
(
    SELECT stale_session_key
    FROM proxy_remint_pairs(t_from = {t_from:DateTime64(6)}, t_to = {t_to:DateTime64(6)}, service = {service:String},
                            environment = {environment:String}, mcp_paths = {mcp_paths:Array(String)}, window_s = {window_s:Float64})
),
inits AS (SELECT client, groupArray(t) AS ts FROM r WHERE init GROUP BY client),
used AS
(
    SELECT sk,
           any(client) AS client, any(ua_family) AS ua_family, any(origin) AS origin,
           countIf(refused) AS refused_n,
           minIf(t, ok) AS first_ok, maxIf(t, ok) AS last_ok, countIf(ok) AS ok_n,
           argMax(ok, t) AS last_ok_flag, max(t) AS last_t
    FROM r WHERE sk != '' GROUP BY sk
),
minted AS (SELECT rk AS sk, any(client) AS client, any(ua_family) AS ua_family, any(origin) AS origin FROM r WHERE init GROUP BY rk),
per_session AS
(
    SELECT
        if(u.sk != '', u.sk, m.sk) AS session_key,
        if(u.sk != '', u.ua_family, m.ua_family) AS ua_family,
        if(u.sk != '', u.origin, m.origin) AS origin,
        if(u.sk != '', u.client, m.client) AS client,
        m.sk != '' AS was_minted,
        u.sk != '' AS was_used,
        u.refused_n > 0 AS is_stale,
        session_key IN (SELECT stale_session_key FROM pairs) AS is_recovered,
        u.sk != '' AND u.last_ok_flag = 0 AS last_failed,
        u.last_t AS last_t,
        u.first_ok AS first_ok,
        u.last_ok AS last_ok,
        u.ok_n AS ok_n
    FROM used AS u
    FULL OUTER JOIN minted AS m ON m.sk = u.sk
)
SELECT
    s.ua_family AS ua_family,
    s.origin AS origin,
    count() AS sessions,
    countIf(was_minted AND NOT was_used) AS minted_unused,
    countIf(is_stale) AS stale,
    countIf(is_stale AND is_recovered) AS recovered,
    countIf(is_stale AND NOT is_recovered) AS unrecovered_stale,
    countIf(last_failed AND NOT arrayExists(x -> x >= s.last_t AND x <= s.last_t + {window_s:Float64}, i.ts)) AS abandoned_after_failure,
    countIf(ok_n > 0 AND arrayCount(span -> span.1 > s.first_ok AND span.2 < s.last_ok, x.spans) >= 1) AS survived_1,
    countIf(ok_n > 0 AND arrayCount(span -> span.1 > s.first_ok AND span.2 < s.last_ok, x.spans) >= 2) AS survived_2
FROM per_session AS s
LEFT JOIN inits AS i ON i.client = s.client
CROSS JOIN restarts AS x
GROUP BY ua_family, origin
ORDER BY sessions DESC
