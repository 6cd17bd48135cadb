-- refused_server_groups: the `refused_misses` rows of source 'server' (see
-- refused_misses.sql): the servers' misses by boot, reason, status, methods and
-- what the session did next. The server's reason stands; a miss is active when its
-- session had a successful request in the range before it (server_refused.sql). Read by refused_misses.sql, and alone by
-- narrowed/refused_misses.sql where every miss the proxy logged was recorded by a
-- server too (queries/registry.ts NARROWED_QUERIES).
-- requires: server_misses
SELECT
    'server' AS source,
    boot_id AS boot,
    CAST(NULL, 'Nullable(DateTime64(6, \'UTC\'))') AS boot_at,
    reason, http_status, http_method, mcp_method, next,
    count() AS misses,
    uniqExact(skh) AS sessions,
    countIf(active) AS misses_active,
    uniqExactIf(skh, active) AS sessions_active
FROM server_misses
GROUP BY boot_id, reason, http_status, http_method, mcp_method, next
