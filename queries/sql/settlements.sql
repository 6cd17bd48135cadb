-- settlements: arrivals joined to their settlements by arrival_id — never by
-- session id, which a settlement may lack and a deploy changes — per boot and
-- method: settled share, arrivals still unsettled, those unsettled when their
-- boot ended (in flight at shutdown: attributed to the boot that ended, since
-- the arrival carries that boot's id), outcomes and latency percentiles (ms).
-- A boot has ended when a later boot of its service exists or it shut down.
WITH
arr AS
(
    SELECT arrival_id, any(service) AS a_service, any(boot_id) AS a_boot_id, any(mcp_method) AS a_mcp_method
    FROM events
    WHERE event_type = 'arrival'
      AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)}
      AND ({service:String} = '' OR service = {service:String})
      AND ({environment:String} = '' OR environment = {environment:String})
    GROUP BY arrival_id
),
sett AS
(
    -- a settlement may land after the range ends (a long SSE stream): allow an hour
    SELECT arrival_id, argMin(outcome, ts) AS s_outcome, argMin(duration_ms, ts) AS s_duration_ms
    FROM events
    WHERE event_type = 'settlement'
      AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)} + INTERVAL 1 HOUR
      AND arrival_id IN (SELECT arrival_id FROM arr)
    GROUP BY arrival_id
),
ended_boots AS
(
    SELECT prev_boot_id AS boot_id
    FROM server_boots(t_from = {t_from:DateTime64(6)}, t_to = {t_to:DateTime64(6)}, service = {service:String},
                      environment = {environment:String})
    WHERE is_restart
    UNION DISTINCT
    SELECT boot_id FROM events
    WHERE event_type = 'shutdown' AND ts >= {t_from:DateTime64(6)} AND ts < {t_to:DateTime64(6)} + INTERVAL 1 HOUR
)
SELECT
    a.a_service AS service,
    a.a_boot_id AS boot_id,
    a.a_boot_id IN (SELECT boot_id FROM ended_boots) AS boot_ended,
    a.a_mcp_method AS mcp_method,
    count() AS arrivals,
    countIf(s.arrival_id != '') AS settled,
    arrivals - settled AS unsettled,
    if(boot_ended, unsettled, 0) AS unsettled_at_shutdown,
    round(settled / arrivals, 4) AS settled_share,
    countIf(s.s_outcome = 'ok') AS ok,
    countIf(s.s_outcome = 'jsonrpc_error') AS jsonrpc_error,
    countIf(s.s_outcome = 'tool_error') AS tool_error,
    countIf(s.s_outcome = 'refused') AS refused,
    countIf(s.s_outcome = 'auth_challenge') AS auth_challenge,
    countIf(s.s_outcome IN ('cancelled', 'disconnected', 'unknown')) AS other,
    round(quantileIf(0.5)(s.s_duration_ms, s.arrival_id != ''), 3) AS p50_ms,
    round(quantileIf(0.95)(s.s_duration_ms, s.arrival_id != ''), 3) AS p95_ms,
    round(quantileIf(0.99)(s.s_duration_ms, s.arrival_id != ''), 3) AS p99_ms
FROM arr AS a
LEFT JOIN sett AS s ON s.arrival_id = a.arrival_id
GROUP BY service, boot_id, mcp_method
ORDER BY service, boot_id, mcp_method
