/** The ClickHouse store (embedded chDB or server) behind one @clickhouse/client. */
export { openStore, decodeCompact, classifyStoreError, MAX_SQL_ROWS } from './client.ts';
export type { ReadOnlyOptions, Store } from './client.ts';
export { migrate, applyRetention, retentionDaysOf, retentionChangesOf, loadMigrations, splitStatements, RETAINED_TABLES, MIN_FREE_BYTES_FOR_DDL } from './migrate.ts';
export type { DdlOptions, Migration } from './migrate.ts';
export { readRetention } from './retention.ts';
export type { Retention, RetentionOptions } from './retention.ts';
export { openMigratedStore } from './open.ts';
export { compactClosedDays, startCompaction, COMPACT_QUIET_MS } from './compact.ts';
export type { CompactOptions, CompactedPartition, Compaction } from './compact.ts';
