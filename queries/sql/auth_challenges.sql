-- auth_challenges: 401/403 challenges by hour, user agent and class (RFC 6750
-- §3.1 classes), each with a verdict:
--   loop:       the client (address + user agent) was challenged at least
--               loop_min times with no 2xx between its first and last challenge,
--               and not on an established session (that one is lost, below)
--   benign:     the same client (proxy: address + user agent; server: user agent
--               + principal) or session got a 2xx within auth_window_s after
--               (its end included, to the microsecond: times are compared as
--               whole microseconds)
--   lost:       an established session (it had a 2xx before) that never
--               succeeds again in the range
--   unresolved: none of the above
-- Clients and sessions are joined on hashed keys ((is_server, clienth), skh);
-- the access lines and server requests come from proxy_access and
-- server_requests (schema/migrations/0006-0007), the 2xx of the minutes the range
-- covers whole from ok_minutes (0017) where those give the same answer. Challenges are counted, so
-- copies of a challenge event are dropped by event_id; the 2xx around them are
-- existence tests, which a copy does not change.
-- requires: proxy_lines, auth_challenge_rows, auth_ok_minutes
WITH
-- a client's or a session's key as one UInt64 (the CTE keyed says why, and how likely a
-- collision is): the low 64 bits of its hashed key with tag (kind * 2 + is_server)
-- xored into the top 4
(key, tag) -> bitXor(toUInt64(key), bitShiftLeft(toUInt64(tag), 60)) AS key64,
-- the challenges, read once (several parts below use them)
(SELECT groupArray((ts, user_agent, challenge_class, http_status, is_server, clienth, skh)) FROM auth_challenge_rows) AS challenge_rows,
-- the sources whose challenges are counted (is_server values): a client's 2xx are read
-- only of these (lib/auth_ok_minutes.sql, auth_ok_rows.sql)
arrayDistinct(arrayMap(x -> x.5, challenge_rows)) AS challenge_sources,
-- (ci: the challenge's place in challenge_rows, which tells two copies of one
-- challenge apart in judged)
challenges AS
(
    SELECT x.1 AS ts, x.2 AS user_agent, x.3 AS challenge_class, x.4 AS http_status, x.5 AS is_server, x.6 AS clienth, x.7 AS skh,
           ci,
           toUInt64(toUnixTimestamp64Micro(ts)) AS us,
           key64(clienth, 2 + is_server) AS client_k64,
           key64(skh, 4) AS session_k64
    FROM (SELECT challenge_rows AS rows) ARRAY JOIN rows AS x, arrayEnumerate(rows) AS ci
),
-- The 2xx are read in one pass. Each client's and each session's 2xx and
-- challenges become one sorted array of us << 1 | is_challenge (a 2xx sorts
-- before a challenge of the same µs, so "after" is strictly after);
-- arrayReverseFill then gives every challenge the next 2xx in one linear pass over
-- its key's array (a merge, not a join: no table of every 2xx is built, and no
-- join probes one per 2xx). us: µs since the epoch, never 0 or negative (the
-- contract refuses an event before 2000, schema/events/envelope.ts), so 0 can
-- mean "none".
per_client AS
(
    SELECT client_k64, count() AS n, max(us) AS last_us
    FROM challenges
    GROUP BY client_k64
),
-- Each key is one UInt64, k64 (key64 above): the low 64 bits of its SipHash128
-- (schema/migrations/0006-0007), with kind * 2 + is_server xored into the top 4
-- (kind 1: a client (is_server, clienth); kind 2: a session (skh)). Two distinct
-- keys of ordinary traffic share a k64 with probability 2^-64 (about 1e-9 for the
-- 200,000 keys of 10M events). The hash is not keyed: whoever chooses their user
-- agents could make two clients of their own collide with about 2^32 tries (and
-- have one's 2xx judge the other's challenges); another's key would take about 2^64.
-- The grouping hashes 8 bytes per 2xx instead of a (kind, is_server, UInt128) tuple,
-- in one pass for both kinds
-- (the grouping alone at 10M events: 1.3 s -> 0.8 s; see nexts_array for the rest).
-- Only the keys with a challenge are kept (a filter of the 2xx by the challenged
-- keys cost more than it saved: sets built per query, at least as slow over the
-- whole range).
keyed AS
(
    SELECT k64, arraySort(groupArray(v)) AS vs, max(bitTest(v, 0)) AS has_challenge
    FROM
    (
        -- the 2xx (lib/auth_ok_minutes.sql, or auth_ok_rows.sql where the minutes do not pay)
        SELECT k64, v FROM auth_ok_minutes
        UNION ALL
        SELECT client_k64, bitShiftLeft(us, 1) + 1 FROM challenges
        UNION ALL
        SELECT session_k64, bitShiftLeft(us, 1) + 1 FROM challenges WHERE skh != 0
    )
    GROUP BY k64
    HAVING has_challenge
),
-- one row per key and challenge us: next_us, the first 2xx strictly after it (0:
-- none); per key, first_ok_us and last_ok_us, its first and last 2xx, and
-- ok_from_first_us, its first 2xx at or after its first challenge (us; 0: none)
nexts AS
(
    SELECT k64,
           bitShiftRight(arrayFirst(v -> NOT bitTest(v, 0), vs), 1) AS first_ok_us,
           bitShiftRight(arrayLast(v -> NOT bitTest(v, 0), vs), 1) AS last_ok_us,
           arrayFirst(v -> bitTest(v, 0), vs) AS first_ch_v,
           bitShiftRight(arrayFirst(v -> NOT bitTest(v, 0) AND v + 1 >= first_ch_v, vs), 1) AS ok_from_first_us,
           arrayJoin(arrayFilter(z -> bitTest(z.1, 0), arrayZip(vs, arrayReverseFill(v -> NOT bitTest(v, 0), vs)))) AS ch_next,
           toInt64(bitShiftRight(ch_next.1, 1)) AS ch_us,
           if(bitTest(ch_next.2, 0), toInt64(0), toInt64(bitShiftRight(ch_next.2, 1))) AS next_us
    FROM keyed
    LIMIT 1 BY k64, ch_us
),
-- nexts read once into a scalar: the challenges find their client's row and their
-- session's row in it (two joins on nexts itself would group the 2xx twice; split
-- by kind, each grouping half of them, it was the tuple keys' time again). Whole
-- query at 10M events, medians of 7 side by side: 2,144 -> 1,735 and 2,008 -> 1,563 ms.
(SELECT groupArray((k64, ch_us, next_us, ok_from_first_us, first_ok_us, last_ok_us)) FROM nexts) AS nexts_array,
next_rows AS
(
    SELECT x.1 AS k64, x.2 AS ch_us, x.3 AS next_us, x.4 AS ok_from_first_us, x.5 AS first_ok_us, x.6 AS last_ok_us
    FROM (SELECT arrayJoin(nexts_array) AS x)
),
-- Each challenge is joined to next_rows once: a row for its client's key and one for
-- its session's (if any), grouped back per challenge. Two joins of next_rows (one
-- per kind of key) made the engine analyze the tree behind nexts_array a second
-- time: about 110 ms of every call, data or not (medians of 9 side by side on an
-- empty store, 2026-12-03); the grouping of twice the challenges costs far less.
judged AS
(
    SELECT
        ts, user_agent, challenge_class, http_status,
        skh != 0 AND s_first_ok_us != 0 AND s_first_ok_us < c_us AS session_ok_before,
        skh != 0 AND s_last_ok_us > c_us AS session_ok_after,
        multiIf(
            pc.n >= {loop_min:UInt32} AND NOT (c_ok_from_first_us != 0 AND c_ok_from_first_us <= pc.last_us) AND NOT session_ok_before, 'loop',
            (c_next_us != 0 AND c_next_us - c_us <= round({auth_window_s:Float64} * 1e6))
                OR (session_ok_after AND s_next_us - c_us <= round({auth_window_s:Float64} * 1e6)), 'benign',
            session_ok_before AND NOT session_ok_after, 'lost',
            'unresolved') AS verdict
    FROM
    (
        -- kind 0: the client's row, 1: the session's (a row of next_rows not found: zeros)
        SELECT ci, any(ts) AS ts, any(user_agent) AS user_agent, any(challenge_class) AS challenge_class,
               any(http_status) AS http_status, any(client_k64) AS client_k64, any(skh) AS skh, any(c_us) AS c_us,
               maxIf(n_next_us, kind = 0) AS c_next_us, maxIf(n_ok_from_first_us, kind = 0) AS c_ok_from_first_us,
               maxIf(n_next_us, kind = 1) AS s_next_us, maxIf(n_first_ok_us, kind = 1) AS s_first_ok_us,
               maxIf(n_last_ok_us, kind = 1) AS s_last_ok_us
        FROM
        (
            SELECT c.ci AS ci, c.ts AS ts, c.user_agent AS user_agent, c.challenge_class AS challenge_class,
                   c.http_status AS http_status, c.client_k64 AS client_k64, c.skh AS skh, c.c_us AS c_us, c.kind AS kind,
                   n.next_us AS n_next_us, n.ok_from_first_us AS n_ok_from_first_us,
                   n.first_ok_us AS n_first_ok_us, n.last_ok_us AS n_last_ok_us
            FROM
            (
                SELECT ci, ts, user_agent, challenge_class, http_status, client_k64, skh, toInt64(us) AS c_us, k.1 AS k64, k.2 AS kind
                FROM challenges
                ARRAY JOIN if(skh != 0, [(client_k64, toUInt8(0)), (session_k64, toUInt8(1))], [(client_k64, toUInt8(0))]) AS k
            ) AS c
            LEFT JOIN next_rows AS n ON n.k64 = c.k64 AND n.ch_us = c.c_us
        )
        GROUP BY ci
    ) AS j
    LEFT JOIN per_client AS pc ON pc.client_k64 = j.client_k64
)
SELECT
    toStartOfHour(ts) AS hour,
    user_agent,
    challenge_class,
    http_status,
    verdict,
    count() AS challenges
FROM judged
GROUP BY hour, user_agent, challenge_class, http_status, verdict
ORDER BY hour, user_agent, challenge_class, verdict
