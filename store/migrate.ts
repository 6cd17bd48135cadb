import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
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
 * Applies pending migrations in order and records each in `schema_migrations`;
 * statements are idempotent (`IF NOT EXISTS`), so two processes racing here
 * converge. Then applies the configured retention TTL.
 * @returns the versions applied by this call.
 * @throws ContinuityError CONT_ERR_MIGRATION when an applied file was edited or a statement fails.
 */
export async function migrate(store: Store, options: { retentionDays?: number; migrations?: Migration[] } = {}): Promise<number[]> {
  await store.command(
    `CREATE TABLE IF NOT EXISTS schema_migrations
     (version UInt32, name String, checksum String, applied_at DateTime64(3, 'UTC') DEFAULT now64(3))
     ENGINE = ReplacingMergeTree ORDER BY version`,
  );
  const applied = new Map(
    (await store.query<{ version: number; checksum: string }>('SELECT version, checksum FROM schema_migrations FINAL')).map((r) => [
      r.version,
      r.checksum,
    ]),
  );
  const done: number[] = [];
  for (const m of options.migrations ?? loadMigrations()) {
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
  if (options.retentionDays !== undefined) await applyRetention(store, options.retentionDays);
  return done;
}

/**
 * The tables whose rows expire with the events they come from: `events` and the
 * tables materialized views fill from it (schema/migrations/0006 on; the rollups
 * of 0008 keep the hour in `ts`). Each has `TTL toDateTime(ts) + …`.
 */
export const RETAINED_TABLES: readonly string[] = ['events', 'proxy_access', 'server_requests', 'proxy_sessions', 'server_sessions'];

/**
 * Sets the TTL of every table in {@link RETAINED_TABLES} to `days` (0 removes
 * it). Only issues an ALTER where a table's TTL differs, since a TTL change is a
 * metadata mutation; tables not created yet are skipped.
 */
export async function applyRetention(store: Store, days: number): Promise<void> {
  for (const { name, days: currentDays } of await retentionOf(store)) {
    if (currentDays === days) continue;
    if (days === 0) await store.command(`ALTER TABLE ${name} REMOVE TTL`);
    else await store.command(`ALTER TABLE ${name} MODIFY TTL toDateTime(ts) + toIntervalDay(${Math.floor(days)})`);
  }
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
