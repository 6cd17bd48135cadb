-- auth_challenges: 401/403 challenges by hour, user agent and class (RFC 6750
-- §3.1 classes), each with a verdict:
--   loop:       the client (address + user agent) was challenged at least
--               loop_min times with no 2xx between its first and last challenge,
--               and not on an established session (that one is lost, below)
--   benign:     the same client (proxy: address + user agent; server: user agent
--               + principal) or session got a 2xx within auth_window_s after
--   lost:       an established session (it had a 2xx before) that never
--               succeeds again in the range
--   unresolved: none of the above
-- requires: proxy_requests
WITH
r AS
(
    SELECT ts, t, sk, client, ok
    FROM proxy_requests
),
proxy_challenges AS
(
    -- joined to its own access line (same µs timestamp and user agent) for the
    -- client and session; challenges count on any path, not only the endpoint
    -- (a client that never gets past the challenge never reveals the endpoint).
    SELECT c.ts AS ts, toUnixTimestamp64Micro(c.ts) / 1e6 AS t, c.user_agent AS user_agent, c.challenge_class AS challenge_class,
           c.http_status AS http_status, concat(p.client_address, ' ', p.user_agent) AS client, p.request_session_key AS sk
    FROM events AS c FINAL
    INNER JOIN
    (
        SELECT ts, user_agent, client_address, request_session_key
        FROM events
        WHERE event_type = 'proxy_access' AND http_status IN (401, 403)
          AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
    ) AS p ON p.ts = c.ts AND p.user_agent = c.user_agent
    WHERE c.event_type = 'auth_challenge' AND c.source = 'proxy'
      AND c.ts >= {t_from:DateTime64(6)} AND c.ts < {t_to:DateTime64(6)}
      AND ({service:String} = '' OR c.service = {service:String})
      AND ({environment:String} = '' OR c.environment = {environment:String})
),
server_challenges AS
(
    -- server-recorded challenges: the client is its user agent and principal
    SELECT ts, toUnixTimestamp64Micro(ts) / 1e6 AS t, user_agent, challenge_class, http_status,
           concat('server ', user_agent, ' ', principal_key) AS client, session_key AS sk
    FROM events FINAL
    WHERE event_type = 'auth_challenge' AND source = 'server'
      AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
),
-- where a server recorded the challenge, the proxy's line for the same request
-- (same user agent within 2 s) is not counted again
server_times AS (SELECT user_agent, t, toUInt8(1) AS hit FROM server_challenges),
challenge_union AS
(
    SELECT * FROM server_challenges
    UNION ALL
    -- the first server challenge of the same user agent at or after p.t - 2 s
    SELECT p.* FROM proxy_challenges AS p
    ASOF LEFT JOIN server_times AS st ON st.user_agent = p.user_agent AND st.t >= p.t - 2
    WHERE NOT (st.hit = 1 AND st.t <= p.t + 2)
),
-- the challenges, read once (several parts below use them)
(SELECT groupArray((ts, t, user_agent, challenge_class, http_status, client, sk)) FROM challenge_union) AS challenge_rows,
challenges AS
(
    SELECT x.1 AS ts, x.2 AS t, x.3 AS user_agent, x.4 AS challenge_class, x.5 AS http_status, x.6 AS client, x.7 AS sk
    FROM (SELECT arrayJoin(challenge_rows) AS x)
),
server_ok AS
(
    SELECT toUnixTimestamp64Micro(ts) / 1e6 AS t, concat('server ', user_agent, ' ', principal_key) AS client, session_key AS sk
    FROM events
    WHERE event_type = 'settlement' AND source = 'server' AND outcome = 'ok'
      AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
),
-- 2xx of the challenged clients and sessions only; each challenge finds its
-- neighbours among them by ASOF joins (arrays of every 2xx per client would not
-- fit in memory at millions of requests)
ok_rows AS
(
    SELECT client, sk, t
    FROM (SELECT client, sk, t FROM r WHERE ok UNION ALL SELECT client, sk, t FROM server_ok)
    WHERE client IN (SELECT client FROM challenges) OR (sk != '' AND sk IN (SELECT sk FROM challenges WHERE sk != ''))
),
client_ok AS (SELECT client, t FROM ok_rows),
session_ok AS (SELECT sk, t FROM ok_rows WHERE sk != ''),
per_client AS
(
    -- a loop: no 2xx for the client between its first and last challenge
    SELECT p.client AS client, p.n AS n, p.first_t AS first_t, p.last_t AS last_t,
           NOT (o.client != '' AND o.t <= p.last_t) AS no_ok_between
    FROM (SELECT client, count() AS n, min(t) AS first_t, max(t) AS last_t FROM challenges GROUP BY client) AS p
    ASOF LEFT JOIN client_ok AS o ON o.client = p.client AND o.t >= p.first_t
),
judged AS
(
    SELECT
        c.ts AS ts, c.user_agent AS user_agent, c.challenge_class AS challenge_class, c.http_status AS http_status,
        c.sk != '' AND sp.sk != '' AS session_ok_before,
        c.sk != '' AND sn.sk != '' AS session_ok_after,
        multiIf(
            pc.n >= {loop_min:UInt32} AND pc.no_ok_between AND NOT session_ok_before, 'loop',
            (cn.client != '' AND cn.t <= c.t + {auth_window_s:Float64}) OR (session_ok_after AND sn.t <= c.t + {auth_window_s:Float64}), 'benign',
            session_ok_before AND NOT session_ok_after, 'lost',
            'unresolved') AS verdict
    FROM challenges AS c
    LEFT JOIN per_client AS pc ON pc.client = c.client
    ASOF LEFT JOIN client_ok AS cn ON cn.client = c.client AND cn.t > c.t
    ASOF LEFT JOIN session_ok AS sn ON sn.sk = c.sk AND sn.t > c.t
    ASOF LEFT JOIN session_ok AS sp ON sp.sk = c.sk AND sp.t < c.t
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
