import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { applyRetention } from '../store/index.ts';
import { insertEvents, proxyEvents, T0_MICROS, type FixtureRequest } from './fixtures/proxy-scenario.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// A challenge's next 2xx is strictly after it; a loop is broken by a 2xx at or after
// the client's first challenge (queries/sql/auth_challenges.sql). Both hold to the
// microsecond: each service below is one client whose 2xx falls in the same µs as a
// challenge, or 1 µs away from it.

const INVALID = 'Bearer error="invalid_token"';

/** Service `service`: one client's `lines` and its 401s at `challenges` (s after the scenario start). */
const tie = (service: string, lines: FixtureRequest[], challenges: number[]) =>
  proxyEvents([
    ...lines.map((l) => ({ ...l, ua: 'tie-ua/1', ip: '10.0.3.2' })),
    ...challenges.map((at) => ({ at, status: 401, ua: 'tie-ua/1', ip: '10.0.3.2', credential: true, wwwAuthenticate: INVALID })),
  ]).map((e) => ({ ...e, service }));

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('auth-ties');
  await insertEvents(t.store, [
    ...tie('after-same', [{ at: 100, status: 200, sid: 'tie-a' }], [100]),
    ...tie('after-1us', [{ at: 100.000001, status: 200, sid: 'tie-b' }], [100]),
    ...tie('loop-same', [{ at: 100, status: 200, sid: 'tie-c' }], [100, 101, 102]),
    ...tie('loop-1us', [{ at: 99.999999, status: 200, sid: 'tie-d' }], [100, 101, 102]),
  ]);
});
afterAll(async () => {
  await t?.close();
});

const verdicts = async (service: string) =>
  (await runQuery<{ verdict: string; challenges: number }>(t.store, 'auth_challenges', { service, auth_window_s: 60 })).map((r) => [r.verdict, Number(r.challenges)]);

describe('auth_challenges: a 2xx in the same microsecond as a challenge', () => {
  it('is not after it (the challenge stays unresolved); 1 µs later is, and makes it benign', async () => {
    expect(await verdicts('after-same')).toEqual([['unresolved', 1]]);
    expect(await verdicts('after-1us')).toEqual([['benign', 1]]);
  });

  it('as the first of 3 challenges breaks the loop; 1 µs before it does not', async () => {
    expect(await verdicts('loop-same')).toEqual([['unresolved', 3]]);
    expect(await verdicts('loop-1us')).toEqual([['loop', 3]]);
  });
});

// With retention off (CONTINUITY_RETENTION_DAYS=0) no TTL drops rows before 1970,
// whose µs are negative; the sorted arrays hold µs + 2^62, so they still sort in
// time order (a break-it pass found a wrapped UInt64 turning this benign challenge
// into a loop).
describe('auth_challenges before 1970 (retention off)', () => {
  it('judges as it does after: a 2xx on the session 5 s after the challenge makes it benign', async () => {
    await applyRetention(t.store, 0);
    const sc = new ServerScenario('pre-1970', { ua: 'cc/1', principal: 'p1' });
    sc.boot(0);
    sc.session('s1', 10, 2);
    sc.challenge(20, 's1', 'invalid_token');
    sc.request(25, { sid: 's1' });
    // scenario time 0 at 1969-12-31 23:00 UTC
    await insertEvents(t.store, sc.events.map((e) => ({ ...e, ts: (e.ts as number) - T0_MICROS - 3600e6 })));
    const rows = await runQuery<{ verdict: string; challenges: number }>(t.store, 'auth_challenges', { service: 'pre-1970', t_from: '1900-01-01 00:00:00', t_to: '2200-01-01 00:00:00', auth_window_s: 60 });
    expect(rows.map((r) => [r.verdict, Number(r.challenges)])).toEqual([['benign', 1]]);
  });
});
