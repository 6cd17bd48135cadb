-- The events table: one wide table for every event type of contract v1 (DESIGN §3).
--
-- Why one table: every named query joins several event types of the same
-- session or arrival (arrival → settlement, proxy_access → auth_challenge,
-- session_refused → remint); one table keeps those joins local and lets one
-- scan with conditional aggregation answer a query. Columns a type does not
-- use keep their defaults, which cost almost nothing compressed.
--
-- Deduplication by event_id, two mechanisms:
--  * insert-level: every batch carries an insert_deduplication_token (a retried
--    batch, a re-imported file) and the table keeps a deduplication window for
--    plain MergeTree (non_replicated_deduplication_window), so a retry stores
--    nothing twice at insert time and count() stays exact;
--  * merge-level: ReplacingMergeTree with event_id last in the sorting key, so
--    the same event arriving in two different batches collapses on merge, and
--    queries that must be exact before a merge read with FINAL.
-- Every sorting-key column is a function of the event itself, so two copies of
-- one event always share a key.
CREATE TABLE IF NOT EXISTS events
(
    event_id                UUID,
    event_type              LowCardinality(String),
    ts                      DateTime64(6, 'UTC') CODEC(Delta, ZSTD(1)),
    source                  LowCardinality(String),
    service                 LowCardinality(String),
    instance                LowCardinality(String),
    boot_id                 String CODEC(ZSTD(1)),
    release                 LowCardinality(String),
    environment             LowCardinality(String),
    protocol_version        LowCardinality(String),
    session_key             String CODEC(ZSTD(1)),
    principal_key           String CODEC(ZSTD(1)),
    client_name             LowCardinality(String),
    client_version          LowCardinality(String),
    user_agent              LowCardinality(String),
    attrs                   Map(LowCardinality(String), String) CODEC(ZSTD(1)),

    -- boot / shutdown
    pid                     UInt32,
    started_at              Nullable(DateTime64(6, 'UTC')),
    reason                  LowCardinality(String),
    in_flight               UInt32,
    drain_ms                Float64,

    -- arrival / settlement
    arrival_id              String CODEC(ZSTD(1)),
    http_method             LowCardinality(String),
    mcp_method              LowCardinality(String),
    jsonrpc_id              String CODEC(ZSTD(1)),
    tool_name               LowCardinality(String),
    has_credential          Bool,
    http_status             UInt16,
    outcome                 LowCardinality(String),
    error_type              LowCardinality(String),
    rpc_status_code         LowCardinality(String),
    duration_ms             Float64 CODEC(Gorilla, ZSTD(1)),
    session_resolution      LowCardinality(String),
    minted_session_key      String CODEC(ZSTD(1)),

    -- session_refused / remint
    remint_eligible         Bool,
    stale_session_key       String CODEC(ZSTD(1)),
    replacement_session_key String CODEC(ZSTD(1)),
    mode                    LowCardinality(String),

    -- session_lifecycle / cap_snapshot
    action                  LowCardinality(String),
    cap_kind                LowCardinality(String),
    live_count              UInt32,
    live_cap                UInt32,
    durable_count           UInt32,
    durable_cap             UInt32,
    global_count            UInt32,
    global_cap              UInt32,
    victim_idle_ms          Float64,
    victim_in_flight        UInt32,

    -- auth_challenge
    challenge_class         LowCardinality(String),
    scope                   String CODEC(ZSTD(1)),
    has_resource_metadata   Bool,

    -- proxy_access
    url_path                String CODEC(ZSTD(1)),
    bytes                   UInt64,
    request_session_key     String CODEC(ZSTD(1)),
    response_session_key    String CODEC(ZSTD(1)),
    proxy_generated         Bool,
    upstream_error          LowCardinality(String),
    client_address          LowCardinality(String),
    client_port             UInt16,

    -- canary
    canary_id               String,
    step                    LowCardinality(String),
    ok                      Bool,
    detail                  String CODEC(ZSTD(1)),

    -- storage only (not part of the contract): when the row became queryable
    ingested_at             DateTime64(3, 'UTC') DEFAULT now64(3),

    INDEX idx_session_key session_key TYPE bloom_filter(0.01) GRANULARITY 4,
    INDEX idx_request_session_key request_session_key TYPE bloom_filter(0.01) GRANULARITY 4,
    INDEX idx_arrival_id arrival_id TYPE bloom_filter(0.01) GRANULARITY 4,
    INDEX idx_boot_id boot_id TYPE set(256) GRANULARITY 4
)
ENGINE = ReplacingMergeTree
PARTITION BY toDate(ts)
-- Queries select a time range and an event type, then walk a session's events
-- in time order (window functions over session_key, ts).
ORDER BY (event_type, session_key, ts, event_id)
TTL toDateTime(ts) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 10000, index_granularity = 8192;
