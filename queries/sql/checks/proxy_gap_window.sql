-- proxy_gap_window: whether the restart gaps (lib/proxy_seq.sql) can read only the
-- proxy's lines of proxy_gap_minutes, every minute within proxy_gap_near (2) of a
-- minute that holds a proxy-generated 5xx (from 2 before to 2 after it; queries/registry.ts
-- resolveProxyGapWindow makes the list from checks/proxy_5xx_minutes.sql and runs
-- this with it bound, so the lines are selected by the primary key).
--   scan = 1 when they cannot: some 5xx has no upstream-served line of its service
--   before it within its own 2 minutes before while the range begins before them,
--   or none after it within its 2 minutes after while the range ends after them.
--   Its neighbour then lies farther (a long outage, sparse traffic) or nowhere,
--   and proxy_seq reads every line of the range.
-- Otherwise those lines hold each 5xx's last served line before it and first after
-- it, so proxy_seq's answer is the one every line gives (the same filters, FINAL and
-- endpoint paths: proxy_lines.sql). Restarts take seconds to a minute, so a gap's
-- neighbours are nearly always that close.
-- requires: proxy_lines, proxy_signal_lines
WITH
-- the first and last served line of each service and minute of those minutes (a
-- few hundred rows), read once: a scalar with no subquery set in it. A 5xx has a
-- served line before it in its minutes when one of them starts with one earlier
-- than it, and one after it when one of them ends with one later.
(
    SELECT groupArray((service, m, lo, hi))
    FROM
    (
        SELECT service, intDiv(toUInt64(t), 60) AS m, minIf(t, NOT pg) AS lo, maxIf(t, NOT pg) AS hi
        FROM proxy_lines
        WHERE toStartOfMinute(ts) IN {proxy_gap_minutes:Array(DateTime('UTC'))}
        GROUP BY service, m
        HAVING hi > 0
    )
) AS minute_rows,
-- near: how many minutes the list holds before and after each 5xx's (2)
toInt64({proxy_gap_near:UInt32}) AS near,
toUnixTimestamp64Micro({t_from:DateTime64(6, 'UTC')}) / 1e6 AS from_t,
toUnixTimestamp64Micro({t_to:DateTime64(6, 'UTC')}) / 1e6 AS to_t
SELECT toUInt8(countIf(NOT (
           ((g.m - near) * 60 <= from_t OR arrayExists(x -> x.1 = g.service AND x.2 + near >= g.m AND x.2 <= g.m AND x.3 < g.t, minute_rows))
           AND ((g.m + near + 1) * 60 >= to_t OR arrayExists(x -> x.1 = g.service AND x.2 >= g.m AND x.2 <= g.m + near AND x.4 > g.t, minute_rows)))) > 0) AS scan
FROM (SELECT service, t, intDiv(toUInt64(t), 60) AS m FROM proxy_signal_lines WHERE pg) AS g
