-- restart_rows: each restart with its evidence, downtime and the proxy 5xx in its
-- gap, the rows of the `restarts` query (restarts.sql, which says what each is)
-- with the times in seconds: down_t (Float64), up_t (Nullable(Float64): a proxy
-- restart not back up when the range ends). One rule, here, decides which proxy-
-- inferred restart is a server boot seen from the proxy: it brackets the boot (same
-- service, or either unlabelled; the boot within 1 s of the proxy's down..up span)
-- and only adds its proxy 5xx and evidence; one that brackets none stays, as source
-- 'proxy'. Read by restarts.sql and restart_spans.sql. restart_spans_no_transitions.sql
-- applies the same rule to the gaps alone (session_continuity's narrowed form): a
-- change to the rule is a change to both (test/queries-narrowed.test.ts compares them).
-- requires: proxy_restarts, server_boots
WITH
-- each fragment read once into a scalar, and each scalar referenced once: the rows
-- are matched in arrays (a few per restart). The engine analyzes a scalar's whole
-- subquery again at every reference (to find its cached value), and with a CTE per
-- use that analysis took about 0.3 s of every call, whatever the range.
(SELECT groupArray((service, boot_id, release, prev_release, boot_t, down_from, prev_boot_id)) FROM server_boots WHERE is_restart) AS server_rows,
(SELECT groupArray((service, evidence, down_from, up_at, downtime_s, proxy_5xx, proxy_5xx_post, proxy_5xx_get, sessions_refused))
 FROM proxy_restarts) AS proxy_rows
SELECT
    r.1 AS service,
    r.2 AS source,
    r.3 AS evidence,
    r.4 AS boot_id,
    r.5 AS release,
    r.6 AS prev_boot_id,
    r.7 AS prev_release,
    r.8 AS down_t,
    r.9 AS up_t,
    round(r.10, 3) AS downtime_s,
    r.11 AS proxy_5xx,
    r.12 AS proxy_5xx_post,
    r.13 AS proxy_5xx_get,
    r.14 AS sessions_refused
FROM
(
    SELECT arrayJoin(arrayConcat(
        -- server evidence: every boot that follows an earlier one, with the proxy
        -- restarts that bracket it (same service, or either unlabelled; the boot
        -- within 1 s of the proxy's down..up span) adding their 5xx and evidence
        arrayMap(s -> (
            s.1, 'server',
            if(empty(s.8), 'server_boot', concat('server_boot+', s.8[1].2)),
            s.2, s.3, s.7, s.4, s.6, CAST(s.5, 'Nullable(Float64)'), CAST(s.5 - s.6, 'Nullable(Float64)'),
            arraySum(p -> p.6, s.8), arraySum(p -> p.7, s.8), arraySum(p -> p.8, s.8), arraySum(p -> p.9, s.8)),
            arrayMap(s -> tuple(s.1, s.2, s.3, s.4, s.5, s.6, s.7,
                                arrayFilter(p -> (p.1 = s.1 OR p.1 = '' OR s.1 = '') AND s.5 >= p.3 - 1 AND s.5 <= ifNull(p.4, p.3) + 1, pr)),
                     sr)),
        -- proxy-inferred restarts that bracket no server boot
        arrayMap(p -> (p.1, 'proxy', p.2, '', '', '', '', p.3, p.4, p.5, p.6, p.7, p.8, p.9),
            arrayFilter(p -> NOT arrayExists(s -> (p.1 = s.1 OR p.1 = '' OR s.1 = '') AND s.5 >= p.3 - 1 AND s.5 <= ifNull(p.4, p.3) + 1, sr), pr))
    )) AS r
    FROM (SELECT server_rows AS sr, proxy_rows AS pr)
)
