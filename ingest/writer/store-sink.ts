import { createHash } from 'node:crypto';
import { isContinuityError } from '../../core/index.ts';
import type { Store } from '../../store/index.ts';
import type { BatchBody, BatchSink, SinkResult } from './batch-writer.ts';

/** Options of {@link createStoreSink}. */
export interface StoreSinkOptions {
  /**
   * Derives the batch's `insert_deduplication_token` from its body. Return a value
   * that depends only on the content (e.g. {@link contentToken}) so a retried or
   * re-imported batch is stored once (the table's deduplication window). Omit for no token.
   */
  token?: (body: BatchBody) => string;
  /**
   * Called for each row the store refused, once its dead letter is written, with the
   * row and the engine's message (first line): lets a caller that counted the row as
   * written correct its counts. An exception it throws fails the batch.
   */
  onRefused?: (row: string, detail: string) => void;
}

/** Counters of a store sink. */
export interface StoreSinkStats {
  inserts: number;
  failures: number;
  /** Rows the store refused one by one, each written to `dead_letters` instead. */
  refusedRows: number;
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
 *
 * A batch the store refuses for good (a rejected statement) is split in halves and
 * each half written again, down to single rows, so that one bad row (e.g. a string the
 * engine cannot parse, such as a lone UTF-16 surrogate escape) costs only itself: each
 * row the store still refuses goes to `dead_letters` (source `store`, reason
 * `store_refused`, the engine's message, the row), and the batch counts as written.
 * A batch mixes rows from many requests (the gateway's writer), so nothing a client
 * was told is stored may be dropped with someone else's bad row. Halves carry their
 * own content-derived tokens, so a retried split is deduplicated like any batch.
 */
export function createStoreSink(store: Store, table: string, options: StoreSinkOptions = {}): StoreSink {
  const stats: StoreSinkStats = { inserts: 0, failures: 0, refusedRows: 0 };
  const insert = async (body: BatchBody): Promise<void> => {
    const dedupToken = options.token?.(body);
    await store.insertJsonEachRow(table, body, dedupToken === undefined ? {} : { dedupToken });
    stats.inserts++;
  };
  // The statement was refused for its data, not for a missing table (a misconfiguration
  // that splitting would only spread over every row).
  const refusedForGood = (err: unknown): boolean =>
    isContinuityError(err) && err.code === 'CONT_ERR_STORE_QUERY' && !/UNKNOWN_TABLE|UNKNOWN_DATABASE/.test(err.message);
  /** Writes `body` (JSONEachRow), splitting it on a refusal; throws only what splitting cannot cure. */
  const writeBody = async (body: BatchBody): Promise<void> => {
    try {
      await insert(body);
    } catch (err) {
      if (!refusedForGood(err) || table === 'dead_letters') throw err;
      const rows = body.toString().split('\n').filter((l) => l !== '');
      if (rows.length <= 1) {
        const detail = (err as Error).message.split('\n', 1)[0]!.slice(0, 1000);
        const row = rows[0] ?? '';
        const letter = { source: 'store', origin: table, position: 0, reason: 'store_refused', detail, payload: row, payload_bytes: Buffer.byteLength(row) };
        await store.insertJsonEachRow('dead_letters', JSON.stringify(letter), { dedupToken: contentToken('store-refused')(row) });
        stats.refusedRows++;
        options.onRefused?.(row, detail);
        return;
      }
      const mid = rows.length >> 1;
      await writeBody(rows.slice(0, mid).join('\n'));
      await writeBody(rows.slice(mid).join('\n'));
    }
  };
  return {
    stats,
    async write(body: BatchBody): Promise<SinkResult> {
      try {
        await writeBody(body);
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
 * A content-derived deduplication token: `<prefix>:<SHA-256 of the body's UTF-8
 * bytes, hex>` (FIPS 180-4). Equal bodies give equal tokens, whether given as a
 * string or as its UTF-8 bytes; `prefix` keeps different producers' tokens apart. The
 * result matches the store's token syntax when `prefix` is `[A-Za-z0-9:._-]`.
 */
export function contentToken(prefix: string): (body: BatchBody) => string {
  return (body) => `${prefix}:${(typeof body === 'string' ? createHash('sha256').update(body, 'utf8') : createHash('sha256').update(body)).digest('hex')}`;
}
