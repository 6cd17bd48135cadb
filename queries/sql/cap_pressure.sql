-- cap_pressure: per principal, the latest live / durable session counts against
-- their caps, evictions by cap kind, and the service's global-cap headroom
-- (DESIGN §1: "are principals at their session cap, and is recovery of one chat
-- evicting another chat's records?").
--   live_*, durable_*     the principal's latest reported count and cap (from
--                         cap_snapshot and session_lifecycle, which both carry
--                         the counts after the change; a cap of 0 = not reported)
--   at_cap                the latest live or durable count has reached its cap
--   principals_at_cap     principals of the service at cap (same on every row)
--   evicted_*             evictions of this principal's records by cap kind
--   evicted_active        evictions whose victim was active within active_s
--                         (idle less than active_s, or requests in flight): a
--                         live chat lost its session to make room. Compared in
--                         whole microseconds: idle exactly active_s is not
--                         active (active_s * 1000 in float ms is not exact:
--                         2.007 s gave 2007.0000000000002 ms, and a victim idle
--                         2007 ms was counted)
--   global_*              the service's global count and cap: the instance with
--                         the least headroom, from its latest report
-- A principal whose events report no cap and no eviction (e.g. only an expiry)
-- has no row. Reads only the two cap event types (the sorting key starts with event_type).
-- Eviction counts are distinct event_ids, exact before a merge without FINAL.
WITH
cap AS
(
    SELECT service, instance, principal_key, event_id, ts, action, cap_kind,
           live_count, live_cap, durable_count, durable_cap, global_count, global_cap,
           victim_idle_ms, victim_in_flight
    FROM events
    WHERE event_type IN ('cap_snapshot', 'session_lifecycle')
      AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
),
per_principal AS
(
    SELECT
        service,
        principal_key,
        max(ts) AS p_last_at,
        -- the latest report's count and cap together, by (ts, event_id): two reports
        -- of one µs were picked by the order the rows were read, each column on its
        -- own, so the row depended on which batch came first and could mix the two
        -- (a metamorphic pass); the greater event_id wins a tie, whatever the order
        argMaxIf((live_count, live_cap), (ts, event_id), live_cap > 0) AS p_live,
        argMaxIf((durable_count, durable_cap), (ts, event_id), durable_cap > 0) AS p_durable,
        p_live.1 AS p_live_count,
        p_live.2 AS p_live_cap,
        p_durable.1 AS p_durable_count,
        p_durable.2 AS p_durable_cap,
        uniqExactIf(event_id, action = 'evicted') AS p_evictions,
        uniqExactIf(event_id, action = 'evicted' AND cap_kind = 'live') AS p_evicted_live,
        uniqExactIf(event_id, action = 'evicted' AND cap_kind = 'durable') AS p_evicted_durable,
        uniqExactIf(event_id, action = 'evicted' AND cap_kind = 'global') AS p_evicted_global,
        uniqExactIf(event_id, action = 'evicted' AND (round(victim_idle_ms * 1000) < round({active_s:Float64} * 1e6) OR victim_in_flight > 0)) AS p_evicted_active
    FROM cap
    GROUP BY service, principal_key
    -- a principal appears once something about its caps is known
    HAVING p_live_cap > 0 OR p_durable_cap > 0 OR p_evictions > 0
),
global AS
(
    -- latest report per instance (by (ts, event_id), as above), then the instance with
    -- the least headroom (count and cap of one instance; a tie goes to the first instance)
    SELECT service,
           argMin(g, (toInt64(g.2) - toInt64(g.1), instance)) AS least,
           least.1 AS g_count,
           least.2 AS g_cap
    FROM
    (
        SELECT service, instance, argMax((global_count, global_cap), (ts, event_id)) AS g
        FROM cap
        WHERE global_cap > 0
        GROUP BY service, instance
    )
    GROUP BY service
)
SELECT
    p.service AS service,
    p.principal_key AS principal_key,
    p.p_last_at AS last_at,
    p.p_live_count AS live_count,
    p.p_live_cap AS live_cap,
    p.p_durable_count AS durable_count,
    p.p_durable_cap AS durable_cap,
    CAST((p.p_live_cap > 0 AND p.p_live_count >= p.p_live_cap) OR (p.p_durable_cap > 0 AND p.p_durable_count >= p.p_durable_cap), 'Bool') AS at_cap,
    countIf(at_cap) OVER (PARTITION BY p.service) AS principals_at_cap,
    p.p_evictions AS evictions,
    p.p_evicted_live AS evicted_live,
    p.p_evicted_durable AS evicted_durable,
    p.p_evicted_global AS evicted_global,
    p.p_evicted_active AS evicted_active,
    if(g.g_cap = 0, CAST(NULL, 'Nullable(UInt32)'), g.g_count) AS global_count,
    if(g.g_cap = 0, CAST(NULL, 'Nullable(UInt32)'), g.g_cap) AS global_cap,
    if(g.g_cap = 0, CAST(NULL, 'Nullable(Int64)'), toInt64(g.g_cap) - toInt64(g.g_count)) AS global_headroom
FROM per_principal AS p
LEFT JOIN global AS g ON g.service = p.service
ORDER BY service, at_cap DESC, evictions DESC, principal_key
