-- auth_challenges: 401/403 challenges by hour, user agent and class (RFC 6750
-- §3.1 classes), each with a verdict:
--   loop:       the client (address + user agent) was challenged at least
--               loop_min times with no 2xx between its first and last challenge,
--               and not on an established session (that one is lost, below)
--   benign:     the same client (proxy: address + user agent; server: user agent
--               + principal) or session got a 2xx within auth_window_s after
--               (its end included, to the microsecond: the float seconds are
--               compared as whole microseconds, as in refused_misses.sql)
--   lost:       an established session (it had a 2xx before) that never
--               succeeds again in the range
--   unresolved: none of the above
-- Clients and sessions are joined on hashed keys ((is_server, clienth), skh);
-- the access lines and server requests come from proxy_access and
-- server_requests (schema/migrations/0006-0007). Challenges are counted, so
-- copies of a challenge event are dropped by event_id; the 2xx around them are
-- existence tests, which a copy does not change.
-- requires: proxy_lines, auth_challenge_rows
WITH
-- the challenges, read once (several parts below use them)
(SELECT groupArray((ts, t, user_agent, challenge_class, http_status, is_server, clienth, skh)) FROM auth_challenge_rows) AS challenge_rows,
challenges AS
(
    SELECT x.1 AS ts, x.2 AS t, x.3 AS user_agent, x.4 AS challenge_class, x.5 AS http_status, x.6 AS is_server, x.7 AS clienth, x.8 AS skh
    FROM (SELECT arrayJoin(challenge_rows) AS x)
),
-- The 2xx are read in one pass. Each 2xx finds, by ASOF joins against the
-- challenges (small), the latest challenge of its client and of its session at
-- or before it, and is grouped under that challenge's time ("at"; 0 = none):
--   kind 1, per client and at > 0: the first 2xx (min_t) and the first one
--           strictly after at (after_t; inf = none)
--   kind 2, per challenged session and at: the same, and the last 2xx (max_t)
-- The first 2xx strictly after a challenge at t then comes from its own group
-- and the groups after it (a suffix minimum over each client's or session's
-- groups, below); no join builds a table of every 2xx.
client_ch AS (SELECT DISTINCT is_server, clienth, t, toUInt8(1) AS hit FROM challenges),
session_ch AS (SELECT DISTINCT skh, t, toUInt8(1) AS hit FROM challenges WHERE skh != 0),
per_client AS
(
    SELECT is_server, clienth, count() AS n, min(t) AS first_t, max(t) AS last_t
    FROM challenges
    GROUP BY is_server, clienth
),
ok_rows AS
(
    SELECT toUInt8(0) AS is_server, clienth, skh, t FROM proxy_lines WHERE ok
    UNION ALL
    SELECT toUInt8(1) AS is_server, clienth, skh, t FROM server_requests
    WHERE ok AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
),
-- the groups, read once (a scalar: several parts below use them)
(
    SELECT groupArray((g.kind, g.key, g.is_server, g.at, g.min_t, g.after_t, g.max_t))
    FROM
    (
        SELECT mk.1 AS kind, mk.2 AS key, mk.3 AS is_server, mk.4 AS at,
               min(t) AS min_t, if(countIf(t > at) = 0, inf, minIf(t, t > at)) AS after_t, max(t) AS max_t
        FROM
        (
            SELECT o.t AS t,
                   arrayJoin(arrayFilter(x -> x.1 != 0, [
                       (if(cc.hit = 1, 1, 0), o.clienth, o.is_server, cc.t),
                       (if(o.skh != 0, 2, 0), o.skh, toUInt8(0), sc.t)])) AS mk
            FROM ok_rows AS o
            ASOF LEFT JOIN client_ch AS cc ON cc.is_server = o.is_server AND cc.clienth = o.clienth AND cc.t <= o.t
            ASOF LEFT JOIN session_ch AS sc ON sc.skh = o.skh AND sc.t <= o.t
            WHERE cc.hit = 1 OR o.skh != 0
        )
        GROUP BY kind, key, is_server, at
    ) AS g
    -- kind 2 of challenged sessions only (a join, not an IN: see proxy_refused.sql)
    LEFT JOIN (SELECT DISTINCT skh, toUInt8(1) AS hit FROM session_ch) AS s ON s.skh = g.key
    WHERE g.kind = 1 OR s.hit = 1
) AS ok_groups,
client_groups AS
(
    SELECT x.2 AS clienth, x.3 AS is_server, x.4 AS at, x.5 AS min_t, x.6 AS after_t
    FROM (SELECT arrayJoin(ok_groups) AS x) WHERE x.1 = 1
),
session_groups AS
(
    SELECT x.2 AS skh, x.4 AS at, x.5 AS min_t, x.6 AS after_t, x.7 AS max_t
    FROM (SELECT arrayJoin(ok_groups) AS x) WHERE x.1 = 2
),
-- A challenge at t finds the first group at or after t (ASOF). If that group is
-- its own (at = t), its next 2xx is the group's first one strictly after t, or a
-- later group's first (next_same); if the group is a later challenge's (at > t),
-- every 2xx in it is after t, so the group's first (next_later). later_min: the
-- least first 2xx of the groups after this one (NULL: none).
client_next AS
(
    SELECT is_server, clienth, at,
           least(after_t, ifNull(later_min, inf)) AS next_same,
           least(min_t, ifNull(later_min, inf)) AS next_later
    FROM
    (
        SELECT is_server, clienth, at, min_t, after_t,
               minOrNull(min_t) OVER (PARTITION BY is_server, clienth ORDER BY at DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS later_min
        FROM client_groups
    )
),
-- a loop needs no 2xx of the client between its first and last challenge: every
-- 2xx of a client's groups is at or after its first challenge, so the first of
-- them is the first 2xx at or after it
client_first AS (SELECT is_server, clienth, min(min_t) AS first_ok FROM client_groups GROUP BY is_server, clienth),
-- a session's first and last 2xx: a 2xx before or after a challenge is a
-- comparison with them
session_span AS (SELECT skh, min(min_t) AS first_ok, max(max_t) AS last_ok FROM session_groups GROUP BY skh),
session_next AS
(
    SELECT skh, at,
           least(after_t, ifNull(later_min, inf)) AS next_same,
           least(min_t, ifNull(later_min, inf)) AS next_later
    FROM
    (
        SELECT skh, at, min_t, after_t,
               minOrNull(min_t) OVER (PARTITION BY skh ORDER BY at DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS later_min
        FROM session_groups WHERE at > 0
    )
),
judged AS
(
    SELECT
        c.ts AS ts, c.user_agent AS user_agent, c.challenge_class AS challenge_class, c.http_status AS http_status,
        c.skh != 0 AND ss.skh != 0 AND ss.first_ok < c.t AS session_ok_before,
        c.skh != 0 AND ss.skh != 0 AND ss.last_ok > c.t AS session_ok_after,
        multiIf(
            pc.n >= {loop_min:UInt32} AND NOT (cf.clienth != 0 AND cf.first_ok <= pc.last_t) AND NOT session_ok_before, 'loop',
            (cn.clienth != 0 AND round((if(cn.at = c.t, cn.next_same, cn.next_later) - c.t) * 1e6) <= round({auth_window_s:Float64} * 1e6))
                OR (session_ok_after AND round((if(sn.at = c.t, sn.next_same, sn.next_later) - c.t) * 1e6) <= round({auth_window_s:Float64} * 1e6)), 'benign',
            session_ok_before AND NOT session_ok_after, 'lost',
            'unresolved') AS verdict
    FROM challenges AS c
    LEFT JOIN per_client AS pc ON pc.is_server = c.is_server AND pc.clienth = c.clienth
    LEFT JOIN client_first AS cf ON cf.is_server = c.is_server AND cf.clienth = c.clienth
    ASOF LEFT JOIN client_next AS cn ON cn.is_server = c.is_server AND cn.clienth = c.clienth AND cn.at >= c.t
    LEFT JOIN session_span AS ss ON ss.skh = c.skh
    ASOF LEFT JOIN session_next AS sn ON sn.skh = c.skh AND sn.at >= c.t
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
