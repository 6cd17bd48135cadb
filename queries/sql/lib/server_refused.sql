-- server_refused: refused misses the servers recorded, with the arrival's methods
-- and what the same session (or, for an initialize, the same client: user agent
-- and principal) did next within window_s: initialize (the client initialized
-- again within window_s), same_session_again (the session's id arrived again
-- later), nothing. Only the arrivals of refused misses, of their sessions and their
-- clients' initializes are read; the next one is found by ASOF joins.
WITH
refused AS
(
    SELECT r.service AS service, r.boot_id AS boot_id, r.session_key AS sk, r.reason AS reason, r.http_status AS http_status,
           toUnixTimestamp64Micro(r.ts) / 1e6 AS t, r.arrival_id AS arrival_id, r.user_agent AS user_agent, r.principal_key AS principal_key
    FROM events AS r FINAL
    WHERE r.event_type = 'session_refused'
      AND r.ts >= {t_from:DateTime64(6)} AND r.ts < {t_to:DateTime64(6)}
      AND ({service:String} = '' OR r.service = {service:String})
      AND ({environment:String} = '' OR r.environment = {environment:String})
),
arrivals AS
(
    SELECT arrival_id, session_key, user_agent, principal_key, http_method, mcp_method,
           toUnixTimestamp64Micro(ts) / 1e6 AS t
    FROM events
    WHERE event_type = 'arrival'
      AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
),
-- the refused arrivals themselves: their methods and client
refused_arrivals AS
(
    SELECT arrival_id, user_agent, principal_key, http_method, mcp_method
    FROM arrivals
    WHERE arrival_id IN (SELECT arrival_id FROM refused WHERE arrival_id != '')
),
judged AS
(
    SELECT r.service AS service, r.boot_id AS boot_id, r.sk AS sk, r.reason AS reason, r.http_status AS http_status, r.t AS t,
           a.http_method AS http_method, a.mcp_method AS mcp_method,
           concat(if(a.arrival_id != '', a.user_agent, r.user_agent), ' ', if(a.arrival_id != '', a.principal_key, r.principal_key)) AS client
    FROM refused AS r
    LEFT JOIN refused_arrivals AS a ON a.arrival_id = r.arrival_id
),
later_arrivals AS (SELECT session_key, t, toUInt8(1) AS hit FROM arrivals WHERE session_key != '' AND session_key IN (SELECT sk FROM refused)),
later_inits AS
(
    SELECT concat(user_agent, ' ', principal_key) AS client, t, toUInt8(1) AS hit
    FROM arrivals
    WHERE mcp_method = 'initialize' AND principal_key IN (SELECT principal_key FROM refused_arrivals UNION ALL SELECT principal_key FROM refused)
)
SELECT
    j.service AS service, j.boot_id AS boot_id, j.sk AS sk, j.reason AS reason, j.http_status AS http_status, j.t AS t,
    j.http_method AS http_method, j.mcp_method AS mcp_method,
    multiIf(
        i.hit = 1 AND i.t <= j.t + {window_s:Float64}, 'initialize',
        s.hit = 1, 'same_session_again',
        'nothing') AS next
FROM judged AS j
ASOF LEFT JOIN later_inits AS i ON i.client = j.client AND i.t > j.t
ASOF LEFT JOIN later_arrivals AS s ON s.session_key = j.sk AND s.t > j.t
