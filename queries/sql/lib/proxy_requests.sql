-- proxy_requests: requests to the MCP endpoint as the proxy saw them (DESIGN §4),
-- one row per access line, deduplicated (FINAL). Times are seconds since the
-- epoch as Float64 (`t`) so that windows are plain arithmetic.
--   pg:      the proxy produced the 5xx itself (upstream unreachable)
--   ok:      a 2xx the upstream produced
--   refused: a refused miss — a 404, or a 400 that carried a session id
--   init:    an initialize: a POST without a session id answered 2xx with a minted one
-- Inlined at each reference, so that the reader's filters and columns reach the scan.
-- requires: proxy_endpoints
SELECT
    ts,
    toUnixTimestamp64Micro(ts) / 1e6 AS t,
    service,
    environment,
    http_method,
    url_path,
    http_status,
    duration_ms,
    request_session_key AS sk,
    response_session_key AS rk,
    principal_key,
    has_credential,
    proxy_generated,
    upstream_error,
    client_address,
    user_agent,
    splitByChar('/', user_agent)[1] AS ua_family,
    attrs['http.origin'] AS origin,
    concat(client_address, ' ', user_agent) AS client,
    (proxy_generated AND http_status >= 500) AS pg,
    (NOT pg AND http_status BETWEEN 200 AND 299) AS ok,
    (NOT pg AND (http_status = 404 OR (http_status = 400 AND sk != ''))) AS refused,
    (ok AND http_method = 'POST' AND sk = '' AND rk != '') AS init
FROM events FINAL
WHERE event_type = 'proxy_access'
  AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
  AND ({service:String} = '' OR service = {service:String})
  AND ({environment:String} = '' OR environment = {environment:String})
  AND url_path IN proxy_endpoints
