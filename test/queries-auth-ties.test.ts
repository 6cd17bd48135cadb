import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { parseEvent } from '../schema/index.ts';
import { insertEvents, proxyEvents, type FixtureRequest } from './fixtures/proxy-scenario.ts';
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

// The sorted arrays hold µs since the epoch as unsigned numbers, 0 meaning "none":
// that needs every event after 1970, which the contract guarantees (a break-it pass
// inserting rows of 1969 straight into the table, past the parser, saw them sort
// last and a benign challenge judged a loop).
describe('auth_challenges relies on the contract for its time range', () => {
  it('an event before 2000 is refused before it reaches the store', () => {
    const r = parseEvent({ event_id: '0190d3c4-8a5e-7c3b-9f1e-2a4b6c8d0e1f', source: 'server', event_type: 'auth_challenge', ts: -3_600_000_000, http_status: 401 });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.issues.map((i) => i.path)).toContain('ts');
  });

  // the derived tables key rows by the minute, hour or day as a DateTime, which wraps
  // after its last second (a 2xx of 2163 inserted past the parser landed at a minute
  // of 2026 in ok_minutes); the parser's clock is set after it, so only the bound
  // refuses it (an event more than an hour ahead of the clock is refused too)
  it('an event after the last second a DateTime holds (2106-02-07 06:28:15) is refused', () => {
    const at = (ts: number) => parseEvent({ event_id: '0190d3c4-8a5e-7c3b-9f1e-2a4b6c8d0e1f', source: 'server', event_type: 'auth_challenge', ts, http_status: 401, challenge_class: 'invalid_token' }, { nowMicros: 4_300_000_000_000_000 });
    expect(at(4_294_967_295_999_999).ok).toBe(true);
    const r = at(4_294_967_296_000_000);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.issues.map((i) => i.path)).toContain('ts');
  });
});
