import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { fixtureHash, insertEvents, proxyEvents, T0_MICROS, type FixtureRequest } from './fixtures/proxy-scenario.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// The window parameters (window_s, auth_window_s) include their end and are exact
// to the microsecond (queries/sql/refused_misses.sql): an answer exactly the window
// after the miss or challenge is within it, one µs later is not.
//
// The queries hold times as float seconds (t = µs / 1e6). The old comparison
// `later <= earlier + window_s` rounded the sum differently from the later time for
// some microseconds, and judged an answer exactly window_s later to be outside. Each
// case puts its miss (or challenge, or failed request) at such a microsecond, found
// below with the same float arithmetic the engine does: for 0.001 s any date will
// do (2026, the fixtures' epoch); for a whole number of seconds the sum is exact
// unless the two times straddle a power of two of seconds, so those cases sit
// across 2^31 s (2038-01-19 03:14:08 UTC).

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('window_boundary');
});
afterAll(async () => {
  await t?.close();
});

const TWO_POW_31_S_US = 2 ** 31 * 1e6;

/** Whether float seconds judged a time exactly `w` s after `us` (µs) to be later than `t + w`, as the old SQL did. */
const floatMisjudges = (us: number, w: number) => (us + Math.round(w * 1e6)) / 1e6 > us / 1e6 + w;

/** The first µs at or after `from` that the old comparison misjudged for window `w`. */
function misjudgedFrom(from: number, w: number): number {
  for (let us = from; us < from + 100_000; us++) if (floatMisjudges(us, w)) return us;
  throw new Error(`no misjudged µs after ${from} for ${w} s`);
}

/** `events` (built at T0_MICROS) moved so that T0_MICROS falls on `anchorUs`. */
const movedTo = (anchorUs: number, events: Array<Record<string, unknown>>) =>
  events.map((e) => ({ ...e, ts: (e.ts as number) - T0_MICROS + anchorUs }));

/** Proxy lines `dt` µs after the anchor (negative: before it). */
const lines = (anchorUs: number, service: string, rows: Array<Omit<FixtureRequest, 'at'> & { dt: number }>) =>
  movedTo(anchorUs, proxyEvents(rows.map(({ dt, ...r }) => ({ ...r, at: dt / 1e6 })))).map((e) => ({ ...e, service }));

const cases = [
  { w: 0.001, from: T0_MICROS + 60e6 },
  { w: 10, from: TWO_POW_31_S_US - 10e6 },
  { w: 86_400, from: TWO_POW_31_S_US - 86_400e6 },
];

