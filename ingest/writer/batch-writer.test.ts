import { afterEach, describe, expect, it, vi } from 'vitest';
import { createBatchWriter, type BatchSink, type SinkResult } from './batch-writer.ts';

/** A sink that records bodies and settles each write when the test says so. */
function manualSink(): BatchSink & { bodies: string[]; settle(result?: SinkResult): void; waiting: number } {
  const pending: Array<(r: SinkResult) => void> = [];
  const sink = {
    bodies: [] as string[],
    get waiting() {
      return pending.length;
    },
    write(body: string): Promise<SinkResult> {
      sink.bodies.push(body);
      return new Promise<SinkResult>((r) => pending.push(r));
    },
    settle(result: SinkResult = { ok: true }) {
      pending.shift()?.(result);
    },
  };
  return sink;
}

/** A sink that accepts everything at once. */
function okSink(): BatchSink & { bodies: string[] } {
  const bodies: string[] = [];
  return { bodies, write: async (body) => (bodies.push(String(body)), { ok: true }) };
}

const tick = () => new Promise<void>((r) => setImmediate(r));

afterEach(() => {
  vi.useRealTimers();
});

describe('createBatchWriter', () => {
  it('cuts batches by row count and joins rows with newlines', async () => {
    const sink = okSink();
    const w = createBatchWriter({ sink, maxRows: 2, flushIntervalMs: 0 });
    for (const r of ['a', 'b', 'c', 'd', 'e']) await w.write(r);
    await w.flush();
    expect(sink.bodies).toEqual(['a\nb', 'c\nd', 'e']);
    expect(w.stats).toMatchObject({ rows: 5, batches: 3, bytes: 7, dropped: 0, bufferedRows: 0, pendingBatches: 0, pendingRows: 0 });
  });

  it('cuts batches by size; an oversized row makes a batch of its own', async () => {
    const sink = okSink();
    const w = createBatchWriter({ sink, maxRows: 100, maxBytes: 8, flushIntervalMs: 0 });
    for (const r of ['aaa', 'bbb', 'cccccccccccc', 'd']) await w.write(r);
    await w.flush();
    expect(sink.bodies).toEqual(['aaa\nbbb', 'cccccccccccc', 'd']);
  });

  it('equal input gives equal batches when the timer is off (what content tokens need)', async () => {
    const a = okSink();
    const b = okSink();
    for (const sink of [a, b]) {
      const w = createBatchWriter({ sink, maxRows: 3, flushIntervalMs: 0 });
      for (let i = 0; i < 10; i++) await w.write(`r${i}`);
      await w.shutdown();
    }
    expect(a.bodies).toEqual(b.bodies);
  });

  it('pushes back with a promise only when the queue is full, and resumes when a batch is written', async () => {
    const sink = manualSink();
    const w = createBatchWriter({ sink, maxRows: 1, maxPendingBatches: 1, flushIntervalMs: 0 });
    expect(w.write('a')).toBeUndefined(); // batch 1 in flight
    const blocked = w.write('b'); // batch 2 queued: 2 pending > 1
    expect(blocked).toBeInstanceOf(Promise);
    let resumed = false;
    void blocked!.then(() => (resumed = true));
    await tick();
    expect(resumed).toBe(false);
    sink.settle();
    await tick();
    expect(resumed).toBe(true);
    sink.settle();
    await w.flush();
    expect(w.stats).toMatchObject({ rows: 2, batches: 2 });
  });

  it("with onFull 'drop' never blocks: a batch that does not fit is dropped and counted", async () => {
    const sink = manualSink();
    const w = createBatchWriter({ sink, maxRows: 1, maxPendingBatches: 1, flushIntervalMs: 0, onFull: 'drop' });
    expect(w.write('a')).toBeUndefined();
    expect(w.write('b')).toBeUndefined();
    expect(w.write('c')).toBeUndefined();
    expect(w.stats.dropped).toBe(2);
    sink.settle();
    await w.flush();
    expect(sink.bodies).toEqual(['a']);
    expect(w.stats).toMatchObject({ rows: 1, dropped: 2 });
  });

  it('a failed batch is counted as dropped, reported once, and remembered; the writer goes on', async () => {
    const sink = manualSink();
    const errors: Array<[string, number]> = [];
    const w = createBatchWriter({ sink, maxRows: 2, flushIntervalMs: 0, onError: (e, b) => errors.push([e.message, b.rows]) });
    w.write('a');
    w.write('b');
    sink.settle({ ok: false, error: new Error('store down'), retriable: true });
    await tick();
    w.write('c');
    const flushed = w.flush();
    sink.settle();
    await flushed;
    expect(errors).toEqual([['store down', 2]]);
    expect(w.error?.message).toBe('store down');
    expect(w.stats).toMatchObject({ rows: 1, batches: 1, failedBatches: 1, dropped: 2 });
  });

  it('a sink that throws counts as a failed batch', async () => {
    const w = createBatchWriter({
      sink: {
        write: () => Promise.reject(new Error('boom')),
      },
      flushIntervalMs: 0,
    });
    w.write('a');
    await w.flush();
    expect(w.stats).toMatchObject({ failedBatches: 1, dropped: 1 });
    expect(w.error?.message).toBe('boom');
  });

  it('seals the open batch after flushIntervalMs', async () => {
    vi.useFakeTimers();
    const sink = okSink();
    const w = createBatchWriter({ sink, maxRows: 100, flushIntervalMs: 500 });
    w.write('a');
    w.write('b');
    expect(sink.bodies).toEqual([]);
    await vi.advanceTimersByTimeAsync(500);
    expect(sink.bodies).toEqual(['a\nb']);
    await w.shutdown();
  });

  it('after shutdown rows are dropped and counted; shutdown is idempotent and shuts the sink down', async () => {
    let sinkShutdowns = 0;
    const sink = { ...okSink(), shutdown: async () => void sinkShutdowns++ };
    const w = createBatchWriter({ sink, flushIntervalMs: 0 });
    w.write('a');
    await w.shutdown();
    await w.shutdown();
    expect(w.write('late')).toBeUndefined();
    expect(w.stats).toMatchObject({ rows: 1, dropped: 1 });
    expect(sinkShutdowns).toBe(1);
  });

  it('refuses nonsensical sizes', () => {
    expect(() => createBatchWriter({ sink: okSink(), maxRows: 0 })).toThrow(RangeError);
    expect(() => createBatchWriter({ sink: okSink(), maxPendingBatches: 0 })).toThrow(RangeError);
    expect(() => createBatchWriter({ sink: okSink(), concurrency: 0 })).toThrow(RangeError);
    expect(() => createBatchWriter({ sink: okSink(), concurrency: 1.5 })).toThrow(RangeError);
  });

  it('by default hands the sink one batch at a time, in order', async () => {
    const sink = manualSink();
    const w = createBatchWriter({ sink, maxRows: 1, maxPendingBatches: 3, flushIntervalMs: 0 });
    w.write('a');
    w.write('b');
    w.write('c');
    expect(sink.waiting).toBe(1);
    expect(sink.bodies).toEqual(['a']);
    sink.settle();
    await tick();
    expect(sink.bodies).toEqual(['a', 'b']);
    sink.settle();
    await tick();
    sink.settle();
    await w.flush();
    expect(sink.bodies).toEqual(['a', 'b', 'c']);
  });
});

