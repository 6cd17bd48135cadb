-- proxy_seq: the proxy-generated 5xx (the rows of the restart gaps, DESIGN §4),
-- each with the upstream-served requests of its service around it:
--   last_served  the last served request before it (0 = none); the 5xx rows of
--                one gap share it, so it names the gap ("run")
--   next_served  the first served request after it (1e12 = none yet)
-- Two scalars, which the engine computes once per query however often this
-- fragment is inlined (a scalar that holds a subquery set would be evaluated again
-- at each reference, so neither does): one pass over the served requests' times
-- per service and minute (the first and last of each minute, and in the minutes
-- that hold a 5xx each 5xx time's served neighbours), and the 5xx rows. No join or
-- window runs over every request, and no 5xx row looks through its minute's requests.
-- The pass reads only the minutes within 2 of a 5xx (proxy_gap_minutes, by the
-- primary key), which hold every 5xx's neighbours unless proxy_gap_scan says
-- otherwise (both resolved before the query: checks/proxy_gap_window.sql); then it
-- reads every line of the range. (A per-minute rollup of the served lines was
-- tried on 2026-12-02 and dropped: a rollup cannot forget a line re-imported
-- under another service, and the gaps are per service.)
-- requires: proxy_lines, proxy_signal_lines
WITH
(
    SELECT groupArray((service, m, lo, hi, around))
    FROM
    (
        SELECT service, intDiv(toUInt64(t), 60) AS m, minIf(t, NOT pg) AS lo, maxIf(t, NOT pg) AS hi,
               if(countIf(pg) > 0, groupArrayIf(t, NOT pg), []) AS served,
               if(countIf(pg) > 0, arraySort(arrayDistinct(groupArrayIf(t, pg))), []) AS gaps,
               -- each 5xx time of the minute with the last served time before it and the
               -- first after it in the minute (0 = none), by one sort of the minute's
               -- times and a fill: the 5xx sort first at a tie for "before" and last for
               -- "after", so both are strict. (Each 5xx row once looked through the whole
               -- minute's served times: a minute of 100K requests and 1,700 5xx made 13
               -- GiB of arrays and the queries ran out of memory: a break-it pass.)
               arraySort(arrayConcat(arrayMap(x -> (x, 0), gaps), arrayMap(x -> (x, 1), served))) AS by_before,
               arrayFilter((v, e) -> e.2 = 0, arrayFill(v -> v != 0, arrayMap(e -> if(e.2 = 1, e.1, 0.), by_before)), by_before) AS befores,
               arraySort(arrayConcat(arrayMap(x -> (x, 1), gaps), arrayMap(x -> (x, 0), served))) AS by_after,
               arrayFilter((v, e) -> e.2 = 1, arrayReverseFill(v -> v != 0, arrayMap(e -> if(e.2 = 0, e.1, 0.), by_after)), by_after) AS afters,
               arrayZip(gaps, befores, afters) AS around
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
-- one row per 5xx time: its neighbours in its minute (the same for every 5xx line of that time)
near AS (SELECT x.1 AS service, y.1 AS t, y.2 AS before, y.3 AS after, toUInt8(1) AS found FROM (SELECT arrayJoin(minute_rows) AS x) ARRAY JOIN x.5 AS y),
p AS (SELECT x.1 AS service, x.2 AS t, x.3 AS http_method, intDiv(toUInt64(t), 60) AS m FROM (SELECT arrayJoin(gap_rows) AS x))
SELECT p.service AS service, p.t AS t, p.http_method AS http_method,
       greatest(b.hi, if(n.found = 1, n.before, 0.)) AS last_served,
       last_served AS run,
       least(if(a.lo = 0, 1e12, a.lo), if(n.found = 1 AND n.after != 0, n.after, 1e12)) AS next_served
FROM p
ASOF LEFT JOIN minutes AS b ON b.service = p.service AND b.m < p.m
ASOF LEFT JOIN minutes AS a ON a.service = p.service AND a.m > p.m
LEFT JOIN near AS n ON n.service = p.service AND n.t = p.t
