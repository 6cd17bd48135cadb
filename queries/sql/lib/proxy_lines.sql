-- proxy_lines: the requests to the MCP endpoint as the proxy saw them (DESIGN §4),
-- from proxy_access, with each line's event_id, read with FINAL: a line delivered again keeps only its
-- newest copy, and a copy may differ from the first (a re-import of the same log
-- with another --service or --environment relabels its lines), so readers must
-- not see the older one. (Without FINAL the older copy was still counted until
-- the table merged: found by a break-it pass, see test/derived-tables.test.ts.)
SELECT
    event_id, ts, t, service, environment, http_method, url_path, http_status, duration_ms, sk, rk, principal_key,
    has_credential, proxy_generated, upstream_error, client_address, user_agent, ua_family, origin, client,
    skh, rkh, clienth, pg, ok, refused, init
FROM proxy_access FINAL
WHERE ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
  AND ({service:String} = '' OR service = {service:String})
  AND ({environment:String} = '' OR environment = {environment:String})
  -- the endpoint's paths (proxy_endpoints.sql), resolved before the query and bound
  -- as a constant (queries/registry.ts INTERNAL_PARAM_TYPES)
  AND url_path IN {endpoint_paths:Array(String)}
