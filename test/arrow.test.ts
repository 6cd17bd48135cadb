import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { tableFromIPC, Type, type Table } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContinuityServer, type ContinuityServer } from '../api/index.ts';
import { insertEvents, proxyEvents, repeat, type FixtureRequest } from './fixtures/proxy-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// Ad hoc SQL as Arrow IPC (issue 5, item 4): `continuity sql … --format arrow` and
// `POST /api/sql` with format arrow give a stream apache-arrow's tableFromIPC reads
// back with the right columns, types and rows. The CLI runs as a real process on a
// data directory of its own; the API runs in this process on another.

const run = promisify(execFile);
const BIN = new URL('../bin/continuity.mjs', import.meta.url).pathname;
const LOADER = new URL('./helpers/load-events.ts', import.meta.url).pathname;

/** S1's proxy lines: 5 × 200, 1 × 202, 5 × 404. */
const S1: FixtureRequest[] = [
  { at: 0, status: 200, minted: 'A' },
  { at: 0.02, status: 202, sid: 'A' },
  { at: 0.04, status: 200, sid: 'A' },
  ...repeat(3, 1, 1, (at) => ({ at, status: 200, sid: 'A' })),
  ...repeat(5, 60, 1, (at) => ({ at, status: 404, sid: 'A' })),
];
const events = proxyEvents(S1).map((e) => ({ ...e, service: 'arrow' }));

const STATEMENT = `SELECT http_status AS status, count() AS n, min(ts) AS first_ts, any(url_path) AS path, avg(duration_ms) AS avg_ms,
  nullIf(http_status, 404) AS served_status, groupArray(http_method) AS methods
FROM events WHERE event_type = 'proxy_access' AND service = 'arrow' GROUP BY http_status ORDER BY http_status`;

const T0_ISO_MS = Date.UTC(2026, 10, 30, 4, 0, 0);

/** The expected table: columns with their Arrow types, and the rows. */
function expectTable(t: Table): void {
  const fields = Object.fromEntries(t.schema.fields.map((f) => [f.name, f]));
  expect(t.schema.fields.map((f) => f.name)).toEqual(['status', 'n', 'first_ts', 'path', 'avg_ms', 'served_status', 'methods']);
  expect(fields.status!.type).toMatchObject({ typeId: Type.Int, bitWidth: 16, isSigned: false });
  expect(fields.n!.type).toMatchObject({ typeId: Type.Int, bitWidth: 64, isSigned: false });
  expect(fields.first_ts!.type).toMatchObject({ typeId: Type.Timestamp, timezone: 'UTC' });
  expect(String(fields.first_ts!.type)).toBe('Timestamp<MICROSECOND, UTC>');
  expect(fields.path!.type.typeId).toBe(Type.Utf8);
  expect(fields.avg_ms!.type).toMatchObject({ typeId: Type.Float });
  expect(fields.served_status!.nullable).toBe(true);
  expect(fields.status!.nullable).toBe(false);
  expect(fields.methods!.type.typeId).toBe(Type.List);
  expect(t.numRows).toBe(3);
  const rows = t.toArray().map((r) => r.toJSON());
  expect(rows.map((r) => r.status)).toEqual([200, 202, 404]);
  expect(rows.map((r) => r.n)).toEqual([5n, 1n, 5n]);
  expect(rows.map((r) => r.served_status)).toEqual([200, 202, null]);
  expect(rows.map((r) => r.path)).toEqual(['/mcp', '/mcp', '/mcp']);
  expect(rows.map((r) => r.avg_ms)).toEqual([2, 2, 2]);
  // µs timestamps come back as ms with a fraction: 200 first at t=0, 202 at 0.02 s, 404 at 60 s
  expect(rows.map((r) => r.first_ts)).toEqual([T0_ISO_MS, T0_ISO_MS + 20, T0_ISO_MS + 60_000]);
  expect([...(rows[2]!.methods as Iterable<string>)]).toEqual(['POST', 'POST', 'POST', 'POST', 'POST']);
}

