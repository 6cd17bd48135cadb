-- proxy_seq: the proxy-generated 5xx (the rows of the restart gaps, DESIGN §4),
-- each with the upstream-served requests of its service around it:
--   last_served  the last served request before it (0 = none); the 5xx rows of
--                one gap share it, so it names the gap ("run")
--   next_served  the first served request after it (1e12 = none yet)
-- Three scalars, which the engine computes once per query however often this
-- fragment is inlined (a scalar that holds a subquery set would be evaluated again
-- at each reference, so none does), the third the 5xx rows (gap_rows):
--   minute_rows  the first and last served request of each service and minute:
--                the hours the range covers whole (bound: queries/registry.ts
--                wholeHours) from the proxy_minutes rollup (schema/migrations/0014),
--                the hours it cuts from the rows; under a service or environment
--                filter every hour from the rows (a rollup cannot forget a
--                relabelled line's old label; the rows are read with FINAL)
--   near_rows    every served request in the minutes that hold a 5xx, read by the
--                primary key (proxy_5xx_minutes: those minutes, resolved before the
--                query and bound as a constant, queries/registry.ts)
-- No join or window runs over every request.
-- requires: proxy_lines, proxy_signal_lines
WITH
{whole_hour_lo:UInt32} < {whole_hour_hi:UInt32} AND {service:String} = '' AND {environment:String} = '' AS seq_rollup,
fromUnixTimestamp64Micro(toInt64({whole_hour_lo:UInt32}) * 1000000, 'UTC') AS seq_whole_from,
fromUnixTimestamp64Micro(toInt64({whole_hour_hi:UInt32}) * 1000000, 'UTC') AS seq_whole_to,
(
    SELECT groupArray((service, m, lo, hi))
    FROM
    (
        SELECT service, m, min(lo) AS lo, max(hi) AS hi
        FROM
        (
            SELECT service, intDiv(toUInt32(ts), 60) AS m, first_served AS lo, last_served AS hi
            FROM proxy_minutes
            WHERE seq_rollup AND ts >= toDateTime({whole_hour_lo:UInt32}, 'UTC') AND ts < toDateTime({whole_hour_hi:UInt32}, 'UTC')
              AND url_path IN {endpoint_paths:Array(String)}
            UNION ALL
            SELECT service, intDiv(toUInt64(t), 60) AS m, if(pg, inf, t) AS lo, if(pg, 0., t) AS hi
            FROM proxy_lines
            WHERE NOT (seq_rollup AND ts >= seq_whole_from AND ts < seq_whole_to)
        )
        GROUP BY service, m
        HAVING hi > 0
    )
) AS minute_rows,
(
    SELECT groupArray((service, m, served))
    FROM
    (
        SELECT service, intDiv(toUInt64(t), 60) AS m, groupArray(t) AS served
        FROM proxy_lines
        WHERE NOT pg AND toStartOfMinute(ts) IN {proxy_5xx_minutes:Array(DateTime('UTC'))}
        GROUP BY service, m
    )
) AS near_rows,
(
    SELECT groupArray((service, t, http_method))
    FROM proxy_signal_lines WHERE pg
) AS gap_rows,
minutes AS (SELECT x.1 AS service, x.2 AS m, x.3 AS lo, x.4 AS hi FROM (SELECT arrayJoin(minute_rows) AS x)),
near AS (SELECT x.1 AS service, x.2 AS m, x.3 AS served FROM (SELECT arrayJoin(near_rows) AS x)),
p AS (SELECT x.1 AS service, x.2 AS t, x.3 AS http_method, intDiv(toUInt64(t), 60) AS m FROM (SELECT arrayJoin(gap_rows) AS x))
SELECT p.service AS service, p.t AS t, p.http_method AS http_method,
       greatest(b.hi, arrayMax(arrayFilter(s -> s < p.t, arrayPushBack(n.served, 0.)))) AS last_served,
       last_served AS run,
       least(if(a.lo = 0, 1e12, a.lo), arrayMin(arrayFilter(s -> s > p.t, arrayPushBack(n.served, 1e12)))) AS next_served
FROM p
ASOF LEFT JOIN minutes AS b ON b.service = p.service AND b.m < p.m
ASOF LEFT JOIN minutes AS a ON a.service = p.service AND a.m > p.m
LEFT JOIN near AS n ON n.service = p.service AND n.m = p.m
