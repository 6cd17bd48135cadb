import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { insertEvents, proxyEvents, repeat } from './fixtures/proxy-scenario.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// session_continuity's survived_1/2 count the restarts of a session's own service
// (queries/sql/session_continuity.sql): every restart in the range was counted for
// every session, so with 5000 services each restarting once, 5000 sessions had
// "survived two restarts" where one had (a break-it pass).

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('survivors_service');
  // svc restarts at 100 s and 200 s; its session S is served from 10 s to 290 s
  const svc = new ServerScenario('svc');
  svc.boot(0, 'v1');
  svc.session('svc-S', 9, 10, 1);
  svc.boot(100, 'v2');
  svc.session('svc-T', 101, 5, 1);
  svc.boot(200, 'v3');
  for (const at of [10, 150, 290]) svc.request(at, { sid: 'svc-S' });
  // other never restarts; its session X is served across the same moments
  const other = new ServerScenario('other');
  other.boot(0, 'v1');
  other.session('other-X', 9, 1);
  for (const at of [10, 150, 290]) other.request(at, { sid: 'other-X' });
  // an unlabelled proxy log of the same moments: its session P belongs to no service,
  // so every restart is its own
  const proxy = proxyEvents([{ at: 9, status: 200, minted: 'P' }, ...repeat(3, 10, 140, (at) => ({ at, status: 200, sid: 'P' }))]).map((e) => ({ ...e, service: '' }));
  await insertEvents(t.store, [...svc.events, ...other.events, ...proxy]);
});
afterAll(async () => {
  await t?.close();
});

describe("survivors count their own service's restarts", () => {
  it('a session of a service that never restarted survived none; an unlabelled one every one', async () => {
    const total = async (params: Record<string, unknown>) => {
      const rows = await runQuery<Record<string, unknown>>(t.store, 'session_continuity', params);
      return {
        sessions: rows.reduce((n, r) => n + Number(r.sessions), 0),
        survived_1: rows.reduce((n, r) => n + Number(r.survived_1), 0),
        survived_2: rows.reduce((n, r) => n + Number(r.survived_2), 0),
      };
    };
    // svc-S and the proxy's P crossed both of svc's restarts; other-X and svc-T none
    expect(await total({})).toEqual({ sessions: 4, survived_1: 2, survived_2: 2 });
    expect(await total({ service: 'other' })).toEqual({ sessions: 1, survived_1: 0, survived_2: 0 });
    expect(await total({ service: 'svc' })).toEqual({ sessions: 2, survived_1: 1, survived_2: 1 });
  });
});
