-- proxy_paths: the paths the proxy's lines went to, by the hour, and whether a line
-- on the path carried MCP session evidence (marks_endpoint, 0006), so that the
-- endpoint's paths (queries/sql/lib/proxy_endpoints.sql), resolved before every
-- query that reads the proxy's lines, read a few rows per hour instead of every
-- line of the range.
--
-- Why: at 10M events that resolution was a DISTINCT over 3.2M lines, 60 ms or more
-- before each of restarts, refused_misses, remint_pairs, auth_challenges,
-- proxy_errors, proxy_traffic and session_continuity (5 ms over an empty range: the
-- cost is the lines).
--
-- marks_endpoint is a maximum, so a copy of a line delivered in another batch, or
-- this migration's backfill over rows the view already wrote, changes nothing.
-- Discovery probes (/.well-known/*, /register) are never the endpoint and are left
-- out. Like the session rollups (0008), a line re-imported under another service
-- or environment keeps its old label here too (a rollup cannot forget), so the
-- resolution reads the rollup only without a service or environment filter, where
-- labels change nothing, and reads the lines under a filter. The hours the range
-- cuts come from the lines.
--
-- Fed by a materialized view on proxy_access (0006), which a view on events fills;
-- a retried batch is dropped here too (deduplicate_blocks_in_dependent_materialized_views:
-- store/client.ts). Retention follows events (store/migrate.ts RETAINED_TABLES);
-- `ts` is the hour.
CREATE TABLE IF NOT EXISTS proxy_paths
(
    ts             DateTime('UTC'),
    service        LowCardinality(String),
    environment    LowCardinality(String),
    url_path       LowCardinality(String),
    marks_endpoint SimpleAggregateFunction(max, UInt8)
)
ENGINE = AggregatingMergeTree
PARTITION BY toDate(ts)
ORDER BY (ts, service, environment, url_path)
TTL toDateTime(ts) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS proxy_paths_mv TO proxy_paths AS
SELECT toStartOfHour(ts) AS ts, service, environment, url_path, max(toUInt8(marks_endpoint)) AS marks_endpoint
FROM proxy_access
WHERE NOT discovery
GROUP BY ts, service, environment, url_path;

-- A store's lines from before this migration.
INSERT INTO proxy_paths
SELECT toStartOfHour(ts) AS ts, service, environment, url_path, max(toUInt8(marks_endpoint)) AS marks_endpoint
FROM proxy_access
WHERE NOT discovery
GROUP BY ts, service, environment, url_path
SETTINGS max_insert_threads = 1;
