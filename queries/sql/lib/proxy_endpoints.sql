-- proxy_endpoints: the MCP endpoint's paths as the proxy saw them — every path on
-- which some request carried Mcp-Session-Id or Mcp-Protocol-Version or some
-- response minted a session — unless mcp_paths names them. Discovery probes
-- (/.well-known/*, /register) are never the endpoint (DESIGN §4). Scoped by
-- service and environment like every reader. Reads the proxy_access table
-- (schema/migrations/0006), where that evidence is one column.

SELECT DISTINCT url_path
FROM proxy_access
WHERE ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
  AND ({service:String} = '' OR service = {service:String})
  AND ({environment:String} = '' OR environment = {environment:String})
  AND NOT discovery
  AND if(empty({mcp_paths:Array(String)}), marks_endpoint, has({mcp_paths:Array(String)}, url_path))
