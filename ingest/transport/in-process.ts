import { ContinuityError } from '../../core/errors.ts';
import type { ContinuityEvent } from '../../schema/index.ts';
import type { Store } from '../../store/index.ts';
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
}

/** The embedded transport: an {@link EventSink} backed by one batching writer into the store. */
export interface InProcessTransport extends EventSink {
  readonly writer: BatchWriter;
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

/**
 * Embedded mode's transport (DESIGN §2): the gateway hands validated events to one
 * batching writer in the same process, which writes them to the store. Batches carry
 * a content-derived deduplication token, so a batch retried with equal content is
 * stored once. Backpressure: `accept` waits while the writer's queue is full.
 */
export function createInProcessTransport(store: Store, options: InProcessTransportOptions = {}): InProcessTransport {
  const storeSink = createStoreSink(store, 'events', { token: contentToken('gateway') });
  // A transient store failure is retried here with backoff; the retried batch has
  // the same content and so the same deduplication token: stored once.
  const sink: BatchSink = {
    write: (body, rows) =>
      retry(
        async (): Promise<SinkResult> => {
          const result = await storeSink.write(body, rows);
          if (!result.ok) throw Object.assign(result.error, { retriable: result.retriable });
          return result;
        },
        { attempts: 8, maxDelayMs: 5000 },
      ).catch((error: Error): SinkResult => ({ ok: false, error, retriable: false })),
  };
  const writer = createBatchWriter({
    sink,
    maxRows: options.maxRows ?? 10_000,
    flushIntervalMs: options.flushIntervalMs ?? 500,
    maxPendingBatches: 4,
    onFull: 'wait',
  });
  let closed = false;
  return {
    writer,
    ready: () => !closed,
    async accept(events: readonly ContinuityEvent[]): Promise<void> {
      if (closed) throw new ContinuityError('CONT_ERR_SHUTDOWN');
      for (const e of events) {
        const wait = writer.write(JSON.stringify(e));
        if (wait) await wait;
      }
    },
    flush: () => writer.flush(),
    async shutdown(): Promise<void> {
      closed = true;
      await writer.shutdown();
    },
  };
}
