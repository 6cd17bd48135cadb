import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bindInternalParams, bindParams, querySql, runQuery } from '../queries/index.ts';
import { resolveEndpointPaths, resolveProxyGapWindow, withFragments } from '../queries/registry.ts';
import { insertEvents, proxyEvents, type FixtureRequest } from './fixtures/proxy-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// The restart gaps (queries/sql/lib/proxy_seq.sql) read only the proxy's lines within
// 2 minutes of a proxy-generated 5xx when those hold every 5xx's last served line
// before it and first after it, and every line of the range otherwise
// (checks/proxy_gap_window.sql, queries/registry.ts resolveProxyGapWindow). Either
// way the answer must be the one every line gives. Scenarios start 2026-11-30 04:00.

const hour = (h: number, m = 0, s = 0) => `2026-11-30 ${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:${String(s).padStart(2, '0')}`;
const fiveHundreds = (ats: number[]): FixtureRequest[] => ats.map((at) => ({ at, status: 502, sid: 's', proxyGenerated: true }));

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('gap_window');
  const services: Record<string, FixtureRequest[]> = {
    // a short gap across 05:00, 5xx in both minutes, served lines around both
    short: [{ at: 3590, status: 200, sid: 's' }, ...fiveHundreds([3598, 3599.5, 3601, 3605, 3610]), { at: 3620, status: 200, sid: 's' }],
    // a long outage: nothing served from 04:10 to 04:25, 5xx at 04:17
    long: [{ at: 600, status: 200, sid: 's' }, ...fiveHundreds([1020, 1021]), { at: 1500, status: 200, sid: 's' }],
    // a gap still open when the log ends
    open: [{ at: 2000, status: 200, sid: 's' }, ...fiveHundreds([2001, 2002])],
    // nothing served for 10 minutes before a 5xx at 04:50, served again 5 s after it
    quiet: [{ at: 2400, status: 200, sid: 's' }, ...fiveHundreds([3000]), { at: 3005, status: 200, sid: 's' }],
    // 5xx at the same µs as a served line and as each other, in one minute (05:01),
    // then a 5xx alone in its minute (05:03) between served lines in others
    ties: [
      { at: 3690, status: 200, sid: 's' },
      { at: 3700, status: 200, sid: 's' },
      ...fiveHundreds([3700, 3705, 3705]),
      { at: 3710, status: 200, sid: 's' },
      ...fiveHundreds([3710]),
      { at: 3712, status: 200, sid: 's' },
      ...fiveHundreds([3780]),
      { at: 3850, status: 200, sid: 's' },
    ],
  };
  const events = Object.entries(services).flatMap(([service, requests]) => proxyEvents(requests).map((e) => ({ ...e, service })));
  // service A: served at 04:28:20 and 04:29:40, a 5xx at 04:29:50, served at 04:30:10
  // and 04:31:40; then the last two are imported again under service B (same event
  // ids: an overlapping log re-imported with another --service)
  const a = proxyEvents([{ at: 1700, status: 200, sid: 'a' }, { at: 1780, status: 200, sid: 'a' }, ...fiveHundreds([1790]), { at: 1810, status: 200, sid: 'a' }, { at: 1900, status: 200, sid: 'a' }]).map((e) => ({ ...e, service: 'A' }));
  await insertEvents(t.store, [...events, ...a]);
  await insertEvents(t.store, a.slice(3).map((e) => ({ ...e, service: 'B' })));
  await t.store.command('OPTIMIZE TABLE proxy_access FINAL');
});
afterAll(async () => {
  await t?.close();
});

/** proxy_errors' rows by service: [gap_s, proxy_5xx], with the gap window as resolved, or every line read. */
async function gaps(params: Record<string, unknown>, scan?: 1): Promise<Record<string, unknown[]>> {
  const bound = bindParams('proxy_errors', params);
  const sql = querySql('proxy_errors');
  await bindInternalParams(t.store, sql, bound);
  if (scan) bound.proxy_gap_scan = scan;
  const rows = await t.store.query<Record<string, unknown>>(sql, bound);
  return Object.fromEntries(rows.map((r) => [r.service as string, [r.gap_s, r.proxy_5xx]]));
}

/** resolveProxyGapWindow for the range and scope `params`. */
async function window(params: Record<string, unknown>): Promise<{ minutes: string[]; scan: boolean }> {
  const bound = bindParams('proxy_errors', params);
  bound.endpoint_paths = await resolveEndpointPaths(t.store, bound);
  return resolveProxyGapWindow(t.store, bound);
}

