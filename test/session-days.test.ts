import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../core/config.ts';
import { runQuery, wholeHours } from '../queries/index.ts';
import { applyRetention, loadMigrations, migrate, openStore, type Store } from '../store/index.ts';
import { T0_MICROS } from './fixtures/proxy-scenario.ts';
import { SCENARIO_NAMES, scenarioEvents } from './fixtures/scenarios.ts';

// session_continuity reads the days its range covers whole from the daily session
// rollups (schema/migrations/0016), its other whole hours from the hourly ones
// (0008) and the hours it cuts from the rows. Whatever the split, the answer must be
// the one the rows give. The store starts as migrations 0001-0015 left it, with
// every scenario's events in it, so the migration's backfill is what the daily
// rollups hold at first.

let store: Store;
let dir: string;
const body = (rows: Array<Record<string, unknown>>) => rows.map((r) => JSON.stringify(r)).join('\n');
const count = async (table: string) => (await store.query<{ c: number }>(`SELECT count() AS c FROM ${table}`))[0]!.c;
const continuity = (params: Record<string, unknown> = {}) => runQuery<Record<string, unknown>>(store, 'session_continuity', params);
const at = (day: number, h: number, m = 0) => `2026-12-0${day} ${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:00`;

// Every scenario twice: once shifted to start 20 to 50 minutes after 23:00 on
// 2026-12-01 (they last up to an hour, so sessions cross midnight and the events lie
// in 23:20-00:50), once a day later under other event ids and session ids, so
// that whole days, whole hours and cut hours all hold sessions.
const DAY_US = 86_400e6;
const shift = Date.UTC(2026, 11, 1, 23) * 1000 - T0_MICROS;
const KEYS = ['session_key', 'request_session_key', 'response_session_key', 'stale_session_key', 'replacement_session_key', 'minted_session_key', 'arrival_id'];
const events: Array<Record<string, unknown>> = SCENARIO_NAMES.flatMap((name, i) =>
  scenarioEvents(name).flatMap((e) => {
    const first = { ...e, ts: (e.ts as number) + shift + (1200 + (i % 4) * 600) * 1e6 };
    const second: Record<string, unknown> = { ...first, event_id: `dddddddd${String(e.event_id).slice(8)}`, ts: (first.ts as number) + DAY_US };
    for (const k of KEYS) if (typeof e[k] === 'string' && e[k] !== '') second[k] = `d2${String(e[k])}`;
    return [first, second];
  }),
);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'continuity-days-'));
  store = await openStore(loadConfig({ CONTINUITY_HASH_KEY: '00112233445566778899aabbccddeeff' }, { dataDir: dir }));
  await migrate(store, { migrations: loadMigrations().filter((m) => m.version <= 15) });
  await store.insertJsonEachRow('events', body(events), { dedupToken: 'scenarios-on-two-days' });
});
afterAll(async () => {
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the session rollups by the day (migration 0016)', () => {
  it('bound the days among the whole hours', () => {
    const b = (t_from: string, t_to: string) => wholeHours({ t_from: `${t_from}.000000`, t_to: `${t_to}.000000` });
    const s = (t: string) => Date.parse(`${t.replace(' ', 'T')}Z`) / 1000;
    expect(b(at(1, 0), at(3, 0))).toMatchObject({ whole_day_lo: s(at(1, 0)), whole_day_hi: s(at(3, 0)) });
    expect(b('2026-12-01 00:00:01', at(3, 0, 59))).toMatchObject({ whole_hour_lo: s(at(1, 1)), whole_day_lo: s(at(2, 0)), whole_day_hi: s(at(3, 0)) });
    // no whole day: lo >= hi
    const none = b(at(1, 23, 10), at(2, 23, 50));
    expect(none.whole_day_lo).toBeGreaterThanOrEqual(none.whole_day_hi);
  });

  it('are filled from an existing store’s rollups when migrated, and by the views from then on', async () => {
    expect(await migrate(store)).toEqual(loadMigrations().filter((m) => m.version >= 16).map((m) => m.version));
    expect(await count('proxy_sessions_daily')).toBeGreaterThan(0);
    expect(await count('server_sessions_daily')).toBeGreaterThan(0);
    // one row per session and day, fewer than by the hour
    expect(await count('proxy_sessions_daily')).toBeLessThan(await count('proxy_sessions'));
  });

  it('give the rows’ answer whatever days and hours the range cuts', async () => {
    // the rows alone: 23:10 to 00:55 holds no whole hour, on each day
    const raw1 = await continuity({ t_from: at(1, 23, 10), t_to: at(2, 0, 55) });
    const raw2 = await continuity({ t_from: at(2, 23, 10), t_to: at(3, 0, 55) });
    expect(raw1.reduce((n, r) => n + Number(r.sessions), 0)).toBeGreaterThan(0);
    expect(raw1.reduce((n, r) => n + Number(r.survived_1), 0)).toBeGreaterThan(0);
    // both days' sessions (the second day's are copies under other ids)
    const both = await continuity({ t_from: at(1, 23, 10), t_to: at(3, 0, 55) });
    expect(both.reduce((n, r) => n + Number(r.sessions), 0)).toBe(
      raw1.reduce((n, r) => n + Number(r.sessions), 0) + raw2.reduce((n, r) => n + Number(r.sessions), 0),
    );
    // (the rows alone over both days too: 23:10-00:55 cut, and 01:00-23:00 whole
    // hours that hold nothing; the same answer with the hours and days below)
    for (const [from, to, what] of [
      [at(1, 0), '2026-12-04 00:00:00', 'three whole days'],
      ['1960-01-01 00:00:00', '2199-01-01 00:00:00', 'beyond the rollups (DateTime: 1970-2106)'],
      [at(1, 23), at(3, 1), 'whole hours only'],
      [at(1, 23, 10), '2026-12-04 00:00:00', 'cut hour, whole hours, whole days'],
      [at(1, 0), at(3, 0, 55), 'a whole day, then whole hours, then cut hours'],
      [at(1, 22, 59), at(3, 1, 1), 'cut, whole hours, a whole day, whole hours, cut'],
    ] as const) {
      expect(await continuity({ t_from: from, t_to: to }), `${what}: ${from} - ${to}`).toEqual(both);
    }
    // a range from the last day the rollups' DateTime holds (2106-02-07, whose last
    // whole hour is 05:00-06:00): no whole day, and none of the data (the day rounded
    // up from 01:00 overflowed the UInt32 it is bound as and wrapped to 1970, so the
    // daily rollups were read from 1970 to 2106-02-07 and every session counted)
    expect(wholeHours({ t_from: '2106-02-07 01:00:00.000000', t_to: '2199-01-01 00:00:00.000000' }).whole_day_lo).toBeLessThanOrEqual(2 ** 32 - 1);
    for (const t_from of ['2106-02-07 00:00:00.000001', '2106-02-07 01:00:00', '2106-02-07 05:59:59'])
      expect(await continuity({ t_from, t_to: '2199-01-01 00:00:00' }), t_from).toEqual([]);
    // windows that end or begin inside the data, against the rows alone
    expect(await continuity({ t_from: at(1, 0), t_to: at(2, 0, 20) })).toEqual(await continuity({ t_from: at(1, 23, 10), t_to: at(2, 0, 20) }));
    expect(await continuity({ t_from: at(2, 0, 20), t_to: '2026-12-04 00:00:00' })).toEqual(await continuity({ t_from: at(2, 0, 20), t_to: at(3, 0, 55) }));
    // a service filter reads the proxy rows (labels); the server's daily rollup still serves it
    for (const service of ['s8', 's9b']) {
      const rows = await continuity({ service, t_from: at(1, 23, 10), t_to: at(3, 0, 55) });
      expect(rows.length, service).toBeGreaterThan(0);
      expect(await continuity({ service, t_from: at(1, 0), t_to: '2026-12-04 00:00:00' }), service).toEqual(rows);
    }
  });

  it('do not count a retried batch or a copy of an event twice', async () => {
    // a batch written after the migration (the first day's events two days later,
    // under other ids: a batch written before it and retried after it is written
    // again here, as in the signal rows of 0012, and changes nothing either)
    const later = events
      .filter((e) => !String(e.event_id).startsWith('dddddddd'))
      .map((e) => {
        const copy: Record<string, unknown> = { ...e, event_id: `eeeeeeee${String(e.event_id).slice(8)}`, ts: (e.ts as number) + 2 * DAY_US };
        for (const k of KEYS) if (typeof e[k] === 'string' && e[k] !== '') copy[k] = `d3${String(e[k])}`;
        return copy;
      });
    await store.insertJsonEachRow('events', body(later), { dedupToken: 'later' });
    const all = { t_from: at(1, 0), t_to: '2026-12-05 00:00:00' };
    const expected = await continuity(all);
    const [proxyRows, serverRows] = [await count('proxy_sessions_daily'), await count('server_sessions_daily')];
    // the same batch again, same token: dropped, in the daily rollups too
    await store.insertJsonEachRow('events', body(later), { dedupToken: 'later' });
    expect([await count('proxy_sessions_daily'), await count('server_sessions_daily')]).toEqual([proxyRows, serverRows]);
    // every event again in another batch: written again, and nothing changes
    await store.command('SYSTEM STOP MERGES proxy_sessions_daily');
    try {
      await store.insertJsonEachRow('events', body([...events, ...later]), { dedupToken: 'all-again' });
      expect(await count('proxy_sessions_daily')).toBeGreaterThan(proxyRows);
      expect(await continuity(all)).toEqual(expected);
    } finally {
      await store.command('SYSTEM START MERGES proxy_sessions_daily');
    }
    // and the third day read whole gives what its rows give
    expect(await continuity({ t_from: at(3, 22), t_to: '2026-12-05 00:00:00' })).toEqual(await continuity({ t_from: at(3, 23, 10), t_to: '2026-12-04 00:55:00' }));
  });

  it('expire with the events', async () => {
    await applyRetention(store, 30);
    const rows = await store.query<{ name: string; q: string }>(
      `SELECT name, create_table_query AS q FROM system.tables WHERE database = currentDatabase() AND name IN ('proxy_sessions_daily', 'server_sessions_daily')`,
    );
    expect(rows.map((r) => r.name).sort()).toEqual(['proxy_sessions_daily', 'server_sessions_daily']);
    for (const r of rows) expect(r.q, r.name).toMatch(/TTL toDateTime\(ts\) \+ toIntervalDay\(30\)/);
  });

  it('are written by the views after the migration', async () => {
    const before = await count('proxy_sessions_daily');
    const line = { ...events.find((e) => e.event_type === 'proxy_access' && e.request_session_key)!, event_id: '00000000-0000-8000-8000-00000000d001', request_session_key: 'a-new-session' };
    await store.insertJsonEachRow('events', body([line]), { dedupToken: 'new-line' });
    expect(await count('proxy_sessions_daily')).toBe(before + 1);
  });
});
