-- ok_minutes: the first and last 2xx of each client and each session in each
-- minute, so that auth_challenges (queries/sql/auth_challenges.sql) finds the 2xx
-- around a challenge in about one row per key and minute instead of every 2xx.
--
-- Why: at 10M events auth_challenges grouped every 2xx of the range per key
-- (3.0M server 2xx for the clients, 5.8M for the sessions, both sources): most of
-- its time. By the minute they are 0.5M and 2.9M rows, and the query takes 0.63-0.72
-- of its time before (on a copy of the bench store, medians of 5-7 side by side:
-- 808-905 against 1,120-1,401 ms; docs/queries.md). The views cost ingest about 10%
-- (1M generated events: 34.0 and 37.5 s against 33.6 and 30.8 s).
--
-- Why a minute's first and last 2xx are enough (auth_challenges.sql says where
-- they are not, and reads the rows there instead): for a challenge at c, the first
-- 2xx after c is either in c's minute, and then the minute's last 2xx is after c and
-- less than a minute from it, or it is the first 2xx of a later minute; so with a
-- window of 60 s or more, "a 2xx within the window after c" has the same answer.
-- A key's first and last 2xx are a minute's. Any set of a minute's 2xx that holds
-- its first and last serves as well, so a copy of an event delivered in another
-- batch, parts not merged yet, or this migration's backfill over rows the views
-- already wrote, change nothing.
--
-- Columns:
--   ts           the minute (UTC)
--   kind         2: a proxy client (address + user agent), 3: a server client (user
--                agent + principal), 4: a session, as the proxy and the servers saw
--                it together
--   k            the key, as auth_challenges.sql's key64: the low 64 bits of the
--                hashed client or session key (0006, 0007) with a tag xored into
--                the top 4 (2: proxy client, 3: server client, 4: session)
--   service, environment, url_path   a client's labels: the line's or request's
--                (url_path: the proxy's, '' for a server's); a session's are all ''
--   lo, hi       the minute's first and last 2xx, µs since the epoch
-- A session's rows hold both sources' 2xx in one row per minute (at 10M events,
-- 2.9M rows instead of 5.7M), so they serve only a query without a service or
-- environment filter and without mcp_paths: the proxy's lines on a discovery path
-- are left out, and every other line that carries a session marks its path as the
-- endpoint (queries/sql/lib/proxy_endpoints.sql). Like the session rollups (0008),
-- a line re-imported under another service or environment keeps its old label in
-- the proxy clients' rows too (a rollup cannot forget), so those serve only a query
-- without a service or environment filter; the server's requests are read without
-- FINAL where rows are read, so the server clients' rows serve every query.
--
-- ORDER BY: by the hour first, so a range reads only its hours' granules; within
-- an hour by key, so the query's grouping by key meets each key's rows together
-- (at 10M events, 0.81-0.96 s for auth_challenges against 0.88-1.11 s with the minute
-- first, medians of 5-7 side by side).
-- Fed by materialized views on proxy_access (0006) and server_requests (0007); a
-- retried batch is dropped here too (deduplicate_blocks_in_dependent_materialized_views:
-- store/client.ts). Retention follows events (store/migrate.ts RETAINED_TABLES).
CREATE TABLE IF NOT EXISTS ok_minutes
(
    ts           DateTime('UTC'),
    kind         UInt8,
    service      LowCardinality(String),
    environment  LowCardinality(String),
    url_path     LowCardinality(String),
    k            UInt64,
    lo           SimpleAggregateFunction(min, UInt64),
    hi           SimpleAggregateFunction(max, UInt64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toDate(ts)
ORDER BY (toStartOfHour(ts), kind, k, ts, service, environment, url_path)
TTL toDateTime(ts) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS ok_minutes_proxy_mv TO ok_minutes AS
SELECT toStartOfMinute(ts) AS ts, kk.1 AS kind, kk.2 AS service, kk.3 AS environment, kk.4 AS url_path, kk.5 AS k, min(us) AS lo, max(us) AS hi
FROM
(
    SELECT ts, toUInt64(toUnixTimestamp64Micro(ts)) AS us,
           arrayJoin(if(skh != 0 AND NOT discovery,
                        [(toUInt8(2), toString(service), toString(environment), toString(url_path), bitXor(toUInt64(clienth), bitShiftLeft(toUInt64(2), 60))),
                         (toUInt8(4), '', '', '', bitXor(toUInt64(skh), bitShiftLeft(toUInt64(4), 60)))],
                        [(toUInt8(2), toString(service), toString(environment), toString(url_path), bitXor(toUInt64(clienth), bitShiftLeft(toUInt64(2), 60)))])) AS kk
    FROM proxy_access
    WHERE ok
)
GROUP BY ts, kind, service, environment, url_path, k;

CREATE MATERIALIZED VIEW IF NOT EXISTS ok_minutes_server_mv TO ok_minutes AS
SELECT toStartOfMinute(ts) AS ts, kk.1 AS kind, kk.2 AS service, kk.3 AS environment, '' AS url_path, kk.4 AS k, min(us) AS lo, max(us) AS hi
FROM
(
    SELECT ts, toUInt64(toUnixTimestamp64Micro(ts)) AS us,
           arrayJoin(if(skh != 0,
                        [(toUInt8(3), toString(service), toString(environment), bitXor(toUInt64(clienth), bitShiftLeft(toUInt64(3), 60))),
                         (toUInt8(4), '', '', bitXor(toUInt64(skh), bitShiftLeft(toUInt64(4), 60)))],
                        [(toUInt8(3), toString(service), toString(environment), bitXor(toUInt64(clienth), bitShiftLeft(toUInt64(3), 60)))])) AS kk
    FROM server_requests
    WHERE ok
)
GROUP BY ts, kind, service, environment, url_path, k;

-- A store's 2xx from before this migration.
INSERT INTO ok_minutes
SELECT toStartOfMinute(ts) AS ts, kk.1 AS kind, kk.2 AS service, kk.3 AS environment, kk.4 AS url_path, kk.5 AS k, min(us) AS lo, max(us) AS hi
FROM
(
    SELECT ts, toUInt64(toUnixTimestamp64Micro(ts)) AS us,
           arrayJoin(if(skh != 0 AND NOT discovery,
                        [(toUInt8(2), toString(service), toString(environment), toString(url_path), bitXor(toUInt64(clienth), bitShiftLeft(toUInt64(2), 60))),
                         (toUInt8(4), '', '', '', bitXor(toUInt64(skh), bitShiftLeft(toUInt64(4), 60)))],
                        [(toUInt8(2), toString(service), toString(environment), toString(url_path), bitXor(toUInt64(clienth), bitShiftLeft(toUInt64(2), 60)))])) AS kk
    FROM proxy_access
    WHERE ok
)
GROUP BY ts, kind, service, environment, url_path, k
SETTINGS max_insert_threads = 1;

INSERT INTO ok_minutes
SELECT toStartOfMinute(ts) AS ts, kk.1 AS kind, kk.2 AS service, kk.3 AS environment, '' AS url_path, kk.4 AS k, min(us) AS lo, max(us) AS hi
FROM
(
    SELECT ts, toUInt64(toUnixTimestamp64Micro(ts)) AS us,
           arrayJoin(if(skh != 0,
                        [(toUInt8(3), toString(service), toString(environment), bitXor(toUInt64(clienth), bitShiftLeft(toUInt64(3), 60))),
                         (toUInt8(4), '', '', bitXor(toUInt64(skh), bitShiftLeft(toUInt64(4), 60)))],
                        [(toUInt8(3), toString(service), toString(environment), bitXor(toUInt64(clienth), bitShiftLeft(toUInt64(3), 60)))])) AS kk
    FROM server_requests
    WHERE ok
)
GROUP BY ts, kind, service, environment, url_path, k
SETTINGS max_insert_threads = 1;
