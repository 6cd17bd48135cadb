-- proxy_lines: proxy_requests (the requests to the MCP endpoint, DESIGN §4) read
-- without FINAL, with each line's event_id. A line delivered twice in two batches
-- shows twice until the table merges, so a reader must not change with a copy
-- (existence, min, max, neighbours, distinct keys) or must drop copies after its
-- own filter (LIMIT 1 BY event_id: a copy is the same event). Why: FINAL reads
-- every row of every column asked for before any filter, so a read of 47k refused
-- misses with a few string columns costs as much as reading all 3M lines.
SELECT
    event_id, ts, t, service, environment, http_method, url_path, http_status, duration_ms, sk, rk, principal_key,
    has_credential, proxy_generated, upstream_error, client_address, user_agent, ua_family, origin, client,
    skh, rkh, clienth, pg, ok, refused, init
FROM proxy_access
WHERE ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
  AND ({service:String} = '' OR service = {service:String})
  AND ({environment:String} = '' OR environment = {environment:String})
  -- the endpoint's paths (proxy_endpoints.sql), resolved before the query and bound
  -- as a constant (queries/registry.ts INTERNAL_PARAM_TYPES)
  AND url_path IN {endpoint_paths:Array(String)}
