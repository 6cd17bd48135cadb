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
server_times AS (SELECT user_agent, groupArray(t) AS ts FROM server_challenges GROUP BY user_agent),
challenges AS
(
    SELECT * FROM server_challenges
    UNION ALL
    SELECT p.* FROM proxy_challenges AS p
    LEFT JOIN server_times AS st ON st.user_agent = p.user_agent
    WHERE NOT arrayExists(x -> abs(x - p.t) <= 2, st.ts)
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
client_ok AS
(
    SELECT client, groupArray(t) AS ts
    FROM (SELECT client, t FROM r WHERE ok UNION ALL SELECT client, t FROM server_ok)
    GROUP BY client
),
session_ok AS
(
    SELECT sk, groupArray(t) AS ts
    FROM (SELECT sk, t FROM r WHERE ok AND sk != '' UNION ALL SELECT sk, t FROM server_ok WHERE sk != '')
    GROUP BY sk
),
per_client AS (SELECT client, count() AS n, min(t) AS first_t, max(t) AS last_t FROM challenges GROUP BY client),
judged AS
(
    SELECT
        c.ts AS ts, c.user_agent AS user_agent, c.challenge_class AS challenge_class, c.http_status AS http_status,
        multiIf(
            pc.n >= {loop_min:UInt32} AND NOT arrayExists(x -> x >= pc.first_t AND x <= pc.last_t, co.ts)
                AND NOT (c.sk != '' AND arrayExists(x -> x < c.t, so.ts)), 'loop',
            arrayExists(x -> x > c.t AND x <= c.t + {auth_window_s:Float64}, arrayConcat(co.ts, so.ts)), 'benign',
            c.sk != '' AND arrayExists(x -> x < c.t, so.ts) AND NOT arrayExists(x -> x > c.t, so.ts), 'lost',
            'unresolved') AS verdict
    FROM challenges AS c
    LEFT JOIN per_client AS pc ON pc.client = c.client
    LEFT JOIN client_ok AS co ON co.client = c.client
    LEFT JOIN session_ok AS so ON so.sk = c.sk
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
