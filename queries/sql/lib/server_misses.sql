-- server_misses: the refused misses the servers recorded (server_refused.sql), one
-- row each, read once into a scalar: boot_id, skh, reason, http_status, t (seconds),
-- http_method, mcp_method, next, active. Read by refused_server_groups (the `refused_misses`
-- rows of source 'server') and by refused_misses.sql, whose proxy misses are kept
-- only where no server recorded the same one.
-- requires: server_refused
WITH
(SELECT groupArray((boot_id, skh, reason, http_status, t, http_method, mcp_method, next, active)) FROM server_refused) AS server_rows
SELECT x.1 AS boot_id, x.2 AS skh, x.3 AS reason, x.4 AS http_status, x.5 AS t, x.6 AS http_method, x.7 AS mcp_method, x.8 AS next, x.9 AS active
FROM (SELECT arrayJoin(server_rows) AS x)
