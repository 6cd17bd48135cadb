import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateEvents } from '../bench/generate-events.ts';
import { bindInternalParams, bindParams, withFragments } from '../queries/index.ts';
import { RETAINED_TABLES } from '../store/index.ts';
import { insertEvents, proxyEvents, type FixtureRequest } from './fixtures/proxy-scenario.ts';
import { SCENARIO_NAMES, scenarioEvents } from './fixtures/scenarios.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// proxy_refused_prev (queries/sql/lib) gives each proxy refused miss its session's
// previous upstream-served request by an ASOF join, for proxy_transitions; it must
// give exactly the prev_t and prev_ok of proxy_refused, which finds them in each
// refused session's sorted lines (and also gives the other neighbours).

type Row = { service: string; skh: string; t: number; prev_t: number; prev_ok: number };

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('refused_prev');
});
afterAll(async () => {
  await t?.close();
});

async function empty(): Promise<void> {
  for (const table of RETAINED_TABLES) await t.store.command(`TRUNCATE TABLE ${table}`);
}

const columns = 'service, toString(skh) AS skh, t, prev_t, toUInt8(prev_ok) AS prev_ok';
/** Each miss with its previous request, by fragment `fragment`, in one order. */
async function misses(fragment: string, params: Record<string, unknown> = {}): Promise<Row[]> {
  const sql = withFragments(`-- requires: ${fragment}\nSELECT ${columns} FROM ${fragment} ORDER BY service, skh, t, prev_t, prev_ok`);
  return t.store.query<Row>(sql, await bindInternalParams(t.store, sql, bindParams('restarts', params)));
}

/** Checks both fragments agree over `params`; returns how many misses had a previous 2xx. */
async function agree(label: string, params: Record<string, unknown> = {}): Promise<number> {
  const [full, prev] = [await misses('proxy_refused', params), await misses('proxy_refused_prev', params)];
  expect(prev, label).toEqual(full);
  return full.filter((r) => Number(r.prev_ok) === 1).length;
}

describe('proxy_refused_prev', () => {
  it('gives proxy_refused’s previous request for every miss of every scenario, and of all of them together', async () => {
    let withPrevOk = 0;
    for (const name of SCENARIO_NAMES) {
      await empty();
      await insertEvents(t.store, scenarioEvents(name));
      withPrevOk += await agree(name);
    }
    await empty();
    await insertEvents(t.store, SCENARIO_NAMES.flatMap((name) => scenarioEvents(name)));
    withPrevOk += await agree('all scenarios');
    expect(withPrevOk).toBeGreaterThan(0);
  });

  it('agrees over a generated world, whole and cut ranges and per service', async () => {
    await empty();
    const t0Ms = Date.UTC(2026, 10, 3);
    const world = { events: 30_000, sessions: 250, principals: 6, services: 2, bootsPerService: 4, spanS: 6 * 3600, t0Micros: t0Ms * 1000, batchRows: 3_000 };
    let batch = 0;
    for (const chunk of generateEvents(world)) await t.store.insertJsonEachRow('events', chunk.body, { dedupToken: `refused-prev:${batch++}` });
    const iso = (s: number) => new Date(t0Ms + s * 1000).toISOString();
    let withPrevOk = 0;
    for (const params of [{}, { t_from: iso(5400), t_to: iso(15_300) }, { service: 'mcp-svc-1' }]) withPrevOk += await agree(JSON.stringify(params), params);
    expect(withPrevOk).toBeGreaterThan(0);
  }, 120_000);

  it('takes the latest earlier microsecond, a 2xx there if any, and never a line of the miss’s own microsecond or a proxy-generated 5xx', async () => {
    await empty();
    const us = (n: number) => n / 1e6; // fixture times are seconds
    const requests: FixtureRequest[] = [
      // a: a 500 and a 200 at one µs, then a miss: the previous request was a 2xx
      { at: us(0), sid: 'a', status: 500 },
      { at: us(0), sid: 'a', status: 200 },
      { at: us(7), sid: 'a', status: 404 },
      // b: a 200, then a 502 the proxy made, then two misses at one µs with a 200 at that µs too
      { at: us(0), sid: 'b', status: 200 },
      { at: us(3), sid: 'b', status: 502, proxyGenerated: true },
      { at: us(9), sid: 'b', status: 404 },
      { at: us(9), sid: 'b', status: 404 },
      { at: us(9), sid: 'b', status: 200 },
      // c: a miss with nothing before it, then a miss after a 500 (the first miss was served too)
      { at: us(1), sid: 'c', status: 404 },
      { at: us(2), sid: 'c', status: 500 },
      { at: us(4), sid: 'c', status: 404 },
    ];
    await insertEvents(t.store, proxyEvents(requests));
    await agree('ties');
    // (t - prev_t in µs, or none, and prev_ok; sorted, as rows sort by the session's hash)
    const prev = (await misses('proxy_refused_prev')).map((r) => `${r.prev_t === 0 ? 'none' : Math.round((r.t - r.prev_t) * 1e6)},${r.prev_ok}`);
    expect(prev.sort()).toEqual(['2,0', '7,1', '9,1', '9,1', 'none,0'].sort());
  });

  it('drops a miss whose line was delivered again as no miss (the signal rows keep the old copy)', async () => {
    await empty();
    const first = proxyEvents([
      { at: 0, sid: 'k', status: 200 },
      { at: 5, sid: 'k', status: 404 },
      { at: 6, sid: 'k', status: 502, proxyGenerated: true },
    ]);
    const again = { ...proxyEvents([{ at: 5, sid: 'k', status: 200 }])[0]!, event_id: first[1]!.event_id };
    await t.store.insertJsonEachRow('events', first.map((e) => JSON.stringify(e)).join('\n'), { dedupToken: 'refused-prev-first' });
    await t.store.insertJsonEachRow('events', JSON.stringify(again), { dedupToken: 'refused-prev-again' });
    await agree('delivered again');
    expect(await misses('proxy_refused_prev')).toEqual([]);
  });
});
