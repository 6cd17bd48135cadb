import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { buildContinuityReport } from '../reports/index.ts';
import { fixtureHash, insertEvents } from './fixtures/proxy-scenario.ts';
import { scenarioEvents, type ScenarioName } from './fixtures/scenarios.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// The scenarios of SCENARIOS.md that need server events (S2, S5, S9, S12, S15),
// built in test/fixtures/scenarios.ts, each under its own service in one store,
// asserted through the named queries and the report.

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('scenarios_server');
});
afterAll(async () => {
  await t?.close();
});

const report = (service: string) => buildContinuityReport(t.store, { service }, { read: 0, parsed: 0, rejected: 0, skipped: 0 });
const load = (name: ScenarioName) => insertEvents(t.store, scenarioEvents(name));

describe('S2 — session expired by idle TTL, no restart', () => {
  beforeAll(() => load('s2'));

  it('counts 2 refused misses with reason idle_ttl, no restart, and does not attribute them to a deploy', async () => {
    const r = await report('s2');
    expect(r.refused_misses).toMatchObject({ total: 2, sessions: 1, by_reason: { idle_ttl: 2 } });
    expect(r.restarts).toMatchObject({ total: 0, server: 0, inferred: 0 });
    const rows = await runQuery(t.store, 'refused_misses', { service: 's2' });
    expect(rows.every((row) => row.source === 'server' && row.boot === 'boot-s2-0')).toBe(true);
  });
});

describe('S5 — a replacement session is minted but never adopted', () => {
  beforeAll(() => load('s5'));

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
    await load('s9a');
    await load('s9b');
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
  beforeAll(() => load('s12'));

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
  let events: Array<Record<string, unknown>> = [];
  beforeAll(async () => {
    events = scenarioEvents('s15');
    await insertEvents(t.store, events);
  });

  it('attributes the unsettled arrival to the boot that ended, and excludes it from that boot’s settled share', async () => {
    // The one arrival loaded without a settlement: the tool call at t=10, cut off by the boot at t=14.
    const settledIds = new Set(events.filter((e) => e.event_type === 'settlement').map((e) => e.arrival_id));
    expect(events.filter((e) => e.event_type === 'arrival' && !settledIds.has(e.arrival_id))).toEqual([
      expect.objectContaining({ boot_id: 'boot-s15-0', mcp_method: 'tools/call' }),
    ]);
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
