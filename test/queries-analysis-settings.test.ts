// The settings statements run with (queries/registry.ts NO_COMPILATION for every
// named query and check, ANALYSIS_SETTINGS for some, analysisSettings): sent only to
// an engine that lists them, looked up once per store, and never changing a row.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { analysisSettings, bindInternalParams, bindParams, countSessionOutcomes, NAMED_QUERIES, querySql, resolveQuerySql, runQuery } from '../queries/index.ts';
import type { Store } from '../store/index.ts';
import { insertEvents } from './fixtures/proxy-scenario.ts';
import { SCENARIO_NAMES, scenarioEvents } from './fixtures/scenarios.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('analysis_settings');
  await insertEvents(t.store, SCENARIO_NAMES.flatMap((name) => scenarioEvents(name)));
});
afterAll(async () => {
  await t?.close();
});

/**
 * A store whose engine answers the settings lookup with `answer` (the names it
 * lists, or an error), counting the lookups; any other statement is refused.
 */
function engineListing(answer: () => Promise<Array<{ name: string }>>): { store: Store; lookups: () => number } {
  let lookups = 0;
  const store = {
    query: async (sql: string) => {
      if (!sql.includes('system.settings')) throw new Error(`unexpected statement: ${sql}`);
      lookups++;
      return answer();
    },
  } as unknown as Store;
  return { store, lookups: () => lookups };
}

describe('analysisSettings', () => {
  it('turns off compilation for every named query and check, and optimize_and_compare_chain for session_continuity and the canary session_outcomes check, on this engine', async () => {
    // the embedded engine (ClickHouse 26.7) lists every setting, as a server from 25.2 on does
    const noCompilation = '\nSETTINGS compile_expressions = 0, compile_aggregate_expressions = 0, compile_sort_description = 0';
    expect(await analysisSettings(t.store, 'session_continuity')).toBe(`${noCompilation}, optimize_and_compare_chain = 0`);
    expect(await analysisSettings(t.store, 'checks/session_outcomes')).toBe(`${noCompilation}, optimize_and_compare_chain = 0`);
    expect(await analysisSettings(t.store, 'restarts')).toBe(noCompilation);
    expect(await analysisSettings(t.store, 'checks/unmatched_transitions')).toBe(noCompilation);
    const { sql } = await resolveQuerySql(t.store, 'session_continuity', bindParams('session_continuity', {}));
    expect(sql.endsWith(`${noCompilation}, optimize_and_compare_chain = 0`)).toBe(true);
    for (const name of Object.keys(NAMED_QUERIES).filter((n) => n !== 'session_continuity')) {
      const other = await resolveQuerySql(t.store, name, bindParams(name, {}));
      expect(other.sql.endsWith(noCompilation), name).toBe(true);
    }
  });

  it('sends only the settings the engine lists (a server before 25.2 has no optimize_and_compare_chain), and looks once per store', async () => {
    const old = engineListing(async () => []);
    expect(await analysisSettings(old.store, 'session_continuity')).toBe('');
    expect(await analysisSettings(old.store, 'checks/session_outcomes')).toBe('');
    expect(await analysisSettings(old.store, 'settlements')).toBe('');
    expect(old.lookups()).toBe(1);
    const some = engineListing(async () => [{ name: 'compile_expressions' }, { name: 'optimize_and_compare_chain' }]);
    expect(await analysisSettings(some.store, 'session_continuity')).toBe('\nSETTINGS compile_expressions = 0, optimize_and_compare_chain = 0');
    expect(await analysisSettings(some.store, 'settlements')).toBe('\nSETTINGS compile_expressions = 0');
    expect(some.lookups()).toBe(1);
  });

  it('forgets a failed lookup, so the next statement tries again', async () => {
    let calls = 0;
    const flaky = engineListing(async () => {
      if (calls++ === 0) throw new Error('the store is unavailable');
      return [{ name: 'optimize_and_compare_chain' }];
    });
    await expect(analysisSettings(flaky.store, 'session_continuity')).rejects.toThrow('the store is unavailable');
    expect(await analysisSettings(flaky.store, 'session_continuity')).toBe('\nSETTINGS optimize_and_compare_chain = 0');
    expect(flaky.lookups()).toBe(2);
  });
});

describe('the rows with and without the settings', () => {
  const ranges: Array<Record<string, unknown>> = [{}, { window_s: 0.5 }, { window_s: 600 }];

  it('session_continuity gives the same rows as its SQL run without them, over every scenario together', async () => {
    let sessions = 0;
    for (const params of ranges) {
      const sql = querySql('session_continuity');
      const plain = await t.store.query(sql, await bindInternalParams(t.store, sql, bindParams('session_continuity', params)));
      const rows = await runQuery(t.store, 'session_continuity', params);
      expect(rows, JSON.stringify(params)).toEqual(plain);
      sessions += rows.reduce((n, r) => n + Number(r.sessions), 0);
    }
    expect(sessions).toBeGreaterThan(0);
  });

  it('every named query gives the same rows as its statement run without its settings, over every scenario together', async () => {
    let rows = 0;
    for (const name of Object.keys(NAMED_QUERIES)) {
      const bound = bindParams(name, {});
      const { sql } = await resolveQuerySql(t.store, name, bound);
      const at = sql.lastIndexOf('\nSETTINGS ');
      expect(at, name).toBeGreaterThan(0);
      const withSettings = await t.store.query(sql, bound);
      expect(withSettings, name).toEqual(await t.store.query(sql.slice(0, at), bound));
      rows += withSettings.length;
    }
    expect(rows).toBeGreaterThan(0);
  });

  it('the session_outcomes check gives the same rows as its SQL run without them', async () => {
    for (const params of ranges) {
      const sql = querySql('checks/session_outcomes');
      const plain = await t.store.query<Record<string, unknown>>(sql, await bindInternalParams(t.store, sql, bindParams('session_continuity', params)));
      const rows = await countSessionOutcomes(t.store, params);
      expect(rows.length, JSON.stringify(params)).toBeGreaterThan(0);
      // (the check's rows with its labels as text and its counts as numbers, as countSessionOutcomes gives them)
      const typed = plain.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, k === 'ua_family' || k === 'origin' ? String(v) : Number(v)])));
      expect(rows, JSON.stringify(params)).toEqual(typed);
    }
  });
});
