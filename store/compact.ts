import type { Store } from './client.ts';
import { RETAINED_TABLES, statfsFree } from './migrate.ts';

/**
 * Compaction of closed days: each daily partition (`PARTITION BY toDate(ts)`) of the
 * event tables that no longer receives writes is merged into one part
 * (`OPTIMIZE TABLE … PARTITION ID … FINAL`).
 *
 * Why: every reader that must see one row per key reads with `FINAL` (a re-delivered
 * event once, an arrival's rows from several batches as one: schema/migrations/0006,
 * 0010), and `FINAL` merges, at read time and on one thread per group, the ranges of
 * a day's parts whose keys overlap. The engine's background merges leave a day in
 * several parts (each insert block shares its first and last hour with its
 * neighbours'), so a day that was closed long ago is merged again by every read.
 * At 10M events over two days, `settlements` took 1.0–1.3 s on the store as loaded
 * and 0.55–0.58 s once both days were one part each, with the same rows
 * (docs/queries.md, "Closed days in one part"). A partition of a single merged part is
 * read without merging (ClickHouse: `enable_automatic_decision_for_merging_across_partitions_for_final`,
 * `do_not_merge_across_partitions_select_final`).
 *
 * What a merge changes: nothing a `FINAL` read sees. A ReplacingMergeTree keeps the
 * newest copy of a key, as `FINAL` does; an AggregatingMergeTree (the rollups,
 * arrival_outcomes) combines a key's rows with the same functions its readers use. A
 * reader that reads without `FINAL` (the server-side ones, whose min/max facts a copy
 * does not change) sees after the merge what `FINAL` would have shown.
 *
 * When a day counts as closed: it ended (UTC) before `nowMs`, and none of its parts was
 * written in the last `quietMs` (an import of old logs still writing to it is left
 * alone until it stops). A day that gets a late event later has two parts again and
 * is merged again once it is quiet.
 */
export interface CompactOptions {
  /** The clock, ms since the epoch (default now). */
  nowMs?: number;
  /** How long a day's partition must have had no write, ms (default 10 minutes; 0: no wait). */
  quietMs?: number;
  /** Tables to compact (default {@link RETAINED_TABLES}: events and the tables its views fill). */
  tables?: readonly string[];
  /** Free bytes of the file system holding `dir` (embedded; default: statfs). */
  freeBytes?: (dir: string) => number;
  /** Stops before the next partition's merge once aborted (a merge under way runs to its end). */
  signal?: AbortSignal;
  /** Called with each partition as soon as it is merged or skipped. */
  onPartition?: (p: CompactedPartition) => void;
}

/** One partition {@link compactClosedDays} merged, or left as it was and why. */
export interface CompactedPartition {
  table: string;
  /** The day, YYYY-MM-DD (UTC). */
  day: string;
  /** Active parts before. */
  parts: number;
  rows: number;
  /** Bytes on disk before. */
  bytes: number;
  /** Time the merge took, ms (0 when skipped). */
  ms: number;
  /**
   * Why it was not merged: `open` for a day that has not ended (UTC); `recent` for a
   * closed day written to within the quiet time; `disk` when the embedded store's file
   * system has less free space than twice the partition (a merge writes the new part
   * before it drops the old ones).
   */
  skipped?: 'open' | 'recent' | 'disk';
}

/** Default of {@link CompactOptions.quietMs}. */
export const COMPACT_QUIET_MS = 10 * 60_000;

const DAY_PARTITION_ID = /^\d{8}$/;

/**
 * Merges each closed day of `tables` that has more than one active part into one (see
 * {@link CompactOptions} for which days; one statement per table and day, through
 * {@link Store.maintain}, so embedded queries do not wait behind it). A day of one part
 * is left as it is: an insert merges its own block's copies (`optimize_on_insert`, on by
 * default), so its part is level 1 already.
 * @returns every partition of more than one part, oldest day first: merged, or skipped
 *   with the reason (those left when `signal` aborted the pass are not listed). An empty
 *   list: every day is one part.
 * @throws ContinuityError of the store (CONT_ERR_STORE_*) when `system.parts` cannot be
 *   read or a merge fails; the partitions merged before stay merged.
 */
