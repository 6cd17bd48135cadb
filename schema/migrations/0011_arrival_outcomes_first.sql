-- arrival_outcomes (0010) rebuilt with two corrections, found by reading the same
-- stores with `settlements` before and after 0010 (the grouping query of 337d0e1):
--
--  * the first settlement's outcome and duration. 0010 kept the greatest outcome
--    and the greatest duration of an arrival's settlements in one row (max states),
--    so an arrival settled twice (contract v1 does not forbid it: a `cancelled` and
--    then a `disconnected`, a producer other than collectors/mcp) counted the later
--    or the other settlement's outcome and latency whenever both settlements met in
--    one row (one batch, or two batches of one hour). `s` is now one minimum over
--    (time, outcome, duration): the earliest settlement whole, whatever the batches.
--    Two settlements at the same microsecond: the least outcome (the old grouping
--    took either).
--  * the hour of a row that holds an arrival is the arrival's. 0010 took the hour
--    of the row's earliest event; a settlement stamped before its arrival in an
--    earlier hour (a clock stepped back) moved the arrival's row there, so a range
--    starting in the arrival's hour lost the arrival, and a copy of the arrival
--    delivered in another batch made a second row (the arrival counted twice).
--
-- Everything else is as in 0010 (see there). The table is rebuilt from
-- server_requests: 0010's rows cannot tell which settlement came first.
DROP VIEW IF EXISTS arrival_outcomes_mv;

DROP TABLE IF EXISTS arrival_outcomes;

-- Columns ("none" is 2^63 - 1 for a minimum, '' or 0 for a maximum):
--   a_us          the arrival's time, µs since the epoch (the earliest copy)
--   service, environment, boot_id, mcp_method   the arrival's
--   stream        the arrival was a GET (the standalone SSE stream, DESIGN §1)
--   s             the first settlement: (time µs, outcome, duration_ms); none
--                 (2^63 - 1, '', 0) when the row holds no settlement
CREATE TABLE IF NOT EXISTS arrival_outcomes
(
    ts          DateTime('UTC'),
    arh         UInt128,
    a_us        SimpleAggregateFunction(min, Int64),
    service     SimpleAggregateFunction(max, LowCardinality(String)),
    environment SimpleAggregateFunction(max, LowCardinality(String)),
    boot_id     SimpleAggregateFunction(max, LowCardinality(String)),
    mcp_method  SimpleAggregateFunction(max, LowCardinality(String)),
    stream      SimpleAggregateFunction(max, UInt8),
    s           SimpleAggregateFunction(min, Tuple(Int64, String, Float64))
)
ENGINE = AggregatingMergeTree
PARTITION BY toDate(ts)
ORDER BY (ts, arh)
TTL toDateTime(ts) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS arrival_outcomes_mv TO arrival_outcomes AS
SELECT
    toStartOfHour(fromUnixTimestamp64Micro(if(countIf(arrival) > 0, minIf(us, arrival), min(us)), 'UTC')) AS ts,
    arh,
    min(if(arrival, us, toInt64(9223372036854775807))) AS a_us,
    max(if(arrival, service, '')) AS service,
    max(if(arrival, environment, '')) AS environment,
    max(if(arrival, boot, '')) AS boot_id,
    max(if(arrival, method, '')) AS mcp_method,
    max(toUInt8(arrival AND http_method = 'GET')) AS stream,
    min(if(arrival, (toInt64(9223372036854775807), '', 0.), (us, settled_outcome, duration_ms))) AS s
FROM
(
    SELECT arh, toUnixTimestamp64Micro(ts) AS us, event_type = 'arrival' AS arrival,
           toString(service) AS service, toString(environment) AS environment, toString(boot_id) AS boot,
           toString(mcp_method) AS method, http_method, toString(outcome) AS settled_outcome, duration_ms
    FROM server_requests
    WHERE event_type IN ('arrival', 'settlement') AND arh != 0
)
GROUP BY arh;

-- The store's arrivals and settlements so far, each arrival whole, in time order.
INSERT INTO arrival_outcomes
SELECT
    toStartOfHour(fromUnixTimestamp64Micro(if(countIf(arrival) > 0, minIf(us, arrival), min(us)), 'UTC')) AS ts,
    arh,
    min(if(arrival, us, toInt64(9223372036854775807))) AS a_us,
    max(if(arrival, service, '')) AS service,
    max(if(arrival, environment, '')) AS environment,
    max(if(arrival, boot, '')) AS boot_id,
    max(if(arrival, method, '')) AS mcp_method,
    max(toUInt8(arrival AND http_method = 'GET')) AS stream,
    min(if(arrival, (toInt64(9223372036854775807), '', 0.), (us, settled_outcome, duration_ms))) AS s
FROM
(
    SELECT arh, toUnixTimestamp64Micro(ts) AS us, event_type = 'arrival' AS arrival,
           toString(service) AS service, toString(environment) AS environment, toString(boot_id) AS boot,
           toString(mcp_method) AS method, http_method, toString(outcome) AS settled_outcome, duration_ms
    FROM server_requests
    WHERE event_type IN ('arrival', 'settlement') AND arh != 0
)
GROUP BY arh
ORDER BY ts, arh
SETTINGS max_insert_threads = 1;