describe("createBatchWriter with body 'bytes'", () => {
  it('hands the sink each batch as its own UTF-8 bytes, equal to the string bodies, never overwritten by later rows', async () => {
    const held: Array<string | Buffer> = [];
    const w = createBatchWriter({
      sink: { write: async (body) => (held.push(body), { ok: true }) },
      maxRows: 2,
      maxPendingBatches: 10,
      flushIntervalMs: 0,
      body: 'bytes',
    });
    const rows = ['{"a":"é"}', '{"b":2}', '{"c":"✓"}', '{"d":4}', '{"e":5}'];
    for (const r of rows) await w.write(r);
    await w.flush();
    const strings = okSink();
    const s = createBatchWriter({ sink: strings, maxRows: 2, flushIntervalMs: 0 });
    for (const r of rows) await s.write(r);
    await s.flush();
    expect(held.every((b) => Buffer.isBuffer(b))).toBe(true);
    expect(held.map((b) => b.toString())).toEqual(strings.bodies);
    expect(w.stats).toMatchObject({ rows: 5, batches: 3, bytes: held.reduce((n, b) => n + b.length, 0) });
  });
});

describe('createBatchWriter with concurrency', () => {
  /** A sink whose writes the test settles in any order. */
  function unorderedSink(): BatchSink & { bodies: string[]; settle(body: string, result?: SinkResult): void } {
    const pending = new Map<string, (r: SinkResult) => void>();
    const sink = {
      bodies: [] as string[],
      write(body: string): Promise<SinkResult> {
        sink.bodies.push(body);
        return new Promise<SinkResult>((r) => pending.set(body, r));
      },
      settle(body: string, result: SinkResult = { ok: true }) {
        const r = pending.get(body);
        if (!r) throw new Error(`no write in flight for ${body}`);
        pending.delete(body);
        r(result);
      },
    };
    return sink;
  }

  it('writes up to `concurrency` batches at once, oldest first, and the same batches as without it', async () => {
    const sink = unorderedSink();
    const w = createBatchWriter({ sink, maxRows: 2, maxPendingBatches: 2, concurrency: 2, flushIntervalMs: 0 });
    for (const r of ['a', 'b', 'c', 'd']) expect(w.write(r)).toBeUndefined();
    expect(sink.bodies).toEqual(['a\nb', 'c\nd']); // both in flight
    w.write('e');
    const blocked = w.write('f'); // a third sealed batch: 3 pending > 2
    expect(blocked).toBeInstanceOf(Promise);
    expect(sink.bodies).toEqual(['a\nb', 'c\nd']); // the third waits for a free slot
    sink.settle('c\nd'); // the later batch finishes first
    await blocked;
    expect(sink.bodies).toEqual(['a\nb', 'c\nd', 'e\nf']);
    expect(w.stats).toMatchObject({ rows: 2, batches: 1, pendingBatches: 2, pendingRows: 4 });
    const flushed = w.flush();
    let done = false;
    void flushed.then(() => (done = true));
    sink.settle('e\nf');
    await tick();
    expect(done).toBe(false); // flush waits for every batch, not just the newest
    sink.settle('a\nb');
    await flushed;
    expect(w.stats).toMatchObject({ rows: 6, batches: 3, pendingBatches: 0, pendingRows: 0 });

    const serial = okSink();
    const s = createBatchWriter({ sink: serial, maxRows: 2, flushIntervalMs: 0 });
    for (const r of ['a', 'b', 'c', 'd', 'e', 'f']) await s.write(r);
    await s.flush();
    expect([...sink.bodies].sort()).toEqual([...serial.bodies].sort());
  });

  it('a batch failing while another is in flight is counted and remembered; the other still lands', async () => {
    const sink = unorderedSink();
    const errors: string[] = [];
    const w = createBatchWriter({ sink, maxRows: 1, maxPendingBatches: 2, concurrency: 2, flushIntervalMs: 0, onError: (e) => errors.push(e.message) });
    w.write('a');
    w.write('b');
    sink.settle('a', { ok: false, error: new Error('refused'), retriable: false });
    await tick();
    expect(w.error?.message).toBe('refused');
    const flushed = w.flush();
    sink.settle('b');
    await flushed;
    expect(errors).toEqual(['refused']);
    expect(w.stats).toMatchObject({ rows: 1, batches: 1, failedBatches: 1, dropped: 1, pendingBatches: 0 });
  });
});
