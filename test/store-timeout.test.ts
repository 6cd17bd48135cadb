import { drainPending } from 'chdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestStore, type TestStore } from './helpers/store.ts';

// After a statement fails, every later statement gets exactly its own result.
// chdb 3.4.0 keeps the output a format wrote before an exception (names/types
// header, JSON's {"meta": …}) and prepends it to the next result on the same
// connection, so a `SELECT count()` once came back as rows of the failed query's
// column names and types. These tests fail if the store ever reuses a failed
// embedded connection or dispatches a statement behind one that has not settled;
// against a server (HTTP, one request per statement) they pass as they are.

let t: TestStore;
// 1e10 rows of sipHash64 take minutes: the time limit (1 s) always ends it first.
const SLOW = 'SELECT max(number) AS first_5xx FROM numbers(1e10) WHERE sipHash64(number) = 1';
const timedOut = { code: 'CONT_ERR_STORE_QUERY', message: expect.stringMatching(/Timeout exceeded/) };
// ad hoc SQL's own code for it (store.readOnly)
const adhocTimedOut = { code: 'CONT_ERR_SQL_TIMEOUT', message: expect.stringMatching(/: the statement ran longer than 1 s: .*Timeout exceeded/) };
const boom = { code: 'CONT_ERR_STORE_QUERY', message: expect.stringMatching(/boom/) };
// Fails mid-query, after the output header has been written.
const THROWS = "SELECT number AS n, throwIf(number = 100000, 'boom') AS t FROM numbers(200000)";

/** Normal queries with distinct shapes, each checked exactly. */
async function expectExactResults(round: number): Promise<void> {
  expect(await t.store.query(`SELECT count() AS c FROM numbers(${50 + round})`)).toEqual([{ c: 50 + round }]);
  expect(await t.store.query('SELECT toUInt8(number) AS n, toString(number) AS s FROM numbers(3)')).toEqual([
    { n: 0, s: '0' },
    { n: 1, s: '1' },
    { n: 2, s: '2' },
  ]);
  const opts = { maxRows: 10, maxExecutionS: 5 };
  const each = await t.store.readOnly(`SELECT toUInt8(number + ${round}) AS k FROM numbers(2)`, { ...opts, format: 'JSONEachRow' });
  expect(each.toString()).toBe(`{"k":${round}}\n{"k":${round + 1}}\n`);
  const compact = await t.store.readOnly(`SELECT 'r${round}' AS r`, { ...opts, format: 'JSONCompactEachRowWithNames' });
  expect(compact.toString()).toBe(`["r"]\n["r${round}"]\n`);
}

beforeAll(async () => {
  t = await openTestStore('timeout');
});
afterAll(async () => {
  // An aborted statement keeps running inside the engine; let it end before the directory goes.
  await drainPending();
  await t?.close();
});

describe('results stay in step with requests after a failure', () => {
  it('a timeout through store.query', async () => {
    for (let round = 0; round < 3; round++) {
      await expect(t.store.query(`${SLOW} SETTINGS max_execution_time = 1`)).rejects.toMatchObject(timedOut);
      await expectExactResults(round);
    }
  });

  it.each(['JSON', 'JSONCompact', 'JSONCompactEachRowWithNamesAndTypes', 'CSVWithNames', 'JSONEachRow'])(
    'a timeout through store.readOnly in %s',
    async (format) => {
      for (let round = 0; round < 2; round++) {
        await expect(t.store.readOnly(SLOW, { format, maxRows: 10, maxExecutionS: 1 })).rejects.toMatchObject(adhocTimedOut);
        await expectExactResults(round);
      }
    },
  );

  it('an error that is not a timeout, through store.query and store.readOnly', async () => {
    for (let round = 0; round < 3; round++) {
      await expect(t.store.query(THROWS)).rejects.toMatchObject(boom);
      await expectExactResults(round);
      await expect(t.store.readOnly(THROWS, { format: 'JSON', maxRows: 1_000_000, maxExecutionS: 5 })).rejects.toMatchObject(boom);
      await expectExactResults(round);
    }
  });

  it('a syntax error', async () => {
    await expect(t.store.query('SELEC 1')).rejects.toMatchObject({ code: 'CONT_ERR_STORE_QUERY' });
    await expectExactResults(0);
  });

  it('concurrent queries after a failure, and queued behind one', async () => {
    const batch = () =>
      Array.from({ length: 8 }, (_, i) =>
        t.store.query<{ i: number; s: string }>(`SELECT toUInt8(${i}) AS i, 'q${i}' AS s`).then((rows) => expect(rows).toEqual([{ i, s: `q${i}` }])),
      );
    await expect(t.store.query(`${SLOW} SETTINGS max_execution_time = 1`)).rejects.toMatchObject(timedOut);
    await Promise.all(batch());
    // Sent while the failing statement runs: the engine would queue them on its connection.
    const failing = expect(t.store.query(`${SLOW} SETTINGS max_execution_time = 1`)).rejects.toMatchObject(timedOut);
    const readOnlyFailing = expect(t.store.readOnly(SLOW, { format: 'JSONCompact', maxRows: 10, maxExecutionS: 1 })).rejects.toMatchObject(adhocTimedOut);
    await Promise.all([failing, ...batch(), readOnlyFailing, ...batch()]);
    await expectExactResults(1);
  });

  it('a client-side abort of a running statement', async () => {
    for (let round = 0; round < 2; round++) {
      const controller = new AbortController();
      const aborted = t.store.client.query({
        query: `${SLOW} SETTINGS max_execution_time = 2`,
        format: 'JSONCompactEachRowWithNamesAndTypes',
        abort_signal: controller.signal,
      });
      setTimeout(() => controller.abort(), 200);
      await expect(aborted).rejects.toThrow(/abort/i);
      // The engine runs the aborted statement on until its time limit; its output must not surface here.
      await expectExactResults(round);
      await Promise.all([expectExactResults(round + 1), expectExactResults(round + 2)]);
    }
  });
});

describe('ad hoc SQL does not hold up the other reads', () => {
  it('named reads sent while a long ad hoc statement runs finish before it', async () => {
    const order: string[] = [];
    // runs until its 5 s limit; before this, every read queued behind it on the one lane
    const adhoc = t.store
      .readOnly(SLOW, { format: 'JSONCompact', maxRows: 10, maxExecutionS: 5 })
      .then(
        () => order.push('adhoc ok'),
        () => order.push('adhoc ended'),
      );
    // give the ad hoc statement time to reach the engine first
    await new Promise((r) => setTimeout(r, 300));
    const reads = Promise.all([
      t.store.query<{ c: number }>('SELECT count() AS c FROM numbers(10)').then((rows) => {
        expect(rows).toEqual([{ c: 10 }]);
        order.push('read');
      }),
      t.store.readOnly('SELECT 1 AS one', { format: 'JSONEachRow', maxRows: 1, maxExecutionS: 5 }).then(() => order.push('second adhoc')),
    ]);
    await Promise.all([adhoc, reads]);
    // the named read overtakes the long statement; a second ad hoc statement waits behind it
    expect(order).toEqual(['read', 'adhoc ended', 'second adhoc']);
  });
});
