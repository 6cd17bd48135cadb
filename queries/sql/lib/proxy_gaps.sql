-- proxy_gaps: the restart gaps the proxy log shows (DESIGN §4): each run of
-- proxy-generated 5xx of a service with no upstream-served response in between
-- (proxy_seq names a run by the last served response before it), with the
-- upstream down from that last served response (or the first 5xx, when nothing
-- was served before) up to the first served response after the run (NULL: not
-- back yet when the range ends), and the run's 5xx by method.
-- requires: proxy_seq
SELECT service, run, min(t) AS first_5xx, max(t) AS last_5xx, count() AS n_5xx,
       countIf(http_method = 'POST') AS n_5xx_post, countIf(http_method = 'GET') AS n_5xx_get,
       if(min(last_served) = 0, min(t), min(last_served)) AS down_from,
       if(max(next_served) >= 1e12, CAST(NULL, 'Nullable(Float64)'), max(next_served)) AS up_at
FROM proxy_seq
GROUP BY service, run
