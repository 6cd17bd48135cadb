-- proxy_traffic: requests to the MCP endpoint as the proxy saw them, per service:
-- how many, how many the upstream answered 2xx and delivered whole (ok: a 2xx with an
-- upstream error joined from the error log, e.g. an SSE stream cut when the upstream
-- died, is no success; a break-it pass found the real capture's cut stream counted as
-- the one success of its deploy window), how many the proxy answered
-- itself with a 5xx (upstream unreachable), other 5xx, refused misses, 401/403
-- challenges, and distinct sessions. The request count and success count for
-- rates and bounds where no server recorded arrivals (proxy-only evidence).
-- requires: proxy_lines
SELECT
    service,
    count() AS requests,
    countIf(ok AND upstream_error = '') AS ok,
    countIf(pg) AS proxy_generated_5xx,
    countIf(NOT pg AND http_status >= 500) AS upstream_5xx,
    countIf(refused) AS refused,
    countIf(http_status IN (401, 403)) AS challenged,
    uniqExactIf(sk, sk != '') AS sessions
FROM proxy_lines
GROUP BY service
ORDER BY service
