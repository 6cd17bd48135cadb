import { createHash } from 'node:crypto';
import { isContinuityError } from '../../core/index.ts';
import type { Store } from '../../store/index.ts';
import type { BatchSink, SinkResult } from './batch-writer.ts';

/** Options of {@link createStoreSink}. */
export interface StoreSinkOptions {
  /**
   * Derives the batch's `insert_deduplication_token` from its body. Return a value
   * that depends only on the content (e.g. {@link contentToken}) so a retried or
   * re-imported batch is stored once (the table's deduplication window). Omit for no token.
   */
  token?: (body: string) => string;
}

/** Counters of a store sink. */
export interface StoreSinkStats {
  inserts: number;
  failures: number;
}

/** A {@link BatchSink} writing JSONEachRow batches into one store table, with its counters. */
export interface StoreSink extends BatchSink {
  readonly stats: Readonly<StoreSinkStats>;
}

/**
 * A sink that inserts each batch into `table` with `store.insertJsonEachRow` and reports
 * the outcome. It never retries (the caller's retry policy decides): `retriable` in
 * the result comes from the store's coded error (CONT_ERR_STORE_UNAVAILABLE is
 * retriable, a rejected statement is not).
 */
export function createStoreSink(store: Store, table: string, options: StoreSinkOptions = {}): StoreSink {
  const stats: StoreSinkStats = { inserts: 0, failures: 0 };
  return {
    stats,
    async write(body: string): Promise<SinkResult> {
      try {
        const dedupToken = options.token?.(body);
        await store.insertJsonEachRow(table, body, dedupToken === undefined ? {} : { dedupToken });
        stats.inserts++;
        return { ok: true };
      } catch (err) {
        stats.failures++;
        const error = err instanceof Error ? err : new Error(String(err));
        return { ok: false, error, retriable: isContinuityError(err) ? err.retriable : false };
      }
    },
  };
}

/**
 * A content-derived deduplication token: `<prefix>:<SHA-256 of the body, hex>`
 * (FIPS 180-4). Equal bodies give equal tokens; `prefix` keeps different producers'
 * tokens apart. The result matches the store's token syntax when `prefix` is
 * `[A-Za-z0-9:._-]`.
 */
export function contentToken(prefix: string): (body: string) => string {
  return (body) => `${prefix}:${createHash('sha256').update(body, 'utf8').digest('hex')}`;
}
