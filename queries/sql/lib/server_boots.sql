-- server_boots: each boot of a service (server evidence, DESIGN §4), with the
-- previous boot and how that one ended:
--   down_from   the previous boot's shutdown, else its last 2xx settlement,
--               else its last event (a kill -9 leaves no shutdown event)
--   is_restart  a previous boot of the same service exists in the range

WITH
-- the hours the range covers whole, [boots_hour_lo, boots_hour_hi) in seconds
-- (bound: queries/registry.ts wholeHours; whole_from and whole_to, the same bounds
-- as DateTime64, for the row tables' ts): the boots' requests in them come from
-- the server_sessions rollup (0008), the cut hours' from the rows
{whole_hour_lo:UInt32} AS boots_hour_lo,
{whole_hour_hi:UInt32} AS boots_hour_hi,
boots_hour_lo < boots_hour_hi AS boots_whole_hours,
b AS
(
    -- (release and instance of the boot's first event, by (ts, event_id): any() took the
    -- part read first, so two boot events of one boot_id with two releases gave the
    -- release of the batch written first: a break-it pass)
    SELECT service, boot_id, argMin((events.release, events.instance), (ts, event_id)) AS ri, ri.1 AS release, ri.2 AS instance,
           min(toUnixTimestamp64Micro(ts)) / 1e6 AS t
    FROM events
    WHERE event_type = 'boot'
      AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
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
    WINDOW w AS (PARTITION BY service ORDER BY t, boot_id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
),
activity AS
(
    -- what the boots that some boot followed did in the range, per service and boot: their requests'
    -- latest time and latest 2xx settlement (server_sessions for the whole hours,
    -- server_requests for the cut ones), and the other server events from events;
    -- max and argMax are the same with or without a duplicate, so no FINAL
    SELECT service, boot_id,
           max(t) AS last_event_t,
           max(ok_t) AS last_ok_t,
           max(down_t) AS shutdown_t,
           argMaxIf(reason, (down_t, reason), down_t > 0) AS shutdown_reason
    FROM
    (
        SELECT service, toString(boot_id) AS boot_id, t_max AS t, ok_2xx_max AS ok_t, 0. AS down_t, '' AS reason
        FROM server_sessions
        WHERE boots_whole_hours AND ts >= toDateTime(boots_hour_lo, 'UTC') AND ts < toDateTime(boots_hour_hi, 'UTC')
          AND boot_id IN (SELECT prev_boot_id FROM ordered)
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
        UNION ALL
        SELECT service, toString(boot_id) AS boot_id, t, if(event_type = 'settlement' AND http_status BETWEEN 200 AND 299, t, 0.) AS ok_t,
               0. AS down_t, '' AS reason
        FROM server_requests
        WHERE boot_id IN (SELECT prev_boot_id FROM ordered)
          AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
          AND NOT (boots_whole_hours AND ts >= {whole_from:DateTime64(6, 'UTC')} AND ts < {whole_to:DateTime64(6, 'UTC')})
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
        UNION ALL
        SELECT service, boot_id, toUnixTimestamp64Micro(ts) / 1e6 AS t, 0. AS ok_t,
               if(event_type = 'shutdown', t, 0.) AS down_t, toString(reason) AS reason
        FROM events
        WHERE event_type IN ('boot', 'shutdown', 'remint', 'session_lifecycle', 'cap_snapshot', 'auth_challenge')
          AND source = 'server' AND boot_id IN (SELECT prev_boot_id FROM ordered)
          AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
    )
    GROUP BY service, boot_id
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
-- (by service too: two services' collectors may use the same boot ids, and one's
-- shutdown ended the other's boot, a negative downtime: a break-it pass)
LEFT JOIN activity AS a ON a.service = o.service AND a.boot_id = o.prev_boot_id
