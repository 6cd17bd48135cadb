import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyRetention, migrate, RETAINED_TABLES } from '../store/index.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// The tables the named queries read besides `events` (schema/migrations/0006 on)
// are filled at insert time by materialized views. They must hold exactly what
// `events` holds: a batch the events table drops as a retry is not passed on, a
// duplicate delivered in another batch collapses on event_id, and the derived
// columns follow DESIGN §4's classes.

let t: TestStore;
const T0 = 1_796_011_200_000_000; // 2026-11-30 00:00:00 UTC, µs
let n = 0;
function access(fields: Record<string, unknown>): Record<string, unknown> {
  n += 1;
  return {
    event_id: `00000000-0000-8000-8000-${String(n).padStart(12, '0')}`,
    event_type: 'proxy_access',
    ts: T0 + n * 1000,
    source: 'proxy',
    service: 'svc',
    http_method: 'POST',
    url_path: '/mcp',
    client_address: '10.0.0.1',
    user_agent: 'node/20 mcp-client',
    ...fields,
  };
}
const body = (rows: Record<string, unknown>[]) => rows.map((r) => JSON.stringify(r)).join('\n');
const rawCount = async () => (await t.store.query<{ c: number }>('SELECT count() AS c FROM proxy_access'))[0]!.c;
const finalCount = async () => (await t.store.query<{ c: number }>('SELECT count() AS c FROM proxy_access FINAL'))[0]!.c;

beforeAll(async () => {
  t = await openTestStore('derived');
});
afterAll(async () => {
  await t?.close();
});

describe('proxy_access (the proxy lines, as the queries read them)', () => {
  it('derives each line’s class, client and hashed keys', async () => {
    const rows = [
      access({ response_session_key: 'k1', http_status: 200, attrs: { 'http.origin': 'https://claude.ai' } }),
      access({ request_session_key: 'k1', http_status: 404 }),
      access({ request_session_key: 'k1', http_status: 502, proxy_generated: true, upstream_error: 'connection_refused' }),
      access({ http_method: 'GET', url_path: '/.well-known/oauth-protected-resource', http_status: 401 }),
      access({ event_type: 'boot', source: 'server' }),
    ];
    await t.store.insertJsonEachRow('events', body(rows), { dedupToken: 'derive' });
    const got = await t.store.query<Record<string, unknown>>(
      `SELECT http_status, init, ok, refused, pg, discovery, marks_endpoint, client, ua_family, origin,
              skh = reinterpretAsUInt128(sipHash128('k1')) AS sk_hashed, rkh = reinterpretAsUInt128(sipHash128('k1')) AS rk_hashed,
              skh = 0 AS no_sk, t = toUnixTimestamp64Micro(ts) / 1e6 AS t_is_ts
       FROM proxy_access ORDER BY ts`,
    );
    expect(got).toEqual([
      { http_status: 200, init: true, ok: true, refused: false, pg: false, discovery: false, marks_endpoint: true, client: '10.0.0.1 node/20 mcp-client', ua_family: 'node', origin: 'https://claude.ai', sk_hashed: 0, rk_hashed: 1, no_sk: 1, t_is_ts: 1 },
      { http_status: 404, init: false, ok: false, refused: true, pg: false, discovery: false, marks_endpoint: true, client: '10.0.0.1 node/20 mcp-client', ua_family: 'node', origin: '', sk_hashed: 1, rk_hashed: 0, no_sk: 0, t_is_ts: 1 },
      { http_status: 502, init: false, ok: false, refused: false, pg: true, discovery: false, marks_endpoint: true, client: '10.0.0.1 node/20 mcp-client', ua_family: 'node', origin: '', sk_hashed: 1, rk_hashed: 0, no_sk: 0, t_is_ts: 1 },
      { http_status: 401, init: false, ok: false, refused: false, pg: false, discovery: true, marks_endpoint: false, client: '10.0.0.1 node/20 mcp-client', ua_family: 'node', origin: '', sk_hashed: 0, rk_hashed: 0, no_sk: 1, t_is_ts: 1 },
    ]);
  });

  it('a retried batch (same token) is not passed on; a duplicate in another batch collapses under FINAL', async () => {
    for (const table of RETAINED_TABLES) await t.store.command(`TRUNCATE TABLE ${table}`);
    const rows = [access({ http_status: 200, request_session_key: 'k2' }), access({ http_status: 200, request_session_key: 'k2' })];
    await t.store.insertJsonEachRow('events', body(rows), { dedupToken: 'batch-1' });
    await t.store.insertJsonEachRow('events', body(rows), { dedupToken: 'batch-1' });
    expect(await rawCount()).toBe(2);
    // the first row again, in a batch of its own (e.g. a collector's retry)
    await t.store.insertJsonEachRow('events', body([rows[0]!]), { dedupToken: 'batch-2' });
    expect(await rawCount()).toBe(3);
    expect(await finalCount()).toBe(2);
  });

  it('follows the events retention', async () => {
    await applyRetention(t.store, 30);
    const [row] = await t.store.query<{ q: string }>(`SELECT create_table_query AS q FROM system.tables WHERE database = currentDatabase() AND name = 'proxy_access'`);
    expect(row!.q).toMatch(/TTL toDateTime\(ts\) \+ toIntervalDay\(30\)/);
    await applyRetention(t.store, 90);
  });
});

