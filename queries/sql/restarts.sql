-- restarts: each restart with its evidence, downtime and the proxy 5xx in its gap.
-- Server evidence first: every boot that follows an earlier boot of the same
-- service; downtime runs from the previous boot's shutdown (or last 2xx, or last
-- event: a kill -9 leaves no shutdown) to the new boot; prev_boot_id and
-- prev_release name that previous boot, which may be the service's first boot
-- (not a restart itself, so no row of its own here). A proxy-inferred restart
-- (DESIGN §4: a proxy-generated 5xx gap, or sessions whose 2xx turned into refused
-- misses) that brackets a server boot is the same restart and only adds its
-- proxy 5xx; one that brackets none stays, as source 'proxy'.
-- requires: proxy_restarts, server_boots
WITH
-- each fragment read once into a scalar; the parts below read the arrays
(SELECT groupArray((service, boot_id, release, prev_release, boot_t, down_from, prev_boot_id)) FROM server_boots WHERE is_restart) AS server_rows,
(SELECT groupArray((service, evidence, down_from, up_at, downtime_s, proxy_5xx, proxy_5xx_post, proxy_5xx_get, sessions_refused))
 FROM proxy_restarts) AS proxy_rows,
server AS
(
    SELECT x.1 AS service, x.2 AS boot_id, x.3 AS release, x.4 AS prev_release, x.5 AS boot_t, x.6 AS down_from, x.7 AS prev_boot_id
    FROM (SELECT arrayJoin(server_rows) AS x)
),
proxy AS
(
    SELECT x.1 AS service, x.2 AS evidence, x.3 AS down_from, x.4 AS up_at, x.5 AS downtime_s, x.6 AS proxy_5xx,
           x.7 AS proxy_5xx_post, x.8 AS proxy_5xx_get, x.9 AS sessions_refused, ifNull(x.4, x.3) AS until
    FROM (SELECT arrayJoin(proxy_rows) AS x)
),
matched AS
(
    SELECT s.boot_id AS boot_id, p.down_from AS p_down_from, p.evidence AS p_evidence, p.proxy_5xx AS p_5xx,
           p.proxy_5xx_post AS p_post, p.proxy_5xx_get AS p_get, p.sessions_refused AS p_sessions
    FROM server AS s
    CROSS JOIN proxy AS p
    WHERE (p.service = s.service OR p.service = '' OR s.service = '')
      AND s.boot_t >= p.down_from - 1 AND s.boot_t <= p.until + 1
)
-- the two sources, then one order over both (an ORDER BY after UNION ALL orders only its last SELECT)
SELECT *
FROM
(
    SELECT
        s.service AS service,
        'server' AS source,
        if(m.boot_id != '', concat('server_boot+', any(m.p_evidence)), 'server_boot') AS evidence,
        s.boot_id AS boot_id,
        s.release AS release,
        s.prev_boot_id AS prev_boot_id,
        s.prev_release AS prev_release,
        toDateTime64(s.down_from, 6, 'UTC') AS down_from,
        toDateTime64(s.boot_t, 6, 'UTC') AS up_at,
        round(s.boot_t - s.down_from, 3) AS downtime_s,
        sum(m.p_5xx) AS proxy_5xx,
        sum(m.p_post) AS proxy_5xx_post,
        sum(m.p_get) AS proxy_5xx_get,
        sum(m.p_sessions) AS sessions_refused
    FROM server AS s
    LEFT JOIN matched AS m ON m.boot_id = s.boot_id
    GROUP BY s.service, s.boot_id, s.release, s.prev_boot_id, s.prev_release, s.down_from, s.boot_t, m.boot_id
    UNION ALL
    SELECT
        p.service AS service,
        'proxy' AS source,
        p.evidence AS evidence,
        '' AS boot_id,
        '' AS release,
        '' AS prev_boot_id,
        '' AS prev_release,
        toDateTime64(p.down_from, 6, 'UTC') AS down_from,
        if(isNull(p.up_at), NULL, toDateTime64(assumeNotNull(p.up_at), 6, 'UTC')) AS up_at,
        round(p.downtime_s, 3) AS downtime_s,
        p.proxy_5xx AS proxy_5xx,
        p.proxy_5xx_post AS proxy_5xx_post,
        p.proxy_5xx_get AS proxy_5xx_get,
        p.sessions_refused AS sessions_refused
    FROM proxy AS p
    WHERE p.down_from NOT IN (SELECT p_down_from FROM matched)
)
-- a total order: restarts at the same moment (services deployed together) by
-- service and boot, so the same store lists them the same way every time
ORDER BY up_at, down_from, service, source, boot_id, evidence
