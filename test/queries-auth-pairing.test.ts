import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isoMicros } from '../core/time.ts';
import { countChallenges, runQuery } from '../queries/index.ts';
import { insertEvents, proxyEvents, repeat, T0_MICROS, type FixtureRequest } from './fixtures/proxy-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// A proxy challenge is joined to its own access line for the client and session.
// Clients that look alike in everything the challenge carries (time to the µs, user
// agent, principal, session, status) differ only in their address: each challenge
// must still be counted once and judged by one client's later requests.

const INVALID = 'Bearer error="invalid_token"';
const at = (s: number) => isoMicros(T0_MICROS + Math.round(s * 1e6));

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('auth-pairing');
  const challenged = (ip: string, status = 401): FixtureRequest => ({ at: 100, status, ua: 'same-ua/1', ip, credential: true, wwwAuthenticate: status === 401 ? INVALID : 'Bearer error="insufficient_scope"' });
  await insertEvents(t.store, [
    ...proxyEvents([
      challenged('10.0.0.2'),
      challenged('10.0.0.3'),
      // 10.0.0.2 gets through 5 s later, on a new session; 10.0.0.3 never does
      { at: 105, status: 200, minted: 'pair-A', ua: 'same-ua/1', ip: '10.0.0.2' },
      ...repeat(3, 106, 1, (s) => ({ at: s, status: 200, sid: 'pair-A', ua: 'same-ua/1', ip: '10.0.0.2' })),
    ]).map((e) => ({ ...e, service: 'pair' })),
    // a 401 and a 403 of one user agent in the same µs, from two addresses
    ...proxyEvents([challenged('10.0.1.2', 401), challenged('10.0.1.3', 403)]).map((e) => ({ ...e, service: 'mixed' })),
    // the same moment and user agent in another service
    ...proxyEvents([challenged('10.0.2.2')]).map((e) => ({ ...e, service: 'other' })),
  ]);
});
afterAll(async () => {
  await t?.close();
});

const total = (rows: Array<{ challenges: unknown }>) => rows.reduce((a, r) => a + Number(r.challenges), 0);

describe('challenges of look-alike clients in the same microsecond', () => {
  it('count once each, and each is judged by one client: one benign, one not', async () => {
    const rows = await runQuery<{ verdict: string; challenges: number }>(t.store, 'auth_challenges', { service: 'pair', auth_window_s: 60 });
    expect(total(rows)).toBe(2);
    const byVerdict = Object.fromEntries(rows.map((r) => [r.verdict, Number(r.challenges)]));
    expect(byVerdict.benign).toBe(1);
    expect(total(rows.filter((r) => r.verdict !== 'benign'))).toBe(1);
    expect(total(await countChallenges(t.store, { service: 'pair' }))).toBe(2);
  });

  it('a 401 and a 403 of one user agent: each class once', async () => {
    const counts = await countChallenges(t.store, { service: 'mixed' });
    expect(counts.map((c) => [c.challenge_class, c.http_status, c.challenges])).toEqual([
      ['insufficient_scope', 403, 1],
      ['invalid_token', 401, 1],
    ]);
  });

  it('over every service, and per service: 5 challenges in all, 2 + 2 + 1', async () => {
    expect(total(await runQuery(t.store, 'auth_challenges', {}))).toBe(5);
    expect(total(await countChallenges(t.store, { t_from: at(99), t_to: at(101) }))).toBe(5);
    for (const [service, n] of [['pair', 2], ['mixed', 2], ['other', 1]] as const) {
      expect(total(await runQuery(t.store, 'auth_challenges', { service })), service).toBe(n);
    }
  });
});