export async function compactClosedDays(store: Store, options: CompactOptions = {}): Promise<CompactedPartition[]> {
  const nowMs = options.nowMs ?? Date.now();
  const quietMs = options.quietMs ?? COMPACT_QUIET_MS;
  const todayStartS = Math.floor(nowMs / 86_400_000) * 86_400;
  const tables = options.tables ?? RETAINED_TABLES;
  const rows = await store.query<{ table: string; partition_id: string; day: string; parts: number; rows: number; bytes: number; open: number; recent: number }>(
    `SELECT table, partition_id, any(partition) AS day, count() AS parts, sum(rows) AS rows, sum(bytes_on_disk) AS bytes,
            toUnixTimestamp(toDate(day), 'UTC') >= {today:Int64} AS open,
            toUnixTimestamp(max(modification_time)) > {quiet_before:Int64} AS recent
     FROM system.parts
     WHERE database = currentDatabase() AND active AND table IN {tables:Array(String)}
     GROUP BY table, partition_id
     -- (partition: the day as YYYY-MM-DD, the text of toDate(ts))
     HAVING parts > 1
     ORDER BY day, table`,
    {
      tables,
      today: todayStartS,
      // quietMs 0: whatever the write times (a part written this second included)
      quiet_before: quietMs > 0 ? Math.max(0, Math.floor((nowMs - quietMs) / 1000)) : Number.MAX_SAFE_INTEGER,
    },
  );
  const freeBytes = options.freeBytes ?? statfsFree;
  const done: CompactedPartition[] = [];
  for (const r of rows) {
    if (options.signal?.aborted) break;
    const found = { table: r.table, day: r.day, parts: Number(r.parts), rows: Number(r.rows), bytes: Number(r.bytes) };
    // Names come from system.parts, not from a user; still, only a table of the list and
    // a day's partition id (YYYYMMDD) reach the statement.
    if (!DAY_PARTITION_ID.test(r.partition_id) || !tables.includes(r.table)) continue;
    let p: CompactedPartition;
    if (Number(r.open)) {
      p = { ...found, ms: 0, skipped: 'open' };
    } else if (Number(r.recent)) {
      p = { ...found, ms: 0, skipped: 'recent' };
    } else if (store.mode === 'embedded' && freeBytes(store.location) < 2 * found.bytes) {
      p = { ...found, ms: 0, skipped: 'disk' };
    } else {
      const t = performance.now();
      await store.maintain(`OPTIMIZE TABLE ${r.table} PARTITION ID '${r.partition_id}' FINAL`);
      p = { ...found, ms: Math.round(performance.now() - t) };
    }
    done.push(p);
    options.onPartition?.(p);
  }
  return done;
}

/** A running {@link startCompaction}. */
export interface Compaction {
  /**
   * Stops the schedule and waits for a pass in progress to stop: it merges no further
   * partition, but a merge under way (seconds at millions of rows) runs to its end.
   */
  stop(): Promise<void>;
}

/**
 * Runs {@link compactClosedDays} every `everyMs` (default 15 minutes; the first pass
 * after `firstMs`, default 1 minute) while a long-running process (`serve`,
 * `consumer`) owns the store. A pass never overlaps the previous one. Each pass that
 * merged something (or skipped a day for want of disk), and each failed pass, is
 * reported to `onPass` (a failure is not fatal: the next pass tries again); days still
 * open or written to recently are not reported.
 */
export function startCompaction(
  store: Store,
  options: CompactOptions & { everyMs?: number; firstMs?: number; onPass?: (r: { merged: CompactedPartition[]; error?: Error }) => void } = {},
): Compaction {
  const everyMs = options.everyMs ?? 15 * 60_000;
  let running: Promise<void> | undefined;
  const stopping = new AbortController();
  const pass = (): void => {
    if (running || stopping.signal.aborted) return;
    running = compactClosedDays(store, { ...options, nowMs: undefined, signal: stopping.signal })
      .then(
        (found) => {
          // the merged ones and those the disk could not hold (a day still open or
          // written to recently is the next pass's)
          const merged = found.filter((p) => p.skipped === undefined || p.skipped === 'disk');
          if (merged.length > 0) options.onPass?.({ merged });
        },
        (error: unknown) => options.onPass?.({ merged: [], error: error as Error }),
      )
      .finally(() => {
        running = undefined;
      });
  };
  const first = setTimeout(pass, options.firstMs ?? 60_000);
  const timer = setInterval(pass, everyMs);
  first.unref();
  timer.unref();
  return {
    async stop() {
      stopping.abort();
      clearTimeout(first);
      clearInterval(timer);
      await running;
    },
  };
}

