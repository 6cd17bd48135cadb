/**
 * The batching writer: the one place batching lives (OpenTelemetry's
 * BatchLogRecordProcessor / exporter split). It owns a bounded queue, seals batches
 * by size or age, hands each batch to a {@link BatchSink} one at a time, and counts
 * what it wrote and dropped. Sinks only write and report; nobody here retries.
 */

/** Outcome of one {@link BatchSink.write}. */
export type SinkResult = { readonly ok: true } | { readonly ok: false; readonly error: Error; readonly retriable: boolean };

/**
 * A sealed batch: its rows (JSONEachRow lines) joined by `\n`, without a final newline.
 * A string, or its UTF-8 bytes when the writer was created with `body: 'bytes'`.
 */
export type BatchBody = string | Buffer;

/** Writes sealed batches somewhere (the store, a topic). Never retries on its own. */
export interface BatchSink {
  /**
   * Writes one batch. `body` is the batch's rows (see {@link BatchBody}); `rows` their
   * number. Resolves with the outcome; should not reject (a rejection is treated like
   * `{ ok: false, retriable: false }`).
   */
  write(body: BatchBody, rows: number): Promise<SinkResult>;
  /** Releases the sink's resources (not the store it writes to). */
  shutdown?(): Promise<void>;
}

/** Options of {@link createBatchWriter}. */
export interface BatchWriterOptions {
  sink: BatchSink;
  /** Rows per batch (default 10,000). */
  maxRows?: number;
  /** Characters per batch body (default 8 MiB; equals bytes for ASCII rows). A single larger row makes a batch of its own. */
  maxBytes?: number;
  /**
   * Oldest row age before the open batch is sealed, ms (default 1000). 0 disables the
   * timer: batches are then cut by size only, so equal input gives equal batches (what
   * content-derived deduplication tokens need).
   */
  flushIntervalMs?: number;
  /** Sealed batches queued or being written before the writer pushes back (default 2). */
  maxPendingBatches?: number;
  /**
   * Batches handed to the sink at once (default 1: one after the other, in order). With
   * more, batches may complete out of order; use it only where the order of batches does
   * not matter (rows carry their own ids) and the sink can write in parallel (the store:
   * one insert runs on one engine thread, so two keep two cores busy).
   */
  concurrency?: number;
  /**
   * What the sink receives (default `'string'`). `'bytes'`: the batch's UTF-8 bytes as
   * encoded while rows arrived, with no decode to a string and no re-encode by the sink
   * (a store insert sends bytes; the content token hashes the same bytes either way).
   */
  body?: 'string' | 'bytes';
  /**
   * When the queue is full: `'wait'` (default) — `write` returns a promise to await
   * before writing more; `'drop'` — the sealed batch is dropped and counted (for
   * collectors that must never block their host).
   */
  onFull?: 'wait' | 'drop';
  /** Called once per failed batch with the sink's error. */
  onError?: (error: Error, batch: { rows: number; bytes: number; retriable: boolean }) => void;
}

/** Counters of a {@link BatchWriter}. */
export interface BatchWriterStats {
  /** Rows the sink confirmed. */
  rows: number;
  /** Batches the sink confirmed. */
  batches: number;
  /** Characters (string bodies) or bytes (byte bodies) of confirmed batches. */
  bytes: number;
  /** Rows lost: dropped on a full queue, after shutdown, or in a failed batch. */
  dropped: number;
  failedBatches: number;
  /** Rows in the open batch. */
  bufferedRows: number;
  /** Sealed batches queued or being written. */
  pendingBatches: number;
  /** Rows in those batches. */
  pendingRows: number;
}

/** The writer returned by {@link createBatchWriter}. */
export interface BatchWriter {
  /**
   * Appends one row (one JSONEachRow line, no newline). Returns `undefined` when the
   * caller may go on, or a promise (only with `onFull: 'wait'`, when the queue is full)
   * to await before the next write. Never throws; after `shutdown` rows are dropped.
   */
  write(row: string): void | Promise<void>;
  /** Seals the open batch and resolves when every batch so far was written or failed. Never rejects. */
  flush(): Promise<void>;
  /** Flushes, then refuses further rows and shuts the sink down. Idempotent. */
  shutdown(): Promise<void>;
  readonly stats: Readonly<BatchWriterStats>;
  /** The first sink error, if any batch failed (see also `onError`). */
  readonly error: Error | undefined;
}

interface Batch {
  body: BatchBody;
  rows: number;
}

/** Buffer's own UTF-8 encoder (what `write` calls after checking its arguments). */
type Utf8Writer = (buf: Buffer, text: string, offset: number) => number;
const utf8Write: Utf8Writer =
  typeof (Buffer.prototype as unknown as { utf8Write?: unknown }).utf8Write === 'function'
    ? (buf, text, offset) => (buf as unknown as { utf8Write(t: string, o: number): number }).utf8Write(text, offset)
    : (buf, text, offset) => buf.write(text, offset, 'utf8');

/**
 * Creates a batching writer over `sink`. Memory is bounded by
 * `(maxPendingBatches + 1) × maxBytes` plus the open batch.
 * @throws RangeError for non-positive sizes.
 */
