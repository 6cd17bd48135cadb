-- proxy_refused: the refused misses the proxy logged on a session (DESIGN §4), each
-- with its session's requests around it:
--   prev_t, prev_ok  the session's previous upstream-served request (not a
--                    proxy-generated 5xx) and whether it was a 2xx (0, 0 = none)
--   ok_in_range      some earlier request of the session in the range was a 2xx:
--                    the session was active in the range before the miss (the
--                    canary runs refused_misses over the life of the boot that
--                    ended, so this tells sessions that boot served from sessions
--                    that were already stale before it; refused_misses.sql
--                    adds a 2xx before the range, for the miss's reason)
--   next_t           the session's next request of any kind (0 = none)
-- Sessions and clients are their hashed keys (skh, clienth; the strings would be
-- read for every line). A session's lines are its id's under every service label:
-- a server mints the id, which the MCP transport asks to be globally unique
-- (Streamable HTTP, Session Management), so one id under two labels is one session
-- seen through two proxies (or one proxy relabelled), as in session_facts.sql. One scalar, which the engine computes once per query
-- wherever the same expression appears: each refused session's lines sorted by
-- time, with the neighbours of every line computed in one pass over that array
-- (running sums and fills, then a shift), so the cost grows with the session's
-- lines, not with its misses times its lines: a client that resends a dead
-- session id 20,000 times (what the SDK client does, DESIGN §1) once took 22 GiB.
-- A miss's neighbours are those of the first line of its time (a tie is no
-- neighbour: earlier means strictly earlier, later strictly later), so each miss
-- (read with its details from the signal rows, proxy_signal_lines) is joined to
-- the neighbours of its session and time (by µs): the lines sorted per session
-- carry 4 fields, not 8 (about 10% of `restarts` at 10M events, measured side by
-- side), packed into one UInt64 each (below).
-- requires: proxy_lines, proxy_signal_lines
WITH
(
    SELECT groupArray((m.service, m.skh, m.t, m.clienth, m.http_method, m.http_status, n.prev, n.ok_at, n.next_us))
    -- each refused line, with its details from the signal rows, and the neighbours
    -- of its time in its session (the same for every line of that time: one row
    -- per time on the right, LIMIT 1 BY; not ANY INNER JOIN, which also keeps one
    -- row per key on the left, so two misses of one session at the same µs counted once)
    FROM
    (
        SELECT service, skh, t, toUInt64(toUnixTimestamp64Micro(ts)) AS us, clienth, http_method, http_status
        FROM proxy_signal_lines
        WHERE refused AND skh != 0
    ) AS m
    INNER JOIN
    (
        SELECT skh, bitShiftRight(z.1, 3) AS us, z.2 AS prev, z.3 AS ok_at, z.4 AS next_us
        FROM
        (
            SELECT skh, arrayJoin(arrayFilter(z -> bitTest(z.1, 0), arrayZip(rows, prev_at, ok_at, next_at))) AS z
            FROM
            (
                SELECT skh, rows,
                       -- (every lambda takes its arrays as arguments: a captured array would be
                       -- copied for each element)
                       arrayMap(y -> bitShiftRight(y, 3), rows) AS us,
                       -- the first line of each time (rows sort by time first)
                       arrayMap((u, before) -> u != before, us, arrayPopBack(arrayPushFront(us, toUInt64(-1)))) AS starts,
                       -- at each line: the latest upstream-served line before it (a packed
                       -- line, 0 = none); then the value of the first line of its time, filled
                       -- forward
                       arrayPopBack(arrayPushFront(arrayFill(v -> v != 0, arrayMap(y -> if(bitTest(y, 1), toUInt64(0), y), rows)), toUInt64(0))) AS prev_line,
                       arrayFill(v -> v != toUInt64(-1), arrayMap((v, st) -> if(st, v, toUInt64(-1)), prev_line, starts)) AS prev_at,
                       -- at each line: some earlier line was a 2xx
                       arrayPopBack(arrayPushFront(arrayCumSum(arrayMap(y -> toUInt32(bitTest(y, 2)), rows)), toUInt32(0))) AS ok_before,
                       arrayFill(v -> v >= 0, arrayMap((v, st) -> if(st, toInt64(v > 0), -1), ok_before, starts)) AS ok_at,
                       -- at each line: the time (µs) of the first line of the next time (0: none)
                       arrayPushBack(arrayPopFront(arrayReverseFill(v -> v >= 0, arrayMap((u, st) -> if(st, toInt64(u), -1), us, starts))), -1) AS next_line,
                       arrayMap(v -> greatest(v, 0), next_line) AS next_at
                FROM
                (
                    -- only the refused sessions' lines, each packed into one UInt64 that
                    -- sorts as (time, ok, pg, refused) does: µs << 3 | ok << 2 | pg << 1 | refused
                    -- (µs is never negative: the contract refuses an event before 2000,
                    -- schema/events/envelope.ts)
                    -- (an array of tuples took twice as long to gather and sort, measured
                    -- side by side at 10M events). A join, not an IN: a scalar that holds a
                    -- subquery set is evaluated again at every reference.
                    SELECT l.skh AS skh,
                           arraySort(groupArray(bitShiftLeft(toUInt64(toUnixTimestamp64Micro(l.ts)), 3)
                                                + bitShiftLeft(toUInt64(l.ok), 2) + bitShiftLeft(toUInt64(l.pg), 1) + toUInt64(l.refused))) AS rows
                    FROM proxy_lines AS l
                    INNER JOIN (SELECT DISTINCT skh FROM proxy_signal_lines WHERE refused AND skh != 0) AS r ON r.skh = l.skh
                    GROUP BY l.skh
                )
            )
        )
        LIMIT 1 BY skh, us
    ) AS n ON n.skh = m.skh AND n.us = m.us
) AS refused_rows
SELECT m.x.1 AS service, m.x.2 AS skh, m.x.3 AS t, m.x.4 AS clienth, m.x.5 AS http_method, m.x.6 AS http_status,
       -- the previous upstream-served line, unpacked (0, 0: none)
       if(m.x.7 = 0, 0., bitShiftRight(m.x.7, 3) / 1e6) AS prev_t, m.x.7 != 0 AND bitTest(m.x.7, 2) AS prev_ok,
       m.x.8 = 1 AS ok_in_range,
       m.x.9 / 1e6 AS next_t
FROM (SELECT arrayJoin(refused_rows) AS x) AS m
