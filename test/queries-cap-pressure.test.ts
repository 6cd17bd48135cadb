import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { querySql, runQuery } from '../queries/index.ts';
import { fixtureHash, insertEvents, T0_MICROS } from './fixtures/proxy-scenario.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// cap_pressure (DESIGN §4): per principal, latest counts against caps, principals
// at cap, evictions by cap kind, evictions of victims active within 60 s, and the
// global-cap headroom — against the embedded engine, one service per case.

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('cap_pressure');
});
afterAll(async () => {
  await t?.close();
});

type Row = Record<string, unknown>;
const run = (params: Record<string, unknown>) => runQuery<Row>(t.store, 'cap_pressure', params);
const iso = (at: number) => new Date((T0_MICROS + at * 1e6) / 1000).toISOString();
const storeTime = (at: number) => iso(at).replace('T', ' ').replace('Z', '000');

/**
 * Principal P fills its 8 live transports and 16 durable records; recovery of one
 * chat evicts another chat's records: two live-cap evictions (one victim idle 5 s,
 * one idle 10 min), one durable-cap eviction of a victim with a request in flight.
 * Principal Q stays well below its caps, and a global-cap eviction hits Q's
 * oldest session. Two instances report global counts; the fuller one decides.
 */
describe('cap_pressure', () => {
  beforeAll(async () => {
    const a = new ServerScenario('cap', { principal: 'user-P' });
    a.boot(0);
    const caps = { live_cap: 8, durable_cap: 16, global_cap: 256 };
    for (let i = 1; i <= 8; i++) a.lifecycle(i, `P${i}`, 'created', { ...caps, live_count: i, durable_count: 8 + i, global_count: 100 + i });
    a.lifecycle(20, 'P1', 'evicted', { ...caps, cap_kind: 'live', live_count: 8, durable_count: 16, global_count: 108, victim_idle_ms: 5_000 });
    a.lifecycle(21, 'P2', 'evicted', { ...caps, cap_kind: 'live', live_count: 8, durable_count: 16, global_count: 108, victim_idle_ms: 600_000 });
    a.lifecycle(22, 'P3', 'evicted', { ...caps, cap_kind: 'durable', live_count: 8, durable_count: 16, global_count: 108, victim_idle_ms: 900_000, victim_in_flight: 1 });
    // an expiry is not an eviction; counts without caps do not replace the latest reported ones
    a.lifecycle(23, 'P4', 'expired', { cap_kind: 'none' });
    a.capSnapshot(30, { ...caps, live_count: 8, durable_count: 16, global_count: 120, instance: 'i-1' });

    const q = new ServerScenario('cap', { principal: 'user-Q' });
    q.boot(0);
    q.capSnapshot(5, { ...caps, live_count: 2, durable_count: 3, global_count: 110, instance: 'i-1' });
    q.lifecycle(25, 'Q1', 'evicted', { ...caps, cap_kind: 'global', live_count: 1, durable_count: 3, global_count: 255, victim_idle_ms: 1_000, instance: 'i-2' });
    q.capSnapshot(40, { ...caps, live_count: 1, durable_count: 3, global_count: 250, instance: 'i-2' });

    // another service, and events of other types, must not leak in
    const other = new ServerScenario('cap-other', { principal: 'user-P' });
    other.boot(0);
    other.capSnapshot(5, { live_cap: 8, live_count: 8, global_cap: 10, global_count: 1 });
    other.session('X', 1, 2);
    await insertEvents(t.store, [...a.events, ...q.events, ...other.events]);
  });

  it('gives each principal its latest counts, at cap or not, evictions by kind and of active victims, and the global headroom', async () => {
    const rows = await run({ service: 'cap' });
    const common = { service: 'cap', principals_at_cap: 1, global_count: 250, global_cap: 256, global_headroom: 6 };
    expect(rows).toEqual([
      {
        ...common,
        principal_key: fixtureHash('user-P'),
        last_at: storeTime(30),
        live_count: 8,
        live_cap: 8,
        durable_count: 16,
        durable_cap: 16,
        at_cap: true,
        evictions: 3,
        evicted_live: 2,
        evicted_durable: 1,
        evicted_global: 0,
        evicted_active: 2,
      },
      {
        ...common,
        principal_key: fixtureHash('user-Q'),
        last_at: storeTime(40),
        live_count: 1,
        live_cap: 8,
        durable_count: 3,
        durable_cap: 16,
        at_cap: false,
        evictions: 1,
        evicted_live: 0,
        evicted_durable: 0,
        evicted_global: 1,
        evicted_active: 1,
      },
    ]);
  });

  it('takes the active window as a parameter', async () => {
    const rows = await run({ service: 'cap', active_s: 1 });
    const p = rows.find((r) => r.principal_key === fixtureHash('user-P'));
    // only the victim with a request in flight counts as active within 1 s
    expect(p).toMatchObject({ evictions: 3, evicted_active: 1 });
    expect(rows.find((r) => r.principal_key === fixtureHash('user-Q'))).toMatchObject({ evicted_active: 0 });
  });

  it('reports the latest counts within the time range', async () => {
    const rows = await run({ service: 'cap', t_to: iso(10) });
    expect(rows.find((r) => r.principal_key === fixtureHash('user-P'))).toMatchObject({ live_count: 8, durable_count: 16, at_cap: true, evictions: 0 });
    expect(rows.find((r) => r.principal_key === fixtureHash('user-Q'))).toMatchObject({ live_count: 2, at_cap: false, evictions: 0 });
    // before 10 s only instance i-1 had reported: P's created events (108) and Q's snapshot (110) — the latest is 110
    expect(rows[0]).toMatchObject({ global_count: 110, global_headroom: 146 });
  });

  it('counts a duplicated event once (same event_id in two batches)', async () => {
    const d = new ServerScenario('cap-dup', { principal: 'user-D' });
    d.lifecycle(50, 'D1', 'evicted', { cap_kind: 'live', live_count: 4, live_cap: 4, victim_idle_ms: 10 });
    await insertEvents(t.store, d.events);
    await insertEvents(t.store, d.events);
    const rows = await run({ service: 'cap-dup' });
    expect(rows).toEqual([
      expect.objectContaining({ evictions: 1, evicted_live: 1, evicted_active: 1, at_cap: true, principals_at_cap: 1, global_count: null, global_cap: null, global_headroom: null }),
    ]);
  });

  it('returns no rows for a service without cap events or with only an expiry, and every service without a filter', async () => {
    expect(await run({ service: 'nobody' })).toEqual([]);
    const e = new ServerScenario('cap-expiry', { principal: 'user-E' });
    e.lifecycle(60, 'E1', 'expired', { cap_kind: 'none' });
    await insertEvents(t.store, e.events);
    expect(await run({ service: 'cap-expiry' })).toEqual([]);
    const all = await run({});
    expect(new Set(all.map((r) => r.service))).toEqual(new Set(['cap', 'cap-other', 'cap-dup']));
    expect(all.find((r) => r.service === 'cap-other')).toMatchObject({ at_cap: true, evictions: 0, global_headroom: 9 });
  });

  it('reads only the cap event types, in one scan (the sorting key starts with event_type)', () => {
    const sql = querySql('cap_pressure');
    expect(sql.match(/\bFROM events\b/g)).toHaveLength(1);
    expect(sql).toMatch(/WHERE event_type IN \('cap_snapshot', 'session_lifecycle'\)/);
    expect(sql).not.toMatch(/proxy_requests|proxy_restarts|server_boots|server_refused/);
  });

  // last: a service of its own, which the "every service" case above does not expect
  it('counts a victim idle exactly active_s as not active, to the microsecond', async () => {
    // 2.007 * 1000 is 2007.0000000000002 in float ms: the victim idle 2007 ms was counted active
    const e = new ServerScenario('cap-edge', { principal: 'user-E' });
    e.lifecycle(70, 'E1', 'evicted', { cap_kind: 'live', live_count: 4, live_cap: 4, victim_idle_ms: 2007 });
    e.lifecycle(71, 'E2', 'evicted', { cap_kind: 'live', live_count: 4, live_cap: 4, victim_idle_ms: 2006.999 });
    await insertEvents(t.store, e.events);
    expect(await run({ service: 'cap-edge', active_s: 2.007 })).toEqual([expect.objectContaining({ evictions: 2, evicted_active: 1 })]);
  });

  it('picks the same report of two in one microsecond whatever batch came first, count and cap from one event (a metamorphic pass)', async () => {
    // a lifecycle (3 of 8 live, global 10) and a snapshot (8 of 8, global 200) of one
    // principal at one µs: the row came from the batch written last, each column on its
    // own (the two instances' tie mixed count and cap); now the greater event_id wins
    const ts = T0_MICROS + 90e6;
    const report = (service: string, id: string, type: 'session_lifecycle' | 'cap_snapshot', live: number, global: number, instance = 'i-1') => ({
      event_id: `00000000-0000-8000-8000-${id}`, event_type: type, ts, source: 'server', service, instance, boot_id: 'b', principal_key: fixtureHash('user-T'),
      ...(type === 'session_lifecycle' ? { action: 'created', cap_kind: 'none' } : {}),
      live_count: live, live_cap: 8, durable_count: live * 2, durable_cap: 16, global_count: global, global_cap: 256,
    });
    await insertEvents(t.store, [report('cap-tie-a', '000000000001', 'session_lifecycle', 3, 10)]);
    await insertEvents(t.store, [report('cap-tie-a', '000000000002', 'cap_snapshot', 8, 200)]);
    await insertEvents(t.store, [report('cap-tie-b', '000000000012', 'cap_snapshot', 8, 200)]);
    await insertEvents(t.store, [report('cap-tie-b', '000000000011', 'session_lifecycle', 3, 10)]);
    const expected = { live_count: 8, live_cap: 8, durable_count: 16, at_cap: true, principals_at_cap: 1, global_count: 200, global_headroom: 56 };
    expect(await run({ service: 'cap-tie-a' })).toEqual([expect.objectContaining(expected)]);
    expect(await run({ service: 'cap-tie-b' })).toEqual([expect.objectContaining(expected)]);
    // two instances with the same headroom: count and cap of one of them, whichever came first
    await insertEvents(t.store, [report('cap-tie-c', '000000000021', 'cap_snapshot', 1, 250, 'i-2')]);
    await insertEvents(t.store, [{ ...report('cap-tie-c', '000000000022', 'cap_snapshot', 1, 200, 'i-1'), global_cap: 206 }]);
    expect(await run({ service: 'cap-tie-c' })).toEqual([expect.objectContaining({ global_count: 200, global_cap: 206, global_headroom: 6 })]);
  });
});
