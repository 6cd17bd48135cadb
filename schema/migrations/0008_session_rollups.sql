-- proxy_sessions, server_sessions: per-session rollups by the hour, written at
-- insert time, so that session_continuity (queries/sql/session_continuity.sql)
-- reads a few rows per session and hour instead of every request.
--
-- Why: at 10M events session_continuity aggregated 9.6M proxy and server rows
-- per session on every run. Sessions send a request every few minutes, so one
-- row per session and hour is about 6 times fewer rows than requests.
--
-- Every column is a state that a re-delivered copy of a request does not change:
-- a minimum, a maximum (of a time, or of a (time, flag) tuple: the latest request
-- and whether it failed, ties going to the failure; the latest served request and
-- whether it succeeded, ties going to the success, as a sort of the rows would),
-- an existence (max of a 0/1), or a set (groupUniqArray). So a copy of an event
-- delivered in another batch, or a migration backfill that runs over rows the
-- view already wrote, changes nothing; there is no count here. The columns are
-- SimpleAggregateFunction: a read merges them with the plain function, no state
-- to deserialize. "None" is 0 for a maximum and +inf for a minimum.
--
-- A query reads whole hours from here and the hours its t_from/t_to cut from
-- the rows (proxy_access, server_requests), and combines both with the same
-- functions, so any range is exact. The service, environment and url_path are
-- part of the key (the endpoint's paths and the filters select rows).
--
-- Fed by materialized views on proxy_access (0006) and server_requests (0007),
-- which views on events fill, so the hashed keys and classes are computed once.
-- A retried batch (same insert_deduplication_token) is dropped here too
-- (deduplicate_blocks_in_dependent_materialized_views: store/client.ts).
-- Retention follows events (store/migrate.ts RETAINED_TABLES); `ts` is the hour.

-- The proxy's requests to a session: each line is credited to its request
-- session key (skh) or, for an initialize (init: no session id sent, one minted),
-- to the minted key (rkh). Lines with neither are not session lines.
--   client        the session's client (address + user agent), hashed; the
--                 largest if several (the queries read "any one")
--   used          some request carried the id; minted: an initialize minted it
--   first_ok, last_ok   first and last 2xx of a request carrying the id
--   last          (t, failed) of the latest request carrying the id (failed:
--                 not a 2xx)
--   last_refused  the latest refused miss
--   first_served, last_served   the first and the latest (t, ok) request the
--                 upstream answered (not a proxy-generated 5xx), refused misses
--                 aside (the queries read those one by one)
--   inits         (client, t) of each initialize that minted the id
CREATE TABLE IF NOT EXISTS proxy_sessions
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
    last_refused  SimpleAggregateFunction(max, Float64),
    first_served  SimpleAggregateFunction(min, Float64),
    last_served   SimpleAggregateFunction(max, Tuple(Float64, UInt8)),
    inits         SimpleAggregateFunction(groupUniqArrayArray, Array(Tuple(UInt128, Float64)))
)
ENGINE = AggregatingMergeTree
PARTITION BY toDate(ts)
ORDER BY (ts, service, environment, url_path, h)
TTL toDateTime(ts) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS proxy_sessions_mv TO proxy_sessions AS
SELECT
    toStartOfHour(ts) AS ts, service, environment, url_path,
    if(skh != 0, skh, rkh) AS h,
    max(clienth) AS client,
    max(ua_family) AS ua_family,
    max(origin) AS origin,
    max(toUInt8(skh != 0)) AS used,
    max(toUInt8(init)) AS minted,
    min(if(skh != 0 AND ok, t, inf)) AS first_ok,
    max(if(skh != 0 AND ok, t, 0.)) AS last_ok,
    max(if(skh != 0, (t, toUInt8(NOT ok)), (0., toUInt8(0)))) AS last,
    max(if(skh != 0 AND refused, t, 0.)) AS last_refused,
    min(if(skh != 0 AND NOT pg AND NOT refused, t, inf)) AS first_served,
    max(if(skh != 0 AND NOT pg AND NOT refused, (t, toUInt8(ok)), (0., toUInt8(0)))) AS last_served,
    groupUniqArrayIf((clienth, t), init) AS inits
FROM proxy_access
WHERE skh != 0 OR init
GROUP BY ts, service, environment, url_path, h;

