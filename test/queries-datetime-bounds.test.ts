import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatTimeMicros, isoMicros } from '../core/time.ts';
import { NAMED_QUERIES, runQuery } from '../queries/index.ts';
import { insertEvents, T0_MICROS } from './fixtures/proxy-scenario.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// The engine (26.7) prunes granules of a DateTime64 key wrongly when a bound is a
// second-precision DateTime: under `NOT (ts >= toDateTime(lo) AND ts < toDateTime(hi))`
// a granule that starts in the half second before `lo` (and ends before `hi`) was
// judged to lie wholly inside [lo, hi) and skipped, so its rows were read from
// neither the rows nor the rollup. On the 10M bench store this lost 11 and 31
// server requests for two of 46 ranges. The queries' bounds on the row tables are
// DateTime64 (fromUnixTimestamp64Micro).
//
// The case: a boot's last 2xx opens the second granule (8,192 rows, the tables'
// index_granularity, of the boot's requests come before it), 0.3 s before the
// first whole hour the range reads from the rollup, and the rest of that granule
// (the boot's later requests, none of them a 2xx) lies inside the whole hours.
// The next boot's downtime must run from that settlement, not from the boot's
// last request.

const GRANULE = 8192;

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('datetime_bounds');
});
afterAll(async () => {
  await t?.close();
});

describe('restarts: a boot whose last 2xx opens a granule just before a whole hour', () => {
  it('runs the downtime from that settlement', async () => {
    expect(T0_MICROS % 3_600_000_000).toBe(0);
    const sc = new ServerScenario('granule-svc');
    sc.boot(1800, 'v1');
    // 8,192 unsettled arrivals (one server_requests row each) in [30 min, 59:59.5)
    for (let i = 0; i < GRANULE; i++) sc.request(1800 + (i * 1799.5) / GRANULE, { sid: `s${i % 50}`, settle: false });
    // the last 2xx: its arrival is the first row of the second granule
    sc.request(3599.7, { sid: 's0', duration: 0.01 });
    // the rest of the second granule: later unsettled arrivals, all inside the whole hours
    for (let i = 0; i < GRANULE - 2; i++) sc.request(3600.5 + (i * 4000) / GRANULE, { sid: `s${i % 50}`, settle: false });
    sc.boot(9000, 'v2');
    sc.request(9010, { sid: 's1' });
    await insertEvents(t.store, sc.events);

    const rows = await runQuery<{ boot_id: string; down_from: string }>(t.store, 'restarts', {
      t_from: isoMicros(T0_MICROS + 1800e6),
      t_to: isoMicros(T0_MICROS + 3 * 3600e6),
    });
    expect(rows.map((r) => [r.boot_id, r.down_from])).toEqual([
      ['boot-granule-svc-9000', formatTimeMicros(T0_MICROS + 3599.71e6)],
    ]);
  });
});

describe('a range that starts before 1970', () => {
  it('gives every named query the rows of one that starts in 1970 (settlements read nothing: its first hour wrapped to 2106)', async () => {
    // (a break-it pass: `--from 1969-12-31T00:00:00Z`, a natural "everything", gave 0 arrivals)
    const sc = new ServerScenario('epoch-svc');
    sc.boot(0, 'v1');
    sc.session('e1', 1, 3);
    sc.boot(60, 'v2');
    sc.session('e2', 61, 2);
    await insertEvents(t.store, sc.events);
    const scope = { service: 'epoch-svc' };
    const settled = await runQuery<{ arrivals: number }>(t.store, 'settlements', { ...scope, t_from: '1970-01-01 00:00:00' });
    expect(settled.reduce((n, r) => n + Number(r.arrivals), 0)).toBe(7);
    for (const name of Object.keys(NAMED_QUERIES)) {
      const from1970 = await runQuery(t.store, name, { ...scope, t_from: '1970-01-01 00:00:00' });
      for (const t_from of ['1969-12-31 23:59:59', '1900-01-01 00:00:00']) {
        expect(await runQuery(t.store, name, { ...scope, t_from }), `${name} from ${t_from}`).toEqual(from1970);
      }
    }
  });
});
