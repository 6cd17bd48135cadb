-- proxy_refused_prev: the refused misses the proxy logged on a session (DESIGN §4),
-- each with its session's previous upstream-served request (not a proxy-generated
-- 5xx) and whether it was a 2xx: prev_t, prev_ok (0, 0 = none), as proxy_refused.sql
-- gives them, for the readers that need no other neighbour (proxy_transitions.sql).
-- Each line of a refused session becomes one UInt64, µs << 1 | ok, so the ASOF join's
-- nearest key below the miss's µs << 1 is the latest earlier µs (strictly: a line of
-- the miss's own µs is no neighbour), a 2xx if one of that µs was (as proxy_refused's
-- sorted lines give it). The proxy-generated 5xx are not upstream-served: left out.
-- (µs is never negative: the contract refuses an event before 2000,
-- schema/events/envelope.ts; 0 = none.) test/queries-refused-prev.test.ts pins it
-- to proxy_refused's.
-- requires: proxy_lines, proxy_signal_lines
SELECT m.service AS service, m.skh AS skh, m.t AS t,
       if(p.k = 0, 0., intDiv(p.k, 2) / 1e6) AS prev_t, p.k % 2 = 1 AS prev_ok
FROM
(
    SELECT service, skh, t, toUInt64(toUnixTimestamp64Micro(ts)) * 2 AS mk
    FROM proxy_signal_lines
    WHERE refused AND skh != 0
      -- (a miss whose line was delivered again as no miss is none: the signal rows keep
      -- the old copy, the lines the newest, as proxy_refused's join to the lines does)
      AND (skh, toUnixTimestamp64Micro(ts)) IN (SELECT skh, toUnixTimestamp64Micro(ts) FROM proxy_lines WHERE refused AND skh != 0)
) AS m
ASOF LEFT JOIN
(
    SELECT skh, toUInt64(toUnixTimestamp64Micro(ts)) * 2 + ok AS k
    FROM proxy_lines
    WHERE NOT pg AND skh IN (SELECT skh FROM proxy_signal_lines WHERE refused AND skh != 0)
) AS p ON p.skh = m.skh AND p.k < m.mk