describe('server_requests (the servers’ request records, as the queries read them)', () => {
  const server = (fields: Record<string, unknown>) => access({ source: 'server', url_path: '', client_address: '', boot_id: 'boot-1', principal_key: 'p1', ...fields });
  it('holds arrivals, settlements and refused misses with their class, client and hashed ids; a retried batch once', async () => {
    for (const table of RETAINED_TABLES) await t.store.command(`TRUNCATE TABLE ${table}`);
    const rows = [
      server({ event_type: 'arrival', arrival_id: 'a1', mcp_method: 'initialize' }),
      server({ event_type: 'settlement', arrival_id: 'a1', outcome: 'ok', http_status: 200, minted_session_key: 'k9' }),
      server({ event_type: 'session_refused', arrival_id: 'a2', session_key: 'k8', reason: 'unknown_after_boot', http_status: 404 }),
      server({ event_type: 'boot' }),
    ];
    await t.store.insertJsonEachRow('events', body(rows), { dedupToken: 'server-1' });
    await t.store.insertJsonEachRow('events', body(rows), { dedupToken: 'server-1' });
    const got = await t.store.query<Record<string, unknown>>(
      `SELECT event_type, ok, refused, init, client, ua_family, toString(boot_id) AS boot,
              arh = reinterpretAsUInt128(sipHash128(arrival_id)) AS ar_hashed, skh = if(session_key = '', 0, reinterpretAsUInt128(sipHash128(session_key))) AS sk_hashed,
              mkh = if(minted_session_key = '', 0, reinterpretAsUInt128(sipHash128(minted_session_key))) AS mk_hashed
       FROM server_requests ORDER BY ts`,
    );
    const common = { client: 'node/20 mcp-client p1', ua_family: 'node', boot: 'boot-1', ar_hashed: 1, sk_hashed: 1, mk_hashed: 1 };
    expect(got).toEqual([
      { event_type: 'arrival', ok: false, refused: false, init: true, ...common },
      { event_type: 'settlement', ok: true, refused: false, init: false, ...common },
      { event_type: 'session_refused', ok: false, refused: true, init: false, ...common },
    ]);
  });
});

