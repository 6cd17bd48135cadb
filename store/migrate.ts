import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statfsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MAX_RETENTION_DAYS } from '../core/config.ts';
import { ContinuityError } from '../core/errors.ts';
import type { Store } from './client.ts';

const MIGRATIONS_DIR = fileURLToPath(new URL('../schema/migrations/', import.meta.url));

/** One numbered migration file `NNNN_name.sql`. */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
  /** SHA-256 of the file text; an applied migration whose file changed is refused. */
  readonly checksum: string;
}

/** Reads `schema/migrations/NNNN_*.sql` in version order. */
export function loadMigrations(dir: string = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((file) => {
      const sql = readFileSync(dir + file, 'utf8');
      return {
        version: Number(file.slice(0, 4)),
        name: file.slice(5, -4),
        sql,
        checksum: createHash('sha256').update(sql).digest('hex'),
      };
    });
}

/** Splits a migration into statements: `;` at the end of a line ends one; `--` comments are dropped. */
export function splitStatements(sql: string): string[] {
  const withoutComments = sql
    .split('\n')
    .map((line) => line.replace(/^\s*--.*$/, ''))
    .join('\n');
  return withoutComments
    .split(/;\s*(?:\n|$)/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/**
 * Free bytes an embedded store needs before it runs a schema change (CREATE, ALTER … TTL).
 * On a full disk the embedded engine (chdb 3.4.0) leaves the table definitions it was
 * rewriting empty: an `ALTER TABLE … MODIFY TTL` on a full ext4 or tmpfs file system
 * "succeeded", and afterwards, with space back, the data directory could not be opened
 * ("Cannot parse definition from metadata file …/events.sql", an empty file), its data
 * out of reach. A CREATE there does the same. The engine itself reserves at least 1 MiB
 * for a write; this leaves room for that and for other writers.
 */
export const MIN_FREE_BYTES_FOR_DDL = 16 << 20;

/** How a schema change finds the free space of the store's file system (tests pass their own). */
export interface DdlOptions {
  /** Free bytes of the file system holding `dir` for an unprivileged writer (default: statfs). */
  freeBytes?: (dir: string) => number;
}

/**
 * Refuses a schema change on an embedded store whose file system has less than
 * {@link MIN_FREE_BYTES_FOR_DDL} free (a server keeps its own disks: not checked).
 * @throws ContinuityError CONT_ERR_STORE_UNAVAILABLE (`details.reason = 'disk_full'`).
 */
function assertRoomForDdl(store: Store, what: string, options: DdlOptions): void {
  if (store.mode !== 'embedded') return;
  const freeBytes = options.freeBytes ?? statfsFree;
  const free = freeBytes(store.location);
  if (free >= MIN_FREE_BYTES_FOR_DDL) return;
  throw new ContinuityError(
    'CONT_ERR_STORE_UNAVAILABLE',
    `the file system of the data directory ${store.location} is full (${Math.floor(free / 1024)} KiB free): ${what} needs at least ${MIN_FREE_BYTES_FOR_DDL >> 20} MiB free ` +
      '(the embedded engine left empty table definitions behind when it changed the schema on a full disk); free space there and start again',
    { details: { dataDir: store.location, reason: 'disk_full', freeBytes: free } },
  );
}

/** Free bytes of the file system holding `dir` for an unprivileged writer; +Infinity when it cannot be told. */
export function statfsFree(dir: string): number {
  try {
    const s = statfsSync(dir);
    return s.bavail * s.bsize;
  } catch {
    return Number.POSITIVE_INFINITY; // cannot tell: let the engine answer
  }
}

/**
 * Applies pending migrations in order and records each in `schema_migrations`;
 * statements are idempotent (`IF NOT EXISTS`), so two processes racing here
 * converge. Then applies the configured retention TTL, or, without one, gives the
 * tables this call created the retention `events` already has ({@link RETAINED_TABLES}:
 * a migration creates them with 90 days). Schema changes are refused on
 * an embedded store whose disk is (nearly) full ({@link MIN_FREE_BYTES_FOR_DDL});
 * a store with nothing to change opens whatever its free space.
 * @returns the versions applied by this call.
 * @throws ContinuityError CONT_ERR_MIGRATION when an applied file was edited or a
 *   statement fails; CONT_ERR_STORE_UNAVAILABLE when a change is due and the disk is full.
 */
export async function migrate(
  store: Store,
  options: {
    retentionDays?: number;
    migrations?: Migration[];
    /**
     * Told when the retention of `events` of a store that existed before this call
     * changed (days; 0 = none): by `retentionDays`, or (`why` given) because the store's
     * own retention was longer than {@link MAX_RETENTION_DAYS}.
     */
    onRetentionChange?: (fromDays: number, toDays: number, why?: string) => void;
  } & DdlOptions = {},
): Promise<number[]> {
  const existed = await hasTable(store, 'schema_migrations');
  if (!existed) {
    assertRoomForDdl(store, 'creating the store', options);
    await store.command(
      `CREATE TABLE IF NOT EXISTS schema_migrations
       (version UInt32, name String, checksum String, applied_at DateTime64(3, 'UTC') DEFAULT now64(3))
       ENGINE = ReplacingMergeTree ORDER BY version`,
    );
  }
  const applied = new Map(
    (await store.query<{ version: number; checksum: string }>('SELECT version, checksum FROM schema_migrations FINAL')).map((r) => [
      r.version,
      r.checksum,
    ]),
  );
  const done: number[] = [];
  const migrations = options.migrations ?? loadMigrations();
  const pending = migrations.filter((m) => !applied.has(m.version));
  if (pending.length > 0) assertRoomForDdl(store, `migration ${pending.map((m) => `${String(m.version).padStart(4, '0')}_${m.name}`).join(', ')}`, options);
  for (const m of migrations) {
    const recorded = applied.get(m.version);
    if (recorded !== undefined) {
      if (recorded !== m.checksum) {
        throw new ContinuityError('CONT_ERR_MIGRATION', `${String(m.version).padStart(4, '0')}_${m.name}.sql changed after it was applied`);
      }
      continue;
    }
    for (const statement of splitStatements(m.sql)) {
      try {
        await store.command(statement);
      } catch (err) {
        throw new ContinuityError('CONT_ERR_MIGRATION', `${m.version}_${m.name}: ${(err as Error).message}`, { cause: err });
      }
    }
    await store.insertJsonEachRow('schema_migrations', JSON.stringify({ version: m.version, name: m.name, checksum: m.checksum }));
    done.push(m.version);
  }
  if (options.retentionDays === undefined && existed && done.length > 0) {
    // a table a migration created starts with the migration's default TTL: it takes
    // the store's retention, which events holds (a store kept forever kept a new
    // table's rows 90 days: found by a break-it pass)
    await applyRetention(store, await retentionDaysOf(store), options);
  }
  if (options.retentionDays === undefined && existed) {
    // A TTL past MAX_RETENTION_DAYS (set before that limit) wraps past 2106 to the 1970s,
    // and the next merge would expire every row: such a store keeps its events for ever.
    const current = await retentionDaysOf(store);
    if (current > MAX_RETENTION_DAYS) {
      await applyRetention(store, 0, options);
      options.onRetentionChange?.(current, 0, `a retention over ${MAX_RETENTION_DAYS} days passes the store's last date (2106) and would expire every event`);
    }
  }
  if (options.retentionDays !== undefined) {
    const before = await applyRetention(store, options.retentionDays, options);
    // (a store created by this call had only the migrations' default to change)
    if (existed && before !== options.retentionDays) options.onRetentionChange?.(before, options.retentionDays);
  }
  return done;
}

/**
 * The tables whose rows expire with the events they come from: `events` and the
 * tables materialized views fill from it (schema/migrations/0006 on; the rollups
 * of 0008 and arrival_outcomes of 0010/0011 keep the hour in `ts`; the signal rows
 * of 0012 are copies of rows of proxy_access and server_requests; the paths by the
 * hour of 0014; the session rollups by the day of 0016 keep the day; the 2xx by the
 * minute of 0017 keep the minute). So a bucket's row expires with its first second,
 * while the rows in it expire one by one up to a minute, an hour or a day later: the
 * named queries read a bucket that starts before the retention's cutoff from the
 * rows, not from its rollup (queries/registry.ts `rollupsKeptFrom`). Two reads still
 * take the cutoff's hour from a rollup: `settlements` (arrival_outcomes by the hour,
 * which it alone reads: up to an hour of arrivals just past the cutoff goes uncounted
 * once that hour's row expires), and the hourly rollups' sessions before a range
 * (`refused_misses`' 2xx before the range, `session_continuity`'s sessions refused
 * before it). Each has `TTL toDateTime(ts) + …`.
 */
export const RETAINED_TABLES: readonly string[] = [
  'events',
  'proxy_access',
  'server_requests',
  'proxy_sessions',
  'server_sessions',
  'arrival_outcomes',
  'proxy_signals',
  'server_signals',
  'proxy_paths',
  'proxy_sessions_daily',
  'server_sessions_daily',
  'ok_minutes',
];

/**
 * Sets the TTL of every table in {@link RETAINED_TABLES} to `days` (0 removes
 * it). Only issues an ALTER where a table's TTL differs; tables not created yet are
 * skipped. The change itself is metadata only (`materialize_ttl_after_modify = 0`):
 * recomputing the TTL of every part was a mutation of every day of every table, and
 * took 119 s for 12 tables of 50 days (191 s for 200 days), after which rows the new
 * TTL expired were still counted until the engine's TTL merges ran. With a retention,
 * the days it has expired whole are then dropped from every table, changed or not (a
 * shorter retention stopped halfway, by a signal or a crash, is finished this way the
 * next time it is applied), and a shorter one also merges the day its cutoff falls in
 * ({@link dropExpired}).
 * @returns the retention `events` had before, in days (0: none; see {@link retentionDaysOf}).
 * @throws ContinuityError CONT_ERR_STORE_UNAVAILABLE when a TTL differs and the
 *   embedded store's disk is (nearly) full ({@link MIN_FREE_BYTES_FOR_DDL}): nothing is changed.
 */
export async function applyRetention(store: Store, days: number, options: DdlOptions = {}): Promise<number> {
  const tables = await retentionOf(store);
  const changes = tables.filter((t) => t.days !== days);
  if (changes.length > 0) assertRoomForDdl(store, `changing the retention to ${days} days (CONTINUITY_RETENTION_DAYS)`, options);
  for (const { name } of changes) {
    if (days === 0) await store.command(`ALTER TABLE ${name} REMOVE TTL`);
    else await store.command(`ALTER TABLE ${name} MODIFY TTL toDateTime(ts) + toIntervalDay(${Math.floor(days)}) SETTINGS materialize_ttl_after_modify = 0`);
  }
  if (days !== 0) {
    const shorter = changes.filter((t) => t.days === 0 || days < t.days).map((t) => t.name);
    await dropExpired(store, tables.map((t) => t.name), Math.floor(days), shorter);
  }
  const before = tables.find((t) => t.name === 'events')?.days ?? 0;
  if (changes.some((t) => t.name === 'events') && (await hasTable(store, 'retention_changes'))) {
    await store.insertJsonEachRow('retention_changes', JSON.stringify({ from_days: before, to_days: Math.floor(days) }));
  }
  return before;
}

/**
 * Removes from `tables` (each partitioned by `toDate(ts)`, UTC, as every table of
 * {@link RETAINED_TABLES} is) the rows a retention of `days` has expired: every day
 * that ended more than `days` days ago is dropped whole (`DROP PARTITION`, no rewrite),
 * and in `merge` (the tables whose retention just became shorter) the day the cutoff
 * falls in is merged (`OPTIMIZE … FINAL`, which applies the TTL to its rows:
 * ClickHouse "TTL for columns and tables", rows are removed when parts merge). A row
 * expires when `toDateTime(ts) + days` is before now, so a day d is expired whole
 * when d + 1 day + `days` is not after now. The cutoff day is counted here, in whole
 * days since 1970 (a DateTime `now() - days` wrapped around past 1970 and dropped
 * every day: a break-it pass). Tables partitioned otherwise are left to the engine's
 * TTL merges.
 */
async function dropExpired(store: Store, tables: readonly string[], days: number, merge: readonly string[]): Promise<void> {
  const cutoffDay = Math.floor(Date.now() / 86_400_000) - days;
  if (cutoffDay <= 0 || tables.length === 0) return;
  const partitions = await store.query<{ table: string; partition_id: string; whole: number }>(
    `SELECT p.table AS table, p.partition_id AS partition_id, toInt64(toDate(p.partition)) < {cutoff:Int64} AS whole
     FROM system.parts AS p
     INNER JOIN system.tables AS t ON t.database = p.database AND t.name = p.table
     WHERE p.database = currentDatabase() AND p.active AND p.table IN {tables:Array(String)}
       AND t.partition_key = 'toDate(ts)' AND toInt64(toDate(p.partition)) <= {cutoff:Int64}
     GROUP BY table, partition_id, whole
     ORDER BY table, partition_id`,
    { tables, cutoff: cutoffDay },
  );
  for (const { table, partition_id: id, whole } of partitions) {
    if (!/^[a-z_]+$/.test(table) || !/^\d+$/.test(id)) continue;
    if (Number(whole) === 1) await store.maintain(`ALTER TABLE ${table} DROP PARTITION ID '${id}'`);
    else if (merge.includes(table)) await store.maintain(`OPTIMIZE TABLE ${table} PARTITION ID '${id}' FINAL`);
  }
}

/**
 * How many times the retention of `events` changed ({@link applyRetention}; 0 on a
 * store from before schema/migrations/0018, or none yet). Caddy imports name it in
 * their deduplication token, so a retention change that dropped rows does not make
 * the same lines, imported again, count as duplicates of rows that are gone.
 */
export async function retentionChangesOf(store: Store): Promise<number> {
  if (!(await hasTable(store, 'retention_changes'))) return 0;
  const [row] = await store.query<{ n: string | number }>('SELECT count() AS n FROM retention_changes');
  return Number(row?.n ?? 0);
}

/** Whether the store's database holds a table `name`. */
async function hasTable(store: Store, name: string): Promise<boolean> {
  const [row] = await store.query<{ n: string | number }>(
    'SELECT count() AS n FROM system.tables WHERE database = currentDatabase() AND name = {name:String}',
    { name },
  );
  return Number(row?.n ?? 0) > 0;
}

/**
 * The retention the store keeps now: the TTL of `events` in days, 0 when there is none
 * (or no `events` table yet).
 */
export async function retentionDaysOf(store: Store): Promise<number> {
  return (await retentionOf(store)).find((t) => t.name === 'events')?.days ?? 0;
}

/** Each existing table of {@link RETAINED_TABLES} with its TTL in days (0: none). */
async function retentionOf(store: Store): Promise<Array<{ name: string; days: number }>> {
  const rows = await store.query<{ name: string; q: string }>(
    `SELECT name, create_table_query AS q FROM system.tables WHERE database = currentDatabase() AND name IN {names:Array(String)}`,
    { names: RETAINED_TABLES },
  );
  return rows.map(({ name, q }) => {
    const current = /TTL toDateTime\(ts\) \+ (?:INTERVAL (\d+) DAY|toIntervalDay\((\d+)\))/.exec(q);
    return { name, days: current ? Number(current[1] ?? current[2]) : 0 };
  });
}
