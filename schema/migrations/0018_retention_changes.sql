-- retention_changes: one row each time the retention of `events` changed
-- (CONTINUITY_RETENTION_DAYS; store/migrate.ts applyRetention).
--
-- Why: a Caddy import's batches carry a content deduplication token, so the same
-- lines imported again store nothing twice. A retention change can drop rows whose
-- token the table still remembers: imported under no retention, dropped for their
-- age when a retention was set, then imported again after it was removed, the lines
-- were taken as duplicates of the rows that were gone, and the report said they
-- were written (a break-it pass). The import's token names how many changes the
-- store has seen (collectors/caddy/import.ts), so after any change the same lines
-- are stored again, once; with no change in between they still are not.
--
-- Columns:
--   changed_at   when (UTC)
--   from_days    the retention before, in days (0: none)
--   to_days      the retention after, in days (0: none)
CREATE TABLE IF NOT EXISTS retention_changes
(
    changed_at DateTime64(3, 'UTC') DEFAULT now64(3),
    from_days  UInt32,
    to_days    UInt32
)
ENGINE = MergeTree
ORDER BY changed_at;
