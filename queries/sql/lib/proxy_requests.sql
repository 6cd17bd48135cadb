-- proxy_requests: requests to the MCP endpoint as the proxy saw them (DESIGN §4),
-- one row per access line, deduplicated (FINAL), read from the proxy_access table
-- (schema/migrations/0006), which holds each line's derived columns. Times are
-- seconds since the epoch as Float64 (`t`) so that windows are plain arithmetic.
-- skh, rkh, clienth: sk, rk and client as UInt128 hashes (0 = empty), the keys
-- to join and count on (several times faster than the strings).
--   pg:      the proxy produced the 5xx itself (upstream unreachable)
--   ok:      a 2xx the upstream produced
--   refused: a refused miss — a 404, or a 400 that carried a session id
--   init:    an initialize: a POST without a session id answered 2xx with a minted one
-- Inlined at each reference, so that the reader's filters and columns reach the scan.
SELECT
    ts, t, service, environment, http_method, url_path, http_status, duration_ms, sk, rk, principal_key,
    has_credential, proxy_generated, upstream_error, client_address, user_agent, ua_family, origin, client,
    skh, rkh, clienth, pg, ok, refused, init
FROM proxy_access FINAL
WHERE ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
  AND ({service:String} = '' OR service = {service:String})
  AND ({environment:String} = '' OR environment = {environment:String})
  -- the endpoint's paths (proxy_endpoints.sql), resolved before the query and bound
  -- as a constant (queries/registry.ts INTERNAL_PARAM_TYPES)
  AND url_path IN {endpoint_paths:Array(String)}
