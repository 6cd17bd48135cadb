-- proxy_restarts: restarts inferred from the proxy log alone (DESIGN §4). Two kinds
-- of evidence:
--  * a gap: a run of proxy-generated 5xx with no upstream-served response in
--    between; the upstream was down from the last served response before the run
--    to the first served response after it;
--  * a transition: a session whose previous upstream-served request was a 2xx
--    gets a refused miss; its server forgot it somewhere in between.
-- A transition overlapping a gap is the same restart (one restart seen both
-- ways is one restart). Transitions that overlap no gap are merged by overlap
-- into restarts of their own (a fast restart leaves no 502 at all).
-- requires: proxy_gaps, proxy_transitions
WITH
trans AS (SELECT service, skh, lo, hi, matched, run FROM proxy_transitions),
gaps AS (SELECT * FROM proxy_gaps),
-- Transitions that span no gap, merged by overlap: each group is one restart.
clusters AS
(
    SELECT service, lo, hi, sum(toUInt64(is_new)) OVER (PARTITION BY service ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS cluster
    FROM
    (
        SELECT service, lo, hi,
               lo > max(hi) OVER (PARTITION BY service ORDER BY lo, hi ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS is_new
        FROM trans
        WHERE NOT matched
    )
)
SELECT
    g.service AS service,
    if(m.sessions > 0, 'proxy_5xx_gap+session_refusals', 'proxy_5xx_gap') AS evidence,
    g.down_from AS down_from,
    g.up_at AS up_at,
    -- observed downtime: from the first proxy-generated 5xx to the first served
    -- response after it (down_from is the earliest the upstream could have gone)
    g.up_at - g.first_5xx AS downtime_s,
    g.first_5xx AS first_5xx,
    g.last_5xx AS last_5xx,
    g.n_5xx AS proxy_5xx,
    g.n_5xx_post AS proxy_5xx_post,
    g.n_5xx_get AS proxy_5xx_get,
    ifNull(m.sessions, 0) AS sessions_refused
FROM gaps AS g
LEFT JOIN (SELECT service, run, uniqExact(skh) AS sessions FROM trans WHERE matched GROUP BY service, run) AS m
    ON m.service = g.service AND m.run = g.run
UNION ALL
SELECT
    service,
    'session_refusals' AS evidence,
    max(lo) AS down_from,
    CAST(min(hi), 'Nullable(Float64)') AS up_at,
    CAST(NULL, 'Nullable(Float64)') AS downtime_s,
    CAST(NULL, 'Nullable(Float64)') AS first_5xx,
    CAST(NULL, 'Nullable(Float64)') AS last_5xx,
    toUInt64(0) AS proxy_5xx,
    toUInt64(0) AS proxy_5xx_post,
    toUInt64(0) AS proxy_5xx_get,
    count() AS sessions_refused
FROM clusters
GROUP BY service, cluster