export function createBatchWriter(options: BatchWriterOptions): BatchWriter {
  const sink = options.sink;
  const maxRows = options.maxRows ?? 10_000;
  const maxBytes = options.maxBytes ?? 8 << 20;
  const interval = options.flushIntervalMs ?? 1000;
  const maxPending = options.maxPendingBatches ?? 2;
  const dropWhenFull = options.onFull === 'drop';
  const concurrency = options.concurrency ?? 1;
  const bytesOut = options.body === 'bytes';
  if (!(maxRows >= 1) || !(maxBytes >= 1) || !(maxPending >= 1) || !(interval >= 0) || !(Number.isInteger(concurrency) && concurrency >= 1)) {
    throw new RangeError('maxRows, maxBytes, maxPendingBatches and concurrency must be >= 1 and flushIntervalMs >= 0');
  }

  const stats: BatchWriterStats = { rows: 0, batches: 0, bytes: 0, dropped: 0, failedBatches: 0, bufferedRows: 0, pendingBatches: 0, pendingRows: 0 };
  // The open batch is encoded into one reused byte buffer as rows arrive: rows die
  // young (cheap for the GC) instead of living until the batch is joined.
  let buf = Buffer.allocUnsafe(Math.min(maxBytes, 1 << 20) + 1024);
  let used = 0;
  let openRows = 0;
  let openChars = 0;
  /** Sealed batches not yet handed to the sink. */
  const queue: Batch[] = [];
  /** Batches the sink is writing. */
  let inFlight = 0;
  let closed = false;
  let firstError: Error | undefined;
  let timer: NodeJS.Timeout | undefined;
  /** Resolvers waiting for queue space (backpressure) or for the queue to empty (flush). */
  let spaceWaiters: Array<() => void> = [];
  let idleWaiters: Array<() => void> = [];

  const wake = (): void => {
    if (stats.pendingBatches <= maxPending && spaceWaiters.length > 0) {
      const w = spaceWaiters;
      spaceWaiters = [];
      for (const r of w) r();
    }
    if (stats.pendingBatches === 0 && idleWaiters.length > 0) {
      const w = idleWaiters;
      idleWaiters = [];
      for (const r of w) r();
    }
  };

  /** Writes one batch and accounts for its outcome. Never rejects. */
  const writeOne = async (batch: Batch): Promise<void> => {
    const body = batch.body;
    const n = batch.rows;
    batch.body = '';
    let result: SinkResult;
    try {
      result = await sink.write(body, n);
    } catch (err) {
      result = { ok: false, error: err instanceof Error ? err : new Error(String(err)), retriable: false };
    }
    inFlight--;
    stats.pendingBatches--;
    stats.pendingRows -= n;
    if (result.ok) {
      stats.rows += n;
      stats.batches++;
      stats.bytes += body.length;
    } else {
      stats.failedBatches++;
      stats.dropped += n;
      firstError ??= result.error;
      try {
        options.onError?.(result.error, { rows: n, bytes: body.length, retriable: result.retriable });
      } catch {
        // A reporting hook must not stop the writer.
      }
    }
    pump();
    wake();
  };

  /** Hands queued batches to the sink, up to `concurrency` at once, oldest first. */
  const pump = (): void => {
    while (inFlight < concurrency && queue.length > 0) {
      inFlight++;
      void writeOne(queue.shift()!);
    }
  };

  /** Seals the open batch. Returns false when it was dropped on a full queue. */
  const seal = (force: boolean): boolean => {
    if (timer) {
      clearTimeout(timer);
      timer = undefined;
    }
    if (openRows === 0) return true;
    const rows = openRows;
    openRows = 0;
    openChars = 0;
    stats.bufferedRows = 0;
    if (dropWhenFull && !force && stats.pendingBatches >= maxPending) {
      used = 0;
      stats.dropped += rows;
      return false;
    }
    let body: BatchBody;
    if (bytesOut) {
      // The sink keeps the bytes; the open batch goes on in a buffer of its own.
      body = buf.subarray(0, used - 1);
      buf = Buffer.allocUnsafe(buf.length);
    } else body = buf.toString('utf8', 0, used - 1);
    const batch: Batch = { body, rows };
    used = 0;
    queue.push(batch);
    stats.pendingBatches++;
    stats.pendingRows += rows;
    pump();
    return true;
  };

  const waitForSpace = (): Promise<void> => new Promise<void>((r) => spaceWaiters.push(r));

  const flush = async (): Promise<void> => {
    seal(true);
    if (stats.pendingBatches === 0) return;
    await new Promise<void>((r) => idleWaiters.push(r));
  };

  return {
    write(row: string): void | Promise<void> {
      if (closed) {
        stats.dropped++;
        return;
      }
      if (openRows > 0 && openChars + row.length + 1 > maxBytes) seal(false);
      const need = used + row.length * 3 + 1; // worst case of UTF-8 for UTF-16 units
      if (need > buf.length) {
        const bigger = Buffer.allocUnsafe(Math.max(need, buf.length * 2));
        buf.copy(bigger, 0, 0, used);
        buf = bigger;
      }
      used += utf8Write(buf, row, used);
      buf[used++] = 0x0a;
      openRows++;
      openChars += row.length + 1;
      stats.bufferedRows = openRows;
      if (openRows >= maxRows || openChars >= maxBytes) seal(false);
      else if (interval > 0 && timer === undefined) {
        timer = setTimeout(() => {
          timer = undefined;
          seal(false);
        }, interval);
        timer.unref();
      }
      if (!dropWhenFull && stats.pendingBatches > maxPending) return waitForSpace();
      return undefined;
    },
    flush,
    async shutdown(): Promise<void> {
      if (closed) return;
      await flush();
      closed = true;
      await sink.shutdown?.();
    },
    get stats(): Readonly<BatchWriterStats> {
      return stats;
    },
    get error(): Error | undefined {
      return firstError;
    },
  };
}
