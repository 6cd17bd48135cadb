-- server_boots: each boot of a service (server evidence, DESIGN §4), with the
-- previous boot and how that one ended:
--   down_from   the previous boot's shutdown, else its last 2xx settlement,
--               else its last event (a kill -9 leaves no shutdown event)
--   is_restart  a previous boot of the same service exists in the range

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
    -- what the boots that some boot followed did in the range: the requests from
    -- server_requests (0007), the other server events from events; max and argMax
    -- are the same with or without a duplicate, so no FINAL
    SELECT boot_id,
           max(t) AS last_event_t,
           maxIf(t, event_type = 'settlement' AND http_status BETWEEN 200 AND 299) AS last_ok_t,
           maxIf(t, event_type = 'shutdown') AS shutdown_t,
           argMaxIf(reason, t, event_type = 'shutdown') AS shutdown_reason
    FROM
    (
        SELECT toString(boot_id) AS boot_id, event_type, http_status, reason, t
        FROM server_requests
        WHERE boot_id IN (SELECT prev_boot_id FROM ordered)
          AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
        UNION ALL
        SELECT boot_id, event_type, http_status, reason, toUnixTimestamp64Micro(ts) / 1e6 AS t
        FROM events
        WHERE event_type IN ('boot', 'shutdown', 'remint', 'session_lifecycle', 'cap_snapshot', 'auth_challenge')
          AND source = 'server' AND boot_id IN (SELECT prev_boot_id FROM ordered)
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
LEFT JOIN activity AS a ON a.boot_id = o.prev_boot_id
