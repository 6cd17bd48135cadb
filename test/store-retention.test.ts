// The store's retention as every write path reads it (store/retention.ts): from the
// events table's own TTL (CONTINUITY_RETENTION_DAYS changes that TTL only when set),
// read once and kept, re-read at most once per refresh interval, never per batch.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContinuityServer } from '../api/index.ts';
import { importCaddyLogs } from '../collectors/index.ts';
import { hasherForConfig, loadConfig, MAX_RETENTION_DAYS } from '../core/index.ts';
import { generateEvents } from '../bench/generate-events.ts';
import { applyRetention, migrate, readRetention, RETAINED_TABLES, retentionChangesOf, retentionDaysOf, type Store } from '../store/index.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('retention', { CONTINUITY_RETENTION_DAYS: undefined }) /* the store's own default retention (90 days) */;
});
afterAll(async () => {
  await t?.close();
});

const DAY_US = 86_400e6;

/** `t.store` counting its queries. */
function counting(store: Store): { store: Store; queries: () => number } {
  let n = 0;
  return {
    store: { ...store, query: (sql, params) => (n++, store.query(sql, params)) } as Store,
    queries: () => n,
  };
}

describe('readRetention', () => {
  it('reads the TTL the store keeps (90 days when created) and gives the cutoff in µs', async () => {
    const r = await readRetention(t.store);
    expect(r.days).toBe(90);
    const now = Date.UTC(2026, 11, 1, 12);
    expect(r.cutoffMicros(now)).toBe(now * 1000 - 90 * DAY_US);
    expect(r.explain(978_307_200_001_000, r.cutoffMicros(now))).toBe(
      "event time 2001-01-01T00:00:00.001000Z is older than the store's 90-day retention (it keeps events from 2026-09-02T12:00:00.000000Z on): " +
        'the TTL of `events` would drop it as soon as it is written (CONTINUITY_RETENTION_DAYS sets the retention; 0 keeps events for ever)',
    );
  });

  it('is read once: a cutoff costs no query; it is read again only after the refresh interval, in the background', async () => {
    const c = counting(t.store);
    let clock = 1_000_000;
    const r = await readRetention(c.store, { refreshMs: 60_000, clock: () => clock });
    expect(c.queries()).toBe(1);
    for (let i = 0; i < 1000; i++) r.cutoffMicros();
    expect(c.queries()).toBe(1);
    await applyRetention(t.store, 30);
    try {
      clock += 60_001;
      expect(r.days).toBe(90); // the value in hand answers at once
      r.cutoffMicros();
      r.cutoffMicros(); // one refresh in flight at a time
      expect(c.queries()).toBe(2);
      await expect.poll(() => r.days).toBe(30);
    } finally {
      await applyRetention(t.store, 90);
    }
  });

  it('has no cutoff when the store keeps events for ever (CONTINUITY_RETENTION_DAYS=0)', async () => {
    await applyRetention(t.store, 0);
    try {
      const r = await readRetention(t.store);
      expect(r.days).toBe(0);
      expect(r.cutoffMicros()).toBe(Number.NEGATIVE_INFINITY);
    } finally {
      await applyRetention(t.store, 90);
    }
  });
});

describe('serve with a store that keeps events for ever', () => {
  it('accepts and keeps events of any age', async () => {
    await applyRetention(t.store, 0);
    const server = await createContinuityServer({ store: t.store, transport: { flushIntervalMs: 20 } });
    try {
      const old = { event_id: randomUUID(), event_type: 'boot', ts: 978_307_200_001_000, source: 'server', service: 'forever', boot_id: 'boot-forever' };
      const res = await server.app.inject({ method: 'POST', url: '/v1/events', payload: [old] });
      expect(res.json()).toEqual({ accepted: 1 });
      await server.transport.flush();
      const [row] = await t.store.query<{ n: number }>(`SELECT count() AS n FROM events WHERE service = 'forever'`);
      expect(row!.n).toBe(1);
    } finally {
      await server.shutdown();
      await applyRetention(t.store, 90);
    }
  });
});

describe('a Caddy log imported again after a retention change dropped its rows', () => {
  it('is stored again, once; with no change in between it stores nothing twice', async () => {
    // (imported under no retention, dropped when one was set, imported again after it
    // was removed: the batches' tokens matched the dropped rows' and the report said 47
    // written with none stored; a break-it pass)
    const s = t; // (one embedded engine per process: the file's store)
    const changes = await retentionChangesOf(s.store);
    const dir = mkdtempSync(join(tmpdir(), 'continuity-retention-'));
    try {
      const access = readFileSync(fileURLToPath(new URL('./fixtures/captures/caddy-sdk-restart/caddy-access.log', import.meta.url)), 'utf8');
      const old = join(dir, 'old.log');
      writeFileSync(old, access.trim().split('\n').map((l) => JSON.stringify({ ...JSON.parse(l), ts: (JSON.parse(l) as { ts: number }).ts - 200 * 86_400 })).join('\n'));
      const importOld = () => importCaddyLogs(s.store, { access: [old], hasher: hasherForConfig(s.config), service: 'reimport' });
      const stored = async () => Number((await s.store.query<{ n: string }>("SELECT count() AS n FROM events WHERE service = 'reimport'"))[0]!.n);
      await applyRetention(s.store, 0);
      expect((await importOld()).events_written).toBe(47);
      expect(await stored()).toBe(47);
      await applyRetention(s.store, 90);
      await s.store.command('OPTIMIZE TABLE events FINAL'); // the merge that applies the TTL
      expect(await stored()).toBe(0);
      await applyRetention(s.store, 0);
      expect((await importOld()).events_written).toBe(47);
      expect(await stored()).toBe(47);
      await importOld();
      expect(await stored()).toBe(47);
      expect(await retentionChangesOf(s.store)).toBe(changes + 3);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await applyRetention(s.store, 90);
    }
  });
});

