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
-- Reads arrival_outcomes (schema/migrations/0010, 0011): arrivals paired with
-- their first settlements at insert time.
WITH
toUnixTimestamp64Micro({t_from:DateTime64(6, 'UTC')}) AS from_us,
toUnixTimestamp64Micro({t_to:DateTime64(6, 'UTC')}) AS to_us,
-- a settlement counts when it lands in [t_from, t_to + 1 hour): a long SSE stream
-- settles after the range ends
to_us + 3600000000 AS settle_to_us,
-- the hour t_from falls in, the first hour of arrival_outcomes to read (its ts is a
-- DateTime: a t_from before 1970 starts at 1970, as toStartOfHour would wrap it to
-- 2106 and read nothing; a break-it pass)
toStartOfHour(greatest({t_from:DateTime64(6, 'UTC')}, toDateTime64(0, 6, 'UTC'))) AS from_hour,
(toInt64(9223372036854775807), '', 0.) AS none_s,
-- settlements stored in another batch than their arrival: rows of their own in
-- arrival_outcomes (schema/migrations/0011), keyed by the settlement's hour (in a
-- later hour than the arrival's they never merge with its row; in the same hour,
-- until a merge), read without FINAL (a minimum per arrival is the same with or
-- without a copy)
late AS
(
    SELECT arh, min(s) AS l_s
    FROM arrival_outcomes
    WHERE ts >= from_hour AND ts < {t_to:DateTime64(6, 'UTC')} + INTERVAL 1 HOUR
      AND a_us = 9223372036854775807 AND s.1 >= from_us AND s.1 < settle_to_us
    GROUP BY arh
),
-- one row per arrival in the range (FINAL: an arrival's rows from several batches
-- of one hour as one, a re-delivered copy once), with its first settlement: the
-- row's own, or a later one from `late`
per_arrival AS
(
    SELECT o.service AS a_service,
           o.boot_id AS a_boot_id,
           o.mcp_method AS a_mcp_method,
           o.stream = 1 AS a_stream,
           if(o.s.1 >= from_us AND o.s.1 < settle_to_us, o.s, none_s) AS own_s,
           -- no match in `late` joins its default, (0, '', 0)
           if(l.l_s.1 = 0, none_s, l.l_s) AS late_s,
           -- the earlier of the two: (time, outcome, duration) compare by time first
           if(own_s <= late_s, own_s, late_s) AS first_s,
           first_s.1 < 9223372036854775807 AS s_settled,
           first_s.2 AS s_outcome,
           first_s.3 AS s_duration_ms
    FROM
    (
        SELECT arh, service, boot_id, mcp_method, stream, s
        FROM arrival_outcomes FINAL
        WHERE ts >= from_hour AND ts <= {t_to:DateTime64(6, 'UTC')}
          -- (were this filter applied before FINAL's merge, a settlement-only row of
          -- the same hour would be dropped here and still come from `late`)
          AND a_us >= from_us AND a_us < to_us
          AND ({service:String} = '' OR service = {service:String})
          AND ({environment:String} = '' OR environment = {environment:String})
    ) AS o
    LEFT JOIN late AS l ON l.arh = o.arh
),
ended_boots AS
(
    -- (by service and boot: two services' collectors may use the same boot ids)
    SELECT toString(service) AS service, prev_boot_id AS boot_id
    FROM server_boots
    WHERE is_restart
    UNION DISTINCT
    SELECT toString(service) AS service, boot_id FROM events
    WHERE event_type = 'shutdown' AND ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')} + INTERVAL 1 HOUR
)
-- grouped first, then each group's boot looked up among the ended ones (once per
-- group, not per arrival)
SELECT
    service, boot_id,
    (toString(service), boot_id) IN (SELECT service, boot_id FROM ended_boots) AS boot_ended,
    mcp_method, arrivals, settled,
    arrivals - settled AS unsettled,
    streams_open,
    if(boot_ended, unsettled - streams_open, 0) AS unsettled_at_shutdown,
    round(settled / arrivals, 4) AS settled_share,
    ok, jsonrpc_error, tool_error, refused, auth_challenge, other,
    round(q[1], 3) AS p50_ms,
    round(q[2], 3) AS p95_ms,
    round(q[3], 3) AS p99_ms
FROM
(
    SELECT
        a.a_service AS service,
        a.a_boot_id AS boot_id,
        a.a_mcp_method AS mcp_method,
        count() AS arrivals,
        countIf(a.s_settled) AS settled,
        countIf(NOT a.s_settled AND a.a_stream) AS streams_open,
        countIf(a.s_settled AND a.s_outcome = 'ok') AS ok,
        countIf(a.s_settled AND a.s_outcome = 'jsonrpc_error') AS jsonrpc_error,
        countIf(a.s_settled AND a.s_outcome = 'tool_error') AS tool_error,
        countIf(a.s_settled AND a.s_outcome = 'refused') AS refused,
        countIf(a.s_settled AND a.s_outcome = 'auth_challenge') AS auth_challenge,
        countIf(a.s_settled AND a.s_outcome IN ('cancelled', 'disconnected', 'unknown')) AS other,
        -- exact, interpolated between neighbours as the sampling quantile does below 8,192 values (which gave another answer at each run above that), one sort for the three levels
        quantilesExactInclusiveIf(0.5, 0.95, 0.99)(a.s_duration_ms, a.s_settled) AS q
    FROM per_arrival AS a
    GROUP BY service, boot_id, mcp_method
)
ORDER BY service, boot_id, mcp_method
