-- proxy_misses_alone check (queries/registry.ts NARROWED_QUERIES): the refused
-- misses the proxy logged on a session in the range and scope that no server
-- recorded (no server miss on the same session key within 2 s, 2,000,000 µs): the proxy misses
-- refused_misses.sql keeps, by its rule. Zero lets `refused_misses` run as
-- narrowed/refused_misses.sql, without the proxy's inference. The servers' misses
-- are their signal rows (server_signal_rows.sql), the same misses with the same
-- times as server_refused.sql's, without their arrivals: one copy of each event,
-- the earliest, as server_refused.sql keeps (a copy of a server miss stamped with
-- another time would otherwise match a proxy miss the query keeps).
-- It can count a miss the query does not keep, never the reverse: a line delivered
-- again with another status (a 404 that became a 200, same event_id and ts) stays a
-- miss in proxy_signals, which only the refused lines reach, while proxy_lines
-- keeps the newest copy; the full text then runs, with the same rows.
-- requires: proxy_signal_lines, server_signal_rows
-- (One ASOF join, as refused_misses.sql: the server's latest miss of the session at
-- most 2 s after the proxy's, which is within 2 s of it if any is; times as µs.)
SELECT count() AS n
FROM (SELECT skh, toInt64(toUnixTimestamp64Micro(ts)) + 2000000 AS us_to FROM proxy_signal_lines WHERE refused AND skh != 0) AS m
ASOF LEFT JOIN
(
    SELECT skh, toInt64(toUnixTimestamp64Micro(ts)) AS us, toUInt8(1) AS found
    FROM (SELECT event_id, skh, ts FROM server_signal_rows WHERE refused ORDER BY event_id, ts LIMIT 1 BY event_id)
) AS s ON s.skh = m.skh AND s.us <= m.us_to
WHERE NOT (s.found = 1 AND s.us >= m.us_to - 4000000)
