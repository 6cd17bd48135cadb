import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prng } from '../bench/prng.ts';
import { authOkForm, bindInternalParams, bindParams, querySql, runQuery } from '../queries/index.ts';
import { insertEvents, proxyEvents, T0_MICROS, type FixtureRequest } from './fixtures/proxy-scenario.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// auth_challenges reads the 2xx of the minutes its range covers whole from ok_minutes
// (schema/migrations/0017: each key's first and last 2xx of each minute) when the
// window is at least 60 s, and the rows elsewhere. Whatever it reads, the answer must
// be the one the rows alone give. The traffic below is random but seeded: clients of
// both sources with several sessions each, 2xx and challenges at any µs of ten
// minutes (so many a challenge lies between its minute's first and last 2xx), and
// one client that loops within a single minute with a 2xx between its challenges.

const INVALID = 'Bearer error="invalid_token"';

const SPAN_S = 600;
const at = (rand: () => number) => Math.round(rand() * SPAN_S * 1e6) / 1e6;

function traffic(): Array<Record<string, unknown>> {
  const rand = prng(17);
  const events: Array<Record<string, unknown>> = [];
  for (let c = 0; c < 6; c++) {
    const service = c % 2 === 0 ? 'min-a' : 'min-b';
    const server = new ServerScenario(service, { ua: `srv-ua/${c % 3}`, principal: `principal-${c}` });
    const proxy: FixtureRequest[] = [];
    for (let s = 0; s < 3; s++) {
      const sid = `min-${c}-${s}`;
      const n = 5 + Math.floor(rand() * 40);
      for (let i = 0; i < n; i++) {
        const t = at(rand);
        if (rand() < 0.15) server.challenge(t, sid, 'invalid_token');
        else server.request(t, { sid });
        // the proxy's own clients, whose challenges no server recorded
        const u = at(rand);
        if (rand() < 0.15) proxy.push({ at: u, status: 401, ip: `10.7.${c}.1`, ua: `proxy-ua/${c}`, sid, credential: true, wwwAuthenticate: INVALID });
        else proxy.push({ at: u, status: 200, ip: `10.7.${c}.1`, ua: `proxy-ua/${c}`, sid });
      }
    }
    events.push(...server.events, ...proxyEvents(proxy).map((e) => ({ ...e, service, environment: c < 3 ? 'staging' : 'production' })));
  }
  // loops across minutes: no 2xx between the first and the last challenge, but 2xx
  // in their minutes before the first and after the last; each challenge on a
  // session of its own that had no 2xx before
  const serverLoop = new ServerScenario('min-b', { ua: 'loop-ua/2', principal: 'loop-principal' });
  serverLoop.request(200.5, { sid: 'sloop-0' });
  for (const [i, ch] of [201, 230, 262].entries()) serverLoop.challenge(ch, `sloop-${i + 1}`, 'invalid_token');
  serverLoop.request(262.5, { sid: 'sloop-0' });
  events.push(...serverLoop.events);
  const proxyLoop = [200.5, 262.5].map((u): FixtureRequest => ({ at: u, status: 200, ip: '10.7.9.1', ua: 'proxy-loop/1', sid: 'ploop-0' }));
  for (const [i, ch] of [201, 230, 262].entries()) {
    proxyLoop.push({ at: ch, status: 401, ip: '10.7.9.1', ua: 'proxy-loop/1', sid: `ploop-${i + 1}`, credential: true, wwwAuthenticate: INVALID });
  }
  events.push(...proxyEvents(proxyLoop).map((e) => ({ ...e, service: 'min-b' })));
  // a loop within one minute (120-180 s): 2xx before, between and after its three
  // challenges, all in that minute; the minute's first and last 2xx alone would call
  // it a loop
  const looper = new ServerScenario('min-a', { ua: 'loop-ua/1', principal: 'loop-principal' });
  looper.request(125, { sid: 'loop-s1' });
  looper.challenge(130, 'loop-s2', 'invalid_token');
  looper.request(131.5, { sid: 'loop-s3' });
  looper.challenge(132, 'loop-s4', 'invalid_token');
  looper.challenge(134, 'loop-s5', 'invalid_token');
  looper.request(170, { sid: 'loop-s6' });
  events.push(...looper.events);
  return events;
}

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('auth-minutes');
  await insertEvents(t.store, traffic());
});
afterAll(async () => {
  await t?.close();
});

type Row = { hour: string; user_agent: string; challenge_class: string; http_status: number; verdict: string; challenges: number };

/** auth_challenges in one form: by the minute (lib/auth_ok_minutes.sql) or from the rows alone (auth_ok_rows.sql). */
async function form(params: Record<string, unknown>, rowsOnly: boolean): Promise<Row[]> {
  const sql = querySql('auth_challenges', rowsOnly ? { auth_ok_minutes: 'auth_ok_rows' } : {});
  expect(sql.includes('FROM ok_minutes')).toBe(!rowsOnly);
  const bound = bindParams('auth_challenges', params);
  return t.store.query<Row>(sql, await bindInternalParams(t.store, sql, bound));
}
const fromRows = (params: Record<string, unknown>) => form(params, true);
const fromMinutes = (params: Record<string, unknown>) => form(params, false);

