// The named queries' narrowed forms (queries/registry.ts NARROWED_QUERIES).
// - refused_misses: where every refused miss the proxy logged was recorded by a
//   server too, its rows are the servers' alone, read without the proxy's restart
//   inference. The check (proxy_misses_alone) must count exactly the proxy misses
//   the query's own SQL keeps, so that it never narrows a query whose proxy rows
//   would have been there.
// - session_continuity: where no refused miss can be a session transition that no
//   restart gap matches, the transitions are not computed. The check
//   (unmatched_transitions) must count at least the unmatched transitions.
// Both forms must give the same rows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateEvents } from '../bench/generate-events.ts';
import { bindInternalParams, bindParams, NARROWED_QUERIES, querySql, resolveQuerySql, runQuery, withFragments } from '../queries/index.ts';
import { RETAINED_TABLES } from '../store/index.ts';
import { insertEvents, proxyEvents, T0_MICROS, type FixtureRequest } from './fixtures/proxy-scenario.ts';
import { SCENARIO_NAMES, scenarioEvents } from './fixtures/scenarios.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

type Rows = Array<Record<string, unknown>>;

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('narrowed');
});
afterAll(async () => {
  await t?.close();
});

/** Empties the store. */
async function empty(): Promise<void> {
  for (const table of RETAINED_TABLES) await t.store.command(`TRUNCATE TABLE ${table}`);
}

/** The rows of SQL text `sql` over named query `name`'s parameters `params` (internal ones resolved). */
async function rowsOf(sql: string, name: string, params: Record<string, unknown>): Promise<Rows> {
  return t.store.query(sql, await bindInternalParams(t.store, sql, bindParams(name, params)));
}
/** The count `n` a check (or any text returning one row with `n`) gives over `name`'s parameters. */
async function countOf(sql: string, name: string, params: Record<string, unknown>): Promise<number> {
  return Number((await rowsOf(sql, name, params))[0]!.n);
}

/** refused_misses by its own SQL (never narrowed). */
const ownRows = (params: Record<string, unknown>) => rowsOf(querySql('refused_misses'), 'refused_misses', params);
/** The check's count: the proxy misses no server recorded. */
const alone = (params: Record<string, unknown>) => countOf(querySql('checks/proxy_misses_alone'), 'refused_misses', params);

const proxyMisses = (rows: Rows): number => rows.filter((r) => r.source === 'proxy').reduce((n, r) => n + Number(r.misses), 0);
const key = (r: Record<string, unknown>) => JSON.stringify(Object.entries(r).sort(([a], [b]) => a.localeCompare(b)));
const canonical = (rows: Rows) => rows.map(key).sort();

/**
 * Runs refused_misses both ways over `params` and checks: the same rows, the check
 * counting the proxy misses the own SQL keeps, and the narrowed form used exactly
 * when that count is 0.
 * @returns whether runQuery narrowed it, and the rows.
 */
async function bothWays(label: string, params: Record<string, unknown>): Promise<{ narrowed: boolean; rows: Rows }> {
  const own = await ownRows(params);
  const { narrowed } = await resolveQuerySql(t.store, 'refused_misses', bindParams('refused_misses', params));
  const rows = await runQuery(t.store, 'refused_misses', params);
  expect(canonical(rows), label).toEqual(canonical(own));
  // (row order too: the narrowed SQL orders as the query does)
  expect(rows.map((r) => r.source), label).toEqual(own.map((r) => r.source));
  expect(await alone(params), `${label}: the check counts the proxy misses kept`).toBe(proxyMisses(own));
  expect(narrowed, `${label}: narrowed exactly when no proxy miss is kept`).toBe(proxyMisses(own) === 0);
  return { narrowed, rows };
}

