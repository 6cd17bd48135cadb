import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { buildContinuityReport } from '../reports/index.ts';
import { fixtureHash, insertEvents, proxyEvents, repeat, T0_MICROS, type FixtureRequest } from './fixtures/proxy-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// The scenarios of SCENARIOS.md that proxy evidence alone can decide. Each
// scenario is stored under its own `service` so one store serves them all and
// every query is scoped to one scenario.

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('scenarios_proxy');
});
afterAll(async () => {
  await t?.close();
});

async function load(service: string, requests: FixtureRequest[]): Promise<void> {
  await insertEvents(
    t.store,
    proxyEvents(requests).map((e) => ({ ...e, service })),
  );
}
const report = (service: string) => buildContinuityReport(t.store, { service }, { read: 0, parsed: 0, rejected: 0, skipped: 0 });

/** A healthy session: initialize mints `sid`, then initialized, tools/list, `calls` tool calls. */
function session(sid: string, from: number, calls: number, extra: Partial<FixtureRequest> = {}): FixtureRequest[] {
  return [
    { at: from, status: 200, minted: sid, ...extra },
    { at: from + 0.02, status: 202, sid, ...extra },
    { at: from + 0.04, status: 200, sid, minted: sid, ...extra },
    ...repeat(calls, from + 1, 1, (at) => ({ at, status: 200, sid, minted: sid, ...extra })),
  ];
}

describe('S1 — stale session after a restart; the client never re-initializes', () => {
  beforeAll(() => load('s1', [...session('A', 0, 3), ...repeat(5, 60, 1, (at) => ({ at, status: 404, sid: 'A' }))]));

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
});

describe('S3 — a bridge client keeps the stale id', () => {
  const bridge = { ua: 'mcp-remote/0.1.29', ip: '10.0.0.5' };
  const firstParty = { ua: 'claude-code/2.0.14', ip: '10.0.0.9' };
  beforeAll(() =>
    load('s3', [
      ...session('A1', 0, 3, bridge),
      ...session('A2', 0.5, 3, bridge),
      ...session('C', 0.7, 3, firstParty),
      ...repeat(4, 60, 1, (at) => ({ at, status: 404, sid: 'A1', ...bridge })),
      ...repeat(4, 60.3, 1, (at) => ({ at, status: 404, sid: 'A2', ...bridge })),
      { at: 60.5, status: 404, sid: 'C', ...firstParty },
      ...session('C2', 60.9, 2, firstParty),
    ]),
  );

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
  const browser = { ua: 'Mozilla/5.0', ip: '203.0.113.7', origin: 'https://app.example' };
  beforeAll(() =>
    load(
      's6',
      ['B', 'C', 'D', 'E'].flatMap((sid, i) => [
        { at: i * 5, status: 200, minted: sid, ...browser },
        { at: i * 5 + 0.1, status: 400, ...browser },
      ]),
    ),
  );

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
  const p = { principal: 'user-P', ip: '10.1.0.1', ua: 'claude-desktop/1.0' };
  const other = { principal: 'user-Q', ip: '10.1.0.2', ua: 'claude-desktop/1.0' };
  beforeAll(() =>
    load('s8', [
      ...session('A', 0, 10, p),
      ...session('Q1', 0.5, 10, other),
      { at: 30, status: 502, sid: 'A', proxyGenerated: true, ...p },
      ...repeat(120, 40, 60, (at) => ({ at, status: 200, sid: 'Q1', minted: 'Q1', ...other })),
    ]),
  );

  it('counts session A once as abandoned after failure; the 502 gap is one restart', async () => {
    const r = await report('s8');
    expect(r.sessions.abandoned_after_failure).toBe(1);
    expect(r.restarts.inferred).toBe(1);
    expect(r.proxy_errors.proxy_generated).toBe(1);
    expect(r.sessions.unrecovered_stale).toBe(0);
  });
});

describe('S11 — OAuth loop: no 2xx ever', () => {
  const client = { ua: 'some-agent/3.1', ip: '198.51.100.4' };
  beforeAll(() =>
    load(
      's11',
      [0, 10, 20].flatMap((at) => [
        { at, status: 401, wwwAuthenticate: 'Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource"', ...client },
        { at: at + 1, status: 401, credential: true, wwwAuthenticate: 'Bearer error="invalid_token"', ...client },
      ]),
    ),
  );

  it('reports 3 missing_credential and 3 invalid_token, all judged an authentication loop', async () => {
    const r = await report('s11');
    expect(r.auth_challenges).toMatchObject({ missing_credential: 3, invalid_token: 3, total: 6 });
    expect(r.auth_challenges.by_verdict).toEqual({ loop: 6 });
    expect(r.findings.join('\n')).toMatch(/authentication loops/);
  });
});

describe('S13 — proxy 502s during a deploy, then stale-session 404s', () => {
  const c = (n: number) => ({ ip: `10.2.0.${n}`, ua: 'node' });
  beforeAll(() =>
    load('s13', [
      ...session('A', 0, 5, c(1)),
      ...session('B', 0.2, 5, c(2)),
      ...session('C', 0.4, 5, c(3)),
      // upstream down from t=10 to t=17: 9 proxy-generated 502s, 6 POST and 3 GET
      ...repeat(6, 10, 1.2, (at, i) => ({ at, status: 502, sid: ['A', 'B', 'C'][i % 3]!, proxyGenerated: true, ...c((i % 3) + 1) })),
      ...repeat(3, 10.5, 2.5, (at, i) => ({ at, method: 'GET' as const, status: 502, sid: ['A', 'B', 'C'][i]!, proxyGenerated: true, ...c(i + 1) })),
      { at: 17.2, status: 404, sid: 'A', ...c(1) },
      { at: 17.3, status: 404, sid: 'B', ...c(2) },
      { at: 17.4, status: 404, sid: 'C', ...c(3) },
      ...session('A2', 17.6, 2, c(1)),
      ...session('B2', 18.0, 2, c(2)),
    ]),
  );

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