describe.each(cases)('window $w s: an answer exactly the window later is within it, 1 µs later is not', ({ w, from }) => {
  const W = Math.round(w * 1e6);
  const anchor = misjudgedFrom(from, w);
  const svc = `win-${w}`;
  // `in` answers exactly W µs after the anchor, `out` W + 1 µs after (clients differ by address and user agent)
  const clients = [
    { name: 'in', d: W },
    { name: 'out', d: W + 1 },
  ] as const;

  beforeAll(async () => {
    expect(floatMisjudges(anchor, w)).toBe(true);
    // proxy: a session with a 2xx, a refused miss on it at the anchor, then an initialize
    // from the same client minting a replacement, which the client then uses
    for (const [i, c] of clients.entries()) {
      const k = { ip: `10.9.0.${i + 1}`, ua: `${c.name}/1.0` };
      await insertEvents(
        t.store,
        lines(anchor, `${svc}-proxy`, [
          { dt: -3e6, status: 200, minted: `${svc}-A-${c.name}`, ...k },
          { dt: -2e6, status: 200, sid: `${svc}-A-${c.name}`, ...k },
          { dt: 0, status: 404, sid: `${svc}-A-${c.name}`, ...k },
          { dt: c.d, status: 200, minted: `${svc}-B-${c.name}`, ...k },
          { dt: c.d + 1e6, status: 200, sid: `${svc}-B-${c.name}`, ...k },
        ]),
      );
    }
    // server: a refused miss (its session_refused event at the anchor), then an
    // initialize from the same client (user agent and principal); and a session whose
    // last request fails (its settlement at the anchor), then an initialize
    for (const c of clients) {
      const s = new ServerScenario(`${svc}-server`, { ua: `${c.name}/1.0`, principal: `p-${c.name}` });
      s.boot(-10);
      s.session(`${svc}-A-${c.name}`, -5, 1);
      s.refused(-0.001, `${svc}-A-${c.name}`, 'unknown_after_boot');
      s.request(c.d / 1e6, { method: 'initialize', minted: `${svc}-B-${c.name}`, resolution: 'new' });
      s.request(c.d / 1e6 + 1, { sid: `${svc}-B-${c.name}` });
      const f = new ServerScenario(`${svc}-server`, { ua: `${c.name}-fail/1.0`, principal: `pf-${c.name}` });
      f.session(`${svc}-C-${c.name}`, -5, 1);
      f.request(-0.01, { sid: `${svc}-C-${c.name}`, status: 500, outcome: 'error', duration: 0.01 });
      f.request(c.d / 1e6, { method: 'initialize', minted: `${svc}-D-${c.name}`, resolution: 'new' });
      await insertEvents(t.store, movedTo(anchor, [...s.events, ...f.events]));
    }
    // auth: a 401 at the anchor, then a 2xx from the same client (`c-*`) or, on an
    // established session, a 2xx on that session from another address (`s-*`)
    for (const [i, c] of clients.entries()) {
      const ck = { ip: `10.8.0.${i + 1}`, ua: `c-${c.name}/1.0` };
      const sk = { ip: `10.8.1.${i + 1}`, ua: `s-${c.name}/1.0` };
      const sid = `${svc}-S-${c.name}`;
      await insertEvents(
        t.store,
        lines(anchor, `${svc}-auth`, [
          { dt: 0, status: 401, ...ck },
          { dt: c.d, status: 200, minted: `${svc}-X-${c.name}`, ...ck },
          { dt: -3e6, status: 200, minted: sid, ...sk },
          { dt: -2e6, status: 200, sid, ...sk },
          { dt: 0, status: 401, sid, credential: true, ...sk },
          { dt: c.d, status: 200, sid, ...sk, ip: `10.8.2.${i + 1}` },
        ]),
      );
    }
  });

  const nextOf = (rows: Array<Record<string, unknown>>, source: string) =>
    Object.fromEntries(rows.filter((r) => r.source === source).map((r) => [String(r.next), Number(r.misses)]));

  it('refused_misses: the proxy miss re-initialized exactly window_s later is `initialize`, 1 µs later `nothing`', async () => {
    const rows = await runQuery(t.store, 'refused_misses', { service: `${svc}-proxy`, window_s: w });
    expect(nextOf(rows, 'proxy')).toEqual({ initialize: 1, nothing: 1 });
  });

  it('refused_misses: the same for a miss the server recorded', async () => {
    const rows = await runQuery(t.store, 'refused_misses', { service: `${svc}-server`, window_s: w });
    expect(nextOf(rows, 'server')).toEqual({ initialize: 1, nothing: 1 });
  });

  it('remint_pairs: pairs the miss with the initialize exactly window_s later, not with one 1 µs later', async () => {
    const pairs = await runQuery(t.store, 'remint_pairs', { service: `${svc}-proxy`, window_s: w });
    expect(pairs).toEqual([
      expect.objectContaining({
        stale_session_key: fixtureHash(`${svc}-A-in`),
        replacement_session_key: fixtureHash(`${svc}-B-in`),
        inferred: 1,
        adopted: true,
        recovery_s: Math.round(w * 1e3) / 1e3,
      }),
    ]);
  });

  it('session_continuity: recovered and not abandoned within the window, unrecovered and abandoned 1 µs after it', async () => {
    const byFamily = async (source: string) =>
      Object.fromEntries((await runQuery(t.store, 'session_continuity', { service: `${svc}-${source}`, window_s: w })).map((r) => [String(r.ua_family), r]));
    const proxy = await byFamily('proxy');
    // proxy: the inferred pair recovers A; A's last request (the 404) failed
    expect(proxy.in).toMatchObject({ stale: 1, recovered: 1, unrecovered_stale: 0, abandoned_after_failure: 0 });
    expect(proxy.out).toMatchObject({ stale: 1, recovered: 0, unrecovered_stale: 1, abandoned_after_failure: 1 });
    const server = await byFamily('server');
    // server: the re-initialize after the recorded miss recovers A; C's failed request
    // is answered by an initialize, or not
    expect(server.in).toMatchObject({ stale: 1, recovered: 1, unrecovered_stale: 0 });
    expect(server.out).toMatchObject({ stale: 1, recovered: 0, unrecovered_stale: 1 });
    expect(server['in-fail']).toMatchObject({ abandoned_after_failure: 0 });
    expect(server['out-fail']).toMatchObject({ abandoned_after_failure: 1 });
  });

  it('auth_challenges: a 2xx exactly auth_window_s after a challenge makes it benign, 1 µs later does not', async () => {
    const rows = await runQuery(t.store, 'auth_challenges', { service: `${svc}-auth`, auth_window_s: w });
    const verdicts = Object.fromEntries(rows.map((r) => [String(r.user_agent), r.verdict]));
    expect(verdicts).toEqual({ 'c-in/1.0': 'benign', 'c-out/1.0': 'unresolved', 's-in/1.0': 'benign', 's-out/1.0': 'unresolved' });
  });
});
