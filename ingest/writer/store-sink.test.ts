import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestStore, type TestStore } from '../../test/helpers/store.ts';
import { createBatchWriter } from './batch-writer.ts';
import { contentToken, createStoreSink } from './store-sink.ts';

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('store_sink');
});
afterAll(async () => {
  await t?.close();
});

const row = (i: number, source = 'canary') =>
  JSON.stringify({ event_id: `00000000-0000-8000-8000-${String(i).padStart(12, '0')}`, event_type: 'canary', ts: 1_796_011_472_000_000 + i, source, canary_id: 'c', ok: true });

describe('createStoreSink (real embedded engine)', () => {
  it('writes batches; a batch with the same content token is stored once', async () => {
    const sink = createStoreSink(t.store, 'events', { token: contentToken('sink-test') });
    const body = [row(1), row(2), row(3)].join('\n');
    expect(await sink.write(body, 3)).toEqual({ ok: true });
    expect(await sink.write(body, 3)).toEqual({ ok: true });
    const [n] = await t.store.query<{ n: number }>(`SELECT count() AS n FROM events WHERE event_type = 'canary' AND source = 'canary'`);
    expect(n?.n).toBe(3);
    expect(sink.stats).toEqual({ inserts: 2, failures: 0, refusedRows: 0 });
  });

  it('reports a batch for a table that does not exist as not retriable, without throwing', async () => {
    const sink = createStoreSink(t.store, 'no_such_table');
    const result = await sink.write(row(5), 1);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.retriable).toBe(false);
      expect((result.error as { code?: string }).code).toBe('CONT_ERR_STORE_QUERY');
    }
    expect(sink.stats.failures).toBe(1);
  });

  it('splits a refused batch: good rows are stored, each row the engine refuses goes to dead_letters', async () => {
    const refused: string[] = [];
    const sink = createStoreSink(t.store, 'events', { token: contentToken('split'), onRefused: (r) => refused.push(r) });
    // A lone UTF-16 surrogate escape passes JSON.parse but not the engine's JSON reader.
    const bad = row(21).replace('"canary_id":"c"', '"canary_id":"c\\ud800"');
    const body = [row(20), bad, row(22), row(23), 'not json at all'].join('\n');
    expect(await sink.write(body, 5)).toEqual({ ok: true });
    const [n] = await t.store.query<{ n: number }>(
      `SELECT count() AS n FROM events WHERE event_type = 'canary' AND event_id IN ('00000000-0000-8000-8000-000000000020', '00000000-0000-8000-8000-000000000022', '00000000-0000-8000-8000-000000000023')`,
    );
    expect(n?.n).toBe(3);
    const letters = await t.store.query<{ reason: string; payload: string }>(
      `SELECT reason, payload FROM dead_letters WHERE source = 'store' AND origin = 'events'`,
    );
    expect(letters.sort((a, b) => a.payload.length - b.payload.length)).toEqual([
      { reason: 'store_refused', payload: 'not json at all' },
      { reason: 'store_refused', payload: bad },
    ]);
    expect(sink.stats.refusedRows).toBe(2);
    expect(refused.sort()).toEqual([bad, 'not json at all'].sort());
    expect(sink.stats.failures).toBe(0);
  });

  it('behind a batch writer: every row arrives', async () => {
    const w = createBatchWriter({ sink: createStoreSink(t.store, 'events', { token: contentToken('w') }), maxRows: 7, flushIntervalMs: 0 });
    for (let i = 100; i < 150; i++) {
      const p = w.write(row(i, 'import'));
      if (p) await p;
    }
    await w.shutdown();
    expect(w.stats).toMatchObject({ rows: 50, batches: 8, dropped: 0 });
    const [n] = await t.store.query<{ n: number }>(`SELECT count() AS n FROM events WHERE source = 'import'`);
    expect(n?.n).toBe(50);
  });

  it('contentToken is stable and fits the store token syntax', () => {
    const tok = contentToken('caddy-import');
    expect(tok('abc')).toBe(tok('abc'));
    expect(tok('abc')).not.toBe(tok('abd'));
    expect(tok('abc')).toMatch(/^caddy-import:[0-9a-f]{64}$/);
  });

  it('contentToken gives a body and its UTF-8 bytes the same token (batches imported as strings are recognised as bytes)', () => {
    const tok = contentToken('caddy-import');
    for (const body of ['abc', '{"ua":"Clíent/1 ✓ 😀"}\n{"x":1}']) expect(tok(Buffer.from(body, 'utf8'))).toBe(tok(body));
  });

  it('byte bodies: stored like strings, deduplicated against the same content sent as a string, and split on a refusal', async () => {
    const sink = createStoreSink(t.store, 'events', { token: contentToken('bytes') });
    const body = [row(300, 'bytes'), row(301, 'bytes')].join('\n');
    expect(await sink.write(Buffer.from(body), 2)).toEqual({ ok: true });
    expect(await sink.write(body, 2)).toEqual({ ok: true });
    const bad = row(303, 'bytes').replace('"canary_id":"c"', '"canary_id":"c\\ud800"');
    expect(await sink.write(Buffer.from([row(302, 'bytes'), bad].join('\n')), 2)).toEqual({ ok: true });
    const [n] = await t.store.query<{ n: number }>(`SELECT count() AS n FROM events WHERE source = 'bytes'`);
    expect(n?.n).toBe(3);
    expect(sink.stats.refusedRows).toBe(1);
    const [letter] = await t.store.query<{ payload: string }>(`SELECT payload FROM dead_letters WHERE source = 'store' AND payload LIKE '%000000000303%'`);
    expect(letter?.payload).toBe(bad);
  });
});
