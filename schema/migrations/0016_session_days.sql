-- proxy_sessions_daily, server_sessions_daily: the per-session rollups of 0008 by
-- the UTC day, with the columns session_facts (queries/sql/lib) reads, so that
-- session_continuity reads a row per session and day for the days its range covers
-- whole, the hourly rollups for the other whole hours, and the rows for the hours
-- the range cuts.
--
-- Why: a session of the bench (10M events) lasts 5.5 hours on average, so the
-- hourly rollups hold 512K proxy and 671K server rows for 93K and 156K sessions,
-- and grouping them per session was about 380 ms of session_continuity's 1 s. By
-- the day they are 104K and 166K rows: about 220 ms (measured side by side on the
-- same store, docs/queries.md).
--
-- The columns are those of 0008 with the same functions (a minimum, a maximum, an
-- existence), so a copy of an event delivered in another batch, or this
-- migration's backfill over rows the views already wrote, changes nothing; the
-- server's rows drop the boot (session_facts does not ask) and the rows without a
-- session key. Like the hourly rollups, a line re-imported under another service
-- or environment keeps its old label here too (a rollup cannot forget), so the
-- proxy's rows serve only a query without a service or environment filter.
--
-- Fed by materialized views on proxy_access (0006) and server_requests (0007),
-- like the hourly ones; a retried batch is dropped here too
-- (deduplicate_blocks_in_dependent_materialized_views: store/client.ts). Retention
-- follows events (store/migrate.ts RETAINED_TABLES); `ts` is the day's start, so a
-- day's row expires with the day's first hour (at the retention edge a range then
-- reads that day's later hours from nowhere until they expire too: within a day of
-- the edge, as the hourly rollups are within an hour).
CREATE TABLE IF NOT EXISTS proxy_sessions_daily
(
    ts            DateTime('UTC'),
    service       LowCardinality(String),
    environment   LowCardinality(String),
    url_path      LowCardinality(String),
    h             UInt128,
    client        SimpleAggregateFunction(max, UInt128),
    ua_family     SimpleAggregateFunction(max, String),
    origin        SimpleAggregateFunction(max, String),
    used          SimpleAggregateFunction(max, UInt8),
    minted        SimpleAggregateFunction(max, UInt8),
    first_ok      SimpleAggregateFunction(min, Float64),
    last_ok       SimpleAggregateFunction(max, Float64),
    last          SimpleAggregateFunction(max, Tuple(Float64, UInt8)),
    last_refused  SimpleAggregateFunction(max, Float64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toDate(ts)
ORDER BY (ts, service, environment, url_path, h)
TTL toDateTime(ts) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS proxy_sessions_daily_mv TO proxy_sessions_daily AS
SELECT
    toStartOfDay(ts) AS ts, service, environment, url_path,
    if(skh != 0, skh, rkh) AS h,
    max(clienth) AS client,
    max(ua_family) AS ua_family,
    max(origin) AS origin,
    max(toUInt8(skh != 0)) AS used,
    max(toUInt8(init)) AS minted,
    min(if(skh != 0 AND ok, t, inf)) AS first_ok,
    max(if(skh != 0 AND ok, t, 0.)) AS last_ok,
    max(if(skh != 0, (t, toUInt8(NOT ok)), (0., toUInt8(0)))) AS last,
    max(if(skh != 0 AND refused, t, 0.)) AS last_refused
FROM proxy_access
WHERE skh != 0 OR init
GROUP BY ts, service, environment, url_path, h;

CREATE TABLE IF NOT EXISTS server_sessions_daily
(
    ts            DateTime('UTC'),
    service       LowCardinality(String),
    environment   LowCardinality(String),
    h             UInt128,
    client        SimpleAggregateFunction(max, UInt128),
    ua_family     SimpleAggregateFunction(max, String),
    used          SimpleAggregateFunction(max, UInt8),
    minted        SimpleAggregateFunction(max, UInt8),
    first_ok      SimpleAggregateFunction(min, Float64),
    last_ok       SimpleAggregateFunction(max, Float64),
    last_t        SimpleAggregateFunction(max, Float64),
    last          SimpleAggregateFunction(max, Tuple(Float64, UInt8)),
    last_refused  SimpleAggregateFunction(max, Float64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toDate(ts)
ORDER BY (ts, service, environment, h)
TTL toDateTime(ts) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS server_sessions_daily_mv TO server_sessions_daily AS
SELECT
    toStartOfDay(ts) AS ts, service, environment,
    k.1 AS h,
    max(if(k.2 = 1 OR NOT init, clienth, toUInt128(0))) AS client,
    max(if(k.2 = 1 OR NOT init, toString(ua_family), '')) AS ua_family,
    max(toUInt8(k.2 = 0 AND NOT init)) AS used,
    max(toUInt8(k.2 = 1)) AS minted,
    min(if(k.2 = 0 AND ok, t, inf)) AS first_ok,
    max(if(k.2 = 0 AND ok, t, 0.)) AS last_ok,
    max(if(k.2 = 0 AND NOT init, t, 0.)) AS last_t,
    max(if(k.2 = 0 AND event_type != 'arrival', (t, toUInt8(NOT ok)), (0., toUInt8(0)))) AS last,
    max(if(k.2 = 0 AND refused, t, 0.)) AS last_refused
FROM server_requests
ARRAY JOIN [(skh, toUInt8(0)), (mkh, toUInt8(1))] AS k
WHERE k.1 != 0 AND (k.2 = 0 OR event_type = 'settlement')
GROUP BY ts, service, environment, h;

-- A store's sessions from before this migration, from the hourly rollups (the same
-- functions over their rows give the same values as over the requests).
INSERT INTO proxy_sessions_daily
SELECT toStartOfDay(ts) AS day, service, environment, url_path, h,
       max(client), max(ua_family), max(origin), max(used), max(minted), min(first_ok), max(last_ok), max(last), max(last_refused)
FROM proxy_sessions
GROUP BY day, service, environment, url_path, h;

INSERT INTO server_sessions_daily
SELECT toStartOfDay(ts) AS day, service, environment, h,
       max(client), max(ua_family), max(used), max(minted), min(first_ok), max(last_ok), max(last_t), max(last), max(last_refused)
FROM server_sessions
WHERE h != 0
GROUP BY day, service, environment, h;
