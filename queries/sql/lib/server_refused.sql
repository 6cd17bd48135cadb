-- server_refused: refused misses the servers recorded, with the arrival's methods
-- and what the same session (or, for an initialize, the same client: user agent
-- and principal) did next within window_s.

WITH
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
by_session AS (SELECT session_key, groupArray(t) AS ts FROM arrivals WHERE session_key != '' GROUP BY session_key),
inits AS (SELECT concat(user_agent, ' ', principal_key) AS client, groupArray(t) AS ts FROM arrivals WHERE mcp_method = 'initialize' GROUP BY client)
SELECT
    r.service AS service, r.boot_id AS boot_id, r.sk AS sk, r.reason AS reason, r.http_status AS http_status, r.t AS t,
    a.http_method AS http_method, a.mcp_method AS mcp_method,
    multiIf(
        arrayExists(x -> x > r.t AND x <= r.t + {window_s:Float64}, i.ts), 'initialize',
        arrayExists(x -> x > r.t, s.ts), 'same_session_again',
        'nothing') AS next
FROM refused AS r
LEFT JOIN arrivals AS a ON a.arrival_id = r.arrival_id
LEFT JOIN by_session AS s ON s.session_key = r.sk
LEFT JOIN inits AS i ON i.client = concat(if(a.arrival_id != '', a.user_agent, r.user_agent), ' ', if(a.arrival_id != '', a.principal_key, r.principal_key))
