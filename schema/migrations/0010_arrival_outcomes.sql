-- arrival_outcomes: each arrival joined to its settlement by arrival_id at insert
-- time, one row per arrival and hour, so that `settlements`
-- (queries/sql/settlements.sql) reads one row per arrival instead of grouping
-- every arrival and settlement by arrival id on every run.
--
-- Why: at 10M events `settlements` grouped 6.4M server requests into 3.2M arrivals
-- by hashed id; the hash table of 3.2M groups, each with ten aggregate states,
-- cost about 4 s, more than any read. An arrival and its settlement usually reach
-- the store in one batch (the settlement follows within milliseconds), and the
-- view below pairs them within the batch, so rows here are mostly whole.
--
-- The key is (ts, arh): ts is the hour of the earliest event of the row (the
-- arrival's, when the row holds it) and arh the hashed arrival id. Rows of one
-- arrival written by different batches merge when their hours agree: a read
-- with FINAL sees one row, and every column is a state a re-delivered copy does
-- not change (a minimum or a maximum), so a copy in another batch changes
-- nothing. A settlement that reached the store in a later batch, in a later hour
-- than its arrival, stays a row of its own ("settlement only": a_us is the
-- none value); the query joins those to their arrivals by arh.
--
-- Columns ("none" is 2^63 - 1 for a minimum, '' or 0 for a maximum):
--   a_us          the arrival's time, µs since the epoch (the earliest copy)
--   service, environment, boot_id, mcp_method   the arrival's
--   stream        the arrival was a GET (the standalone SSE stream, DESIGN §1)
--   s_us          the first settlement's time, µs since the epoch
--   outcome, duration_ms   that settlement's (one arrival settles once, DESIGN §3;
--                 two different settlements of one arrival would give the greater)
--
-- Fed by a materialized view on server_requests (0007), which a view on events
-- fills; a retried batch is dropped here too (its insert_deduplication_token,
-- with deduplicate_blocks_in_dependent_materialized_views: store/client.ts).
-- Retention follows events (store/migrate.ts RETAINED_TABLES); `ts` is the hour.
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
    s_us        SimpleAggregateFunction(min, Int64),
    outcome     SimpleAggregateFunction(max, LowCardinality(String)),
    duration_ms SimpleAggregateFunction(max, Float64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toDate(ts)
ORDER BY (ts, arh)
TTL toDateTime(ts) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS arrival_outcomes_mv TO arrival_outcomes AS
SELECT
    toStartOfHour(fromUnixTimestamp64Micro(min(us), 'UTC')) AS ts,
    arh,
    min(if(arrival, us, 9223372036854775807)) AS a_us,
    max(if(arrival, service, '')) AS service,
    max(if(arrival, environment, '')) AS environment,
    max(if(arrival, boot, '')) AS boot_id,
    max(if(arrival, method, '')) AS mcp_method,
    max(toUInt8(arrival AND http_method = 'GET')) AS stream,
    min(if(arrival, 9223372036854775807, us)) AS s_us,
    max(if(arrival, '', settled_outcome)) AS outcome,
    max(if(arrival, 0., duration_ms)) AS duration_ms
FROM
(
    SELECT arh, toUnixTimestamp64Micro(ts) AS us, event_type = 'arrival' AS arrival,
           toString(service) AS service, toString(environment) AS environment, toString(boot_id) AS boot,
           toString(mcp_method) AS method, http_method, toString(outcome) AS settled_outcome, duration_ms
    FROM server_requests
    WHERE event_type IN ('arrival', 'settlement') AND arh != 0
)
GROUP BY arh;

-- A store's arrivals and settlements from before this migration, each arrival
-- whole (grouped over the store, not by batch), written in time order so that the
-- parts they make cover disjoint hours and FINAL has next to nothing to merge.
INSERT INTO arrival_outcomes
SELECT
    toStartOfHour(fromUnixTimestamp64Micro(min(us), 'UTC')) AS ts,
    arh,
    min(if(arrival, us, 9223372036854775807)) AS a_us,
    max(if(arrival, service, '')) AS service,
    max(if(arrival, environment, '')) AS environment,
    max(if(arrival, boot, '')) AS boot_id,
    max(if(arrival, method, '')) AS mcp_method,
    max(toUInt8(arrival AND http_method = 'GET')) AS stream,
    min(if(arrival, 9223372036854775807, us)) AS s_us,
    max(if(arrival, '', settled_outcome)) AS outcome,
    max(if(arrival, 0., duration_ms)) AS duration_ms
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
