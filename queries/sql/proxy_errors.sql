-- proxy_errors: proxy-generated 5xx per restart gap, with the gap's duration and
-- where it falls in the distribution of all gaps in the range.
-- requires: proxy_restarts
SELECT
    service,
    toDateTime64(first_5xx, 6, 'UTC') AS first_5xx,
    toDateTime64(last_5xx, 6, 'UTC') AS last_5xx,
    round(downtime_s, 3) AS gap_s,
    proxy_5xx,
    proxy_5xx_post,
    proxy_5xx_get,
    round(quantileExact(0.5)(downtime_s) OVER (), 3) AS gap_p50_s,
    round(max(downtime_s) OVER (), 3) AS gap_max_s
FROM proxy_restarts
WHERE proxy_5xx > 0
ORDER BY first_5xx
