-- settlements: arrivals joined to their settlements by arrival_id — never by
-- session id, which a settlement may lack and a deploy changes — per boot and
-- method: settled share, arrivals still unsettled, those unsettled when their
-- boot ended (in flight at shutdown: attributed to the boot that ended, since
-- the arrival carries that boot's id), outcomes and latency percentiles (ms).
-- A boot has ended when a later boot of its service exists or it shut down.
-- A standalone GET stream (the server-push SSE channel every SDK client opens,
-- DESIGN §1) is an arrival too, but it is a listening channel that only ends when
-- one side closes it, and every shutdown closes it: an open one is counted in
-- streams_open, not as a request in flight (unsettled_at_shutdown).
-- requires: server_boots
WITH
-- one pass over both event types, one row per arrival: what arrived in the range
-- (its service, boot and method) and its first settlement, which may land after the
-- range ends (a long SSE stream): settlements are read up to an hour past t_to
per_arrival AS
(
    -- server_requests (schema/migrations/0007), grouped on the hashed arrival id;
    -- every aggregate here is the same with or without a copy of an event
    SELECT arh,
           anyIf(service, event_type = 'arrival') AS a_service,
           anyIf(toString(boot_id), event_type = 'arrival') AS a_boot_id,
           anyIf(toString(mcp_method), event_type = 'arrival') AS a_mcp_method,
           anyIf(http_method = 'GET', event_type = 'arrival') AS a_stream,
           minIf(ts, event_type = 'arrival') AS a_ts,
           countIf(event_type = 'arrival') > 0 AS arrived,
           countIf(event_type = 'settlement') > 0 AS s_settled,
           argMinIf(outcome, ts, event_type = 'settlement') AS s_outcome,
           argMinIf(duration_ms, ts, event_type = 'settlement') AS s_duration_ms
    FROM server_requests
    WHERE event_type IN ('arrival', 'settlement')
      AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')} + INTERVAL 1 HOUR
      -- past t_to only settlements: an arrival there is not the range's (HAVING)
      AND (ts < {t_to:DateTime64(6, 'UTC')} OR event_type = 'settlement')
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
    GROUP BY arh
    HAVING arrived AND a_ts < {t_to:DateTime64(6, 'UTC')}
),
ended_boots AS
(
    SELECT prev_boot_id AS boot_id
    FROM server_boots
    WHERE is_restart
    UNION DISTINCT
    SELECT boot_id FROM events
    WHERE event_type = 'shutdown' AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')} + INTERVAL 1 HOUR
)
SELECT
    a.a_service AS service,
    a.a_boot_id AS boot_id,
    a.a_boot_id IN (SELECT boot_id FROM ended_boots) AS boot_ended,
    a.a_mcp_method AS mcp_method,
    count() AS arrivals,
    countIf(a.s_settled) AS settled,
    arrivals - settled AS unsettled,
    countIf(NOT a.s_settled AND a.a_stream) AS streams_open,
    if(boot_ended, unsettled - streams_open, 0) AS unsettled_at_shutdown,
    round(settled / arrivals, 4) AS settled_share,
    countIf(a.s_settled AND a.s_outcome = 'ok') AS ok,
    countIf(a.s_settled AND a.s_outcome = 'jsonrpc_error') AS jsonrpc_error,
    countIf(a.s_settled AND a.s_outcome = 'tool_error') AS tool_error,
    countIf(a.s_settled AND a.s_outcome = 'refused') AS refused,
    countIf(a.s_settled AND a.s_outcome = 'auth_challenge') AS auth_challenge,
    countIf(a.s_settled AND a.s_outcome IN ('cancelled', 'disconnected', 'unknown')) AS other,
    -- exact, interpolated between neighbours as the sampling quantile does below 8,192 values (which gave another answer at each run above that), one sort for the three levels
    round(quantilesExactInclusiveIf(0.5, 0.95, 0.99)(a.s_duration_ms, a.s_settled)[1], 3) AS p50_ms,
    round(quantilesExactInclusiveIf(0.5, 0.95, 0.99)(a.s_duration_ms, a.s_settled)[2], 3) AS p95_ms,
    round(quantilesExactInclusiveIf(0.5, 0.95, 0.99)(a.s_duration_ms, a.s_settled)[3], 3) AS p99_ms
FROM per_arrival AS a
GROUP BY service, boot_id, mcp_method
ORDER BY service, boot_id, mcp_method
