import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { proxyLines, reloadEvents } from './helpers/reload.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// Refused misses of one session at the same microsecond are each a miss.
// proxy_refused (queries/sql/lib/proxy_refused.sql) joins each miss to the
// neighbours of its session and time; an ANY INNER JOIN there kept one row per
// (session, time) on the left as well, and two such misses counted once (found by
// a helper's A/B of the old and new SQL on random stores).

let t: TestStore;
const T = Date.UTC(2026, 10, 1, 10) * 1000; // µs
const line = proxyLines(T, {
  service: 'svc-a',
  environment: 'prod',
  user_agent: 'claude-code/2.0.14',
  client_address: '10.0.0.1',
  has_credential: true,
  request_session_key: 'k-stale',
});

beforeAll(async () => {
  t = await openTestStore('refused_ties');
});
afterAll(async () => {
  await t?.close();
});

async function load(tied: Record<string, unknown>, token: string): Promise<void> {
  const rows = [
    line(1, 0, { http_status: 200 }),
    line(2, 5, { http_status: 404 }),
    line(3, 5, tied),
    // the client re-initializes: an inferred re-mint, 4 s after the misses
    line(9, 9, { http_status: 200, request_session_key: '', response_session_key: 'k-new' }),
  ];
  await reloadEvents(t.store, [rows], token);
}

const proxyMisses = async () =>
  (await runQuery<Record<string, unknown>>(t.store, 'refused_misses', {}))
    .filter((r) => r.source === 'proxy')
    .map((r) => ({ http_method: r.http_method, http_status: Number(r.http_status), next: r.next, misses: Number(r.misses), sessions: Number(r.sessions) }));
const sessionsRefused = async () => (await runQuery<Record<string, unknown>>(t.store, 'restarts', {})).map((r) => Number(r.sessions_refused));

describe('two refused misses of one session at the same microsecond', () => {
  it('count twice when they are alike', async () => {
    await load({ http_status: 404 }, 'alike');
    expect(await proxyMisses()).toEqual([{ http_method: 'POST', http_status: 404, next: 'initialize', misses: 2, sessions: 1 }]);
    expect(await sessionsRefused()).toEqual([2]);
  });

  it('each keep their own method and status', async () => {
    await load({ http_status: 404, http_method: 'GET' }, 'methods');
    expect(await proxyMisses()).toEqual([
      { http_method: 'GET', http_status: 404, next: 'initialize', misses: 1, sessions: 1 },
      { http_method: 'POST', http_status: 404, next: 'initialize', misses: 1, sessions: 1 },
    ]);
    expect(await sessionsRefused()).toEqual([2]);
  });
});

// A proxy miss stands alone, and is counted as the proxy's, only where no server
// recorded a miss on the same session within 2 s (2,000,000 µs either way). The
// match is one ASOF join per miss (queries/sql/refused_misses.sql, and the check
// proxy_misses_alone); each miss once looked through every server miss of its
// session, quadratic for a client resending a dead session id in a loop.
describe('a proxy miss and the server misses of its session', () => {
  it('is the same miss within 2 s either way, to the microsecond, and its own beyond', async () => {
    const server = (n: number, dt_s: number) => ({
      event_id: `00000000-0000-4000-9000-${String(n).padStart(12, '0')}`,
      event_type: 'session_refused',
      ts: T + dt_s * 1_000_000,
      source: 'server',
      service: 'svc-a',
      environment: 'prod',
      boot_id: 'boot-1',
      arrival_id: `a${n}`,
      session_key: 'k-stale',
      reason: 'unknown_after_boot',
      http_status: 404,
    });
    const rows = [
      line(1, 0, { http_status: 200 }),
      line(2, 5, { http_status: 404 }),
      line(3, 10, { http_status: 404 }),
      line(4, 20, { http_status: 404 }),
      server(1, 7), // 2 s after the miss at 5 s: the same miss
      server(2, 12.000001), // 2.000001 s after the miss at 10 s: not
      server(3, 18), // 2 s before the miss at 20 s: the same
    ];
    await reloadEvents(t.store, [rows], 'alone');
    const got = await runQuery<Record<string, unknown>>(t.store, 'refused_misses', {});
    const misses = (source: string) => got.filter((r) => r.source === source).reduce((n, r) => n + Number(r.misses), 0);
    expect({ server: misses('server'), proxy: misses('proxy') }).toEqual({ server: 3, proxy: 1 });
  });
});
