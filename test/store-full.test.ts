// A store whose disk is full: the engine refuses writes (NOT_ENOUGH_SPACE, code 243)
// until space returns. That is the store being unavailable, not a statement it
// rejects: a retriable CONT_ERR_STORE_UNAVAILABLE that says the disk is full and where,
// so the consumer pauses and resumes (test/faults/store-full.test.ts), `serve` answers
// 503 and keeps what it accepted, and an import stops with the coded error.
//
// The full disk is the engine's own: the MergeTree setting
// `min_free_disk_bytes_to_perform_insert` set above any free space makes every insert
// into `events` fail exactly as a full disk does, with no root and no tmpfs. (A real
// 40 MB tmpfs gives the same error; see docs/ingest-kafka.md.)
import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importCaddyLogs } from '../collectors/index.ts';
import { hasherForConfig } from '../core/index.ts';
import { createGateway, createInProcessTransport, mapOtlpRecord, type InProcessTransport } from '../ingest/index.ts';
import { applyRetention, classifyStoreError, loadMigrations, migrate, retentionDaysOf } from '../store/index.ts';
import { waitFor } from './faults/support.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('store_full');
});
afterAll(async () => {
  await t?.close();
});

const fill = () => t.store.command('ALTER TABLE events MODIFY SETTING min_free_disk_bytes_to_perform_insert = 1000000000000000');
const free = () => t.store.command('ALTER TABLE events RESET SETTING min_free_disk_bytes_to_perform_insert');
const count = async (where: string) => (await t.store.query<{ n: number }>(`SELECT count() AS n FROM events WHERE ${where}`))[0]!.n;
let seq = 0;
const boot = (service: string) => ({ event_id: randomUUID(), event_type: 'boot', ts: Date.now() * 1000 + seq++, source: 'server', service, boot_id: `boot-${service}`, pid: 1 });

