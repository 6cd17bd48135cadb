-- proxy_seq: the proxy-generated 5xx (the rows of the restart gaps, DESIGN §4),
-- each with the upstream-served requests of its service around it:
--   last_served  the last served request before it (0 = none); the 5xx rows of
--                one gap share it, so it names the gap ("run")
--   next_served  the first served request after it (1e12 = none yet)
-- One pass over the requests, per service and minute: the first and last served
-- request of every minute, and, for the minutes that hold a 5xx, the 5xx rows
-- and every served request's time. Read once into a scalar; no window or join
-- runs over every request.
-- requires: proxy_requests
WITH
(
    SELECT (groupArray((service, m, lo, hi)), groupArrayIf((service, m, served, gap_rows), length(gap_rows) > 0))
    FROM
    (
        SELECT service, intDiv(toUInt64(t), 60) AS m, minIf(t, NOT pg) AS lo, maxIf(t, NOT pg) AS hi,
               groupArrayIf((t, sk, http_method), pg) AS gap_rows,
               if(countIf(pg) > 0, groupArrayIf(t, NOT pg), []) AS served
        FROM proxy_requests
        GROUP BY service, m
    )
) AS per_minute,
minutes AS (SELECT x.1 AS service, x.2 AS m, x.3 AS lo, x.4 AS hi FROM (SELECT arrayJoin(per_minute.1) AS x) WHERE hi > 0),
p AS
(
    SELECT x.1 AS service, x.2 AS m, x.3 AS served, y.1 AS t, y.2 AS sk, y.3 AS http_method
    FROM (SELECT arrayJoin(per_minute.2) AS x)
    ARRAY JOIN x.4 AS y
)
SELECT p.service AS service, p.t AS t, p.sk AS sk, p.http_method AS http_method,
       greatest(b.hi, arrayMax(arrayFilter(s -> s < p.t, arrayPushBack(p.served, 0.)))) AS last_served,
       last_served AS run,
       least(if(a.lo = 0, 1e12, a.lo), arrayMin(arrayFilter(s -> s > p.t, arrayPushBack(p.served, 1e12)))) AS next_served
FROM p
ASOF LEFT JOIN minutes AS b ON b.service = p.service AND b.m < p.m
ASOF LEFT JOIN minutes AS a ON a.service = p.service AND a.m > p.m
