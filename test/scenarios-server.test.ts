import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { buildContinuityReport } from '../reports/index.ts';
import { fixtureHash, insertEvents } from './fixtures/proxy-scenario.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// The scenarios of SCENARIOS.md that need server events (S2, S5, S9, S12, S15),
// each under its own service in one store, asserted through the named queries
// and the report.

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('scenarios_server');
});
afterAll(async () => {
  await t?.close();
});

const report = (service: string) => buildContinuityReport(t.store, { service }, { read: 0, parsed: 0, rejected: 0, skipped: 0 });
const load = (s: ServerScenario) => insertEvents(t.store, s.events);

describe('S2 — session expired by idle TTL, no restart', () => {
  beforeAll(async () => {
    const s = new ServerScenario('s2');
    s.boot(0);
    s.session('A', 1, 5);
    s.lifecycle(2460, 'A', 'expired', { cap_kind: 'none' });
    s.refused(2470, 'A', 'idle_ttl');
    s.refused(2471, 'A', 'idle_ttl');
    await load(s);
  });

  it('counts 2 refused misses with reason idle_ttl, no restart, and does not attribute them to a deploy', async () => {
    const r = await report('s2');
    expect(r.refused_misses).toMatchObject({ total: 2, sessions: 1, by_reason: { idle_ttl: 2 } });
    expect(r.restarts).toMatchObject({ total: 0, server: 0, inferred: 0 });
    const rows = await runQuery(t.store, 'refused_misses', { service: 's2' });
    expect(rows.every((row) => row.source === 'server' && row.boot === 'boot-s2-0')).toBe(true);
  });
});

describe('S5 — a replacement session is minted but never adopted', () => {
  beforeAll(async () => {
    const s = new ServerScenario('s5');
    s.boot(0);
    s.session('A', 1, 3);
    s.boot(100, 'v2');
    s.remint(110, 'A', 'B', 'alias');
    s.request(110, { sid: 'A', resolution: 'rebuilt' });
    for (let i = 1; i <= 6; i++) s.request(110 + i * 5, { sid: 'A', resolution: 'alias' });
    s.boot(200, 'v3');
    s.refused(210, 'A', 'unknown_after_boot');
    await load(s);
  });

  it('reports 1 distinct pair with 6 alias hits, the replacement orphaned', async () => {
    const pairs = await runQuery(t.store, 'remint_pairs', { service: 's5' });
    expect(pairs).toEqual([
      expect.objectContaining({
        stale_session_key: fixtureHash('A'),
        replacement_session_key: fixtureHash('B'),
        mode: 'alias',
        inferred: 0,
        events: 1,
        alias_hits: 6,
        adopted: false,
      }),
    ]);
    const r = await report('s5');
    expect(r.remint_pairs).toMatchObject({ distinct: 1, adopted: 0, orphaned: 1 });
  });

  it('after the second boot, 1 refused miss on A; 2 server restarts', async () => {
    const r = await report('s5');
    expect(r.refused_misses).toMatchObject({ total: 1, sessions: 1, by_reason: { unknown_after_boot: 1 } });
    expect(r.restarts).toMatchObject({ server: 2, inferred: 0 });
    const rows = await runQuery(t.store, 'refused_misses', { service: 's5' });
    expect(rows).toEqual([expect.objectContaining({ source: 'server', boot: 'boot-s5-200', misses: 1 })]);
  });
});

describe('S9 — the access token expires mid-conversation', () => {
  beforeAll(async () => {
    for (const variant of ['a', 'b'] as const) {
      const s = new ServerScenario(`s9${variant}`, { principal: 'user-P' });
      s.boot(0);
      s.session('A', 1, 12, 300); // tool calls for 55 min
      s.challenge(3400, 'A', 'expired_token');
      if (variant === 'a') s.request(3404, { sid: 'A' });
      else for (const at of [3410, 3420, 3430]) s.challenge(at, 'A', 'expired_token');
      await load(s);
    }
  });

  it('(a) one expired_token challenge, benign: the same session succeeded within the window', async () => {
    const r = await report('s9a');
    expect(r.auth_challenges).toMatchObject({ total: 1, expired_token: 1, by_verdict: { benign: 1 } });
  });

  it('(b) four challenges, the session lost to auth', async () => {
    const r = await report('s9b');
    expect(r.auth_challenges).toMatchObject({ total: 4, expired_token: 4 });
    expect(r.auth_challenges.by_verdict.lost).toBe(4);
    expect(r.findings.join('\n')).toMatch(/never succeeded again/);
  });
});

describe('S12 — an auth failure disguised as a tool error', () => {
  beforeAll(async () => {
    const s = new ServerScenario('s12');
    s.boot(0);
    s.session('A', 1, 2);
    for (const at of [10, 11, 12]) s.request(at, { sid: 'A', outcome: 'tool_error', errorType: 'tool_error' });
    await load(s);
  });

  it('counts 3 tool errors in the settlements, and no auth challenge', async () => {
    const rows = await runQuery(t.store, 'settlements', { service: 's12' });
    const calls = rows.find((row) => row.mcp_method === 'tools/call');
    expect(calls).toMatchObject({ arrivals: 5, settled: 5, tool_error: 3, ok: 2 });
    const r = await report('s12');
    expect(r.settlements.tool_error).toBe(3);
    expect(r.auth_challenges.total).toBe(0);
  });
});

describe('S15 — a request dies with the process', () => {
  let x = '';
  beforeAll(async () => {
    const s = new ServerScenario('s15');
    s.boot(0);
    s.session('A', 1, 3);
    x = s.request(10, { sid: 'A', settle: false });
    s.boot(14, 'v2');
    s.request(15, { sid: 'A', status: 404, outcome: 'refused' });
    await load(s);
  });

  it('attributes the unsettled arrival to the boot that ended, and excludes it from that boot’s settled share', async () => {
    expect(x).not.toBe('');
    const rows = await runQuery(t.store, 'settlements', { service: 's15' });
    const first = rows.filter((row) => row.boot_id === 'boot-s15-0');
    const second = rows.filter((row) => row.boot_id === 'boot-s15-14');
    const calls = first.find((row) => row.mcp_method === 'tools/call');
    expect(calls).toMatchObject({ boot_ended: 1, arrivals: 4, settled: 3, unsettled: 1, unsettled_at_shutdown: 1, settled_share: 0.75 });
    expect(second.reduce((n, row) => n + Number(row.unsettled_at_shutdown), 0)).toBe(0);
    const r = await report('s15');
    expect(r.settlements.unsettled_at_shutdown).toBe(1);
    expect(r.restarts).toMatchObject({ server: 1 });
  });
});
