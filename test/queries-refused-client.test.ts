import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { insertEvents } from './fixtures/proxy-scenario.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// Whether a client answered a server-recorded refused miss with an initialize
// (refused_misses' next = initialize; session_continuity's recovered) depends on
// which client the miss is: its own user agent and principal, else, where it lacks
// either, its arrival's (queries/sql/lib/server_refused.sql, session_facts.sql).
// The collector stamps both on every event of a request; another producer may send
// the refusal bare.

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('refused_client');
  const events: Array<Record<string, unknown>> = [];
  // per service: session A refused at 10 s, then an initialize at 12 s from the
  // arrival's client (user agent and principal); `mark` rewrites the refusal
  const cases: Array<[string, (e: Record<string, unknown>) => Record<string, unknown>]> = [
    ['bare', (e) => ({ ...e, user_agent: '', principal_key: '' })],
    ['no-principal', (e) => ({ ...e, principal_key: '' })],
    ['own', (e) => e],
    ['other', (e) => ({ ...e, user_agent: 'someone-else/1.0' })],
  ];
  for (const [svc, mark] of cases) {
    const s = new ServerScenario(svc, { ua: 'arrival-ua/1.0', principal: 'p1' });
    s.boot(0);
    s.session('A', 1, 2);
    s.refused(10, 'A', 'unknown_after_boot');
    s.request(12, { method: 'initialize', minted: 'B', resolution: 'new' });
    s.request(13, { sid: 'B' });
    events.push(...s.events.map((e) => (e.event_type === 'session_refused' ? mark(e) : e)));
  }
  await insertEvents(t.store, events);
});
afterAll(async () => {
  await t?.close();
});

const next = async (service: string) =>
  (await runQuery(t.store, 'refused_misses', { service, window_s: 60 })).filter((r) => r.source === 'server').map((r) => [r.next, Number(r.misses)]);
const recovered = async (service: string) =>
  (await runQuery(t.store, 'session_continuity', { service, window_s: 60 })).reduce((n, r) => n + Number(r.recovered), 0);

describe("a server's refused miss is its own client's, else its arrival's", () => {
  it('a bare refusal, or one without a principal, takes the arrival’s client: answered by its initialize', async () => {
    for (const svc of ['bare', 'no-principal']) {
      expect(await next(svc), svc).toEqual([['initialize', 1]]);
      expect(await recovered(svc), svc).toBe(1);
    }
  });

  it('a refusal with its own client keeps it: the same client answered, another did not', async () => {
    expect(await next('own')).toEqual([['initialize', 1]]);
    expect(await recovered('own')).toBe(1);
    expect(await next('other')).toEqual([['nothing', 1]]);
    expect(await recovered('other')).toBe(0);
  });
});

// server_refused reads each refused session's latest arrival from the rollup
// (server_sessions.last_arrival) for whole hours, but only without a service or
// environment filter: a rollup keeps an arrival re-imported under another label
// under its old one too, while the rows keep the newest copy once the parts merge.
describe('a refused session’s next arrival, re-imported under another service', () => {
  it('counts under the newest label once the rows merge, whole hours or cut', async () => {
    const s = new ServerScenario('relabel-a', { ua: 'arrival-ua/1.0', principal: 'p1' });
    s.boot(0);
    s.session('R', 10, 2);
    s.refused(40, 'R', 'unknown_after_boot');
    const later = s.events.length;
    s.request(50, { sid: 'R' });
    await insertEvents(t.store, s.events);
    await insertEvents(t.store, s.events.slice(later).map((e) => ({ ...e, service: 'relabel-b' })));
    await t.store.command('OPTIMIZE TABLE server_requests FINAL');
    for (const range of [{}, { t_from: '2026-11-30 04:00:00', t_to: '2026-11-30 05:00:00' }, { t_from: '2026-11-30 04:00:00.5', t_to: '2026-11-30 05:00:00' }]) {
      const rows = await runQuery(t.store, 'refused_misses', { service: 'relabel-a', window_s: 60, ...range });
      expect(rows.filter((r) => r.source === 'server').map((r) => [r.next, Number(r.misses)]), JSON.stringify(range)).toEqual([['nothing', 1]]);
    }
  });
});
