-- server_requests: what instrumented MCP servers recorded of each request
-- (event types arrival, settlement and session_refused; DESIGN §3), kept a second
-- time at insert time in the shape the named queries read them: narrow, the ids
-- as 128-bit SipHash values to join and count on, boot and user agent as
-- low-cardinality columns, the client (user agent and principal) and the
-- request's class computed once, and sorted by time.
--
-- The same design as proxy_access (0006): ORDER BY (ts, event_id) so that
-- time-ordered ingest makes parts with disjoint time ranges and a FINAL read
-- (exact under duplicate deliveries) merges next to nothing; filled by a
-- materialized view on events that drops a retried batch by its token; retention
-- follows events (store/migrate.ts RETAINED_TABLES).
CREATE TABLE IF NOT EXISTS server_requests
(
    event_id           UUID,
    ts                 DateTime64(6, 'UTC') CODEC(Delta, ZSTD(1)),
    t                  Float64 CODEC(Delta, ZSTD(1)),
    event_type         LowCardinality(String),
    service            LowCardinality(String),
    environment        LowCardinality(String),
    boot_id            LowCardinality(String),
    arrival_id         String CODEC(ZSTD(1)),
    arh                UInt128,
    session_key        String CODEC(ZSTD(1)),
    skh                UInt128,
    minted_session_key String CODEC(ZSTD(1)),
    mkh                UInt128,
    user_agent         LowCardinality(String),
    principal_key      String CODEC(ZSTD(1)),
    client             String CODEC(ZSTD(1)),
    clienth            UInt128,
    ua_family          LowCardinality(String),
    http_method        LowCardinality(String),
    mcp_method         LowCardinality(String),
    http_status        UInt16,
    outcome            LowCardinality(String),
    duration_ms        Float64 CODEC(Gorilla, ZSTD(1)),
    session_resolution LowCardinality(String),
    reason             LowCardinality(String),
    -- a settlement with outcome ok
    ok                 Bool,
    -- a session_refused (a refused miss the server recorded)
    refused            Bool,
    -- an arrival of an initialize
    init               Bool
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(ts)
ORDER BY (ts, event_id)
TTL toDateTime(ts) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS server_requests_mv TO server_requests AS
SELECT
    event_id,
    ts,
    toUnixTimestamp64Micro(ts) / 1e6 AS t,
    event_type,
    service,
    environment,
    boot_id,
    arrival_id,
    if(arrival_id = '', toUInt128(0), reinterpretAsUInt128(sipHash128(arrival_id))) AS arh,
    session_key,
    if(session_key = '', toUInt128(0), reinterpretAsUInt128(sipHash128(session_key))) AS skh,
    minted_session_key,
    if(minted_session_key = '', toUInt128(0), reinterpretAsUInt128(sipHash128(minted_session_key))) AS mkh,
    user_agent,
    principal_key,
    concat(user_agent, ' ', principal_key) AS client,
    reinterpretAsUInt128(sipHash128(client)) AS clienth,
    splitByChar('/', user_agent)[1] AS ua_family,
    http_method,
    mcp_method,
    http_status,
    outcome,
    duration_ms,
    session_resolution,
    reason,
    event_type = 'settlement' AND outcome = 'ok' AS ok,
    event_type = 'session_refused' AS refused,
    event_type = 'arrival' AND mcp_method = 'initialize' AS init
FROM events
WHERE source = 'server' AND event_type IN ('arrival', 'settlement', 'session_refused');

-- Requests stored before this migration, in time order (disjoint parts).
INSERT INTO server_requests
SELECT
    event_id,
    ts,
    toUnixTimestamp64Micro(ts) / 1e6 AS t,
    event_type,
    service,
    environment,
    boot_id,
    arrival_id,
    if(arrival_id = '', toUInt128(0), reinterpretAsUInt128(sipHash128(arrival_id))) AS arh,
    session_key,
    if(session_key = '', toUInt128(0), reinterpretAsUInt128(sipHash128(session_key))) AS skh,
    minted_session_key,
    if(minted_session_key = '', toUInt128(0), reinterpretAsUInt128(sipHash128(minted_session_key))) AS mkh,
    user_agent,
    principal_key,
    concat(user_agent, ' ', principal_key) AS client,
    reinterpretAsUInt128(sipHash128(client)) AS clienth,
    splitByChar('/', user_agent)[1] AS ua_family,
    http_method,
    mcp_method,
    http_status,
    outcome,
    duration_ms,
    session_resolution,
    reason,
    event_type = 'settlement' AND outcome = 'ok' AS ok,
    event_type = 'session_refused' AS refused,
    event_type = 'arrival' AND mcp_method = 'initialize' AS init
FROM events
WHERE source = 'server' AND event_type IN ('arrival', 'settlement', 'session_refused')
ORDER BY ts
SETTINGS max_insert_threads = 1;
