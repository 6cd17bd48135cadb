-- proxy_seq: the proxy-generated 5xx (the rows of the restart gaps, DESIGN §4),
-- each with the upstream-served requests of its service around it:
--   last_served  the last served request before it (0 = none); the 5xx rows of
--                one gap share it, so it names the gap ("run")
--   next_served  the first served request after it (1e12 = none yet)
-- Two scalars, which the engine computes once per query however often this
-- fragment is inlined (a scalar that holds a subquery set would be evaluated again
-- at each reference, so neither does): one pass over the served requests' times
-- per service and minute (the first and last of each minute, and all of them in
-- the minutes that hold a 5xx), and the 5xx rows. No join or window runs over every request.
-- The pass reads only the minutes within 2 of a 5xx (proxy_gap_minutes, by the
-- primary key), which hold every 5xx's neighbours unless proxy_gap_scan says
-- otherwise (both resolved before the query: checks/proxy_gap_window.sql); then it
-- reads every line of the range. (A per-minute rollup of the served lines was
-- tried on 2026-12-02 and dropped: a rollup cannot forget a line re-imported
-- under another service, and the gaps are per service.)
-- requires: proxy_lines, proxy_signal_lines
WITH
(
    SELECT groupArray((service, m, lo, hi, served))
    FROM
    (
        SELECT service, intDiv(toUInt64(t), 60) AS m, minIf(t, NOT pg) AS lo, maxIf(t, NOT pg) AS hi,
               if(countIf(pg) > 0, groupArrayIf(t, NOT pg), []) AS served
        FROM proxy_lines
        WHERE {proxy_gap_scan:UInt8} = 1 OR toStartOfMinute(ts) IN {proxy_gap_minutes:Array(DateTime('UTC'))}
        GROUP BY service, m
    )
) AS minute_rows,
(
    -- (only the 5xx of the minutes resolved: one written after the resolution, while
    -- a consumer ingests, waits for the next query rather than be read without the
    -- lines around it)
    SELECT groupArray((service, t, http_method))
    FROM proxy_signal_lines
    WHERE pg AND ({proxy_gap_scan:UInt8} = 1 OR toStartOfMinute(ts) IN {proxy_gap_minutes:Array(DateTime('UTC'))})
) AS gap_rows,
minutes AS (SELECT x.1 AS service, x.2 AS m, x.3 AS lo, x.4 AS hi FROM (SELECT arrayJoin(minute_rows) AS x) WHERE x.4 > 0),
near AS (SELECT x.1 AS service, x.2 AS m, x.5 AS served FROM (SELECT arrayJoin(minute_rows) AS x) WHERE notEmpty(x.5)),
p AS (SELECT x.1 AS service, x.2 AS t, x.3 AS http_method, intDiv(toUInt64(t), 60) AS m FROM (SELECT arrayJoin(gap_rows) AS x))
SELECT p.service AS service, p.t AS t, p.http_method AS http_method,
       greatest(b.hi, arrayMax(arrayFilter(s -> s < p.t, arrayPushBack(n.served, 0.)))) AS last_served,
       last_served AS run,
       least(if(a.lo = 0, 1e12, a.lo), arrayMin(arrayFilter(s -> s > p.t, arrayPushBack(n.served, 1e12)))) AS next_served
FROM p
ASOF LEFT JOIN minutes AS b ON b.service = p.service AND b.m < p.m
ASOF LEFT JOIN minutes AS a ON a.service = p.service AND a.m > p.m
LEFT JOIN near AS n ON n.service = p.service AND n.m = p.m
