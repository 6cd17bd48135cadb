-- remint_pairs: distinct stale → replacement pairs (never events), adopted or
-- orphaned. Inferred pairs (refused miss, then an initialize from the same
-- client within window_s) are marked inferred = 1.
SELECT
    stale_session_key,
    replacement_session_key,
    'client_reinit_inferred' AS mode,
    1 AS inferred,
    toDateTime64(miss_t, 6, 'UTC') AS refused_at,
    toDateTime64(init_t, 6, 'UTC') AS reinitialized_at,
    round(init_t - miss_t, 3) AS recovery_s,
    adopted
FROM proxy_remint_pairs(t_from = {t_from:DateTime64(6)}, t_to = {t_to:DateTime64(6)}, service = {service:String},
                        environment = {environment:String}, mcp_paths = {mcp_paths:Array(String)}, window_s = {window_s:Float64})
ORDER BY miss_t
