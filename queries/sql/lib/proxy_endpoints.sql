-- proxy_endpoints: the MCP endpoint's paths as the proxy saw them — every path on
-- which some request carried Mcp-Session-Id or Mcp-Protocol-Version or some
-- response minted a session — unless mcp_paths names them. Discovery probes
-- (/.well-known/*, /register) are never the endpoint (DESIGN §4). Scoped by
-- service and environment like every reader.

SELECT DISTINCT url_path
FROM events
WHERE event_type = 'proxy_access'
  AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
  AND ({service:String} = '' OR service = {service:String})
  AND ({environment:String} = '' OR environment = {environment:String})
  AND if(empty({mcp_paths:Array(String)}),
         request_session_key != '' OR response_session_key != '' OR protocol_version != '',
         has({mcp_paths:Array(String)}, url_path))
  AND NOT startsWith(url_path, '/.well-known/') AND url_path != '/register'
