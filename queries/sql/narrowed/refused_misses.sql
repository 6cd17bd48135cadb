-- refused_misses where no proxy miss stands alone: every refused miss the proxy
-- logged in the range and scope was recorded by a server too (the check
-- proxy_misses_alone found none), so refused_misses.sql would drop each one and
-- its rows are the servers' alone. The same rows without the proxy's restart
-- inference and neighbours (queries/registry.ts NARROWED_QUERIES).
-- requires: refused_server_groups
SELECT * FROM refused_server_groups
ORDER BY source DESC, boot, misses DESC, reason, http_status, http_method, mcp_method, next
