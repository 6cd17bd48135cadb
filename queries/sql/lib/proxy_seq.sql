-- proxy_seq: the proxy-generated 5xx (the rows of the restart gaps, DESIGN §4),
-- each with the upstream-served requests of its service around it:
--   last_served  the last served request before it (0 = none); the 5xx rows of
--                one gap share it, so it names the gap ("run")
--   next_served  the first served request after it (1e12 = none yet)
-- Three narrow reads, none with a join or window over every request: the first
-- and last served request of every minute (one pass over times only), the 5xx
-- rows (a copy of a line dropped by its event_id), and the served requests of
-- the minutes that hold a 5xx. The first two are scalars, read once per query.
-- requires: proxy_lines
WITH
(
    SELECT groupArray((service, m, lo, hi))
    FROM (SELECT service, intDiv(toUInt64(t), 60) AS m, min(t) AS lo, max(t) AS hi FROM proxy_lines WHERE NOT pg GROUP BY service, m)
) AS minute_rows,
(
    SELECT groupArray((service, t, http_method))
    FROM (SELECT event_id, service, t, http_method FROM proxy_lines WHERE pg LIMIT 1 BY event_id)
) AS gap_rows,
minutes AS (SELECT x.1 AS service, x.2 AS m, x.3 AS lo, x.4 AS hi FROM (SELECT arrayJoin(minute_rows) AS x)),
p AS (SELECT x.1 AS service, x.2 AS t, x.3 AS http_method, intDiv(toUInt64(t), 60) AS m FROM (SELECT arrayJoin(gap_rows) AS x)),
near AS
(
    SELECT service, intDiv(toUInt64(t), 60) AS m, groupArray(t) AS served
    FROM proxy_lines
    WHERE NOT pg AND intDiv(toUInt64(t), 60) IN (SELECT m FROM p)
    GROUP BY service, m
)
SELECT p.service AS service, p.t AS t, p.http_method AS http_method,
       greatest(b.hi, arrayMax(arrayFilter(s -> s < p.t, arrayPushBack(n.served, 0.)))) AS last_served,
       last_served AS run,
       least(if(a.lo = 0, 1e12, a.lo), arrayMin(arrayFilter(s -> s > p.t, arrayPushBack(n.served, 1e12)))) AS next_served
FROM p
ASOF LEFT JOIN minutes AS b ON b.service = p.service AND b.m < p.m
ASOF LEFT JOIN minutes AS a ON a.service = p.service AND a.m > p.m
LEFT JOIN near AS n ON n.service = p.service AND n.m = p.m
