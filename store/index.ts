/** The ClickHouse store (embedded chDB or server) behind one @clickhouse/client. */
export { openStore, decodeCompact } from './client.ts';
export type { Store } from './client.ts';
export { migrate, applyRetention, retentionDaysOf, loadMigrations, splitStatements, RETAINED_TABLES } from './migrate.ts';
export type { Migration } from './migrate.ts';
export { openMigratedStore } from './open.ts';
