import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countChallenges, runQuery } from '../queries/index.ts';
import { insertEvents, proxyEvents, type FixtureRequest } from './fixtures/proxy-scenario.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// A challenge the server recorded is counted from the server's event; the proxy's
// line for the same request (the same user agent within 2 s) is not counted again
// (queries/sql/lib/auth_challenge_rows.sql). The proxy's other challenges are
// counted, each joined to its own access line.

const INVALID = 'Bearer error="invalid_token"';
const proxyCh = (at: number, ua: string): FixtureRequest => ({ at, status: 401, ip: '10.9.0.2', ua, credential: true, wwwAuthenticate: INVALID });

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('auth-sources');
  const server = new ServerScenario('both', { ua: 'dual-ua/1', principal: 'dual-principal' });
  server.challenge(100, '', 'invalid_token'); // its auth_challenge event at 100.001 s
  await insertEvents(t.store, [
    ...server.events,
    ...proxyEvents([
      proxyCh(99, 'dual-ua/1'), // 1.001 s before the server's: the same request
      proxyCh(101.5, 'dual-ua/1'), // 1.499 s after it: the same request
      proxyCh(102.5, 'dual-ua/1'), // 2.499 s after it: another request
      proxyCh(100.5, 'other-ua/1'), // another user agent: another request
    ]).map((e) => ({ ...e, service: 'both' })),
  ]);
});
afterAll(async () => {
  await t?.close();
});

const byAgent = (rows: Array<{ user_agent: string; challenges: unknown }>) => {
  const out: Record<string, number> = {};
  for (const r of rows) out[r.user_agent] = (out[r.user_agent] ?? 0) + Number(r.challenges);
  return out;
};

describe('a challenge both the proxy and the server recorded', () => {
  it('counts once; the proxy challenges no server challenge of their user agent lies within 2 s of count too', async () => {
    const rows = await runQuery<{ user_agent: string; challenges: number }>(t.store, 'auth_challenges', { service: 'both' });
    expect(byAgent(rows)).toEqual({ 'dual-ua/1': 2, 'other-ua/1': 1 });
  });

  it('counts the same in the challenge_counts check (the canary baseline)', async () => {
    const counts = await countChallenges(t.store, { service: 'both' });
    expect(counts.map((c) => [c.challenge_class, c.http_status, Number(c.challenges)])).toEqual([['invalid_token', 401, 3]]);
  });
});
