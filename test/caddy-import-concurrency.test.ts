import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateCaddyAccessLog } from '../bench/generate-caddy.ts';
import { convertCaddyLogs, importCaddyLogs, type ImportReport } from '../collectors/index.ts';
import { hasherForConfig, type KeyedHasher } from '../core/index.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// The import writes several batches at once (insertConcurrency, default 2). Batches,
// their deduplication tokens and the report must not depend on it: only the order in
// which batches land may differ.

let t: TestStore;
let hasher: KeyedHasher;
let dir: string;
let log: string;

beforeAll(async () => {
  t = await openTestStore('caddy_import_concurrency');
  hasher = hasherForConfig(t.config);
  dir = mkdtempSync(join(tmpdir(), 'continuity-conc-'));
  log = join(dir, 'access.log');
  await generateCaddyAccessLog({ lines: 3000, path: log, seed: 7 });
  // Rejected lines after the good ones, with known line numbers (3001…3003).
  appendFileSync(log, '{"ts": "not a number", "request": {}, "status": 200}\nnot json at all\n{"truncated": \n');
});
afterAll(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The report without its wall-clock times. */
const timeless = (r: ImportReport) => ({ ...r, files: r.files.map(({ started_at: _s, finished_at: _f, ...f }) => f) });
const count = async (sql: string, params: Record<string, unknown>): Promise<number> => (await t.store.query<{ n: number }>(sql, params))[0]!.n;

describe('import with batches written concurrently', () => {
  let first: ImportReport;

  it('stores exactly the converted events, and every rejected line, with several batches in flight', async () => {
    const ids: string[] = [];
    await convertCaddyLogs({ access: [log], hasher, service: 'conc' }, (row) => {
      ids.push((JSON.parse(row) as { event_id: string }).event_id);
    });
    first = await importCaddyLogs(t.store, { access: [log], hasher, service: 'conc', batchRows: 250, insertConcurrency: 3 });
    expect(first.events_written).toBe(ids.length);
    expect(first.lines).toMatchObject({ read: 3003, rejected: 3 });
    expect(first.rejects.map((r) => r.line)).toEqual([3001, 3002, 3003]);
    const stored = await t.store.query<{ id: string }>(`SELECT toString(event_id) AS id FROM events WHERE service = {service:String} ORDER BY id`, {
      service: 'conc',
    });
    expect(stored.map((r) => r.id)).toEqual([...ids].sort());
    expect(await count('SELECT count() AS n FROM dead_letters WHERE origin = {origin:String}', { origin: log })).toBe(3);
  });

  it('one batch at a time gives the same report, the same batches (tokens), and so stores nothing twice', async () => {
    const again = await importCaddyLogs(t.store, { access: [log], hasher, service: 'conc', batchRows: 250, insertConcurrency: 1 });
    expect(timeless(again)).toEqual(timeless(first));
    expect(await count('SELECT count() AS n FROM events WHERE service = {service:String}', { service: 'conc' })).toBe(first.events_written);
  });
});