/**
 * Reads an Arrow IPC stream with apache-arrow as shipped: no compression codec is
 * registered, so a compressed stream (ClickHouse's default, LZ4_FRAME) throws
 * "Record batch is compressed but codec not found". store.readOnly asks for
 * output_format_arrow_compression_method = 'none'.
 */
function readArrow(bytes: Uint8Array): Table {
  return tableFromIPC(bytes);
}

/** Whether `bytes` hold an LZ4 frame (magic 0x184D2204, little-endian), i.e. a compressed buffer. */
function hasLz4Frame(bytes: Uint8Array): boolean {
  return Buffer.from(bytes).includes(Buffer.from([0x04, 0x22, 0x4d, 0x18]));
}

describe('continuity sql --format arrow', () => {
  let dir = '';
  let files = '';
  const cli = async (args: string[]): Promise<Buffer> => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.CLICKHOUSE_URL;
    delete env.KAFKA_BROKERS;
    delete env.CONTINUITY_DATA_DIR;
    const { stdout } = await run(process.execPath, [BIN, '--data-dir', dir, ...args], { env, encoding: 'buffer', maxBuffer: 64 << 20 });
    return stdout;
  };
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'continuity-arrow-'));
    files = mkdtempSync(join(tmpdir(), 'continuity-arrow-files-'));
    const file = join(files, 'events.jsonl');
    writeFileSync(file, events.map((e) => JSON.stringify(e)).join('\n') + '\n');
    await run(process.execPath, ['--import', 'tsx', LOADER, dir, file]);
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(files, { recursive: true, force: true });
  });

  it('writes an Arrow IPC stream with the statement’s columns, types and rows', async () => {
    expectTable(readArrow(await cli(['sql', STATEMENT, '--format', 'arrow'])));
  });

  it('stops at --max-rows', async () => {
    const t = readArrow(await cli(['sql', 'SELECT number AS x FROM system.numbers', '--format', 'arrow', '--max-rows', '7', '--timeout', '5']));
    expect(t.numRows).toBe(7);
    expect(t.getChild('x')!.toArray()).toEqual(new BigUint64Array([0n, 1n, 2n, 3n, 4n, 5n, 6n]));
  });

  it('is readable by apache-arrow without a compression codec', async () => {
    const bytes = await cli(['sql', STATEMENT, '--format', 'arrow']);
    expect(hasLz4Frame(bytes)).toBe(false);
    expect(() => tableFromIPC(bytes)).not.toThrow();
  });
});

describe('POST /api/sql with format arrow', () => {
  let t: TestStore;
  let server: ContinuityServer;
  const post = (payload: Record<string, unknown>) => server.app.inject({ method: 'POST', url: '/api/sql', payload });
  beforeAll(async () => {
    t = await openTestStore('arrow');
    server = await createContinuityServer({ store: t.store });
    await insertEvents(t.store, events);
  });
  afterAll(async () => {
    await server?.shutdown();
    await t?.close();
  });

  it('answers an Arrow IPC stream with the statement’s columns, types and rows', async () => {
    const res = await post({ sql: STATEMENT, format: 'arrow' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe('application/vnd.apache.arrow.stream');
    expectTable(readArrow(res.rawPayload));
  });

  it('applies max_rows to the stream', async () => {
    const res = await post({ sql: 'SELECT number AS x, toString(number) AS s FROM system.numbers', format: 'arrow', max_rows: 4, timeout_s: 5 });
    expect(res.statusCode).toBe(200);
    const table = readArrow(res.rawPayload);
    expect(table.numRows).toBe(4);
    expect(table.getChild('s')!.toArray()).toEqual(['0', '1', '2', '3']);
  });

  it('answers a write with the coded JSON error, not a stream', async () => {
    const res = await post({ sql: 'DROP TABLE events', format: 'arrow' });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ code: 'CONT_ERR_READONLY' });
  });

  it('is readable by apache-arrow without a compression codec', async () => {
    const res = await post({ sql: STATEMENT, format: 'arrow' });
    expect(hasLz4Frame(res.rawPayload)).toBe(false);
    expect(() => tableFromIPC(res.rawPayload)).not.toThrow();
  });
});