describe('refused_misses, narrowed where the servers recorded every proxy miss', () => {
  it('gives the same rows both ways in every scenario of SCENARIOS.md, and all of them together', async () => {
    const forms = new Set<boolean>();
    for (const name of SCENARIO_NAMES) {
      await empty();
      await insertEvents(t.store, scenarioEvents(name));
      forms.add((await bothWays(name, {})).narrowed);
    }
    await empty();
    await insertEvents(t.store, SCENARIO_NAMES.flatMap((name) => scenarioEvents(name)));
    forms.add((await bothWays('all scenarios', {})).narrowed);
    // both forms were exercised
    expect([...forms].sort()).toEqual([false, true]);
  });

  describe('a generated world with both sources (each proxy 404 a server recorded)', () => {
    const T0_MS = Date.UTC(2026, 10, 3);
    beforeAll(async () => {
      await empty();
      let batch = 0;
      const world = { events: 30_000, sessions: 250, principals: 6, services: 2, bootsPerService: 4, spanS: 6 * 3600, t0Micros: T0_MS * 1000, batchRows: 3_000 };
      for (const chunk of generateEvents(world)) await t.store.insertJsonEachRow('events', chunk.body, { dedupToken: `narrowed-world:${batch++}` });
    }, 120_000);

    const iso = (s: number) => new Date(T0_MS + s * 1000).toISOString();
    const ranges: Array<[string, Record<string, unknown>]> = [
      ['the whole store', {}],
      ['hours 1.5 to 4.25', { t_from: iso(5400), t_to: iso(15_300) }],
      ['one service', { service: 'mcp-svc-1' }],
      ['the other service, from hour 2', { service: 'mcp-svc-0', t_from: iso(7200) }],
    ];

    it('is narrowed, with the same rows, over whole and cut ranges and per service', async () => {
      let serverMisses = 0;
      for (const [label, params] of ranges) {
        const { narrowed, rows } = await bothWays(label, params);
        expect(narrowed, label).toBe(true);
        serverMisses += rows.reduce((n, r) => n + Number(r.misses), 0);
      }
      expect(serverMisses).toBeGreaterThan(0);
    });

    it('runs the whole query where one proxy miss stands alone, and narrows again once a server records it (within 2 s: 1.5 s, not 2.5 s)', async () => {
      const at = T0_MS + 3 * 3600 * 1000 + 123;
      const stale = 'ffffffffffffffffffffffffffffff01';
      await insertEvents(t.store, [
        {
          event_id: '00000000-0000-8000-8000-00000000a001',
          event_type: 'proxy_access',
          ts: at * 1000,
          source: 'proxy',
          service: 'mcp-svc-1',
          http_method: 'POST',
          url_path: '/mcp',
          http_status: 404,
          request_session_key: stale,
          client_address: '10.9.9.9',
          user_agent: 'node',
        },
      ]);
      const before = await bothWays('one proxy miss alone', {});
      expect(before.narrowed).toBe(false);
      expect(proxyMisses(before.rows)).toBe(1);
      // a server's miss on the same session 2.5 s later is another miss: still alone
      const serverMiss = (id: string, offsetUs: number) => ({
        event_id: id,
        event_type: 'session_refused',
        ts: at * 1000 + offsetUs,
        source: 'server',
        service: 'mcp-svc-1',
        boot_id: 'late-boot',
        session_key: stale,
        reason: 'unknown_after_boot',
        http_status: 404,
      });
      await insertEvents(t.store, [serverMiss('00000000-0000-8000-8000-00000000a002', 2_500_000)]);
      expect((await bothWays('a server miss 2.5 s later', {})).narrowed).toBe(false);
      await insertEvents(t.store, [serverMiss('00000000-0000-8000-8000-00000000a003', 1_500_000)]);
      const after = await bothWays('a server miss 1.5 s later', {});
      expect(after.narrowed).toBe(true);
      expect(proxyMisses(after.rows)).toBe(0);
    });
  });
  it('keeps a proxy miss that only a later copy of a server miss (same event_id, another time) lies near: the query counts the earliest copy, and so does the check', async () => {
    const day = Date.UTC(2026, 11, 2) * 1000;
    const stale = 'ffffffffffffffffffffffffffffff02';
    const serverMiss = { event_id: '00000000-0000-8000-8000-00000000b001', event_type: 'session_refused', source: 'server', service: 'svc', environment: 'prod', boot_id: 'b1', reason: 'unknown_after_boot', http_status: 404 };
    const proxyMiss = { event_id: '00000000-0000-8000-8000-00000000b002', event_type: 'proxy_access', source: 'proxy', service: 'svc', environment: 'prod', http_method: 'POST', url_path: '/mcp', http_status: 404, request_session_key: stale, session_key: stale, protocol_version: '2025-11-25', client_address: '10.0.0.1', user_agent: 'node' };
    // the copies in one day, and across midnight (two partitions); the first copy on another session too
    for (const [first, firstKey, later] of [
      [day + 3_600e6, stale, day + 7_200e6],
      [day + 3_600e6, 'ffffffffffffffffffffffffffffff03', day + 7_200e6],
      [day - 1e6, stale, day + 1e6],
    ] as const) {
      await empty();
      await insertEvents(t.store, [{ ...proxyMiss, ts: later + 500_000 }]);
      await insertEvents(t.store, [{ ...serverMiss, ts: first, session_key: firstKey }]);
      await insertEvents(t.store, [{ ...serverMiss, ts: later, session_key: stale }]);
      for (const params of [{}, { service: 'svc' }, { environment: 'prod' }, { mcp_paths: ['/mcp'] }]) {
        const { narrowed, rows } = await bothWays(`copies at ${first} and ${later}: ${JSON.stringify(params)}`, params);
        expect(narrowed).toBe(false);
        expect(proxyMisses(rows)).toBe(1);
      }
    }
  });
});