describe('the restart gaps read the lines near their 5xx', () => {
  it('when those hold every neighbour: the minutes within 2 of each 5xx, and the answer every line gives', async () => {
    const w = await window({ service: 'short' });
    expect(w.scan).toBe(false);
    expect(w.minutes.sort()).toEqual(['04:57', '04:58', '04:59', '05:00', '05:01', '05:02'].map((m) => `2026-11-30 ${m}:00`));
    expect(await gaps({ service: 'short' })).toEqual({ short: [22, 5] });
    expect(await gaps({ service: 'short' }, 1)).toEqual({ short: [22, 5] });
  });

  it('reads every line when a neighbour lies farther (a long outage), with the same answer', async () => {
    expect((await window({ service: 'long' })).scan).toBe(true);
    // first 5xx 04:17:00, first served after it 04:25:00
    expect(await gaps({ service: 'long' })).toEqual({ long: [480, 2] });
  });

  it('reads every line of a range of 12 hours or less, resolving nothing', async () => {
    expect(await window({ service: 'long', t_from: hour(4, 16), t_to: hour(16, 16) })).toEqual({ minutes: [], scan: true });
    expect(await gaps({ service: 'long', t_from: hour(4, 16), t_to: hour(4, 18) })).toEqual({ long: [null, 2] });
    expect(await gaps({ service: 'short', t_from: hour(4), t_to: hour(6) })).toEqual({ short: [22, 5] });
  });

  it('reads every line when only the served line before a 5xx lies farther', async () => {
    expect((await window({ service: 'quiet' })).scan).toBe(true);
    // the upstream was down from its last served line, 04:40, not from the 5xx
    expect(await runQuery(t.store, 'restarts', { service: 'quiet' })).toMatchObject([{ down_from: '2026-11-30 04:40:00.000000', downtime_s: 5, proxy_5xx: 1 }]);
    // a range that begins within the 5xx's minutes needs nothing before them (and one
    // that ends within them nothing after them: below)
    const fromNear = { service: 'quiet', t_from: hour(4, 49), t_to: '2026-12-01 04:00:00' };
    expect((await window(fromNear)).scan).toBe(false);
    expect(await runQuery(t.store, 'restarts', fromNear)).toMatchObject([{ down_from: '2026-11-30 04:50:00.000000', downtime_s: 5, proxy_5xx: 1 }]);
  });

  it('knows a gap still open when the range ends near it', async () => {
    // the log ends at 04:33:22: the range ending at 04:35 ends within the 5xx's minutes
    const toNear = { service: 'open', t_from: '2026-11-29 04:00:00', t_to: hour(4, 35) };
    expect((await window(toNear)).scan).toBe(false);
    expect(await gaps(toNear)).toEqual({ open: [null, 2] });
    // ending later, the next served line could lie beyond them: every line is read
    expect((await window({ service: 'open' })).scan).toBe(true);
    expect(await gaps({ service: 'open' })).toEqual({ open: [null, 2] });
  });

  it('keeps a gap open whose served lines were re-imported under another service, with or without a filter', async () => {
    // A's served lines after its 5xx are B's now: A's gap has not ended
    const all = await gaps({});
    expect(all.A).toEqual([null, 1]);
    expect(await gaps({ service: 'A' })).toEqual({ A: [null, 1] });
    expect(await gaps({}, 1)).toEqual(all);
    for (const [from, to] of [
      [hour(4), hour(6)],
      [hour(4, 10), hour(5, 30)],
    ]) {
      expect((await gaps({ t_from: from, t_to: to })).A, `${from} - ${to}`).toEqual([null, 1]);
    }
  });

  it('leaves a 5xx written after the window was resolved to the next query', async () => {
    const bound = bindParams('proxy_errors', { service: 'late' });
    const sql = querySql('proxy_errors');
    await bindInternalParams(t.store, sql, bound);
    expect(bound.proxy_gap_minutes).toEqual([]);
    // a consumer writes a gap between the resolution and the query
    await insertEvents(t.store, proxyEvents([{ at: 310, status: 200, sid: 's' }, ...fiveHundreds([320]), { at: 330, status: 200, sid: 's' }]).map((e) => ({ ...e, service: 'late' })));
    // not read without the lines around it (it would look like a gap still open)
    expect(await t.store.query(sql, bound)).toEqual([]);
    expect(await gaps({ service: 'late' })).toEqual({ late: [10, 1] });
  });

  it("gives each 5xx the served lines strictly before and after it, at a tie too, from its minute's lines", async () => {
    // (each 5xx once looked through every served time of its minute: 100K requests and
    // 1,700 5xx in a minute ran the queries out of memory; a break-it pass)
    const bound = bindParams('proxy_errors', { service: 'ties' });
    const sql = withFragments('-- requires: proxy_seq\nSELECT t, last_served, next_served FROM proxy_seq ORDER BY t');
    await bindInternalParams(t.store, sql, bound);
    expect(bound.proxy_gap_scan).toBe(0);
    const base = Date.UTC(2026, 10, 30, 4) / 1000;
    const rows = (r: Array<{ t: number; last_served: number; next_served: number }>) => r.map((x) => [x.t - base, x.last_served - base, x.next_served - base]);
    const expected = [
      [3700, 3690, 3710],
      [3705, 3700, 3710],
      [3705, 3700, 3710],
      [3710, 3700, 3712],
      [3780, 3712, 3850],
    ];
    expect(rows(await t.store.query(sql, bound))).toEqual(expected);
    expect(rows(await t.store.query(sql, { ...bound, proxy_gap_scan: 1 }))).toEqual(expected);
  });

  it('gives restarts the same rows from the near lines as from every line', async () => {
    const rows = await runQuery(t.store, 'restarts', {});
    expect(rows.length).toBeGreaterThan(3);
    const bound = bindParams('restarts', {});
    const sql = querySql('restarts');
    await bindInternalParams(t.store, sql, bound);
    expect(await t.store.query(sql, { ...bound, proxy_gap_scan: 1 })).toEqual(rows);
  });
});
