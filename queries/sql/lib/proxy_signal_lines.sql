-- proxy_signal_lines: proxy_lines (proxy_lines.sql) restricted to the rare lines
-- the queries look up by their class (refused misses, initializes,
-- proxy-generated 5xx, 401/403), read from proxy_signals
-- (schema/migrations/0012), which holds only those: the same columns, filters
-- and FINAL as proxy_lines, so `proxy_signal_lines WHERE refused` is
-- `proxy_lines WHERE refused` at a fraction of the read. Only those classes:
-- any other filter must read proxy_lines. test/queries-registry.test.ts keeps
-- the two the same but for the table.
SELECT
    event_id, ts, t, service, environment, http_method, url_path, http_status, duration_ms, sk, rk, principal_key,
    has_credential, proxy_generated, upstream_error, client_address, user_agent, ua_family, origin, client,
    skh, rkh, clienth, pg, ok, refused, init
FROM proxy_signals FINAL
WHERE ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
  AND ({service:String} = '' OR service = {service:String})
  AND ({environment:String} = '' OR environment = {environment:String})
  -- the endpoint's paths (proxy_endpoints.sql), resolved before the query and bound
  -- as a constant (queries/registry.ts INTERNAL_PARAM_TYPES)
  AND url_path IN {endpoint_paths:Array(String)}
