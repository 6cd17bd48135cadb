-- proxy_endpoints: the MCP endpoint's paths as the proxy saw them — every path on
-- which some request carried Mcp-Session-Id or Mcp-Protocol-Version or some
-- response minted a session — unless mcp_paths names them. Discovery probes
-- (/.well-known/*, /register) are never the endpoint (DESIGN §4). Scoped by
-- service and environment like every reader. The hours the range covers whole come
-- from the rollup proxy_paths (schema/migrations/0014), without a service or
-- environment filter (a rollup keeps a re-imported line's old label too); the hours
-- it cuts, or every hour under a filter, from the lines (proxy_access, 0006, where
-- that evidence is one column).
WITH
{whole_hour_lo:UInt32} AS hour_lo,
{whole_hour_hi:UInt32} AS hour_hi,
hour_lo < hour_hi AND {service:String} = '' AND {environment:String} = '' AS paths_rollup
SELECT DISTINCT url_path
FROM
(
    SELECT url_path, marks_endpoint = 1 AS marks_endpoint
    FROM proxy_paths
    WHERE paths_rollup AND ts >= toDateTime(hour_lo, 'UTC') AND ts < toDateTime(hour_hi, 'UTC')
    UNION ALL
    SELECT url_path, marks_endpoint
    FROM proxy_access
    WHERE ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
      AND NOT (paths_rollup AND ts >= {whole_from:DateTime64(6, 'UTC')} AND ts < {whole_to:DateTime64(6, 'UTC')})
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
      AND NOT discovery
)
WHERE if(empty({mcp_paths:Array(String)}), marks_endpoint, has({mcp_paths:Array(String)}, url_path))
