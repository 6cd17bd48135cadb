import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { proxyLines, reloadEvents } from './helpers/reload.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// A client that re-initializes after a refused miss but still sends the stale id is
// refused again, and initializes again. Each initialize that answered one of the
// session's misses is a distinct stale→replacement pair (DESIGN §1: count distinct
// pairs), and the one after its last miss is what recovered it. The inferred pairs
// were grouped by the stale session alone (found reading the SQL): only its first
// replacement was kept, so a session whose last re-initialize was adopted read
// unrecovered, with that pair missing and its first replacement orphaned.

let t: TestStore;
const T = Date.UTC(2026, 10, 1, 10) * 1000; // µs
const line = proxyLines(T, { service: 'svc-r', user_agent: 'mcp-remote/0.1.29', client_address: '10.9.0.3' });

beforeAll(async () => {
  t = await openTestStore('remint_repeated');
  await reloadEvents(
    t.store,
    [
      [
        line(1, 0, { http_status: 200, request_session_key: 'k-a' }),
        // refused, re-initialized, and the stale id sent again: twice
        line(2, 30, { http_status: 404, request_session_key: 'k-a' }),
        line(3, 31, { http_status: 200, response_session_key: 'k-b1' }),
        line(4, 60, { http_status: 404, request_session_key: 'k-a' }),
        line(5, 60.5, { http_status: 404, request_session_key: 'k-a' }),
        line(6, 61, { http_status: 200, response_session_key: 'k-b2' }),
        line(7, 90, { http_status: 404, request_session_key: 'k-a' }),
        // the last re-initialize is adopted
        line(8, 91, { http_status: 200, response_session_key: 'k-b3' }),
        line(9, 92, { http_status: 200, request_session_key: 'k-b3' }),
      ],
    ],
    'repeated',
  );
});
afterAll(async () => {
  await t?.close();
});

describe('a client that re-initializes and still sends the stale id', () => {
  it('remint_pairs: a pair per replacement that answered one of its misses, each from the latest miss it answered', async () => {
    const pairs = await runQuery<Record<string, unknown>>(t.store, 'remint_pairs', {});
    expect(pairs.map((p) => [p.stale_session_key, p.replacement_session_key, p.refused_at, p.adopted, p.mode])).toEqual([
      ['k-a', 'k-b1', '2026-11-01 10:00:30.000000', false, 'client_reinit_inferred'],
      ['k-a', 'k-b2', '2026-11-01 10:01:00.500000', false, 'client_reinit_inferred'],
      ['k-a', 'k-b3', '2026-11-01 10:01:30.000000', true, 'client_reinit_inferred'],
    ]);
  });

  it('refused_misses: the three misses an initialize followed are the three pairs', async () => {
    const rows = await runQuery<Record<string, unknown>>(t.store, 'refused_misses', {});
    const next = Object.fromEntries(rows.map((r) => [r.next, Number(r.misses)]));
    // (the miss at 60 s was followed by the same session again, not by an initialize)
    expect(next).toEqual({ initialize: 3, same_session_again: 1 });
  });

  it('session_continuity: the session is recovered by the initialize after its last miss', async () => {
    const rows = await runQuery<Record<string, unknown>>(t.store, 'session_continuity', {});
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ ua_family: 'mcp-remote', stale: 1, recovered: 1, unrecovered_stale: 0, unrecovered_new: 0 });
  });
});
