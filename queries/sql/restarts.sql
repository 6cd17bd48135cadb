-- restarts: each restart with its evidence, downtime and proxy 5xx in the gap.
-- Proxy-inferred (DESIGN §4): a gap of proxy-generated 5xx and/or sessions whose
-- 2xx turned into refused misses; server boot events join in a later migration.
SELECT
    service,
    'proxy' AS source,
    evidence,
    toDateTime64(down_from, 6, 'UTC') AS down_from,
    if(isNull(up_at), NULL, toDateTime64(assumeNotNull(up_at), 6, 'UTC')) AS up_at,
    round(downtime_s, 3) AS downtime_s,
    proxy_5xx,
    proxy_5xx_post,
    proxy_5xx_get,
    sessions_refused
FROM proxy_restarts(t_from = {t_from:DateTime64(6)}, t_to = {t_to:DateTime64(6)}, service = {service:String},
                    environment = {environment:String}, mcp_paths = {mcp_paths:Array(String)})
ORDER BY ifNull(up_at, down_from)