describe('a store made before the derived tables', () => {
  it('gets them filled from its events when migrated', async () => {
    // this store as migrations 0001-0005 left it, with events in it
    for (const table of RETAINED_TABLES) await t.store.command(`TRUNCATE TABLE ${table}`);
    const derived = ['proxy_access', 'server_requests', 'proxy_sessions', 'server_sessions', 'arrival_outcomes', 'proxy_signals', 'server_signals', 'proxy_sessions_daily', 'server_sessions_daily'];
    for (const table of derived) await t.store.command(`DROP VIEW ${table}_mv`);
    for (const view of ['ok_minutes_proxy_mv', 'ok_minutes_server_mv']) await t.store.command(`DROP VIEW ${view}`);
    await t.store.command('DROP TABLE ok_minutes');
    for (const table of derived) await t.store.command(`DROP TABLE ${table}`);
    await t.store.command('ALTER TABLE schema_migrations DELETE WHERE version >= 6 SETTINGS mutations_sync = 2');
    const rows = [
      access({ response_session_key: 'k1', http_status: 200 }),
      access({ source: 'server', event_type: 'arrival', arrival_id: 'a1', url_path: '' }),
      access({ source: 'server', event_type: 'settlement', arrival_id: 'a1', outcome: 'ok', http_status: 200, url_path: '' }),
      access({ source: 'server', event_type: 'boot', url_path: '' }),
    ];
    await t.store.insertJsonEachRow('events', body(rows), { dedupToken: 'old' });
    expect(await migrate(t.store)).toEqual([6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
    expect(await t.store.query('SELECT (SELECT count() FROM proxy_access) AS p, (SELECT count() FROM server_requests) AS s')).toEqual([{ p: 1, s: 2 }]);
    // the 2xx by the minute (0017): the proxy's line and the server's settlement, each its client's
    expect(await t.store.query('SELECT kind FROM ok_minutes ORDER BY kind')).toEqual([{ kind: 2 }, { kind: 3 }]);
    // and the views feed them from now on
    await t.store.insertJsonEachRow('events', body([access({ request_session_key: 'k1', http_status: 200 })]), { dedupToken: 'new' });
    expect(await t.store.query('SELECT count() AS p FROM proxy_access')).toEqual([{ p: 2 }]);
  });
});

describe('a line delivered again with another label', () => {
  it('counts only under its newest label (re-import with another --service)', async () => {
    const { runQuery } = await import('../queries/index.ts');
    for (const table of RETAINED_TABLES) await t.store.command(`TRUNCATE TABLE ${table}`);
    const lines = [
      access({ service: 'a', request_session_key: 'k5', http_status: 200 }),
      access({ service: 'a', request_session_key: 'k5', http_status: 502, proxy_generated: true, upstream_error: 'connection_refused' }),
      access({ service: 'a', request_session_key: 'k5', http_status: 404 }),
    ];
    await t.store.insertJsonEachRow('events', body(lines), { dedupToken: 'label-a' });
    await t.store.insertJsonEachRow('events', body(lines.map((l) => ({ ...l, service: 'b' }))), { dedupToken: 'label-b' });
    for (const name of ['proxy_traffic', 'proxy_errors', 'restarts', 'refused_misses']) {
      expect(await runQuery(t.store, name, { service: 'a' }), name).toEqual([]);
      expect((await runQuery(t.store, name, { service: 'b' })).length, name).toBeGreaterThan(0);
    }
  });

  it('counts a server refused miss only under its newest label, whatever the merges', async () => {
    const { runQuery } = await import('../queries/index.ts');
    for (const table of RETAINED_TABLES) await t.store.command(`TRUNCATE TABLE ${table}`);
    await t.store.command('SYSTEM STOP MERGES server_signals');
    try {
      const miss = access({ source: 'server', event_type: 'session_refused', service: 'a', arrival_id: 'r1', request_session_key: 'k6', reason: 'unknown_after_boot', http_status: 404, url_path: '' });
      await t.store.insertJsonEachRow('events', body([miss]), { dedupToken: 'server-label-a' });
      await t.store.insertJsonEachRow('events', body([{ ...miss, service: 'b' }]), { dedupToken: 'server-label-b' });
      const misses = async (service: string) =>
        (await runQuery<{ source: string; misses: number }>(t.store, 'refused_misses', { service })).filter((r) => r.source === 'server').map((r) => Number(r.misses));
      expect(await misses('a')).toEqual([]);
      expect(await misses('b')).toEqual([1]);
    } finally {
      await t.store.command('SYSTEM START MERGES server_signals');
    }
  });
});

describe('the signal rows (migration 0012: proxy_signals, server_signals)', () => {
  // The rows of the classes the queries look up one by one, as their big tables hold them.
  const proxyClass = 'refused OR init OR pg OR http_status IN (401, 403)';
  const serverClass = "refused OR init OR (event_type = 'settlement' AND session_resolution = 'alias')";
  const rowsOf = (table: string, where = '1') =>
    t.store.query<{ id: string; service: string }>(`SELECT toString(event_id) AS id, toString(service) AS service FROM ${table} FINAL WHERE ${where} ORDER BY id`);
  const lines = () => [
    access({ response_session_key: 'k7', http_status: 200 }), // initialize
    access({ request_session_key: 'k7', http_status: 200 }),
    access({ request_session_key: 'k7', http_status: 404 }),
    access({ request_session_key: 'k7', http_status: 502, proxy_generated: true, upstream_error: 'connection_refused' }),
    access({ request_session_key: 'k7', http_status: 502 }), // the upstream's own 5xx: no signal
    access({ http_status: 401 }),
    access({ source: 'server', event_type: 'arrival', arrival_id: 'b1', mcp_method: 'initialize', url_path: '' }),
    access({ source: 'server', event_type: 'settlement', arrival_id: 'b1', outcome: 'ok', http_status: 200, url_path: '', minted_session_key: 'k8' }),
    access({ source: 'server', event_type: 'arrival', arrival_id: 'b2', mcp_method: 'tools/call', request_session_key: 'k0', url_path: '' }),
    access({ source: 'server', event_type: 'settlement', arrival_id: 'b2', outcome: 'ok', http_status: 200, url_path: '', request_session_key: 'k0', session_resolution: 'alias' }),
    access({ source: 'server', event_type: 'session_refused', arrival_id: 'b3', request_session_key: 'k9', reason: 'unknown_after_boot', http_status: 404, url_path: '' }),
  ];

  it('hold the rows of their classes, through the views and a migration’s backfill alike', async () => {
    for (const table of RETAINED_TABLES) await t.store.command(`TRUNCATE TABLE ${table}`);
    const batch = lines();
    await t.store.insertJsonEachRow('events', body(batch), { dedupToken: 'signals-view' });
    // a retried batch is dropped, a copy in another batch collapses under FINAL
    await t.store.insertJsonEachRow('events', body(batch), { dedupToken: 'signals-view' });
    await t.store.insertJsonEachRow('events', body(batch.slice(2, 4)), { dedupToken: 'signals-copy' });
    const proxy = await rowsOf('proxy_access', proxyClass);
    const server = await rowsOf('server_requests', serverClass);
    expect([proxy.length, server.length]).toEqual([4, 3]);
    expect(await rowsOf('proxy_signals')).toEqual(proxy);
    expect(await rowsOf('server_signals')).toEqual(server);
    expect(await t.store.query('SELECT (SELECT count() FROM server_signals) AS s')).toEqual([{ s: 3 }]);

    // a store that had the rows before 0012: the migration copies them once
    for (const table of ['proxy_signals', 'server_signals']) await t.store.command(`TRUNCATE TABLE ${table}`);
    await t.store.command('DROP VIEW proxy_signals_mv');
    await t.store.command('DROP VIEW server_signals_mv');
    await t.store.command('ALTER TABLE schema_migrations DELETE WHERE version >= 12 SETTINGS mutations_sync = 2');
    expect(await migrate(t.store)).toEqual([12, 13, 14, 15, 16, 17, 18, 19]);
    expect(await rowsOf('proxy_signals')).toEqual(proxy);
    expect(await rowsOf('server_signals')).toEqual(server);
  });

  it('keep only the newest label of a line delivered again, as proxy_access does', async () => {
    for (const table of RETAINED_TABLES) await t.store.command(`TRUNCATE TABLE ${table}`);
    const batch = lines().slice(0, 6);
    await t.store.insertJsonEachRow('events', body(batch), { dedupToken: 'label-a' });
    await t.store.insertJsonEachRow('events', body(batch.map((l) => ({ ...l, service: 'b' }))), { dedupToken: 'label-b' });
    const proxy = await rowsOf('proxy_access', proxyClass);
    expect(proxy.map((r) => r.service)).toEqual(['b', 'b', 'b', 'b']);
    expect(await rowsOf('proxy_signals')).toEqual(proxy);
  });
});

describe('a table a migration creates in a store that existed', () => {
  it('takes the store\'s retention, not the migration\'s default (a store kept for ever keeps it for ever)', async () => {
    const { applyRetention } = await import('../store/index.ts');
    await applyRetention(t.store, 0);
    for (const view of ['ok_minutes_proxy_mv', 'ok_minutes_server_mv']) await t.store.command(`DROP VIEW ${view}`);
    await t.store.command('DROP TABLE ok_minutes');
    await t.store.command('ALTER TABLE schema_migrations DELETE WHERE version >= 17 SETTINGS mutations_sync = 2');
    expect(await migrate(t.store)).toEqual([17, 18, 19]);
    const ttl = async () => (await t.store.query<{ q: string }>("SELECT create_table_query AS q FROM system.tables WHERE database = currentDatabase() AND name = 'ok_minutes'"))[0]!.q;
    expect(await ttl()).not.toContain('TTL');
    await applyRetention(t.store, 90);
    expect(await ttl()).toContain('TTL toDateTime(ts) + toIntervalDay(90)');
  });
});