-- The servers' requests (server_requests) by session and boot. A request is
-- credited to its session key (h = skh; 0 when it has none) and a settlement
-- that minted a session also to the minted key (h = mkh). An initialize's
-- arrival counts only for the boot's activity (t_max), as in the queries.
--   client, ua_family   of the session's requests (user agent + principal)
--   used          a request (not an initialize) carried the id; minted: a
--                 settlement minted it
--   first_ok, last_ok   first and last settlement with outcome ok
--   last_t        the latest request carrying the id
--   last          (t, failed) of the latest settlement or refused miss (failed:
--                 outcome not ok)
--   last_refused  the latest refused miss
--   t_max, ok_2xx_max   the boot's latest request and latest 2xx settlement
--                 (rows with h = 0 hold the requests without a session)
CREATE TABLE IF NOT EXISTS server_sessions
(
    ts            DateTime('UTC'),
    service       LowCardinality(String),
    environment   LowCardinality(String),
    boot_id       LowCardinality(String),
    h             UInt128,
    client        SimpleAggregateFunction(max, UInt128),
    ua_family     SimpleAggregateFunction(max, String),
    used          SimpleAggregateFunction(max, UInt8),
    minted        SimpleAggregateFunction(max, UInt8),
    first_ok      SimpleAggregateFunction(min, Float64),
    last_ok       SimpleAggregateFunction(max, Float64),
    last_t        SimpleAggregateFunction(max, Float64),
    last          SimpleAggregateFunction(max, Tuple(Float64, UInt8)),
    last_refused  SimpleAggregateFunction(max, Float64),
    t_max         SimpleAggregateFunction(max, Float64),
    ok_2xx_max    SimpleAggregateFunction(max, Float64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toDate(ts)
ORDER BY (ts, service, environment, boot_id, h)
TTL toDateTime(ts) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS server_sessions_mv TO server_sessions AS
SELECT
    toStartOfHour(ts) AS ts, service, environment, toString(boot_id) AS boot_id,
    k.1 AS h,
    max(if(k.2 = 1 OR NOT init, clienth, toUInt128(0))) AS client,
    max(if(k.2 = 1 OR NOT init, toString(ua_family), '')) AS ua_family,
    max(toUInt8(k.2 = 0 AND NOT init)) AS used,
    max(toUInt8(k.2 = 1)) AS minted,
    min(if(k.2 = 0 AND ok, t, inf)) AS first_ok,
    max(if(k.2 = 0 AND ok, t, 0.)) AS last_ok,
    max(if(k.2 = 0 AND NOT init, t, 0.)) AS last_t,
    max(if(k.2 = 0 AND event_type != 'arrival', (t, toUInt8(NOT ok)), (0., toUInt8(0)))) AS last,
    max(if(k.2 = 0 AND refused, t, 0.)) AS last_refused,
    max(if(k.2 = 0, t, 0.)) AS t_max,
    max(if(k.2 = 0 AND event_type = 'settlement' AND http_status BETWEEN 200 AND 299, t, 0.)) AS ok_2xx_max
FROM server_requests
ARRAY JOIN [(skh, toUInt8(0)), (mkh, toUInt8(1))] AS k
WHERE k.2 = 0 OR (k.1 != 0 AND event_type = 'settlement')
GROUP BY ts, service, environment, boot_id, h;

-- A store's rows from before this migration (FINAL: a line re-imported under
-- another label counts under its newest one).
INSERT INTO proxy_sessions
SELECT
    toStartOfHour(ts) AS ts, service, environment, url_path,
    if(skh != 0, skh, rkh) AS h,
    max(clienth) AS client,
    max(ua_family) AS ua_family,
    max(origin) AS origin,
    max(toUInt8(skh != 0)) AS used,
    max(toUInt8(init)) AS minted,
    min(if(skh != 0 AND ok, t, inf)) AS first_ok,
    max(if(skh != 0 AND ok, t, 0.)) AS last_ok,
    max(if(skh != 0, (t, toUInt8(NOT ok)), (0., toUInt8(0)))) AS last,
    max(if(skh != 0 AND refused, t, 0.)) AS last_refused,
    min(if(skh != 0 AND NOT pg AND NOT refused, t, inf)) AS first_served,
    max(if(skh != 0 AND NOT pg AND NOT refused, (t, toUInt8(ok)), (0., toUInt8(0)))) AS last_served,
    groupUniqArrayIf((clienth, t), init) AS inits
FROM proxy_access FINAL
WHERE skh != 0 OR init
GROUP BY ts, service, environment, url_path, h
SETTINGS max_insert_threads = 1;

INSERT INTO server_sessions
SELECT
    toStartOfHour(ts) AS ts, service, environment, toString(boot_id) AS boot_id,
    k.1 AS h,
    max(if(k.2 = 1 OR NOT init, clienth, toUInt128(0))) AS client,
    max(if(k.2 = 1 OR NOT init, toString(ua_family), '')) AS ua_family,
    max(toUInt8(k.2 = 0 AND NOT init)) AS used,
    max(toUInt8(k.2 = 1)) AS minted,
    min(if(k.2 = 0 AND ok, t, inf)) AS first_ok,
    max(if(k.2 = 0 AND ok, t, 0.)) AS last_ok,
    max(if(k.2 = 0 AND NOT init, t, 0.)) AS last_t,
    max(if(k.2 = 0 AND event_type != 'arrival', (t, toUInt8(NOT ok)), (0., toUInt8(0)))) AS last,
    max(if(k.2 = 0 AND refused, t, 0.)) AS last_refused,
    max(if(k.2 = 0, t, 0.)) AS t_max,
    max(if(k.2 = 0 AND event_type = 'settlement' AND http_status BETWEEN 200 AND 299, t, 0.)) AS ok_2xx_max
FROM server_requests
ARRAY JOIN [(skh, toUInt8(0)), (mkh, toUInt8(1))] AS k
WHERE k.2 = 0 OR (k.1 != 0 AND event_type = 'settlement')
GROUP BY ts, service, environment, boot_id, h
SETTINGS max_insert_threads = 1;