describe('the engine refusing a write for want of space', () => {
  it('is a retriable CONT_ERR_STORE_UNAVAILABLE that says the disk is full and names the data directory', async () => {
    await fill();
    try {
      const err = await t.store.insertJsonEachRow('events', JSON.stringify(boot('full')), { dedupToken: 'full:1' }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toMatchObject({
        code: 'CONT_ERR_STORE_UNAVAILABLE',
        retriable: true,
        message: expect.stringMatching(/full.*NOT_ENOUGH_SPACE/),
        details: { dataDir: t.config.dataDir, reason: 'disk_full' },
      });
      expect((err as Error).message).toContain(t.config.dataDir);
    } finally {
      await free();
    }
    // Space back: the same insert goes through.
    await t.store.insertJsonEachRow('events', JSON.stringify(boot('full')), { dedupToken: 'full:1' });
    expect(await count("service = 'full'")).toBe(1);
  });

  it.each([
    ['the engine reserving space', 'Code: 243. DB::Exception: Cannot reserve 1.00 MiB, not enough space. (NOT_ENOUGH_SPACE) (version 25.5.1.1)'],
    ['a CREATE on a full disk (no code in the text)', 'Cannot reserve 1.00 MiB, not enough space. '],
    ['a write that met ENOSPC', 'Code: 75. DB::ErrnoException: Cannot write to file /d/clickhouse/store/a/b/tmp_insert_all_1_1_0/data.bin, errno: 28, strerror: No space left on device. (CANNOT_WRITE_TO_FILE_DESCRIPTOR)'],
    ['a full quota', 'Code: 75. DB::ErrnoException: Cannot write to file /d/x.bin: Disk quota exceeded. (CANNOT_WRITE_TO_FILE_DESCRIPTOR)'],
    ['a server answering over HTTP', 'Code: 243. DB::Exception: Cannot reserve 8.00 MiB, not enough space: While executing WaitForAsyncInsert. (NOT_ENOUGH_SPACE)'],
  ])('classifies %s as the store being full', (_what, text) => {
    const embedded = classifyStoreError(new Error(text), { mode: 'embedded', location: '/var/lib/continuity' }, 'INSERT INTO events');
    expect(embedded).toMatchObject({ code: 'CONT_ERR_STORE_UNAVAILABLE', retriable: true, details: { reason: 'disk_full', dataDir: '/var/lib/continuity' } });
    expect(embedded.message).toMatch(/the file system of the data directory \/var\/lib\/continuity is full/);
    const server = classifyStoreError(new Error(text), { mode: 'server', location: 'http://ch:8123' }, 'INSERT INTO events');
    expect(server).toMatchObject({ code: 'CONT_ERR_STORE_UNAVAILABLE', retriable: true, details: { reason: 'disk_full', url: 'http://ch:8123' } });
    expect(server.message).toMatch(/the ClickHouse server http:\/\/ch:8123 has no space left/);
  });

  it.each([
    ['a part directory on a read-only mount', 'Code: 1001. DB::Exception: std::__1::__fs::filesystem::filesystem_error: filesystem error: in create_directories: Read-only file system ["/d/clickhouse/store/a/b/tmp_insert_all_1_1_0/"]. (STD_EXCEPTION)'],
    ['a file write refused', 'Code: 76. DB::ErrnoException: Cannot open file /d/clickhouse/store/a/b/tmp_insert_all_1_1_0/data.bin, errno: 13, strerror: Permission denied. (CANNOT_OPEN_FILE)'],
  ])('classifies %s as the store unavailable, retriable (a break-it pass: serve dropped what it had acknowledged)', (_what, text) => {
    const e = classifyStoreError(new Error(text), { mode: 'embedded', location: '/d' }, 'INSERT INTO events');
    expect(e).toMatchObject({ code: 'CONT_ERR_STORE_UNAVAILABLE', retriable: true, details: { reason: 'not_writable', dataDir: '/d' } });
    expect(e.message).toMatch(/the data directory \/d cannot be written \(read-only or not permitted\): /);
  });

  it('leaves other write failures as they were (an I/O error that is not about space stays a rejected statement)', () => {
    const io = classifyStoreError(new Error('Code: 75. DB::ErrnoException: Cannot write to file /d/x.bin, errno: 5, strerror: Input/output error. (CANNOT_WRITE_TO_FILE_DESCRIPTOR)'), { mode: 'embedded', location: '/d' }, 'INSERT');
    expect(io.code).toBe('CONT_ERR_STORE_QUERY');
    const parse = classifyStoreError(new Error('Code: 27. DB::Exception: Cannot parse input: expected \'"\' before: \'x\': (CANNOT_PARSE_INPUT_ASSERTION_FAILED)'), { mode: 'embedded', location: '/d' }, 'INSERT');
    expect(parse.code).toBe('CONT_ERR_STORE_QUERY');
  });
});

describe('serve\'s in-process writer on a full disk', () => {
  let transport: InProcessTransport;
  let app: FastifyInstance;
  const auth = { authorization: 'Bearer store-full-token-0123456789', 'content-type': 'application/json' };
  beforeAll(async () => {
    transport = createInProcessTransport(t.store, { flushIntervalMs: 20 });
    ({ app } = await createGateway({ sink: transport, mapOtlpRecord, bearerToken: 'store-full-token-0123456789' }));
  });
  afterAll(async () => {
    await app?.close();
    await transport?.shutdown();
  });

  it('keeps what it accepted, answers 503 with the reason while the disk is full, and writes everything once space returns', async () => {
    await fill();
    const answered: number[] = [];
    let sent = 0;
    try {
      const first = await app.inject({ method: 'POST', url: '/v1/events', headers: auth, payload: [boot('serve-full'), boot('serve-full')] });
      expect(first.statusCode).toBe(200); // queued: the write fails after the answer
      sent += 2;
      answered.push(2);
      await waitFor('the writer to find the disk full', () => (transport.ready() ? undefined : true), 20_000, 20);
      const refused = await app.inject({ method: 'POST', url: '/v1/events', headers: auth, payload: [boot('serve-full')] });
      expect(refused.statusCode).toBe(503);
      expect(refused.headers['retry-after']).toBeDefined();
      expect(refused.json()).toMatchObject({ code: 'CONT_ERR_INGEST_UNAVAILABLE', message: expect.stringMatching(/full.*NOT_ENOUGH_SPACE/) });
      expect((await app.inject({ url: '/readyz' })).statusCode).toBe(503);
      // More than the eight attempts after which the writer used to drop the batch.
      await waitFor('more than eight write attempts', () => (transport.stats.writeRetries > 8 ? true : undefined), 60_000, 100);
      expect(transport.writer.stats.dropped).toBe(0);
    } finally {
      await free();
    }
    await waitFor('the writer to recover', () => (transport.ready() ? true : undefined), 30_000, 50);
    const after = await app.inject({ method: 'POST', url: '/v1/events', headers: auth, payload: [boot('serve-full')] });
    expect(after.statusCode).toBe(200);
    sent += 1;
    await transport.flush();
    expect(await count("service = 'serve-full'")).toBe(sent);
    expect(transport.writer.stats.dropped).toBe(0);
    expect((await app.inject({ url: '/readyz' })).statusCode).toBe(200);
  }, 90_000);
});

describe('an import on a full disk', () => {
  it('stops with the coded error; run again once space returns, it stores every line once', async () => {
    const capture = fileURLToPath(new URL('./fixtures/captures/caddy-sdk-restart/caddy-access.log', import.meta.url));
    const lines = readFileSync(capture, 'utf8').split('\n').filter((l) => l.trim() !== '');
    const start = Date.now() / 1000 - lines.length;
    const path = join(tmpdir(), `continuity-store-full-${process.pid}.log`);
    writeFileSync(path, lines.map((l, i) => JSON.stringify({ ...JSON.parse(l), ts: start + i })).join('\n') + '\n');
    const options = { access: [path], hasher: hasherForConfig(t.config), service: 'import-full' };
    try {
      await fill();
      try {
        await expect(importCaddyLogs(t.store, options)).rejects.toMatchObject({ code: 'CONT_ERR_STORE_UNAVAILABLE', message: expect.stringContaining(t.config.dataDir) });
      } finally {
        await free();
      }
      const report = await importCaddyLogs(t.store, options);
      expect(await count("service = 'import-full'")).toBe(report.events_written);
      expect(report.events_written).toBeGreaterThan(0);
    } finally {
      rmSync(path, { force: true });
    }
  });
});

describe('schema changes on a full disk', () => {
  it('are refused before the engine runs them: a TTL change there leaves empty table definitions behind', async () => {
    const before = await retentionDaysOf(t.store);
    await expect(applyRetention(t.store, before + 7, { freeBytes: () => 512 * 1024 })).rejects.toMatchObject({
      code: 'CONT_ERR_STORE_UNAVAILABLE',
      message: expect.stringMatching(/data directory .* is full \(512 KiB free\)/),
    });
    expect(await retentionDaysOf(t.store)).toBe(before);
    // Nothing to change: no check, no refusal.
    await applyRetention(t.store, before, { freeBytes: () => 0 });
  });

  it('refuse a pending migration the same way, and run it once space returns', async () => {
    const next = { version: 9999, name: 'full_disk_probe', sql: 'CREATE TABLE IF NOT EXISTS full_disk_probe (a UInt8) ENGINE = MergeTree ORDER BY a;\n', checksum: 'probe' };
    const migrations = [...loadMigrations(), next];
    await expect(migrate(t.store, { migrations, freeBytes: () => 1 << 20 })).rejects.toMatchObject({
      code: 'CONT_ERR_STORE_UNAVAILABLE',
      message: expect.stringMatching(/1024 KiB free\): migration 9999_full_disk_probe needs at least 16 MiB free/),
      details: { reason: 'disk_full', dataDir: t.config.dataDir },
    });
    const tables = async () => (await t.store.query<{ n: number }>(`SELECT count() AS n FROM system.tables WHERE database = currentDatabase() AND name = 'full_disk_probe'`))[0]!.n;
    expect(await tables()).toBe(0);
    // An up-to-date store opens on a full disk (reads still work there).
    expect(await migrate(t.store, { freeBytes: () => 0 })).toEqual([]);
    expect(await migrate(t.store, { migrations, freeBytes: () => 64 << 20 })).toEqual([9999]);
    expect(await tables()).toBe(1);
  });
});
