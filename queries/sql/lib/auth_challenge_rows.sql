-- auth_challenge_rows: the 401/403 challenges (RFC 6750 §3.1 classes), one row each,
-- from proxy and server evidence together (DESIGN §4): the proxy's challenge
-- events joined to their own access lines (proxy_signals, schema/migrations/0012)
-- for the client and session, the server's with the client as user agent and
-- principal; where a server recorded the challenge, the proxy's line for the same
-- request (same user agent within 2 s) is not counted again. Copies of a
-- challenge event are dropped by event_id. Columns: ts, t (seconds, Float64),
-- user_agent, challenge_class, http_status, is_server (UInt8), clienth and skh
-- (hashed client and session keys; skh 0: no session).
-- Read by auth_challenges and the challenge_counts check (the canary's baseline).
WITH
-- the challenge events of both sources, each once
challenge_events AS
(
    -- FINAL: a challenge re-imported under another label counts under its newest one
    -- only, as the access lines do (without it, the old label's copy counted until a
    -- merge: found by a break-it pass); the sorting key starts with event_type, so
    -- only the challenges are read and merged
    SELECT event_id, ts, source, user_agent, principal_key, session_key, challenge_class, http_status
    FROM events FINAL
    WHERE event_type = 'auth_challenge' AND source IN ('proxy', 'server')
      AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
    LIMIT 1 BY event_id
),
server_challenges AS
(
    -- server-recorded challenges: the client is its user agent and principal
    SELECT ts, toUnixTimestamp64Micro(ts) / 1e6 AS t, user_agent, challenge_class, http_status,
           toUInt8(1) AS is_server, reinterpretAsUInt128(sipHash128(concat(user_agent, ' ', principal_key))) AS clienth,
           if(session_key = '', toUInt128(0), reinterpretAsUInt128(sipHash128(session_key))) AS skh
    FROM challenge_events
    WHERE source = 'server'
),
-- where a server recorded the challenge, the proxy's line for the same request
-- (same user agent within 2 s) is not counted again: the proxy's challenge events
-- left are dropped before they are paired with their lines (a pairing partition
-- below shares its ts and user agent, so it is dropped whole or kept whole)
server_times AS (SELECT user_agent, t, toUInt8(1) AS hit FROM server_challenges),
proxy_alone AS
(
    -- the first server challenge of the same user agent at or after c.t - 2 s
    SELECT c.*
    FROM (SELECT *, toUnixTimestamp64Micro(ts) / 1e6 AS t FROM challenge_events WHERE source = 'proxy') AS c
    ASOF LEFT JOIN server_times AS st ON st.user_agent = c.user_agent AND st.t >= c.t - 2
    WHERE NOT (st.hit = 1 AND st.t <= c.t + 2)
),
proxy_challenges AS
(
    -- joined to its own access line for the client and session: the line of the
    -- same µs, user agent, principal, session and status (a challenge carries its line's
    -- envelope, collectors/caddy/convert.ts). Lines alike in all of these (two
    -- clients behind one user agent in the same µs) are paired with the challenges
    -- one to one, in event_id order on each side, so each challenge counts once
    -- (a join on the time and user agent alone counted each of two such challenges
    -- twice). Challenges count on any path, not only the endpoint (a client that
    -- never gets past the challenge never reveals the endpoint).
    SELECT c.ts AS ts, toUnixTimestamp64Micro(c.ts) / 1e6 AS t, c.user_agent AS user_agent, c.challenge_class AS challenge_class,
           c.http_status AS http_status, toUInt8(0) AS is_server, p.clienth AS clienth, p.skh AS skh
    FROM
    (
        SELECT ts, user_agent, principal_key, session_key, challenge_class, http_status,
               row_number() OVER (PARTITION BY ts, user_agent, principal_key, session_key, http_status ORDER BY event_id) AS k
        FROM proxy_alone
    ) AS c
    INNER JOIN
    (
        SELECT ts, user_agent, principal_key, session_key, http_status, clienth, skh,
               row_number() OVER (PARTITION BY ts, user_agent, principal_key, session_key, http_status ORDER BY event_id) AS k
        FROM
        (
            -- the challenge's session_key is the request's, else the response's
            SELECT event_id, ts, user_agent, principal_key, if(sk != '', sk, rk) AS session_key, http_status, clienth, skh
            FROM proxy_signals FINAL
            WHERE http_status IN (401, 403)
              -- only the lines a counted challenge can pair with: where every proxy challenge
              -- was a server's too, no line is numbered or hashed for the join (10M events:
              -- the challenge_counts check 130 -> 86 ms, medians of 5 side by side)
              AND (ts, user_agent) IN (SELECT ts, user_agent FROM proxy_alone)
              AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
              AND ({service:String} = '' OR service = {service:String})
              AND ({environment:String} = '' OR environment = {environment:String})
            LIMIT 1 BY event_id
        )
    ) AS p ON p.ts = c.ts AND p.user_agent = c.user_agent AND p.principal_key = c.principal_key AND p.session_key = c.session_key
        AND p.http_status = c.http_status AND p.k = c.k
)
SELECT *
FROM (SELECT * FROM server_challenges UNION ALL SELECT * FROM proxy_challenges)
