import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isContinuityError } from '../core/errors.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// Per-statement settings must not outlive their statement. Through chdb/connection,
// per-request clickhouse_settings become session-wide SET statements (chdb 3.4.0):
// these tests fail if the store ever routes a setting that way (in embedded mode),
// and pass against a server, where settings are per request anyway.

let t: TestStore;
const row = (id: number) => JSON.stringify({ event_id: `00000000-0000-8000-8000-${String(id).padStart(12, '0')}`, event_type: 'boot', ts: 1_796_011_200_000_000 + id, source: 'server' });
const count = async () => (await t.store.query<{ c: number }>('SELECT count() AS c FROM events'))[0]!.c;

beforeAll(async () => {
  t = await openTestStore('settings');
});
afterAll(async () => {
  await t?.close();
});

describe('settings scoped to one statement', () => {
  it('a read-only ad hoc query leaves later inserts writable', async () => {
    await t.store.readOnly('SELECT count() FROM events', { format: 'JSONEachRow', maxRows: 10, maxExecutionS: 5 });
    await t.store.insertJsonEachRow('events', row(1));
    expect(await count()).toBe(1);
  });

  it('a deduplication token does not drop later inserts of other rows', async () => {
    await t.store.insertJsonEachRow('events', row(2), { dedupToken: 'leak-test:1' });
    await t.store.insertJsonEachRow('events', row(3));
    await t.store.insertJsonEachRow('events', row(4), { dedupToken: 'leak-test:2' });
    expect(await count()).toBe(4);
  });

  it('the same token twice stores the batch once', async () => {
    await t.store.insertJsonEachRow('events', row(5), { dedupToken: 'leak-test:3' });
    await t.store.insertJsonEachRow('events', row(5), { dedupToken: 'leak-test:3' });
    expect(await count()).toBe(5);
  });

  it('a row limit on one ad hoc query does not cap later ones', async () => {
    const limited = await t.store.readOnly('SELECT number FROM numbers(100)', { format: 'JSONEachRow', maxRows: 3, maxExecutionS: 5 });
    expect(limited.toString().trim().split('\n')).toHaveLength(3);
    const full = await t.store.readOnly('SELECT number FROM numbers(100)', { format: 'JSONEachRow', maxRows: 1000, maxExecutionS: 5 });
    expect(full.toString().trim().split('\n')).toHaveLength(100);
    expect(await t.store.query('SELECT number FROM numbers(50)')).toHaveLength(50);
  });
});

describe('ad hoc SQL is read-only, enforced by the store', () => {
  const opts = { format: 'JSONEachRow', maxRows: 10, maxExecutionS: 5 };
  it.each([
    ['INSERT', "INSERT INTO events (event_id, event_type, ts, source) VALUES (generateUUIDv4(), 'boot', now64(6), 'server')"],
    ['DROP', 'DROP TABLE events'],
    ['ALTER', 'ALTER TABLE events DELETE WHERE 1'],
    ['a second statement', 'SELECT 1; DROP TABLE events'],
    ['a settings change', 'SET readonly = 0'],
    ['a file read', "SELECT * FROM file('/etc/passwd', LineAsString)"],
    ['a file write', "INSERT INTO FUNCTION file('/tmp/continuity-pwned.csv', CSV) SELECT 1"],
    ['a SETTINGS clause lifting readonly', "SELECT * FROM file('/etc/passwd', LineAsString) SETTINGS readonly = 0"],
    ['the file() function', "SELECT file('/etc/passwd') AS f"],
  ])('refuses %s', async (_what, sql) => {
    const err = await t.store.readOnly(sql, opts).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isContinuityError(err)).toBe(true);
    expect(['CONT_ERR_READONLY', 'CONT_ERR_SQL_REFUSED', 'CONT_ERR_STORE_QUERY']).toContain((err as { code: string }).code);
    expect(await count()).toBeGreaterThan(0);
  });

  it('names a second statement plainly, without the wrapper the engine parsed it in', async () => {
    const err = (await t.store.readOnly('SELECT 1; SELECT 2', opts).catch((e: unknown) => e)) as { code: string; message: string };
    expect(err).toMatchObject({ code: 'CONT_ERR_SQL_REFUSED' });
    expect(err.message).toMatch(/one statement per call/);
    expect(err.message).not.toMatch(/formatQuerySingleLine/);
  });

  it('classifies an ad hoc statement\'s error by the engine\'s error name, never by words its message quotes', async () => {
    // each message quotes the user's text: a literal, a column name, a throwIf message
    for (const sql of [
      "SELECT toInt8('No space left on device')",
      'SELECT closed FROM events',
      'SELECT readonly_flag FROM events',
      "SELECT throwIf(1, 'Timeout exceeded')",
      "SELECT throwIf(1, 'ECONNREFUSED socket hang up')",
    ]) {
      const err = await t.store.readOnly(sql, opts).catch((e: unknown) => e);
      expect(err, sql).toMatchObject({ code: 'CONT_ERR_STORE_QUERY', retriable: false, httpStatus: 400 });
    }
  });

  it('runs a statement whose FORMAT the engine writes quoted (FORMAT Null, canonically FORMAT `Null`)', async () => {
    const out = await t.store.readOnly('SELECT 1 AS one FORMAT Null', opts);
    expect(JSON.parse(out.toString().trim())).toEqual({ one: 1 });
  });

  it('names a write as CONT_ERR_READONLY', async () => {
    await expect(t.store.readOnly('DROP TABLE events', opts)).rejects.toMatchObject({ code: 'CONT_ERR_READONLY' });
    await expect(t.store.readOnly("SELECT * FROM file('/etc/passwd', LineAsString)", opts)).rejects.toMatchObject({ code: 'CONT_ERR_READONLY' });
  });

  it('names a statement with its own SETTINGS, and the file() function, as CONT_ERR_SQL_REFUSED', async () => {
    await expect(t.store.readOnly("SELECT getSetting('readonly') AS r SETTINGS readonly = 0", opts)).rejects.toMatchObject({ code: 'CONT_ERR_SQL_REFUSED' });
    await expect(t.store.readOnly('SELECT 1 SETTINGS max_threads = 1', opts)).rejects.toMatchObject({ code: 'CONT_ERR_SQL_REFUSED' });
    await expect(t.store.readOnly("SELECT file('/etc/passwd') AS f", opts)).rejects.toMatchObject({ code: 'CONT_ERR_SQL_REFUSED' });
  });

  it('runs the statement under readonly = 1', async () => {
    const out = await t.store.readOnly("SELECT getSetting('readonly') AS r", opts);
    expect(JSON.parse(out.toString().trim())).toEqual({ r: 1 });
  });

  it('still answers queries, and inserts still work afterwards', async () => {
    const out = await t.store.readOnly('SELECT event_type, count() AS n FROM events GROUP BY event_type', opts);
    expect(JSON.parse(out.toString().trim())).toMatchObject({ event_type: 'boot' });
    await t.store.insertJsonEachRow('events', row(6));
    expect(await count()).toBe(6);
  });
});
