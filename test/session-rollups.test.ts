import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../core/config.ts';
import { bindParams, resolveEndpointPaths, runQuery } from '../queries/index.ts';
import { applyRetention, loadMigrations, migrate, openStore, type Store } from '../store/index.ts';
import { fixtureHash, proxyEvents, T0_MICROS } from './fixtures/proxy-scenario.ts';
import { SCENARIO_NAMES, scenarioEvents } from './fixtures/scenarios.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';

// session_continuity reads whole hours from the per-session rollups of
// schema/migrations/0008 (proxy_sessions, server_sessions) and the hours its range
// cuts from the rows. Whatever the split, the answer must be the one the rows give.
// The store starts as migrations 0001-0007 left it, with every scenario's events
// in it, so the migration's backfill is what the rollups hold at first.

let store: Store;
let dir: string;
const body = (rows: Array<Record<string, unknown>>) => rows.map((r) => JSON.stringify(r)).join('\n');
const hour = (h: number, m = 0) => `2026-11-30 ${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:00`;
const count = async (table: string) => (await store.query<{ c: number }>(`SELECT count() AS c FROM ${table}`))[0]!.c;
const continuity = (params: Record<string, unknown> = {}) => runQuery<Record<string, unknown>>(store, 'session_continuity', params);

// Every scenario, shifted to start 20 to 50 minutes after 04:00 (they last up to an
// hour), so that sessions cross the 05:00 boundary and all events lie in
// 04:20-05:50: the range 04:10-05:55 then covers no whole hour (the rows only) and
// the default range covers 04:00-06:00 whole (the rollups only).
const events: Array<Record<string, unknown>> = SCENARIO_NAMES.flatMap((name, i) =>
  scenarioEvents(name).map((e) => ({ ...e, ts: (e.ts as number) + (1200 + (i % 4) * 600) * 1e6 })),
);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'continuity-rollups-'));
  store = await openStore(loadConfig({ CONTINUITY_HASH_KEY: '00112233445566778899aabbccddeeff' }, { dataDir: dir }));
  await migrate(store, { migrations: loadMigrations().filter((m) => m.version <= 7) });
  await store.insertJsonEachRow('events', body(events), { dedupToken: 'scenarios' });
});
afterAll(async () => {
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the session rollups (migration 0008)', () => {
  it('are filled from an existing store’s events when migrated, and by the views from then on', async () => {
    expect(Math.min(...events.map((e) => e.ts as number))).toBeGreaterThanOrEqual(T0_MICROS + 1200e6);
    // (only 0008: later migrations are not this test's)
    expect(await migrate(store, { migrations: loadMigrations().filter((m) => m.version <= 8) })).toEqual([8]);
    expect(await count('proxy_sessions')).toBeGreaterThan(0);
    expect(await count('server_sessions')).toBeGreaterThan(0);
    // the query reads tables of later migrations too (the signal rows of 0012)
    expect((await migrate(store)).at(-1)).toBe(loadMigrations().at(-1)!.version);
    // 0013 aggregated the rows into server_sessions a second time and merged them: one row per key
    expect(await store.query('SELECT count() AS n, uniqExact(ts, service, environment, boot_id, h) AS keys FROM server_sessions')).toEqual([
      { n: await count('server_sessions'), keys: await count('server_sessions') },
    ]);
    // the whole-hour answer (from the backfilled rollups) is the rows' answer
    const rows = await continuity({ t_from: hour(4, 10), t_to: hour(5, 55) });
    expect(rows.length).toBeGreaterThan(1);
    expect(await continuity()).toEqual(rows);
    // a new session written after the migration reaches the rollup through the view
    const before = await count('proxy_sessions');
    const line = { ...events.find((e) => e.event_type === 'proxy_access' && e.request_session_key)!, event_id: '00000000-0000-8000-8000-000000000001', request_session_key: 'a-new-session' };
    await store.insertJsonEachRow('events', body([line]), { dedupToken: 'new-line' });
    expect(await count('proxy_sessions')).toBe(before + 1);
  });

  it('give the rows’ answer whatever hours the range cuts', async () => {
    const raw = await continuity({ t_from: hour(4, 10), t_to: hour(5, 55) });
    const totals = Object.fromEntries(
      ['sessions', 'minted_unused', 'stale', 'recovered', 'unrecovered_stale', 'abandoned_after_failure', 'survived_1'].map((k) => [
        k,
        raw.reduce((n, r) => n + Number(r[k]), 0),
      ]),
    );
    // the scenarios exercise every count this compares
    for (const [k, n] of Object.entries(totals)) expect(n, k).toBeGreaterThan(0);
    for (const [from, to] of [
      [hour(4), hour(6)], // both hours whole: rollups only
      ['1960-01-01 00:00:00', '2199-01-01 00:00:00'], // beyond the rollup's hours (DateTime: 1970-2106)
      [hour(4, 10), hour(6)], // 04:10-05:00 from the rows, 05:00-06:00 whole
      [hour(4), hour(5, 55)], // 04:00-05:00 whole, 05:00-05:55 from the rows
    ]) {
      expect(await continuity({ t_from: from, t_to: to }), `${from} - ${to}`).toEqual(raw);
    }
    // a window that ends inside the data: whole 04:00-05:00 and the rows of 05:00-05:20,
    // against the rows alone (04:10-05:20 holds no whole hour)
    expect(await continuity({ t_from: hour(4), t_to: hour(5, 20) })).toEqual(await continuity({ t_from: hour(4, 10), t_to: hour(5, 20) }));
    // a service filter reads the proxy rows (labels: see below); the server rollup still serves it
    for (const service of ['s8', 's9b']) {
      expect(await continuity({ service }), service).toEqual(await continuity({ service, t_from: hour(4, 10), t_to: hour(5, 55) }));
    }
  });

  it('hold each session’s latest arrival (0013), and refused_misses gives the rows’ answer whatever hours the range cuts', async () => {
    // the backfill (and the view since) against the rows, per hour and session
    const fromRows = await store.query<{ rows: unknown[] }>(
      `SELECT arraySort(groupArray((toString(h), service, boot_id, hour, last_t))) AS rows FROM (SELECT skh AS h, service, toString(boot_id) AS boot_id,
       toStartOfHour(ts) AS hour, max(t) AS last_t FROM server_requests WHERE event_type = 'arrival' AND skh != 0 GROUP BY hour, service, environment, boot_id, h)`,
    );
    const fromRollup = await store.query<{ rows: unknown[] }>(
      `SELECT arraySort(groupArray((toString(h), service, boot_id, hour, last_t))) AS rows FROM (SELECT h, service, boot_id, ts AS hour,
       max(last_arrival) AS last_t FROM server_sessions WHERE h != 0 GROUP BY hour, service, environment, boot_id, h HAVING last_t > 0)`,
    );
    expect(fromRows[0]!.rows.length).toBeGreaterThan(0);
    expect(fromRollup).toEqual(fromRows);
    // a miss at 04:58 whose session arrives again at 05:03, in the next hour, and one
    // at 05:30 whose session never does
    const s = new ServerScenario('last-arrival');
    s.boot(600);
    s.session('la-1', 3000, 3);
    s.refused(3480, 'la-1', 'unknown_after_boot');
    s.request(3780, { sid: 'la-1', status: 404, outcome: 'refused', resolution: 'refused' });
    s.session('la-2', 5000, 3);
    s.refused(5400, 'la-2', 'unknown_after_boot');
    await store.insertJsonEachRow('events', body(s.events), { dedupToken: 'last-arrival' });
    const misses = (params: Record<string, unknown>) =>
      runQuery<Record<string, unknown>>(store, 'refused_misses', { service: 'last-arrival', ...params }).then((rows) => rows.map((r) => [r.next, Number(r.misses)]));
    const raw = await misses({ t_from: hour(4, 10), t_to: hour(5, 55) });
    expect(raw).toEqual([
      ['nothing', 1],
      ['same_session_again', 1],
    ]);
    for (const [from, to] of [
      [hour(4), hour(6)], // both hours whole: the rollup only
      [hour(4, 10), hour(6)], // 04:10-05:00 from the rows, 05:00-06:00 whole
      [hour(4), hour(5, 55)], // 04:00-05:00 whole, 05:00-05:55 from the rows
    ]) {
      expect(await misses({ t_from: from, t_to: to }), `${from} - ${to}`).toEqual(raw);
    }
    // a range that ends before the session arrived again: nothing came next in it
    expect(await misses({ t_from: hour(4), t_to: hour(5) })).toEqual([['nothing', 1]]);
  });

  it('remint_pairs: a replacement is adopted by the rollups’ whole hours as by the rows, whatever hours the range cuts', async () => {
    // re-mints at 04:57:5x: one replacement the server sees at 05:03 (the next hour),
    // one only the proxy sees, at 05:04, and one never used; and two the proxy infers
    // (a refused miss, then the same client's initialize) at 04:58, one of them used
    // at 05:05
    const s = new ServerScenario('remint-cut');
    s.boot(600);
    for (const [i, sid] of ['rc-a', 'rc-b', 'rc-c'].entries()) {
      s.session(sid, 3000 + i * 10, 2);
      s.remint(3470 + i, sid, `${sid}2`);
    }
    s.request(3780, { sid: 'rc-a2' });
    const inferred = (sid: string, ip: string, at: number) => [
      { at: at - 400, status: 200, minted: sid, ip },
      { at: at - 399, status: 200, sid, ip },
      { at, status: 404, sid, ip },
      { at: at + 1, status: 200, minted: `${sid}2`, ip },
    ];
    const proxy = proxyEvents([
      { at: 3840, status: 200, sid: 'rc-b2' },
      ...inferred('rc-d', '10.7.7.4', 3480),
      ...inferred('rc-e', '10.7.7.5', 3485),
      { at: 3900, status: 200, sid: 'rc-e2', ip: '10.7.7.5' },
    ]).map((e) => ({ ...e, service: 'remint-cut' }));
    await store.insertJsonEachRow('events', body([...s.events, ...proxy]), { dedupToken: 'remint-cut' });
    const pairs = (params: Record<string, unknown>) =>
      runQuery<Record<string, unknown>>(store, 'remint_pairs', params).then((rows) =>
        rows.map((r) => [r.stale_session_key, r.replacement_session_key, r.inferred, r.adopted, r.events, r.alias_hits]),
      );
    const raw = await pairs({ t_from: hour(4, 10), t_to: hour(5, 55) });
    const ours = (rows: unknown[][]) =>
      ['rc-a2', 'rc-b2', 'rc-c2', 'rc-d2', 'rc-e2'].map((k) => rows.filter((r) => r[1] === fixtureHash(k)).map((r) => `${r[2]} ${r[3]}`).join());
    expect(ours(raw)).toEqual(['0 true', '0 true', '0 false', '1 false', '1 true']);
    for (const [from, to] of [
      [hour(4), hour(6)], // both hours whole: the rollups only
      ['1960-01-01 00:00:00', '2199-01-01 00:00:00'], // beyond the rollups' hours
      [hour(4, 10), hour(6)], // 04:10-05:00 from the rows, 05:00-06:00 whole
      [hour(4), hour(5, 55)], // 04:00-05:00 whole, 05:00-05:55 from the rows
    ]) {
      expect(await pairs({ t_from: from, t_to: to }), `${from} - ${to}`).toEqual(raw);
    }
    // a range that ends before the replacements were used: neither is adopted in it,
    // whether 04:00-05:00 comes from the rollups or (04:10-05:00) from the rows
    for (const from of [hour(4), hour(4, 10)]) {
      expect(ours(await pairs({ t_from: from, t_to: hour(5) })), from).toEqual(['0 false', '0 false', '0 false', '1 false', '1 false']);
    }
  });

  it('proxy_paths (0014): the endpoint’s paths from the whole hours are the rows’, whatever hours the range cuts, with mcp_paths or not', async () => {
    // a path only a protocol-version header marks, at 05:10; a path with lines but no
    // session evidence, at 04:40; a discovery probe with a session id, at 05:20
    const base = events.find((e) => e.event_type === 'proxy_access')!;
    const at = (h: number, m: number) => Date.parse(`${hour(h, m).replace(' ', 'T')}Z`) * 1000;
    const extra = [
      { ...base, event_id: '00000000-0000-8000-8000-00000000a001', ts: at(5, 10), url_path: '/mcp-v2', request_session_key: '', response_session_key: '', protocol_version: '2025-06-18' },
      { ...base, event_id: '00000000-0000-8000-8000-00000000a002', ts: at(4, 40), url_path: '/health', request_session_key: '', response_session_key: '', protocol_version: '' },
      { ...base, event_id: '00000000-0000-8000-8000-00000000a003', ts: at(5, 20), url_path: '/.well-known/oauth-protected-resource', request_session_key: 'k' },
    ];
    await store.insertJsonEachRow('events', body(extra), { dedupToken: 'paths' });
    // the answer of the lines alone (the resolution before 0014)
    const fromLines = async (p: Record<string, string | string[]>) =>
      (
        await store.query<{ paths: string[] }>(
          `SELECT arraySort(groupUniqArray(url_path)) AS paths FROM proxy_access
           WHERE ts >= {t_from:DateTime64(6, 'UTC')} AND ts < {t_to:DateTime64(6, 'UTC')} AND ({service:String} = '' OR service = {service:String})
             AND NOT discovery AND if(empty({mcp_paths:Array(String)}), marks_endpoint, has({mcp_paths:Array(String)}, url_path))`,
          { service: '', mcp_paths: [], ...p },
        )
      )[0]!.paths;
    const resolved = async (p: Record<string, string | string[]>) => (await resolveEndpointPaths(store, bindParams('restarts', p))).sort();
    const ranges = [
      [hour(4), hour(6)], // whole hours: the rollup only
      [hour(4, 10), hour(5, 55)], // no whole hour: the lines only
      [hour(4, 10), hour(6)],
      [hour(4), hour(5, 15)], // 05:10 in, 05:20 out
      [hour(4, 45), hour(5)], // 04:40 out
      ['1960-01-01 00:00:00', '2199-01-01 00:00:00'],
    ];
    const inferred = await resolved({ t_from: hour(4), t_to: hour(6) });
    expect(inferred).toContain('/mcp-v2');
    expect(inferred).not.toContain('/health');
    expect(inferred.some((p) => p.startsWith('/.well-known/'))).toBe(false);
    for (const mcp_paths of [[], ['/health', '/mcp-v2', '/.well-known/oauth-protected-resource', '/nowhere']]) {
      for (const [t_from, t_to] of ranges) {
        const p = { t_from: t_from!, t_to: t_to!, mcp_paths };
        expect(await resolved(p), JSON.stringify(p)).toEqual(await fromLines({ t_from: t_from!, t_to: t_to!, mcp_paths }));
      }
      // a service filter reads the lines
      for (const service of ['s8', 's9b']) expect(await resolved({ service, mcp_paths }), service).toEqual(await fromLines({ service, t_from: hour(0), t_to: hour(23), mcp_paths }));
    }
  });

  it('do not count a retried batch or a copy of an event twice', async () => {
    // a batch written after the migration (scenario s8 an hour later, new event ids)
    const later = scenarioEvents('s8').map((e) => ({ ...e, ts: (e.ts as number) + 3 * 3600e6 }));
    await store.insertJsonEachRow('events', body(later), { dedupToken: 'later' });
    const expected = await continuity();
    const proxyRows = await count('proxy_sessions');
    const serverRows = await count('server_sessions');
    // the same batch again, same token: dropped, in the rollups too
    await store.insertJsonEachRow('events', body(later), { dedupToken: 'later' });
    expect(await count('proxy_sessions')).toBe(proxyRows);
    expect(await count('server_sessions')).toBe(serverRows);
    // every event again in another batch (another token): written again, and every
    // rollup column is a minimum, maximum, existence or set, so nothing changes
    // (merges stopped while the rows are counted: a merge right after the insert
    // folds the copies into the rows they repeat)
    await store.command('SYSTEM STOP MERGES proxy_sessions');
    try {
      await store.insertJsonEachRow('events', body([...events, ...later]), { dedupToken: 'scenarios-again' });
      expect(await count('proxy_sessions')).toBeGreaterThan(proxyRows);
    } finally {
      await store.command('SYSTEM START MERGES proxy_sessions');
    }
    expect(await continuity()).toEqual(expected);
    expect(await continuity({ t_from: hour(4, 10), t_to: hour(9, 55) })).toEqual(expected);
  });

  it('count a line re-imported under another --service only under its newest label', async () => {
    const all = await continuity();
    const s13 = events.filter((e) => e.service === 's13');
    const before = await continuity({ service: 's13', t_to: hour(6) });
    expect(before.length).toBeGreaterThan(0);
    await store.insertJsonEachRow('events', body(s13.map((e) => ({ ...e, service: 's13-relabelled' }))), { dedupToken: 'relabel' });
    expect(await continuity({ service: 's13-relabelled', t_to: hour(6) })).toEqual(before);
    // nothing is left under the old label, whole hours or cut
    expect(await continuity({ service: 's13', t_to: hour(6) })).toEqual([]);
    expect(await continuity({ service: 's13', t_from: hour(4, 10), t_to: hour(5, 55) })).toEqual([]);
    // unfiltered, a label changes nothing
    expect(await continuity()).toEqual(all);
  });

  it('expire with the events', async () => {
    await applyRetention(store, 30);
    const rows = await store.query<{ name: string; q: string }>(
      `SELECT name, create_table_query AS q FROM system.tables WHERE database = currentDatabase() AND name IN ('proxy_sessions', 'server_sessions', 'proxy_paths')`,
    );
    expect(rows.map((r) => r.name).sort()).toEqual(['proxy_paths', 'proxy_sessions', 'server_sessions']);
    for (const r of rows) expect(r.q, r.name).toMatch(/TTL toDateTime\(ts\) \+ toIntervalDay\(30\)/);
  });
});
