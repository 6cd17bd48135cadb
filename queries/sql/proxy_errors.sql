-- proxy_errors: proxy-generated 5xx per restart gap, with the gap's duration and
-- where it falls in the distribution of all gaps in the range. The gaps are
-- proxy_restarts' gap rows (proxy_gaps.sql), without the session refusals it
-- also weighs.
-- requires: proxy_gaps
SELECT
    service,
    toDateTime64(first_5xx, 6, 'UTC') AS first_5xx,
    toDateTime64(last_5xx, 6, 'UTC') AS last_5xx,
    round(downtime_s, 3) AS gap_s,
    n_5xx AS proxy_5xx,
    n_5xx_post AS proxy_5xx_post,
    n_5xx_get AS proxy_5xx_get,
    round(quantileExact(0.5)(downtime_s) OVER (), 3) AS gap_p50_s,
    round(max(downtime_s) OVER (), 3) AS gap_max_s
FROM (SELECT *, up_at - first_5xx AS downtime_s FROM proxy_gaps)
ORDER BY first_5xx
