import { isoMicros } from '../core/time.ts';
import type { Store } from './client.ts';
import { retentionDaysOf } from './migrate.ts';

/**
 * The store's retention as the write paths apply it: how far back the `events` table
 * keeps events. It is read from the table's own TTL (`TTL toDateTime(ts) + N DAY`,
 * schema/migrations/0001; CONTINUITY_RETENTION_DAYS changes that TTL when a process
 * opens the store with it set, store/migrate.ts `applyRetention`), never from the
 * configuration, so every process judges by what the store will actually do.
 *
 * Why it matters: an event whose `ts` is already past the TTL when it is written is
 * dropped by the engine at once (the part it lands in is expired), so it would be
 * neither in `events` nor in `dead_letters`. Every write path therefore compares each
 * event's `ts` with {@link Retention.cutoffMicros} — one comparison per event — and
 * refuses the older ones with the reason `expired`: `serve` in its answer (a
 * per-index issue), the Kafka consumer as a dead letter, and `continuity import`
 * warns (cli/commands/import.ts).
 */
export interface Retention {
  /** Days the store keeps events as last read (0: for ever). */
  readonly days: number;
  /**
   * The oldest event time the store keeps at `nowMs` (ms since the epoch, default
   * now): µs since the epoch, UTC. An event with `ts` below it is past the retention.
   * `-Infinity` when the store keeps events for ever. Costs no query: it may start a
   * background re-read of the TTL, at most once per refresh interval.
   */
  cutoffMicros(nowMs?: number): number;
  /** Why an event at `tsMicros` is refused against `cutoffMicros`: one line for issues and dead letters. */
  explain(tsMicros: number, cutoffMicros: number): string;
}

/** Options of {@link readRetention}. */
export interface RetentionOptions {
  /**
   * How old the value in hand may get before a cutoff re-reads the TTL in the
   * background, ms (default 60,000). Only a ClickHouse server can have its TTL
   * changed under a running process (another process opening it with
   * CONTINUITY_RETENTION_DAYS); an embedded data directory has one owner.
   */
  refreshMs?: number;
  /** The clock of the refresh interval, ms (tests). */
  clock?: () => number;
}

const DAY_MICROS = 86_400_000_000;

/**
 * Reads the retention of `store` once (one query on `system.tables`) and keeps it.
 * @throws the store's coded error when it cannot be read (CONT_ERR_STORE_*).
 */
export async function readRetention(store: Store, options: RetentionOptions = {}): Promise<Retention> {
  const refreshMs = options.refreshMs ?? 60_000;
  const clock = options.clock ?? Date.now;
  let days = await retentionDaysOf(store);
  let readAt = clock();
  let refreshing = false;
  const refresh = (): void => {
    if (refreshing) return;
    refreshing = true;
    readAt = clock();
    retentionDaysOf(store).then(
      (d) => {
        days = d;
        refreshing = false;
      },
      () => {
        refreshing = false; // the value in hand stays; the next interval tries again
      },
    );
  };
  return {
    get days() {
      return days;
    },
    cutoffMicros(nowMs = Date.now()): number {
      if (clock() - readAt > refreshMs) refresh();
      return days > 0 ? nowMs * 1000 - days * DAY_MICROS : Number.NEGATIVE_INFINITY;
    },
    explain(tsMicros: number, cutoffMicros: number): string {
      return (
        `event time ${isoMicros(tsMicros)} is older than the store's ${days}-day retention (it keeps events from ${isoMicros(cutoffMicros)} on): ` +
        'the TTL of `events` would drop it as soon as it is written (CONTINUITY_RETENTION_DAYS sets the retention; 0 keeps events for ever)'
      );
    },
  };
}
