-- proxy_seq: one ordered pass over the endpoint's requests per service, the basis
-- of proxy-inferred restarts (DESIGN §4). For every row:
--   served_idx  upstream-served rows up to and including this one; the pg rows
--               of one gap share a served_idx (their "run")
--   pg_before   proxy-generated rows before this one: a session's transition
--               spans a gap exactly when pg_before grew between its two rows
--   last_served / next_served: the served rows around a gap
-- Only the proxy-generated rows are kept: the rows of the gaps.
-- requires: proxy_requests
SELECT *
FROM
(
SELECT service, t, sk, http_method, pg, ok, refused, served_idx,
       sum(toUInt64(pg)) OVER w_upto - toUInt64(pg) AS pg_before,
       max(if(pg, 0., t)) OVER w_upto AS last_served,
       max(if(pg, served_idx, 0)) OVER w_upto AS last_run,
       -- the minimum over the rows that follow, as a running minimum in reverse order:
       -- a frame running to UNBOUNDED FOLLOWING is re-evaluated at every row (quadratic)
       min(if(pg, 1e12, t)) OVER (PARTITION BY service ORDER BY t DESC ROWS UNBOUNDED PRECEDING) AS next_served
FROM
(
    SELECT service, t, sk, http_method, pg, ok, refused,
           sum(toUInt64(NOT pg)) OVER (PARTITION BY service ORDER BY t ROWS UNBOUNDED PRECEDING) AS served_idx
    FROM proxy_requests
)
WINDOW w_upto AS (PARTITION BY service ORDER BY t ROWS UNBOUNDED PRECEDING)
)
WHERE pg
