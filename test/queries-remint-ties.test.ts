import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { proxyLines, reloadEvents } from './helpers/reload.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// Rows that tie to the microsecond must give the same answer whatever batch was
// written first. An ASOF join keeps one of the right-hand rows that tie (the one it
// reads first), and argMax by time alone picks by read order: a metamorphic pass
// found remint_pairs choosing the replacement of whichever initialize was written
// first, when one client minted two sessions at one µs (and session_continuity's
// recoveries built the same way).

let t: TestStore;
const T = Date.UTC(2026, 10, 1, 10) * 1000; // µs
const line = proxyLines(T, { service: 'svc-t', user_agent: 'mcp-remote/0.1.29', client_address: '10.9.0.2' });

beforeAll(async () => {
  t = await openTestStore('remint_ties');
});
afterAll(async () => {
  await t?.close();
});

const load = (batches: Array<Array<Record<string, unknown>>>) => reloadEvents(t.store, batches, 'ties');

const answers = async () => ({
  pairs: await runQuery<Record<string, unknown>>(t.store, 'remint_pairs', {}),
  continuity: await runQuery<Record<string, unknown>>(t.store, 'session_continuity', {}),
});

describe('ties to the microsecond', () => {
  it('two initializes of one client at one µs: the same replacement whichever was written first', async () => {
    const served = line(1, 0, { http_status: 200, request_session_key: 'k-a' });
    const miss = line(2, 30, { http_status: 404, request_session_key: 'k-a' });
    const mintC = line(3, 31, { http_status: 200, response_session_key: 'k-c' });
    const mintD = line(4, 31, { http_status: 200, response_session_key: 'k-d' });
    const useD = line(5, 32, { http_status: 200, request_session_key: 'k-d' });
    await load([[served, miss], [mintC], [mintD], [useD]]);
    const cFirst = await answers();
    await load([[served, miss], [mintD], [mintC], [useD]]);
    const dFirst = await answers();
    expect(cFirst.pairs).toHaveLength(1);
    expect(dFirst).toEqual(cFirst);
  });

  // (this one gave the same on the old SQL in these two orders, by how the engine read
  // them; the tie-break, the greater key, now decides it by rule)
  it('misses of two sessions of one client at one µs, then an initialize: the same stale session credited either way', async () => {
    const served = [line(1, 0, { http_status: 200, request_session_key: 'k-a' }), line(2, 1, { http_status: 200, request_session_key: 'k-b' })];
    const missA = line(3, 30, { http_status: 404, request_session_key: 'k-a' });
    const missB = line(4, 30, { http_status: 404, request_session_key: 'k-b' });
    const mint = line(5, 31, { http_status: 200, response_session_key: 'k-n' });
    await load([served, [missA], [missB], [mint]]);
    const aFirst = await answers();
    await load([served, [missB], [missA], [mint]]);
    const bFirst = await answers();
    expect(aFirst.pairs).toHaveLength(1);
    expect(bFirst).toEqual(aFirst);
  });

  it('two events of one boot or one server re-mint that disagree: the same release and mode whichever was written first (a break-it pass)', async () => {
    const server = (n: number, dt_s: number, fields: Record<string, unknown>) => ({
      event_id: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
      ts: T + dt_s * 1_000_000,
      source: 'server',
      service: 'svc-s',
      ...fields,
    });
    const first = server(11, 0, { event_type: 'boot', boot_id: 'b0', release: 'v0' });
    const bootV1 = server(12, 100, { event_type: 'boot', boot_id: 'b1', release: 'v1' });
    const bootHotfix = server(13, 101, { event_type: 'boot', boot_id: 'b1', release: 'v1-hotfix' });
    const remint = (n: number, dt_s: number, mode: string) =>
      server(n, dt_s, { event_type: 'remint', boot_id: 'b1', stale_session_key: 'k-old', replacement_session_key: 'k-new', mode, outcome: 'created' });
    const alias = remint(14, 110, 'alias');
    const inferred = remint(15, 111, 'client_reinit_inferred');
    const read = async () => ({
      restarts: await runQuery<Record<string, unknown>>(t.store, 'restarts', {}),
      pairs: await runQuery<Record<string, unknown>>(t.store, 'remint_pairs', {}),
    });
    await load([[first], [bootV1, alias], [bootHotfix, inferred]]);
    const inOrder = await read();
    await load([[first], [bootHotfix, inferred], [bootV1, alias]]);
    const reversed = await read();
    expect(inOrder.restarts).toEqual([expect.objectContaining({ boot_id: 'b1', release: 'v1' })]);
    expect(inOrder.pairs).toEqual([expect.objectContaining({ stale_session_key: 'k-old', inferred: 0, mode: 'alias', events: 2 })]);
    expect(reversed).toEqual(inOrder);
  });

  it('a refused miss whose arrival was recorded twice with two methods: the same method whichever was written first (a metamorphic pass)', async () => {
    // (a server miss on line 8's arrival, whose arrival_id line 9 records again with another event_id and method)
    const events = readFileSync(new URL('./fixtures/order/arrival-recorded-twice.jsonl', import.meta.url), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const methods = async () => (await runQuery<Record<string, unknown>>(t.store, 'refused_misses', {})).map((r) => [r.source, r.mcp_method, r.next, r.misses]);
    await load([events]);
    const together = await methods();
    await load([events.filter((_, i) => i !== 8), [events[8]!]]);
    const firstLast = await methods();
    await load([events.filter((_, i) => i !== 9), [events[9]!]]);
    const secondLast = await methods();
    expect(together.length).toBeGreaterThan(0);
    expect(firstLast).toEqual(together);
    expect(secondLast).toEqual(together);
  });
});