const time = (s: number) => new Date(T0_MICROS / 1000 + s * 1000).toISOString();

describe('auth_challenges by the minute (ok_minutes, migration 0017)', () => {
  it('holds a minute row for the clients and sessions of both sources', async () => {
    const kinds = await t.store.query<{ kind: number; n: number }>('SELECT kind, count() AS n FROM ok_minutes GROUP BY kind ORDER BY kind');
    expect(kinds.map((k) => k.kind)).toEqual([2, 3, 4]);
  });

  const cases: Array<[string, Record<string, unknown>]> = [];
  for (const auth_window_s of [30, 59.5, 60, 61.5, 90, 300]) {
    for (const loop_min of [2, 3]) cases.push([`window ${auth_window_s} s, loop_min ${loop_min}`, { auth_window_s, loop_min }]);
  }
  cases.push(['a range that cuts its first and last minute', { t_from: time(90.5), t_to: time(450.25) }]);
  cases.push(['a range of one whole minute', { t_from: time(120), t_to: time(180) }]);
  cases.push(['a service filter', { service: 'min-a' }]);
  cases.push(['an environment filter', { environment: 'staging' }]);
  cases.push(['mcp_paths given', { mcp_paths: ['/mcp'] }]);

  it.each(cases)('gives what the rows give: %s', async (_name, params) => {
    const [minutes, rows] = await Promise.all([fromMinutes(params), fromRows(params)]);
    expect(rows.length).toBeGreaterThan(0);
    expect(minutes).toEqual(rows);
  });

  it('judges the loop within one minute by its rows: the 2xx between its challenges breaks it', async () => {
    const rows = await fromMinutes({});
    const looper = rows.filter((r) => r.user_agent === 'loop-ua/1');
    expect(looper.map((r) => [r.verdict, Number(r.challenges)])).toEqual([['benign', 3]]);
  });

  it('judges a loop across minutes a loop, with 2xx in its first and last minute outside it', async () => {
    const rows = await fromMinutes({});
    for (const ua of ['loop-ua/2', 'proxy-loop/1']) {
      expect(rows.filter((r) => r.user_agent === ua).map((r) => [r.verdict, Number(r.challenges)])).toEqual([['loop', 3]]);
    }
  });

  it('the traffic has every verdict', async () => {
    const rows = await runQuery<Row>(t.store, 'auth_challenges', { loop_min: 2 });
    const verdicts = new Set(rows.map((r) => r.verdict));
    for (const v of ['benign', 'loop', 'lost']) expect(verdicts).toContain(v);
  });
});

// A request delivered again under another service: server_requests keeps the newest
// copy once it merges, ok_minutes keeps both labels (a rollup cannot forget), so under
// a filter the clients' minutes are not read (found by a break-it pass).
describe('a server 2xx delivered again under another service, after the tables merge', () => {
  it('counts under its newest service only, as the rows do', async () => {
    const first = new ServerScenario('rl-a', { ua: 'rl-ua/1', principal: 'rl-p' });
    first.challenge(305, 'rl-s1', 'invalid_token');
    first.request(330, { sid: 'rl-s2' });
    const copies = first.events.filter((e) => e.session_key !== first.events[0]!.session_key || e.event_type === 'settlement').slice(-2);
    expect(copies.map((e) => e.event_type)).toEqual(['arrival', 'settlement']);
    await insertEvents(t.store, first.events);
    await insertEvents(t.store, copies.map((e) => ({ ...e, service: 'rl-b' })));
    for (const table of ['server_requests', 'ok_minutes']) await t.store.command(`OPTIMIZE TABLE ${table} FINAL`);
    const range = { t_from: time(300), t_to: time(360) };
    for (const service of ['rl-a', 'rl-b', '']) {
      const [minutes, rows] = await Promise.all([fromMinutes({ ...range, service }), fromRows({ ...range, service })]);
      expect(minutes, service).toEqual(rows);
    }
    const a = await fromMinutes({ ...range, service: 'rl-a' });
    expect(a.filter((r) => r.user_agent === 'rl-ua/1').map((r) => r.verdict)).toEqual(['unresolved']);
  });
});

describe('which form runQuery reads (queries/registry.ts authOkForm)', () => {
  const at = (h: number) => time(h * 3600);
  it('the minutes for a window of 60 s or more over at least a day of whole minutes, else the rows', () => {
    const form = (params: Record<string, unknown>) => authOkForm(bindParams('auth_challenges', params));
    expect(form({})).toEqual({});
    expect(form({ t_from: at(0), t_to: at(24) })).toEqual({});
    expect(form({ t_from: at(0), t_to: time(24 * 3600 - 1) })).toEqual({ auth_ok_minutes: 'auth_ok_rows' });
    expect(form({ t_from: at(0), t_to: at(6) })).toEqual({ auth_ok_minutes: 'auth_ok_rows' });
    expect(form({ auth_window_s: 59.5 })).toEqual({ auth_ok_minutes: 'auth_ok_rows' });
  });

  it('and both answer alike through runQuery', async () => {
    expect(await runQuery<Row>(t.store, 'auth_challenges', {})).toEqual(await fromRows({}));
  });
});
