-- server_boot_list: each boot of a service in the range (server evidence, DESIGN §4:
-- a `boot` event), in time order per service, with the boot before it:
--   t              the boot's first boot event, s since the epoch
--   prev_boot_id   the previous boot of the same service in the range ('' for the first)
-- Reads only `boot` events (the head of events' sort key): cheap at any size, so
-- the canary report finds a deploy here before it asks for anything costly.

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
)
SELECT service, boot_id, release, instance, t,
       lagInFrame(boot_id, 1, '') OVER w AS prev_boot_id,
       lagInFrame(release, 1, '') OVER w AS prev_release
FROM b
WINDOW w AS (PARTITION BY service ORDER BY t ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
