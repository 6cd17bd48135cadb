-- proxy_access: the proxy's access lines (event_type 'proxy_access'), kept a
-- second time at insert time in the shape the named queries read them
-- (queries/sql/lib/proxy_requests.sql): narrow, with the derived columns computed
-- once (seconds since the epoch, client, user-agent family, origin, the request's
-- class), and sorted by time.
--
-- Why a second copy: every proxy-side query walks the access lines in time order.
-- In `events` they sit among 30 other columns, their origin inside the attrs map,
-- and each read had to recompute every derived column; at 10M events one read
-- cost about 0.6 s and a query made several.
--
-- Why ORDER BY (ts, event_id): lines are ingested roughly in time order, so the
-- parts of this table cover disjoint time ranges and a FINAL read (exact under
-- duplicate deliveries: ReplacingMergeTree on event_id, like `events`) has
-- almost nothing to merge. With a key led by anything else every part spans the
-- whole key range and FINAL merges them all.
--
-- Fed by a materialized view on `events`. A retried batch is dropped here as in
-- `events` (its insert_deduplication_token, with
-- deduplicate_blocks_in_dependent_materialized_views: store/client.ts), and a
-- duplicate that arrives in another batch collapses on event_id as in `events`.
-- Retention follows events (store/migrate.ts applyRetention).
CREATE TABLE IF NOT EXISTS proxy_access
(
    event_id        UUID,
    ts              DateTime64(6, 'UTC') CODEC(Delta, ZSTD(1)),
    t               Float64 CODEC(Delta, ZSTD(1)),
    service         LowCardinality(String),
    environment     LowCardinality(String),
    http_method     LowCardinality(String),
    url_path        LowCardinality(String),
    http_status     UInt16,
    duration_ms     Float64 CODEC(Gorilla, ZSTD(1)),
    sk              String CODEC(ZSTD(1)),
    rk              String CODEC(ZSTD(1)),
    principal_key   String CODEC(ZSTD(1)),
    has_credential  Bool,
    proxy_generated Bool,
    upstream_error  LowCardinality(String),
    client_address  LowCardinality(String),
    user_agent      LowCardinality(String),
    ua_family       LowCardinality(String),
    origin          LowCardinality(String),
    client          String CODEC(ZSTD(1)),
    -- sk, rk and client as 128-bit SipHash values, for joins and distinct counts:
    -- a fixed-width key joins and counts several times faster than a string, and
    -- 128 bits leave no practical chance of two keys colliding (0 = empty key)
    skh             UInt128,
    rkh             UInt128,
    clienth         UInt128,
    -- the line carried MCP session evidence (session id either way, or a protocol
    -- version): its path is an MCP endpoint (proxy_endpoints.sql)
    marks_endpoint  Bool,
    -- a discovery probe (/.well-known/*, /register): never the endpoint
    discovery       Bool,
    pg              Bool,
    ok              Bool,
    refused         Bool,
    init            Bool
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(ts)
ORDER BY (ts, event_id)
TTL toDateTime(ts) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 10000;

-- The classes, as DESIGN §4 defines them:
--   pg:      the proxy produced the 5xx itself (upstream unreachable)
--   ok:      a 2xx the upstream produced
--   refused: a refused miss — a 404, or a 400 that carried a session id
--   init:    an initialize: a POST without a session id answered 2xx with a minted one
CREATE MATERIALIZED VIEW IF NOT EXISTS proxy_access_mv TO proxy_access AS
SELECT
    event_id,
    ts,
    toUnixTimestamp64Micro(ts) / 1e6 AS t,
    service,
    environment,
    http_method,
    url_path,
    http_status,
    duration_ms,
    request_session_key AS sk,
    response_session_key AS rk,
    principal_key,
    has_credential,
    proxy_generated,
    upstream_error,
    client_address,
    user_agent,
    splitByChar('/', user_agent)[1] AS ua_family,
    attrs['http.origin'] AS origin,
    concat(client_address, ' ', user_agent) AS client,
    if(sk = '', toUInt128(0), reinterpretAsUInt128(sipHash128(sk))) AS skh,
    if(rk = '', toUInt128(0), reinterpretAsUInt128(sipHash128(rk))) AS rkh,
    reinterpretAsUInt128(sipHash128(client)) AS clienth,
    request_session_key != '' OR response_session_key != '' OR protocol_version != '' AS marks_endpoint,
    startsWith(url_path, '/.well-known/') OR url_path = '/register' AS discovery,
    proxy_generated AND http_status >= 500 AS pg,
    NOT pg AND http_status BETWEEN 200 AND 299 AS ok,
    NOT pg AND (http_status = 404 OR (http_status = 400 AND sk != '')) AS refused,
    ok AND http_method = 'POST' AND sk = '' AND rk != '' AS init
FROM events
WHERE event_type = 'proxy_access';

-- Lines stored before this migration, written in time order so that the parts
-- they make cover disjoint time ranges (see ORDER BY above).
INSERT INTO proxy_access
SELECT
    event_id,
    ts,
    toUnixTimestamp64Micro(ts) / 1e6 AS t,
    service,
    environment,
    http_method,
    url_path,
    http_status,
    duration_ms,
    request_session_key AS sk,
    response_session_key AS rk,
    principal_key,
    has_credential,
    proxy_generated,
    upstream_error,
    client_address,
    user_agent,
    splitByChar('/', user_agent)[1] AS ua_family,
    attrs['http.origin'] AS origin,
    concat(client_address, ' ', user_agent) AS client,
    if(sk = '', toUInt128(0), reinterpretAsUInt128(sipHash128(sk))) AS skh,
    if(rk = '', toUInt128(0), reinterpretAsUInt128(sipHash128(rk))) AS rkh,
    reinterpretAsUInt128(sipHash128(client)) AS clienth,
    request_session_key != '' OR response_session_key != '' OR protocol_version != '' AS marks_endpoint,
    startsWith(url_path, '/.well-known/') OR url_path = '/register' AS discovery,
    proxy_generated AND http_status >= 500 AS pg,
    NOT pg AND http_status BETWEEN 200 AND 299 AS ok,
    NOT pg AND (http_status = 404 OR (http_status = 400 AND sk != '')) AS refused,
    ok AND http_method = 'POST' AND sk = '' AND rk != '' AS init
FROM events
WHERE event_type = 'proxy_access'
ORDER BY ts
SETTINGS max_insert_threads = 1;
