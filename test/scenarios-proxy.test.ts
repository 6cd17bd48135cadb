import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { buildContinuityReport } from '../reports/index.ts';
import { fixtureHash, insertEvents, proxyEvents, T0_MICROS } from './fixtures/proxy-scenario.ts';
import { scenarioEvents, type ScenarioName } from './fixtures/scenarios.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// The scenarios of SCENARIOS.md that proxy evidence alone can decide, built in
// test/fixtures/scenarios.ts. Each scenario is stored under its own `service` so
// one store serves them all and every query is scoped to one scenario.

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('scenarios_proxy');
});
afterAll(async () => {
  await t?.close();
});

const load = (name: ScenarioName) => insertEvents(t.store, scenarioEvents(name));
const report = (service: string) => buildContinuityReport(t.store, { service }, { read: 0, parsed: 0, rejected: 0, skipped: 0 });

describe('S1 — stale session after a restart; the client never re-initializes', () => {
  beforeAll(() => load('s1'));

  it('finds 1 restart, 5 refused misses (unknown_after_boot) on 1 session, 0 pairs, 1 unrecovered, abandoned', async () => {
    const r = await report('s1');
    expect(r.restarts.inferred).toBe(1);
    expect(r.restarts.list[0]).toMatchObject({ evidence: 'session_refusals', proxy_5xx: 0 });
    expect(r.refused_misses).toMatchObject({ total: 5, sessions: 1, by_reason: { unknown_after_boot: 5 } });
    expect(r.remint_pairs.distinct).toBe(0);
    expect(r.sessions.unrecovered_stale).toBe(1);
    expect(r.sessions.abandoned_after_failure).toBe(1);
  });

  it('attributes the misses to the boot after the restart and says the session kept sending the id', async () => {
    const rows = await runQuery(t.store, 'refused_misses', { service: 's1' });
    expect(rows).toEqual([
      expect.objectContaining({ source: 'proxy', boot: '1', reason: 'unknown_after_boot', http_status: 404, http_method: 'POST', next: 'same_session_again', misses: 4 }),
      expect.objectContaining({ source: 'proxy', boot: '1', reason: 'unknown_after_boot', http_status: 404, http_method: 'POST', next: 'nothing', misses: 1 }),
    ]);
  });

  it('gives the misses the same reason when the range starts after the session’s 2xx (its hours are read from the rollup)', async () => {
    // the 2xx are at 0–3 s, the misses at 60–64 s: a range from 30 s holds only the misses
    const rows = await runQuery(t.store, 'refused_misses', { service: 's1', t_from: '2026-11-30 04:00:30' });
    expect(rows.reduce((n, r) => n + Number(r.misses), 0)).toBe(5);
    expect(rows.every((r) => r.reason === 'unknown_after_boot')).toBe(true);
    // a range that starts between the misses: the session's 2xx are still found
    const late = await runQuery(t.store, 'refused_misses', { service: 's1', t_from: '2026-11-30 04:01:02' });
    expect(late.reduce((n, r) => n + Number(r.misses), 0)).toBe(3);
    expect(late.every((r) => r.reason === 'unknown_after_boot')).toBe(true);
  });
});

describe('S3 — a bridge client keeps the stale id', () => {
  beforeAll(() => load('s3'));

  it('counts 2 unrecovered sessions, both from the mcp-remote family, and C recovered through an adopted pair', async () => {
    const r = await report('s3');
    expect(r.sessions.unrecovered_stale).toBe(2);
    const byFamily = Object.fromEntries(r.sessions.by_ua_family.map((row) => [row.ua_family, row]));
    expect(byFamily['mcp-remote']).toMatchObject({ unrecovered_stale: 2 });
    expect(byFamily['claude-code']).toMatchObject({ unrecovered_stale: 0, recovered: 1 });
    expect(r.remint_pairs).toMatchObject({ distinct: 1, adopted: 1, orphaned: 0 });
    const pairs = await runQuery(t.store, 'remint_pairs', { service: 's3' });
    expect(pairs).toEqual([
      expect.objectContaining({ stale_session_key: fixtureHash('C'), replacement_session_key: fixtureHash('C2'), inferred: 1, adopted: true }),
    ]);
  });
});

