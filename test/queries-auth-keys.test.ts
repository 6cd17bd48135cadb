import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { fixtureHash, insertEvents, proxyEvents, type FixtureRequest } from './fixtures/proxy-scenario.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// auth_challenges groups its 2xx under one UInt64 per key: the low 64 bits of the
// key's SipHash128 with the key's kind (proxy client, server client, session) in its
// top bits (queries/sql/auth_challenges.sql, key64). A proxy client is
// "address user-agent" and a server client "user-agent principal"
// (schema/migrations/0006-0007), so the two strings, and their hashes, can be equal:
// the kind must keep them apart, or one side's 2xx would judge the other's challenges.

const INVALID = 'Bearer error="invalid_token"';
const P = fixtureHash('cross-principal');

const proxyLines = (reqs: FixtureRequest[]) => proxyEvents(reqs).map((e) => ({ ...e, service: 'cross' }));
// the proxy client "cross-ua <P>": address "cross-ua", user agent P
const proxyCh = (at: number): FixtureRequest => ({ at, status: 401, ip: 'cross-ua', ua: P, credential: true, wwwAuthenticate: INVALID });
const proxyOk = (at: number): FixtureRequest => ({ at, status: 200, ip: 'cross-ua', ua: P });

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('auth-keys');
  // the server client "cross-ua <P>": user agent "cross-ua", principal P; no session
  const server = new ServerScenario('cross', { ua: 'cross-ua', principal: 'cross-principal' });
  // three proxy challenges, a server 2xx between the proxy's and the server's challenges,
  // three server challenges, then a proxy 2xx: each side's 2xx comes after its own last
  // challenge, so each side is a loop; one client across both sides would have a 2xx
  // between its first and last challenge (no loop) and one within 60 s after each (benign)
  server.request(303);
  for (const at of [310, 311, 312]) server.challenge(at, '', 'invalid_token');
  await insertEvents(t.store, [...proxyLines([proxyCh(300), proxyCh(301), proxyCh(302)]), ...server.events, ...proxyLines([proxyOk(313)])]);
});
afterAll(async () => {
  await t?.close();
});

describe('auth_challenges: a proxy client and a server client with the same hashed key', () => {
  it('are two clients: neither side’s 2xx breaks the other’s loop or makes its challenges benign', async () => {
    const [client] = await t.store.query<{ clients: number }>(
      `SELECT uniqExact(clienth) AS clients FROM (SELECT clienth FROM proxy_access WHERE service = 'cross' UNION ALL SELECT clienth FROM server_requests WHERE service = 'cross')`,
    );
    expect(Number(client!.clients)).toBe(1); // the premise: both sides hash to one key
    const rows = await runQuery<{ user_agent: string; verdict: string; challenges: number }>(t.store, 'auth_challenges', { service: 'cross', auth_window_s: 60, loop_min: 3 });
    // one row per user agent (the proxy's is P, the server's "cross-ua"), each a loop of 3
    expect(rows.map((r) => [r.user_agent, r.verdict, Number(r.challenges)]).sort()).toEqual([
      ['cross-ua', 'loop', 3],
      [P, 'loop', 3],
    ].sort());
  });
});
