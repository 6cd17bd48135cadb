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
-- Each input is referenced once (the engine analyzes a referenced fragment's whole
-- subquery again at each reference): the transitions are grouped in one pass
-- (matched ones by the gap they are credited to, the others by overlap cluster),
-- the gaps and those groups read into two scalars, and the rows assembled from them.
-- requires: proxy_gaps, proxy_transitions
WITH
(
    SELECT groupArray((service, run, first_5xx, last_5xx, n_5xx, n_5xx_post, n_5xx_get, down_from, up_at))
    FROM proxy_gaps
) AS gap_rows,
(
    -- (service, matched, key, sessions, lo, hi): matched transitions by the run of
    -- the gap they are credited to (sessions: distinct ones), the others by cluster
    -- (transitions merged by overlap: lo the latest start, hi the earliest end, sessions
    -- the transitions)
    SELECT groupArray((service, matched, k, sessions, lo, hi))
    FROM
    (
        SELECT service, matched, if(matched, run, toFloat64(cluster)) AS k,
               if(matched, uniqExact(skh), count()) AS sessions, max(lo) AS lo, min(hi) AS hi
        FROM
        (
            SELECT service, skh, lo, hi, matched, run,
                   sum(toUInt64(is_new)) OVER (PARTITION BY service, matched ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS cluster
            FROM
            (
                SELECT service, skh, lo, hi, matched, run,
                       lo > max(hi) OVER (PARTITION BY service, matched ORDER BY lo, hi ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS is_new
                FROM proxy_transitions
            )
        )
        GROUP BY service, matched, k
    )
) AS trans_rows
-- each gap, with the sessions whose transitions it is credited to (a join on the
-- gap's service and run: each gap once looked through every transition group, and a
-- crash loop of 30,000 proxy-inferred restarts asked 27 GiB; a break-it pass)
SELECT
    g.1 AS service,
    if(m.sessions > 0, 'proxy_5xx_gap+session_refusals', 'proxy_5xx_gap') AS evidence,
    g.8 AS down_from,
    g.9 AS up_at,
    -- observed downtime: from the first proxy-generated 5xx to the first served
    -- response after it (down_from is the earliest the upstream could have gone)
    CAST(g.9 - g.3, 'Nullable(Float64)') AS downtime_s,
    CAST(g.3, 'Nullable(Float64)') AS first_5xx,
    CAST(g.4, 'Nullable(Float64)') AS last_5xx,
    g.5 AS proxy_5xx,
    g.6 AS proxy_5xx_post,
    g.7 AS proxy_5xx_get,
    m.sessions AS sessions_refused
FROM (SELECT arrayJoin(gap_rows) AS g) AS gaps
LEFT JOIN
(
    SELECT x.1 AS service, x.3 AS k, x.4 AS sessions FROM (SELECT arrayJoin(trans_rows) AS x) WHERE x.2
) AS m ON m.service = gaps.g.1 AND m.k = gaps.g.2
UNION ALL
-- transitions that span no gap, merged by overlap: each cluster is one restart
SELECT
    x.1 AS service,
    'session_refusals' AS evidence,
    x.5 AS down_from,
    CAST(x.6, 'Nullable(Float64)') AS up_at,
    CAST(NULL, 'Nullable(Float64)') AS downtime_s,
    CAST(NULL, 'Nullable(Float64)') AS first_5xx,
    CAST(NULL, 'Nullable(Float64)') AS last_5xx,
    toUInt64(0) AS proxy_5xx,
    toUInt64(0) AS proxy_5xx_post,
    toUInt64(0) AS proxy_5xx_get,
    x.4 AS sessions_refused
FROM (SELECT arrayJoin(trans_rows) AS x)
WHERE NOT x.2
