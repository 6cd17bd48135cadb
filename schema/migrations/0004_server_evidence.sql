-- Server evidence (DESIGN §4): what instrumented MCP servers recorded. Where
-- server and proxy evidence both exist, the named queries prefer the server's
-- and keep proxy inference only for what the server did not see. Same leading
-- parameters as the proxy views: t_from, t_to, service, environment.

-- Each boot of a service, with the previous boot and how that one ended:
--   down_from   the previous boot's shutdown, else its last 2xx settlement,
--               else its last event (a kill -9 leaves no shutdown event)
--   is_restart  a previous boot of the same service exists in the range
CREATE VIEW IF NOT EXISTS server_boots AS
WITH
b AS
(
    SELECT service, boot_id, any(release) AS release, any(instance) AS instance,
           min(toUnixTimestamp64Micro(ts)) / 1e6 AS t
    FROM events
    WHERE event_type = 'boot'
      AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
    GROUP BY service, boot_id
),
ordered AS
(
    SELECT service, boot_id, release, instance, t,
           lagInFrame(boot_id, 1, '') OVER w AS prev_boot_id,
           lagInFrame(release, 1, '') OVER w AS prev_release
    FROM b
    WINDOW w AS (PARTITION BY service ORDER BY t ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
),
activity AS
(
    SELECT boot_id,
           max(t) AS last_event_t,
           maxIf(t, event_type = 'settlement' AND http_status BETWEEN 200 AND 299) AS last_ok_t,
           maxIf(t, event_type = 'shutdown') AS shutdown_t,
           argMaxIf(reason, t, event_type = 'shutdown') AS shutdown_reason
    FROM
    (
        SELECT boot_id, event_type, http_status, reason, toUnixTimestamp64Micro(ts) / 1e6 AS t
        FROM events
        WHERE source = 'server' AND boot_id != ''
          AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
    )
    GROUP BY boot_id
)
SELECT
    o.service AS service,
    o.boot_id AS boot_id,
    o.release AS release,
    o.prev_release AS prev_release,
    o.instance AS instance,
    o.t AS boot_t,
    o.prev_boot_id AS prev_boot_id,
    o.prev_boot_id != '' AS is_restart,
    multiIf(a.shutdown_t > 0, a.shutdown_t, a.last_ok_t > 0, a.last_ok_t, a.last_event_t > 0, a.last_event_t, o.t) AS down_from,
    a.shutdown_t > 0 AS clean_shutdown,
    a.shutdown_reason AS shutdown_reason
FROM ordered AS o
LEFT JOIN activity AS a ON a.boot_id = o.prev_boot_id;

-- Refused misses the servers recorded, with the arrival's methods and what the
-- same session (or, for an initialize, the same client: user agent and
-- principal) did next within window_s.
CREATE VIEW IF NOT EXISTS server_refused AS
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
LEFT JOIN inits AS i ON i.client = concat(if(a.arrival_id != '', a.user_agent, r.user_agent), ' ', if(a.arrival_id != '', a.principal_key, r.principal_key));