describe('S6 — the browser never sends the session id back', () => {
  beforeAll(() => load('s6'));

  it('finds 4 sessions minted and never used, names the origin, and infers no restart', async () => {
    const r = await report('s6');
    expect(r.sessions.minted_unused).toBe(4);
    expect(r.restarts.inferred).toBe(0);
    expect(r.refused_misses.total).toBe(0);
    const row = r.sessions.by_ua_family.find((x) => x.origin === 'https://app.example');
    expect(row).toMatchObject({ minted_unused: 4 });
    expect(r.findings.join('\n')).toMatch(/minted but never sent back by the client \(origin https:\/\/app\.example\)/);
  });
});

describe('S8 — tools silently vanish after one failure', () => {
  beforeAll(() => load('s8'));

  it('counts session A once as abandoned after failure; the 502 gap is one restart', async () => {
    const r = await report('s8');
    expect(r.sessions.abandoned_after_failure).toBe(1);
    expect(r.restarts.inferred).toBe(1);
    expect(r.proxy_errors.proxy_generated).toBe(1);
    expect(r.sessions.unrecovered_stale).toBe(0);
  });
});

describe('S11 — OAuth loop: no 2xx ever', () => {
  beforeAll(() => load('s11'));

  it('reports 3 missing_credential and 3 invalid_token, all judged an authentication loop', async () => {
    const r = await report('s11');
    expect(r.auth_challenges).toMatchObject({ missing_credential: 3, invalid_token: 3, total: 6 });
    expect(r.auth_challenges.by_verdict).toEqual({ loop: 6 });
    expect(r.findings.join('\n')).toMatch(/authentication loops/);
  });
});

describe('S13 — proxy 502s during a deploy, then stale-session 404s', () => {
  beforeAll(() => load('s13'));

  it('finds 1 restart with a ~7 s gap holding 9 proxy 5xx, 3 refused misses, 2 adopted pairs, 1 unrecovered', async () => {
    const r = await report('s13');
    expect(r.restarts.inferred).toBe(1);
    const [restart] = r.restarts.list;
    expect(restart).toMatchObject({ evidence: 'proxy_5xx_gap+session_refusals', proxy_5xx: 9, proxy_5xx_post: 6, proxy_5xx_get: 3, sessions_refused: 3 });
    expect(Number(restart!.downtime_s)).toBeGreaterThan(6.5);
    expect(Number(restart!.downtime_s)).toBeLessThan(8.5);
    expect(r.proxy_errors.proxy_generated).toBe(9);
    expect(r.refused_misses).toMatchObject({ total: 3, sessions: 3 });
    expect(r.remint_pairs).toMatchObject({ distinct: 2, adopted: 2 });
    expect(r.sessions.unrecovered_stale).toBe(1);
  });
});

describe('query parameters', () => {
  it('scopes by time range: nothing before the scenarios start', async () => {
    const rows = await runQuery(t.store, 'restarts', { t_to: new Date(T0_MICROS / 1000).toISOString() });
    expect(rows).toEqual([]);
  });
});

describe('a replacement after misses on two sessions of one client', () => {
  // misses on A at 10 s, on B at 12 s, on A again at 14 s; an initialize at 15 s mints C:
  // C replaces the session of the latest miss before it, A (the answer once depended on
  // which of A's two misses the engine happened to pick)
  it('is credited to the session of the latest miss before it, whatever the range', async () => {
    const c = { ip: '10.8.0.1', ua: 'node' };
    await insertEvents(
      t.store,
      proxyEvents([
        { at: 0, status: 200, minted: 'tie-A', ...c },
        { at: 1, status: 200, sid: 'tie-A', ...c },
        { at: 2, status: 200, minted: 'tie-B', ...c },
        { at: 3, status: 200, sid: 'tie-B', ...c },
        { at: 10, status: 404, sid: 'tie-A', ...c },
        { at: 12, status: 404, sid: 'tie-B', ...c },
        { at: 14, status: 404, sid: 'tie-A', ...c },
        { at: 15, status: 200, minted: 'tie-C', ...c },
        { at: 16, status: 200, sid: 'tie-C', ...c },
      ]).map((e) => ({ ...e, service: 'tie' })),
    );
    for (const t_from of ['1970-01-01 00:00:00', '2026-11-30 04:00:05']) {
      const pairs = await runQuery(t.store, 'remint_pairs', { service: 'tie', t_from });
      expect(pairs, t_from).toEqual([expect.objectContaining({ stale_session_key: fixtureHash('tie-A'), replacement_session_key: fixtureHash('tie-C'), adopted: true })]);
      const [sessions] = await runQuery(t.store, 'session_continuity', { service: 'tie', t_from });
      expect(sessions, t_from).toMatchObject({ stale: 2, recovered: 1, unrecovered_stale: 1 });
    }
  });
});
