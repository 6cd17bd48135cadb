import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isoMicros } from '../core/time.ts';
import { runQuery } from '../queries/index.ts';
import { RETAINED_TABLES } from '../store/index.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// `settlements` reads arrival_outcomes (schema/migrations/0010), where a view pairs
// each arrival with its settlement within a batch. Across batches the pairing is
// the read's: rows of one arrival in the same hour merge under FINAL, a settlement
// in a later hour is joined by arrival id. Whatever the batches, the counts must be
// those of the events: each case delivers one arrival and its settlement split,
// reordered or repeated across batches.

const H = 1_796_014_800_000_000; // 2026-11-30 05:00:00 UTC, µs (an hour's start)

let t: TestStore;
let batch = 0;
beforeAll(async () => {
  t = await openTestStore('arrival_outcomes');
});
afterAll(async () => {
  await t?.close();
});
beforeEach(async () => {
  for (const table of RETAINED_TABLES) await t.store.command(`TRUNCATE TABLE ${table}`);
  // each batch stays a part of its own, as before a background merge: the read must
  // combine them itself
  await t.store.command('SYSTEM STOP MERGES arrival_outcomes');
});

const arrival = (id: string, us: number) => ({
  event_id: `00000000-0000-7000-8000-${id.padStart(12, '0')}`,
  event_type: 'arrival', ts: us, source: 'server', service: 'svc', boot_id: 'boot-1',
  arrival_id: `arrival-${id}`, http_method: 'POST', mcp_method: 'tools/call',
});
const settlement = (id: string, us: number, durationMs: number, outcome = 'ok') => ({
  event_id: `00000000-0000-7000-9000-${id.padStart(12, '0')}`,
  event_type: 'settlement', ts: us, source: 'server', service: 'svc', boot_id: 'boot-1',
  arrival_id: `arrival-${id}`, http_status: 200, outcome, duration_ms: durationMs,
});
/** Each argument is one batch (its own insert and deduplication token). */
async function deliver(...batches: Array<Array<Record<string, unknown>>>): Promise<void> {
  for (const rows of batches) {
    batch += 1;
    await t.store.insertJsonEachRow('events', rows.map((r) => JSON.stringify(r)).join('\n'), { dedupToken: `batch-${batch}` });
  }
}
/** The settlements row of `svc` over [from, to): arrivals, settled, ok, p50 (ms). */
async function settled(from: number, to: number, service = 'svc') {
  const rows = await runQuery<Record<string, unknown>>(t.store, 'settlements', { t_from: isoMicros(from), t_to: isoMicros(to), service });
  return rows.map((r) => ({ arrivals: Number(r.arrivals), settled: Number(r.settled), ok: Number(r.ok), p50_ms: Number(r.p50_ms) }));
}

describe('settlements over arrivals and settlements delivered in different batches', () => {
  it('pairs them in one hour, the service filter applied after the merge', async () => {
    await deliver([arrival('1', H + 10e6)], [settlement('1', H + 10.2e6, 200)]);
    expect(await settled(H, H + 3600e6)).toEqual([{ arrivals: 1, settled: 1, ok: 1, p50_ms: 200 }]);
  });

  it('pairs them across an hour boundary, in either order of delivery', async () => {
    await deliver([arrival('1', H - 0.1e6)], [settlement('1', H + 0.1e6, 200)]);
    await deliver([settlement('2', H + 0.2e6, 300)], [arrival('2', H - 0.05e6)]);
    expect(await settled(H - 3600e6, H)).toEqual([{ arrivals: 2, settled: 2, ok: 2, p50_ms: 250 }]);
  });

  it('counts a pair delivered twice once, and a settlement delivered again in a later hour once', async () => {
    const pair = [arrival('1', H + 10e6), settlement('1', H + 10.5e6, 500)];
    await deliver(pair, pair, [settlement('1', H + 10.5e6, 500)]);
    await deliver([arrival('2', H - 1e6)], [settlement('2', H + 1e6, 2000)], [settlement('2', H + 1e6, 2000)]);
    expect(await settled(H - 3600e6, H + 3600e6)).toEqual([{ arrivals: 2, settled: 2, ok: 2, p50_ms: 1250 }]);
  });

  it('leaves an arrival unsettled when its settlement lands an hour or more after the range', async () => {
    // the first range ends 1 ms after arrival 1, and its settlement lands exactly an hour after that end
    await deliver([arrival('1', H + 10e6)], [settlement('1', H + 10e6 + 3600e6 + 1000, 3_600_001)]);
    await deliver([arrival('2', H + 20e6)], [settlement('2', H + 20e6 + 3600e6, 3_600_000)]);
    expect(await settled(H, H + 10e6 + 1000)).toEqual([{ arrivals: 1, settled: 0, ok: 0, p50_ms: 0 }]);
    expect(await settled(H, H + 20e6 + 1000)).toEqual([{ arrivals: 2, settled: 2, ok: 2, p50_ms: 3_600_000.5 }]);
  });

  it('takes the first settlement of an arrival settled in two batches of different hours', async () => {
    await deliver([arrival('1', H - 2e6)], [settlement('1', H - 1e6, 1000, 'cancelled')]);
    await deliver([{ ...settlement('1', H + 1e6, 3000, 'ok'), event_id: '00000000-0000-7000-a000-000000000001' }]);
    expect(await settled(H - 3600e6, H)).toEqual([{ arrivals: 1, settled: 1, ok: 0, p50_ms: 1000 }]);
  });

  it('takes the first settlement of an arrival settled twice in one batch or in two batches of one hour', async () => {
    await deliver([arrival('1', H + 1e6), settlement('1', H + 1.1e6, 100, 'cancelled'), { ...settlement('1', H + 6e6, 5000, 'ok'), event_id: '00000000-0000-7000-a000-000000000001' }]);
    await deliver([arrival('2', H + 2e6), { ...settlement('2', H + 7e6, 5000, 'jsonrpc_error'), event_id: '00000000-0000-7000-a000-000000000002' }], [settlement('2', H + 2.1e6, 100, 'cancelled')]);
    expect(await settled(H, H + 3600e6)).toEqual([{ arrivals: 2, settled: 2, ok: 0, p50_ms: 100 }]);
  });

  it('keeps an arrival in its own hour when its settlement is stamped earlier, in the hour before', async () => {
    // a clock stepped back: the settlement 1 s before the hour, its arrival 1 s after;
    // the arrival is delivered again alone
    await deliver([arrival('1', H + 1e6), settlement('1', H - 1e6, 0)], [arrival('1', H + 1e6)]);
    expect(await settled(H, H + 3600e6)).toEqual([{ arrivals: 1, settled: 0, ok: 0, p50_ms: 0 }]);
    expect(await settled(H - 3600e6, H + 3600e6)).toEqual([{ arrivals: 1, settled: 1, ok: 1, p50_ms: 0 }]);
  });
});
