import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openMigratedStore } from '../store/index.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// In embedded mode the store writes inserts on more than one engine connection, so
// that two batches can be written at once (store/client.ts, EMBEDDED_INSERT_LANES).
// Concurrent statements must still each get their own, correct outcome.

let t: TestStore;
const row = (id: number) => JSON.stringify({ event_id: `00000000-0000-8000-8000-${String(id).padStart(12, '0')}`, event_type: 'boot', ts: 1_796_011_200_000_000 + id, source: 'server' });
const rows = (from: number, n: number) => Array.from({ length: n }, (_, i) => row(from + i)).join('\n');
const count = async () => (await t.store.query<{ c: number }>('SELECT count() AS c FROM events'))[0]!.c;

beforeAll(async () => {
  t = await openTestStore('insert_lanes');
});
afterAll(async () => {
  await t?.close();
});

describe('concurrent inserts', () => {
  it('all land, a repeated token is still stored once, and queries in between get their own results', async () => {
    const work: Array<Promise<unknown>> = [];
    for (let b = 0; b < 8; b++) work.push(t.store.insertJsonEachRow('events', rows(b * 100, 100), { dedupToken: `lanes:${b}` }));
    work.push(t.store.insertJsonEachRow('events', rows(0, 100), { dedupToken: 'lanes:0' }));
    const answers = Array.from({ length: 4 }, (_, i) => t.store.query<{ n: number }>('SELECT {n:UInt32} AS n', { n: i }));
    await Promise.all(work);
    expect((await Promise.all(answers)).map((a) => a[0]!.n)).toEqual([0, 1, 2, 3]);
    expect(await count()).toBe(800);
  });

  it('a refused insert fails alone: the inserts beside it land and later statements are unaffected', async () => {
    const bad = '{"event_id":"not-a-uuid","event_type":"boot","ts":1796011200000000,"source":"server"}';
    const outcomes = await Promise.allSettled([
      t.store.insertJsonEachRow('events', rows(1000, 50), { dedupToken: 'lanes:a' }),
      t.store.insertJsonEachRow('events', bad, { dedupToken: 'lanes:bad' }),
      t.store.insertJsonEachRow('events', rows(2000, 50), { dedupToken: 'lanes:b' }),
      t.store.insertJsonEachRow('events', bad),
      t.store.insertJsonEachRow('events', rows(3000, 50)),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toMatchObject({ code: 'CONT_ERR_STORE_QUERY' });
    expect(await count()).toBe(950);
    await Promise.all([t.store.insertJsonEachRow('events', rows(4000, 10)), t.store.insertJsonEachRow('events', rows(5000, 10))]);
    expect(await count()).toBe(970);
  });

  it('takes bodies as bytes, with or without a final newline', async () => {
    await t.store.insertJsonEachRow('events', Buffer.from(rows(8000, 5)));
    await t.store.insertJsonEachRow('events', Buffer.from(rows(8100, 5) + '\n'));
    expect(await count()).toBe(980);
  });

  it("an insert's own settings (one parsing thread, no partition limit) do not outlive it", async () => {
    await t.store.insertJsonEachRow('events', rows(8200, 5));
    const [s] = await t.store.query<{ pp: number | boolean }>("SELECT getSetting('input_format_parallel_parsing') AS pp");
    expect(Number(s!.pp)).toBe(1);
    expect(await count()).toBe(985);
  });

  it('close waits for the inserts already asked for', async () => {
    const pending = [t.store.insertJsonEachRow('events', rows(6000, 100)), t.store.insertJsonEachRow('events', rows(7000, 100))];
    await t.store.close();
    await Promise.all(pending);
    const reopened = await openMigratedStore(t.config);
    try {
      expect((await reopened.query<{ c: number }>('SELECT count() AS c FROM events'))[0]!.c).toBe(1185);
    } finally {
      await reopened.close();
    }
  });
});