describe('a shorter retention', () => {
  it('removes what it expires from events and every table derived from it at once, and keeps the rest', async () => {
    // (the TTL change was a mutation of every day of every table: 119 s for 50 days, and
    // the rows it expired were still counted until the engine's TTL merges; a break-it pass)
    const s = t; // (one embedded engine per process: the file's store)
    const nowMs = Date.now();
    const scope = "service LIKE 'mcp-svc-%'";
    const counts = async (days: number) =>
      Object.fromEntries(await Promise.all(RETAINED_TABLES.map(async (table) => {
        // expired a minute or more ago (a row at the cutoff may expire while this runs),
        // and newer than the cutoff by an hour: the events, and the times the rollups
        // hold (a merge combines a rollup's rows of one key, so their number may fall)
        const [row] = await s.store.query<{ expired: string; kept: string }>(
          `SELECT countIf(toDateTime(ts) + toIntervalDay(${days}) < now() - 60) AS expired,
                  ${table === 'events' ? 'countIf' : 'uniqExactIf'}(${table === 'events' ? '' : 'ts, '}toDateTime(ts) + toIntervalDay(${days}) > now() + 3600) AS kept
           FROM ${table} WHERE ${scope}`,
        );
        return [table, { expired: Number(row!.expired), kept: Number(row!.kept) }] as const;
      })));
    try {
      await applyRetention(s.store, 0);
      let batch = 0;
      for (const chunk of generateEvents({ events: 12_000, sessions: 200, principals: 4, services: 2, bootsPerService: 6, spanS: 12 * 86_400, t0Micros: (nowMs - 12 * 86_400_000) * 1000, batchRows: 4_000 })) {
        await s.store.insertJsonEachRow('events', chunk.body, { dedupToken: `retention-drop:${batch++}` });
      }
      const before = await counts(5);
      for (const table of RETAINED_TABLES) expect(before[table]!.expired, table).toBeGreaterThan(0);
      expect(before.events!.kept).toBeGreaterThan(0);
      await applyRetention(s.store, 5);
      const after = await counts(5);
      for (const table of RETAINED_TABLES) expect(after[table], table).toEqual({ expired: 0, kept: before[table]!.kept });

      // the longest retention taken drops nothing (a DateTime `now - days` wrapped past
      // 1970 and dropped every day; a break-it pass)
      await applyRetention(s.store, 0);
      await applyRetention(s.store, MAX_RETENTION_DAYS);
      expect(await counts(5)).toEqual(after);
      expect(() => loadConfig({ CONTINUITY_RETENTION_DAYS: String(MAX_RETENTION_DAYS + 1) })).toThrow(/at most 20000 days/);

      // a shorter retention stopped after some tables' TTL changed (a signal, a crash) is
      // finished when it is applied again: the expired days go from every table
      await applyRetention(s.store, 0);
      const n = (await s.store.query<{ n: string }>(`SELECT count() AS n FROM events WHERE ${scope}`))[0]!.n;
      let again = 0;
      for (const chunk of generateEvents({ events: 12_000, sessions: 200, principals: 4, services: 2, bootsPerService: 6, spanS: 12 * 86_400, t0Micros: (nowMs - 12 * 86_400_000) * 1000, batchRows: 4_000 })) {
        await s.store.insertJsonEachRow('events', chunk.body, { dedupToken: `retention-drop-again:${again++}` });
      }
      expect(Number((await s.store.query<{ n: string }>(`SELECT count() AS n FROM events WHERE ${scope}`))[0]!.n)).toBeGreaterThan(Number(n));
      for (const table of RETAINED_TABLES.slice(0, 4)) {
        await s.store.command(`ALTER TABLE ${table} MODIFY TTL toDateTime(ts) + toIntervalDay(3) SETTINGS materialize_ttl_after_modify = 0`);
      }
      await applyRetention(s.store, 3);
      for (const table of RETAINED_TABLES) {
        const [row] = await s.store.query<{ old: string }>(
          `SELECT countIf(toDate(ts) < toDate(now('UTC') - toIntervalDay(3), 'UTC')) AS old FROM ${table} WHERE ${scope}`,
        );
        expect(Number(row!.old), table).toBe(0);
      }
    } finally {
      await applyRetention(s.store, 90);
    }
  });
});

describe('a store whose retention passes its last date', () => {
  it('keeps its events for ever instead, and says why (30000 days wrapped past 2106 and a merge expired every row)', async () => {
    const s = t; // (one embedded engine per process: the file's store)
    try {
      // set before MAX_RETENTION_DAYS existed: the TTL alone, as an ALTER left it
      for (const table of RETAINED_TABLES) {
        await s.store.command(`ALTER TABLE ${table} MODIFY TTL toDateTime(ts) + toIntervalDay(30000) SETTINGS materialize_ttl_after_modify = 0`);
      }
      expect(await retentionDaysOf(s.store)).toBe(30000);
      const told: unknown[][] = [];
      await migrate(s.store, { onRetentionChange: (...args) => told.push(args) });
      expect(told).toEqual([[30000, 0, expect.stringContaining(`over ${MAX_RETENTION_DAYS} days`)]]);
      expect(await retentionDaysOf(s.store)).toBe(0);
      const n = async () => Number((await s.store.query<{ n: string }>('SELECT count() AS n FROM events FINAL'))[0]!.n);
      const before = await n();
      await s.store.command('OPTIMIZE TABLE events FINAL'); // the merge that expired every row
      expect(await n()).toBe(before);
    } finally {
      await applyRetention(s.store, 90);
    }
  });
});
