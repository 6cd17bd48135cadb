// A rollup row (schema/migrations/0008, 0014, 0016, 0017) expires with the first second
// of its hour, day or minute, the rows in that bucket one by one up to a day later:
// at the retention's cutoff a bucket can have lost its row and kept its rows. A range
// that covers such a bucket whole must read it from the rows (queries/registry.ts
// rollupsKeptFrom). Found by a break-it pass: a log imported with its first lines just
// past a 2-day cutoff gave `session_continuity` no session over a range holding the
// cutoff's day whole (the day's rollup row was dropped as it was written), and 154 over
// one beginning at 13:00 that day.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatTimeMicros } from '../core/time.ts';
import { NAMED_QUERIES, runQuery, wholeHours } from '../queries/index.ts';
import { readRetention } from '../store/index.ts';
import { SCENARIO_NAMES, scenarioEvents } from './fixtures/scenarios.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

let t: TestStore;
const DAY_US = 86_400e6;
const HOUR_US = 3_600e6;
const KEYS = ['session_key', 'request_session_key', 'response_session_key', 'stale_session_key', 'replacement_session_key', 'minted_session_key', 'arrival_id'];
/** The first event's time: 30 s past the cutoff of a 2-day retention when the file began. */
let first = 0;

beforeAll(async () => {
  t = await openTestStore('retention-edge', { CONTINUITY_RETENTION_DAYS: '2' });
  const cutoff = (await readRetention(t.store)).cutoffMicros();
  expect(cutoff).toBeGreaterThan(0);
  first = Math.ceil(cutoff + 30e6);
  // every scenario, its first event 0 to 40 minutes after `first` (they last up to an
  // hour), so the events lie in the cutoff's hour and day and the ones after them
  const events = SCENARIO_NAMES.flatMap((name, i) => {
    const evs = scenarioEvents(name);
    const shift = first + (i % 5) * 600e6 - Math.min(...evs.map((e) => e.ts as number));
    return evs.map((e) => {
      const out: Record<string, unknown> = { ...e, ts: (e.ts as number) + shift };
      if (typeof e.started_at === 'number') out.started_at = (e.started_at as number) + shift;
      for (const k of KEYS) if (typeof e[k] === 'string' && e[k] !== '') out[k] = `${name}-${String(e[k])}`;
      return out;
    });
  });
  await t.store.insertJsonEachRow('events', events.map((e) => JSON.stringify(e)).join('\n'), { dedupToken: 'retention-edge' });
});
afterAll(async () => {
  await t?.close();
});

describe('ranges over the retention cutoff', () => {
  it('read the buckets that start before it from the rows: every named query gives what a range starting at the first event gives', async () => {
    // the cutoff's hour and day start before it, so their rollup rows were dropped as
    // they were written (a whole-day range read the day from a row that is not there)
    expect(Math.floor(first / DAY_US) * DAY_US).toBeLessThan(first - 30e6);
    const rollupRows = async (table: string, from: number) =>
      Number((await t.store.query<{ n: string }>(`SELECT count() AS n FROM ${table} WHERE ts = toDateTime({at:Int64}, 'UTC')`, { at: Math.floor(from / 1e6) }))[0]!.n);
    expect(await rollupRows('proxy_sessions_daily', Math.floor(first / DAY_US) * DAY_US)).toBe(0);
    expect(await rollupRows('proxy_sessions', Math.floor(first / HOUR_US) * HOUR_US)).toBe(0);
    // (the default range, 1970 on, covers that day whole; without the edge it would)
    expect(wholeHours({ t_from: '1970-01-01 00:00:00.000000', t_to: '2100-01-01 00:00:00.000000' }).whole_day_lo).toBe(0);
    const atFirst = formatTimeMicros(first - 1);
    const nonEmpty: string[] = [];
    for (const name of Object.keys(NAMED_QUERIES)) {
      const whole = await runQuery<Record<string, unknown>>(t.store, name, {});
      const fromFirst = await runQuery<Record<string, unknown>>(t.store, name, { t_from: atFirst });
      expect(whole, name).toEqual(fromFirst);
      if (whole.length > 0) nonEmpty.push(name);
    }
    // (no scenario of SCENARIO_NAMES holds cap events: cap_pressure has no rows either way)
    expect(nonEmpty).toEqual(Object.keys(NAMED_QUERIES).filter((n) => n !== 'cap_pressure'));
    const sessions = (await runQuery<{ sessions: number }>(t.store, 'session_continuity', {})).reduce((n, r) => n + Number(r.sessions), 0);
    expect(sessions).toBeGreaterThan(20);
  });
});