describe('session_continuity, narrowed where every proxy session transition is matched to a restart gap', () => {
  /** session_continuity by its own SQL (never narrowed). */
  const ownContinuity = (params: Record<string, unknown>) => rowsOf(querySql('session_continuity'), 'session_continuity', params);
  /** session_continuity by its narrowed SQL, whatever the check says. */
  const narrowedContinuity = (params: Record<string, unknown>) => {
    const { sql, substitutes } = NARROWED_QUERIES.session_continuity!;
    return rowsOf(querySql(sql, substitutes), 'session_continuity', params);
  };
  /** The transitions no gap matches (lib/proxy_transitions.sql), counted directly. */
  const unmatched = (params: Record<string, unknown>) =>
    countOf(withFragments('-- requires: proxy_transitions\nSELECT countIf(NOT matched) AS n FROM proxy_transitions'), 'session_continuity', params);
  const check = (params: Record<string, unknown>) => countOf(querySql('checks/unmatched_transitions'), 'session_continuity', params);

  /**
   * Runs session_continuity both ways over `params` and checks: the same rows (and
   * order), the check counting at least the unmatched transitions, and the narrowed
   * form used exactly when the check counts none.
   */
  async function continuityBothWays(label: string, params: Record<string, unknown>): Promise<{ narrowed: boolean; rows: Rows; checked: number; unmatched: number }> {
    const own = await ownContinuity(params);
    const { narrowed } = await resolveQuerySql(t.store, 'session_continuity', bindParams('session_continuity', params));
    const rows = await runQuery(t.store, 'session_continuity', params);
    expect(rows, label).toEqual(own);
    const [checked, direct] = [await check(params), await unmatched(params)];
    expect(checked, `${label}: the check counts every unmatched transition`).toBeGreaterThanOrEqual(direct);
    expect(narrowed, `${label}: narrowed exactly when the check counts none`).toBe(checked === 0);
    return { narrowed, rows, checked, unmatched: direct };
  }

  it('gives the same rows both ways in every scenario of SCENARIOS.md, and all of them together', async () => {
    const forms = new Set<boolean>();
    for (const name of SCENARIO_NAMES) {
      await empty();
      await insertEvents(t.store, scenarioEvents(name));
      for (const params of [{}, { t_from: new Date(T0_MICROS / 1000 + 90_000).toISOString() }]) forms.add((await continuityBothWays(`${name} ${JSON.stringify(params)}`, params)).narrowed);
    }
    await empty();
    await insertEvents(t.store, SCENARIO_NAMES.flatMap((name) => scenarioEvents(name)));
    forms.add((await continuityBothWays('all scenarios', {})).narrowed);
    expect([...forms].sort()).toEqual([false, true]);
  });

  it('gives the same rows both ways over a generated world with both sources, whole and cut ranges and per service', async () => {
    await empty();
    let batch = 0;
    const t0Ms = Date.UTC(2026, 10, 3);
    const world = { events: 30_000, sessions: 250, principals: 6, services: 2, bootsPerService: 4, spanS: 6 * 3600, t0Micros: t0Ms * 1000, batchRows: 3_000 };
    for (const chunk of generateEvents(world)) await t.store.insertJsonEachRow('events', chunk.body, { dedupToken: `narrowed-continuity:${batch++}` });
    const iso = (s: number) => new Date(t0Ms + s * 1000).toISOString();
    // (this world's mcp-svc-1 has sessions refused with no 502 between their last 2xx
    // and the refusal, which the check counts exactly; mcp-svc-0 from hour 2 has none)
    const forms: boolean[] = [];
    let survived = 0;
    for (const params of [{}, { t_from: iso(5400), t_to: iso(15_300) }, { service: 'mcp-svc-1' }, { service: 'mcp-svc-0', t_from: iso(7200) }]) {
      const { narrowed, rows, checked, unmatched } = await continuityBothWays(JSON.stringify(params), params);
      expect(checked, JSON.stringify(params)).toBe(unmatched);
      forms.push(narrowed);
      survived += rows.reduce((n, r) => n + Number(r.survived_1), 0);
    }
    expect(forms).toEqual([false, false, false, true]);
    expect(survived).toBeGreaterThan(0);
  }, 120_000);

  describe('a restart the proxy saw only as refused sessions (no 502), and the same with a 502 in the gap', () => {
    const svc = (reqs: FixtureRequest[]) => proxyEvents(reqs).map((e) => ({ ...e, service: 'svc' }));
    // two sessions served, then both refused 100 s in: a restart with no 502 (one
    // cluster of transitions, from 25 s to 100 s); a third session served before and
    // after it, which survived it
    const base: FixtureRequest[] = [
      { at: 0, status: 200, minted: 'n-1' },
      { at: 10, status: 200, sid: 'n-1' },
      { at: 20, status: 200, sid: 'n-1' },
      { at: 5, status: 200, minted: 'n-2', ip: '10.0.0.2' },
      { at: 25, status: 200, sid: 'n-2', ip: '10.0.0.2' },
      { at: 100, status: 404, sid: 'n-1' },
      { at: 101, status: 404, sid: 'n-2', ip: '10.0.0.2' },
      { at: 1, status: 200, minted: 'n-3', ip: '10.0.0.3' },
      { at: 2, status: 200, sid: 'n-3', ip: '10.0.0.3' },
      { at: 200, status: 200, sid: 'n-3', ip: '10.0.0.3' },
    ];
    const ranges: Array<Record<string, unknown>> = [{}, { t_from: new Date(T0_MICROS / 1000 - 500).toISOString(), t_to: new Date(T0_MICROS / 1000 + 600_000).toISOString() }, { service: 'svc' }];
    const survived = (rows: Rows) => rows.reduce((n, r) => n + Number(r.survived_1), 0);

    it('runs the whole query where a transition is unmatched: its restart is a span the narrowed form would miss', async () => {
      await empty();
      await insertEvents(t.store, svc(base));
      for (const params of ranges) {
        const { narrowed, rows, checked, unmatched } = await continuityBothWays(`no 502 ${JSON.stringify(params)}`, params);
        expect({ narrowed, unmatched }).toEqual({ narrowed: false, unmatched: 2 });
        expect(checked).toBe(2);
        expect(survived(rows)).toBe(1);
        // the narrowed text alone would have dropped the restart, and the survivor
        expect(survived(await narrowedContinuity(params))).toBe(0);
      }
    });

    it('narrows once a 502 lies between each 2xx and its refusal (the gap is the span)', async () => {
      await empty();
      await insertEvents(t.store, svc([...base, { at: 50, status: 502, proxyGenerated: true, ip: '10.0.0.9' }]));
      for (const params of ranges) {
        const { narrowed, rows, unmatched } = await continuityBothWays(`a 502 ${JSON.stringify(params)}`, params);
        expect({ narrowed, unmatched }).toEqual({ narrowed: true, unmatched: 0 });
        expect(survived(rows)).toBe(1);
      }
    });

    it('counts each refused miss line, two of one session at the same microsecond too (each is a transition of its own)', async () => {
      await empty();
      // n-1's 404 logged twice at 100 s (two lines, two event ids): two unmatched
      // transitions, which the check once counted as one (by session and time)
      await insertEvents(t.store, svc([...base, { at: 100, status: 404, sid: 'n-1' }]));
      for (const params of ranges) {
        const { narrowed, checked, unmatched } = await continuityBothWays(`a miss logged twice ${JSON.stringify(params)}`, params);
        expect({ narrowed, unmatched, checked }).toEqual({ narrowed: false, unmatched: 3, checked: 3 });
      }
    });

    it('runs the whole query where a refused session got a 2xx again in the same hour (the check cannot tell it from an unmatched one)', async () => {
      await empty();
      await insertEvents(t.store, svc([...base, { at: 50, status: 502, proxyGenerated: true, ip: '10.0.0.9' }, { at: 150, status: 200, sid: 'n-1' }]));
      // (read from the rollup: one hour with a 2xx before the 502 and one after the
      // refusal; read from the lines, under a filter or a range that cuts the hour,
      // each 2xx is its own and the check counts nothing)
      for (const params of ranges) {
        const { narrowed, checked, unmatched } = await continuityBothWays(`a 2xx after the refusal ${JSON.stringify(params)}`, params);
        const fromRollup = Object.keys(params).length === 0;
        expect({ narrowed, unmatched, checked }).toEqual({ narrowed: !fromRollup, unmatched: 0, checked: fromRollup ? 1 : 0 });
      }
    });
  });
});
