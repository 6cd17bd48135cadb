-- Lines and records the pipeline could not accept, with a stable reason code.
-- Nothing is silently lost: every rejection is either here or in a returned report.
-- For proxy-log imports only the line number, length and reason are kept (a raw
-- line would carry raw session ids and tokens; DESIGN §3, Privacy).
CREATE TABLE IF NOT EXISTS dead_letters
(
    received_at   DateTime64(3, 'UTC') DEFAULT now64(3),
    source        LowCardinality(String),
    origin        String,
    position      UInt64,
    reason        LowCardinality(String),
    detail        String,
    payload       String CODEC(ZSTD(3)),
    payload_bytes UInt64
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(received_at)
ORDER BY (source, received_at)
TTL toDateTime(received_at) + INTERVAL 30 DAY;

-- One row per imported input: what was read, accepted and rejected.
CREATE TABLE IF NOT EXISTS import_runs
(
    run_id        UUID,
    kind          LowCardinality(String),
    origin        String,
    content_hash  String,
    started_at    DateTime64(3, 'UTC'),
    finished_at   DateTime64(3, 'UTC'),
    lines_read    UInt64,
    lines_parsed  UInt64,
    lines_rejected UInt64,
    events_written UInt64
)
ENGINE = MergeTree
ORDER BY (started_at, run_id);
