-- proxy_minutes: the proxy's lines by the minute, written at insert time, so that
-- the restart gaps (queries/sql/lib/proxy_seq.sql) find the upstream-served
-- requests around each proxy-generated 5xx in a few rows per minute instead of
-- every line.
--
-- Why: a gap runs from the last served response before its 5xx to the first one
-- after them, and proxy_seq found those by grouping every line of the range by
-- service and minute: about 0.27 s of every query that reads the restarts
-- (restarts, refused_misses, proxy_errors, session_continuity) at 10M events,
-- whatever it asked. From this table the whole hours of a range take a few ms;
-- the hours a range cuts still come from the rows, and so do the served times
-- inside the few minutes that hold a 5xx (read by the primary key: their minutes
-- are bound as a constant, queries/registry.ts).
--
-- Per minute (ts: its start), service, environment and URL path:
--   first_served, last_served   the first and the latest line the upstream
--                               answered (not a proxy-generated 5xx); +inf and 0
--                               when the minute holds only proxy-generated 5xx
-- Both are a minimum or a maximum, so a re-delivered copy of a line, or this
-- backfill over rows the view already wrote, changes nothing. A line re-imported
-- under another label stays under its old one too (a rollup cannot forget), so
-- readers take it only without a service or environment filter, as they take
-- 0008's rollups. Fed by a materialized view on proxy_access (0006), in the same
-- insert (a retried batch is dropped here too:
-- deduplicate_blocks_in_dependent_materialized_views, store/client.ts); retention
-- follows events (store/migrate.ts RETAINED_TABLES).
CREATE TABLE IF NOT EXISTS proxy_minutes
(
    ts            DateTime('UTC'),
    service       LowCardinality(String),
    environment   LowCardinality(String),
    url_path      LowCardinality(String),
    first_served  SimpleAggregateFunction(min, Float64),
    last_served   SimpleAggregateFunction(max, Float64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toDate(ts)
ORDER BY (ts, service, environment, url_path)
TTL toDateTime(ts) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS proxy_minutes_mv TO proxy_minutes AS
SELECT
    toStartOfMinute(ts) AS ts, service, environment, url_path,
    min(if(pg, inf, t)) AS first_served,
    max(if(pg, 0., t)) AS last_served
FROM proxy_access
GROUP BY ts, service, environment, url_path;

-- A store's lines from before this migration (FINAL: a line re-imported under
-- another label counts under its newest one).
INSERT INTO proxy_minutes
SELECT
    toStartOfMinute(ts) AS ts, service, environment, url_path,
    min(if(pg, inf, t)) AS first_served,
    max(if(pg, 0., t)) AS last_served
FROM proxy_access FINAL
GROUP BY ts, service, environment, url_path
SETTINGS max_insert_threads = 1;
