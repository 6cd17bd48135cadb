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
-- the gaps and those groups read into two scalars, and the rows assembled in arrays
-- (a few per restart).
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
SELECT
    r.1 AS service,
    r.2 AS evidence,
    r.3 AS down_from,
    r.4 AS up_at,
    r.5 AS downtime_s,
    r.6 AS first_5xx,
    r.7 AS last_5xx,
    r.8 AS proxy_5xx,
    r.9 AS proxy_5xx_post,
    r.10 AS proxy_5xx_get,
    r.11 AS sessions_refused
FROM
(
    SELECT arrayJoin(arrayConcat(
        -- each gap, with the sessions whose transitions it is credited to
        arrayMap(g -> (
            g.1, if(g.10 > 0, 'proxy_5xx_gap+session_refusals', 'proxy_5xx_gap'), g.8, g.9,
            -- observed downtime: from the first proxy-generated 5xx to the first served
            -- response after it (down_from is the earliest the upstream could have gone)
            CAST(g.9 - g.3, 'Nullable(Float64)'), CAST(g.3, 'Nullable(Float64)'), CAST(g.4, 'Nullable(Float64)'),
            g.5, g.6, g.7, g.10),
            arrayMap(g -> tuple(g.1, g.2, g.3, g.4, g.5, g.6, g.7, g.8, g.9,
                                arraySum(x -> x.4, arrayFilter(x -> x.2 AND x.1 = g.1 AND x.3 = g.2, tr))),
                     gr)),
        -- transitions that span no gap, merged by overlap: each cluster is one restart
        arrayMap(x -> (x.1, 'session_refusals', x.5, CAST(x.6, 'Nullable(Float64)'), CAST(NULL, 'Nullable(Float64)'),
                       CAST(NULL, 'Nullable(Float64)'), CAST(NULL, 'Nullable(Float64)'), toUInt64(0), toUInt64(0), toUInt64(0), x.4),
                 arrayFilter(x -> NOT x.2, tr))
    )) AS r
    FROM (SELECT gap_rows AS gr, trans_rows AS tr)
)
