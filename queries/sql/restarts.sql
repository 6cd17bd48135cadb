-- restarts: each restart with its evidence, downtime and the proxy 5xx in its gap.
-- Server evidence first: every boot that follows an earlier boot of the same
-- service; downtime runs from the previous boot's shutdown (or last 2xx, or last
-- event: a kill -9 leaves no shutdown) to the new boot; prev_boot_id and
-- prev_release name that previous boot, which may be the service's first boot
-- (not a restart itself, so no row of its own here). A proxy-inferred restart
-- (DESIGN §4: a proxy-generated 5xx gap, or sessions whose 2xx turned into refused
-- misses) that brackets a server boot is the same restart and only adds its
-- proxy 5xx; one that brackets none stays, as source 'proxy'.
-- requires: restart_rows
SELECT
    service, source, evidence, boot_id, release, prev_boot_id, prev_release,
    toDateTime64(down_t, 6, 'UTC') AS down_from,
    if(isNull(up_t), NULL, toDateTime64(assumeNotNull(up_t), 6, 'UTC')) AS up_at,
    downtime_s, proxy_5xx, proxy_5xx_post, proxy_5xx_get, sessions_refused
FROM restart_rows
-- a total order: restarts at the same moment (services deployed together) by
-- service and boot, so the same store lists them the same way every time
ORDER BY up_at, down_from, service, source, boot_id, evidence
