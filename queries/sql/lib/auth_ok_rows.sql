-- auth_ok_rows: the 2xx auth_challenges judges the challenges by, as (k64, v), from
-- the rows alone (auth_ok_minutes.sql says what they are); runQuery reads this in
-- place of auth_ok_minutes where the minutes do not pay (queries/registry.ts
-- authOkForm). Reads the query's challenge_sources and key64.
-- requires: proxy_lines
WITH
ok_rows AS
(
    SELECT toUInt8(0) AS is_server, clienth, skh, toUInt64(toUnixTimestamp64Micro(ts)) AS us FROM proxy_lines WHERE ok
    UNION ALL
    SELECT toUInt8(1) AS is_server, clienth, skh, toUInt64(toUnixTimestamp64Micro(ts)) AS us FROM server_requests
    WHERE ok AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
)
SELECT k64, v
FROM
(
    -- a client's 2xx only of the sources whose challenges are counted: a client
    -- key is looked up only by a challenge of its own source (is_server is in the
    -- key), so where every counted challenge is a server's (a server recorded
    -- each request the proxy logged), the proxy clients' 2xx are not grouped
    -- (10M events: 3M fewer values, 1,072 -> 986 ms, the same rows)
    SELECT key64(o.clienth, 2 + o.is_server) AS k64, bitShiftLeft(o.us, 1) AS v
    FROM ok_rows AS o
    WHERE has(challenge_sources, o.is_server)
    UNION ALL
    SELECT key64(o.skh, 4), bitShiftLeft(o.us, 1)
    FROM ok_rows AS o WHERE o.skh != 0
)
