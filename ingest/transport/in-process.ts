import { ContinuityError } from '../../core/errors.ts';
import type { ContinuityEvent } from '../../schema/index.ts';
import { readRetention, type Retention, type Store } from '../../store/index.ts';
import type { EventSink } from '../gateway/app.ts';
import { retry } from '../../core/retry.ts';
import { createBatchWriter, type BatchSink, type BatchWriter, type SinkResult } from '../writer/batch-writer.ts';
import { contentToken, createStoreSink } from '../writer/store-sink.ts';

/** Options of {@link createInProcessTransport}. */
export interface InProcessTransportOptions {
  /** Rows per batch (default 10,000). */
  maxRows?: number;
  /** Oldest row age before a batch is written, ms (default 500). */
  flushIntervalMs?: number;
  /**
   * How long `shutdown` still retries a batch the store cannot take for now (a full
   * disk, a server that is down) before it gives the batch up as lost, ms (default 10,000).
   */
  shutdownGraceMs?: number;
}

/** Counters of an {@link InProcessTransport} (its writer has the row counts). */
export interface InProcessTransportStats {
  /** Write attempts the store refused for now (retriable), each tried again after a backoff. */
  writeRetries: number;
}

/** The embedded transport: an {@link EventSink} backed by one batching writer into the store. */
export interface InProcessTransport extends EventSink {
  readonly writer: BatchWriter;
  readonly stats: Readonly<InProcessTransportStats>;
  /** The store's retention, read on first use and kept (store/retention.ts). */
  retention(): Promise<Retention>;
  /** The store's error while the writer is retrying it; undefined when ready. */
  unreadyReason(): string | undefined;
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

/**
 * Embedded mode's transport (DESIGN §2): the gateway hands validated events to one
 * batching writer in the same process, which writes them to the store. Batches carry
 * a content-derived deduplication token, so a batch retried with equal content is
 * stored once. Backpressure: `accept` waits while the writer's queue is full.
 *
 * Nothing accepted is given up while the store can still take it: a write the store
 * refuses for now (CONT_ERR_STORE_UNAVAILABLE: a full disk, a server that is down) is
 * retried with jittered backoff for as long as it takes, and meanwhile `ready()` is
 * false and `accept` refuses new events with a retriable CONT_ERR_INGEST_UNAVAILABLE
 * naming the cause (the gateway answers 503 with Retry-After), so the queue stays
 * bounded and clients keep what they could not hand over. Only `shutdown` ends the
 * retries, after `shutdownGraceMs`: what is still queued then is counted as lost
 * (`writer.stats.dropped`), and `writer.error` is the store's error.
 *
 * The retention (`retention()`) lets the gateway refuse events older than the store
 * keeps, in its answer, before they are queued.
 */
export function createInProcessTransport(store: Store, options: InProcessTransportOptions = {}): InProcessTransport {
  const storeSink = createStoreSink(store, 'events', { token: contentToken('gateway') });
  const stats: InProcessTransportStats = { writeRetries: 0 };
  /** The store's retriable error while a batch is being retried; cleared by the next write that succeeds. */
  let failing: Error | undefined;
  const giveUp = new AbortController();
  // The retried batch has the same content and so the same deduplication token: stored once.
  const sink: BatchSink = {
    async write(body, rows): Promise<SinkResult> {
      let last: Error | undefined;
      try {
        return await retry(
          async (): Promise<SinkResult> => {
            const result = await storeSink.write(body, rows);
            if (result.ok) {
              failing = undefined;
              return result;
            }
            last = result.error;
            if (result.retriable) {
              failing = result.error;
              stats.writeRetries++;
            }
            throw Object.assign(result.error, { retriable: result.retriable });
          },
          { attempts: Number.POSITIVE_INFINITY, initialDelayMs: 200, maxDelayMs: 5000, signal: giveUp.signal },
        );
      } catch (err) {
        return { ok: false, error: last ?? (err as Error), retriable: false };
      }
    },
  };
  const writer = createBatchWriter({
    sink,
    maxRows: options.maxRows ?? 10_000,
    flushIntervalMs: options.flushIntervalMs ?? 500,
    maxPendingBatches: 4,
    onFull: 'wait',
  });
  let closed = false;
  let retention: Promise<Retention> | undefined;
  const unreadyReason = (): string | undefined =>
    closed ? 'shutting down' : failing ? `${failing.message} (the events accepted before are kept and written once the store takes them)` : undefined;
  return {
    writer,
    stats,
    ready: () => !closed && failing === undefined,
    unreadyReason,
    retention(): Promise<Retention> {
      retention ??= readRetention(store).catch((err: unknown) => {
        retention = undefined; // read again on the next request
        throw err;
      });
      return retention;
    },
    async accept(events: readonly ContinuityEvent[]): Promise<void> {
      if (closed) throw new ContinuityError('CONT_ERR_SHUTDOWN');
      if (failing) throw new ContinuityError('CONT_ERR_INGEST_UNAVAILABLE', unreadyReason(), { cause: failing });
      for (const e of events) {
        const wait = writer.write(JSON.stringify(e));
        if (wait) await wait;
      }
    },
    flush: () => writer.flush(),
    async shutdown(): Promise<void> {
      closed = true;
      const timer = setTimeout(() => giveUp.abort(), options.shutdownGraceMs ?? 10_000);
      timer.unref();
      try {
        await writer.shutdown();
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
