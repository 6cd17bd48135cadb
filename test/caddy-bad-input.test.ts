import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { constants, deflateRawSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importCaddyLogs, type ImportReport } from '../collectors/index.ts';
import { ContinuityError, hasherForConfig, isContinuityError, type KeyedHasher } from '../core/index.ts';
import type { Store } from '../store/index.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

const CAPTURES = fileURLToPath(new URL('./fixtures/captures/', import.meta.url));
const restartLines = readFileSync(`${CAPTURES}caddy-sdk-restart/caddy-access.log`, 'utf8').trim().split('\n');
const authLines = readFileSync(`${CAPTURES}caddy-sdk-auth/caddy-access.log`, 'utf8').trim().split('\n');
const GOOD = restartLines.slice(0, 3);
const SESSION_ID = '4f2b62a4-4517-4309-8dd1-da4057041770';

let t: TestStore;
let hasher: KeyedHasher;
let dir: string;

beforeAll(async () => {
  t = await openTestStore('caddy_bad_input');
  hasher = hasherForConfig(t.config);
  dir = mkdtempSync(join(tmpdir(), 'caddy-bad-input-'));
});
afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function file(name: string, content: string | Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

/** A capture line with `edit` applied to its parsed entry. */
function edited(line: string, edit: (entry: Record<string, any>) => void): string {
  const entry = JSON.parse(line) as Record<string, any>;
  edit(entry);
  return JSON.stringify(entry);
}

async function run(
  name: string,
  path: string | string[],
  extra: { errors?: string[]; maxLineBytes?: number; batchRows?: number } = {},
  store: Store = t.store,
): Promise<ImportReport> {
  return importCaddyLogs(store, { access: Array.isArray(path) ? path : [path], hasher, service: name, ...extra });
}

async function storeRefusals(): Promise<number> {
  const [row] = await t.store.query<{ n: number }>(`SELECT count() AS n FROM dead_letters WHERE source = 'store'`);
  return Number(row?.n ?? 0);
}

async function importRun(origin: string): Promise<{ lines_parsed: number; lines_rejected: number; events_written: number }> {
  const [row] = await t.store.query<{ lines_parsed: number; lines_rejected: number; events_written: number }>(
    `SELECT lines_parsed, lines_rejected, events_written FROM import_runs WHERE origin = {origin:String} ORDER BY finished_at DESC LIMIT 1`,
    { origin },
  );
  return { lines_parsed: Number(row?.lines_parsed), lines_rejected: Number(row?.lines_rejected), events_written: Number(row?.events_written) };
}

async function stored(service: string): Promise<number> {
  const [row] = await t.store.query<{ n: number }>(`SELECT count() AS n FROM events WHERE service = {service:String}`, { service });
  return row?.n ?? 0;
}

async function deadLetters(origin: string): Promise<Array<{ position: number; reason: string; payload: string; payload_bytes: number }>> {
  return t.store.query(`SELECT position, reason, payload, payload_bytes FROM dead_letters WHERE origin = {origin:String} ORDER BY position`, {
    origin,
  });
}

/** Deterministic pseudo-random bytes (mulberry32). */
function randomBytes(n: number, seed: number): Buffer {
  const out = Buffer.alloc(n);
  let a = seed >>> 0;
  for (let i = 0; i < n; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    out[i] = (x ^ (x >>> 14)) & 0xff;
  }
  return out;
}

describe('bad input never stops an import and never passes silently', () => {
  it('a file of random bytes followed by good lines: rejects the noise by line, keeps the good lines', async () => {
    const noise = randomBytes(256 * 1024, 7);
    noise[0] = 0x41; // not the gzip magic
    const path = file('random.log', Buffer.concat([noise, Buffer.from('\n' + GOOD.join('\n') + '\n')]));
    const r = await run('random', path);
    const noiseLines = noise.toString('latin1').split('\n').length;
    expect(r.proxy_access).toBe(3);
    expect(await stored('random')).toBe(3);
    expect(r.lines.rejected).toBeGreaterThan(100);
    expect(r.lines.read).toBe(r.lines.parsed + r.lines.rejected + r.lines.skipped + r.lines.blank);
    expect(r.lines.parsed).toBe(3);
    expect(Object.keys(r.rejects_by_reason).every((k) => ['not_json', 'wrong_type', 'missing_field'].includes(k))).toBe(true);
    expect(r.rejects_by_reason.not_json).toBeGreaterThan(100);
    expect(r.rejects).toHaveLength(100);
    expect(r.rejects[0]).toMatchObject({ file: path, line: 1, reason: 'not_json' });
    // Every rejected line is in dead_letters, by number, without its content.
    const dl = await deadLetters(path);
    expect(dl).toHaveLength(r.lines.rejected);
    expect(dl.every((d) => d.payload === '' && d.position >= 1 && d.position <= noiseLines)).toBe(true);
  });

  it('truncated JSON lines are not_json with their line numbers; the complete lines are kept', async () => {
    const lines = [GOOD[0]!, GOOD[1]!.slice(0, 100), GOOD[2]!, GOOD[1]!.slice(0, GOOD[1]!.length - 1), restartLines[5]!.slice(0, 400)];
    const path = file('truncated.log', lines.join('\n') + '\n');
    const r = await run('truncated', path);
    expect(r.proxy_access).toBe(2);
    expect(await stored('truncated')).toBe(2);
    expect(r.rejects.map((x) => [x.line, x.reason])).toEqual([
      [2, 'not_json'],
      [4, 'not_json'],
      [5, 'not_json'],
    ]);
    expect(r.rejects[0]!.detail).toMatch(/unexpected end of input/);
    // The detail never quotes the line (it may hold a session id or token).
    for (const x of r.rejects) expect(x.detail).not.toContain(SESSION_ID.slice(0, 8));
    // imported again, the same rejected lines are not dead-lettered twice (schema/migrations/0015)
    expect((await deadLetters(path)).map((d) => Number(d.position))).toEqual([2, 4, 5]);
    await run('truncated', path);
    expect((await deadLetters(path)).map((d) => Number(d.position))).toEqual([2, 4, 5]);
  });

  it('a 10 MB line is rejected as line_too_long without stopping the import', async () => {
    const huge = '{"level":"info","logger":"http.log.access.log0","msg":"' + 'x'.repeat(10 * 1024 * 1024) + '"}';
    const path = file('huge.log', [GOOD[0], huge, GOOD[1], GOOD[2]].join('\n') + '\n');
    const r = await run('huge', path);
    expect(r.proxy_access).toBe(3);
    expect(await stored('huge')).toBe(3);
    expect(r.rejects).toEqual([{ file: path, line: 2, reason: 'line_too_long', detail: expect.stringMatching(/exceeds 1048576/) }]);
    const [dl] = await deadLetters(path);
    expect(dl).toMatchObject({ position: 2, reason: 'line_too_long', payload: '', payload_bytes: huge.length });
  });

  it('a long line at the limit is kept and one byte over is rejected (maxLineBytes)', async () => {
    const line = GOOD[0]!;
    const path = file('limit.log', `${line}\n${line.replace('"level":"info"', '"level":"info" ')}\n`);
    const r = await run('limit', path, { maxLineBytes: Buffer.byteLength(line) });
    expect(r.proxy_access).toBe(1);
    expect(r.rejects.map((x) => [x.line, x.reason])).toEqual([[2, 'line_too_long']]);
  });

  it('fields of the wrong type are wrong_type (naming the field), missing ones missing_field; valid lines are kept', async () => {
    const base = GOOD[2]!;
    const cases: Array<[string, string]> = [
      [edited(base, (e) => (e.status = '200')), 'status'],
      [edited(base, (e) => (e.request = 'POST /mcp')), 'request'],
      [edited(base, (e) => (e.ts = '2026-11-30T04:04:32Z')), 'ts'],
      [edited(base, (e) => (e.request.headers['User-Agent'] = 'node')), 'request.headers.User-Agent'],
      [edited(base, (e) => (e.request.headers['Mcp-Session-Id'] = [42])), 'request.headers.Mcp-Session-Id'],
      [edited(base, (e) => (e.request.remote_port = 'http')), 'request.remote_port'],
      [edited(base, (e) => (e.size = -1)), 'size'],
      [edited(base, (e) => (e.duration = '4ms')), 'duration'],
      [edited(base, (e) => (e.status = 2000)), 'status'],
      [edited(base, (e) => (e.resp_headers = ['Server'])), 'resp_headers'],
      [edited(base, (e) => (e.logger = 7)), 'logger'],
      ['[1,2,3]', 'entry'],
    ];
    const missing = [edited(base, (e) => delete e.status), edited(base, (e) => delete e.ts)];
    const lines = [GOOD[0]!, ...cases.map((c) => c[0]), ...missing, GOOD[1]!];
    const path = file('types.log', lines.join('\n') + '\n');
    const r = await run('types', path);
    expect(r.proxy_access).toBe(2);
    expect(await stored('types')).toBe(2);
    const wrong = r.rejects.filter((x) => x.reason === 'wrong_type');
    expect(wrong.map((x) => x.line)).toEqual(cases.map((_, i) => i + 2));
    cases.forEach(([, field], i) => expect(wrong[i]!.detail.startsWith(`${field}:`), wrong[i]!.detail).toBe(true));
    const miss = r.rejects.filter((x) => x.reason === 'missing_field');
    expect(miss.map((x) => [x.line, x.detail])).toEqual([
      [cases.length + 2, 'status: missing'],
      [cases.length + 3, 'ts: missing'],
    ]);
  });

  it('a line more than an hour past the clock is ts_in_future, as the gateway refuses an event; up to the hour is kept', async () => {
    // (lines of 2105-12 and 2106-01 were counted as written and expired at once, their 90-day TTL
    // past 2106; one of 2100 was kept, where the gateway refuses it: a break-it pass)
    const now = Date.now() / 1000;
    const at = (ts: number) => edited(GOOD[2]!, (e) => (e.ts = ts));
    const lines = [GOOD[0]!, at(Date.UTC(2105, 11, 1) / 1000), at(Date.UTC(2100, 0, 1) / 1000), at(now + 7200), at(now + 600), GOOD[1]!];
    const r = await run('future', file('future.log', lines.join('\n') + '\n'));
    const future = r.rejects.filter((x) => x.reason === 'ts_in_future');
    expect(future.map((x) => x.line)).toEqual([2, 3, 4]);
    expect(future[0]!.detail).toBe("ts: 2105-12-01T00:00:00.000Z is more than 3600 s past this machine's clock");
    expect(r.proxy_access).toBe(3);
    expect(await stored('future')).toBe(3);
  });

  it('a lone UTF-16 surrogate escape in any string field read is lone_surrogate (naming the field, by line); pairs are kept', async () => {
    // JSON.stringify writes a lone surrogate as the escape "\ud800": what the store cannot keep.
    const base = restartLines[2]!; // has Mcp-Session-Id in both request and response headers
    const cases: Array<[string, string]> = [
      [edited(base, (e) => (e.request.headers['User-Agent'] = ['node\ud800'])), 'request.headers.User-Agent'],
      [edited(base, (e) => (e.request.headers.Origin = ['https://a.example\udfff'])), 'request.headers.Origin'],
      [edited(base, (e) => (e.request.uri = '/mcp\udc00')), 'request.uri'],
      [edited(base, (e) => (e.request.host = '\ud800127.0.0.1:8080')), 'request.host'],
      [edited(base, (e) => (e.request.method = 'PO\udbffST')), 'request.method'],
      [edited(base, (e) => (e.request.headers['Mcp-Session-Id'] = ['\ud800'])), 'request.headers.Mcp-Session-Id'],
      [edited(base, (e) => (e.resp_headers['Mcp-Session-Id'] = ['x\ud800'])), 'resp_headers.Mcp-Session-Id'],
      [edited(base, (e) => (e.request.headers['Mcp-Protocol-Version'] = ['2025-11-25\ud800'])), 'request.headers.Mcp-Protocol-Version'],
      [edited(base, (e) => (e.user_id = 'alice\ud800')), 'user_id'],
      [edited(base, (e) => (e.request.remote_ip = '127.0.0.1\ud800')), 'request.remote_ip'],
      [edited(base, (e) => (e.logger = 'http.log.access.log0\ud800')), 'logger'],
      [edited(authLines[0]!, (e) => (e.resp_headers['Www-Authenticate'] = ['Bearer scope="a\ud800"'])), 'resp_headers.Www-Authenticate'], // a 401
      // Upper-case hex is the same escape.
      [edited(base, (e) => (e.request.headers['User-Agent'] = ['node\ud800'])).replace('\\ud800', '\\uD800'), 'request.headers.User-Agent'],
    ];
    expect(cases.at(-1)![0]).toContain('node\\uD800');
    // Kept: a valid pair written as escapes, an escaped backslash before "ud800" (plain text), and a surrogate in a field not read.
    const kept = [
      edited(base, (e) => (e.request.headers['User-Agent'] = ['node 😀'])).replace('😀', '\\ud83d\\ude00'),
      edited(base, (e) => (e.request.headers['User-Agent'] = ['node \\ud800'])),
      edited(base, (e) => (e.request.headers['Accept-Language'] = ['\ud800'])),
    ];
    expect(kept[0]).toContain('"node \\ud83d\\ude00"');
    const lines = [GOOD[0]!, ...cases.map((c) => c[0]), ...kept, GOOD[1]!];
    const path = file('surrogates.log', lines.join('\n') + '\n');
    const refusalsBefore = await storeRefusals();
    const r = await run('surrogates', path);
    expect(r.rejects.map((x) => [x.file, x.line, x.reason])).toEqual(cases.map((_, i) => [path, i + 2, 'lone_surrogate']));
    cases.forEach(([, field], i) => expect(r.rejects[i]!.detail.startsWith(`${field}: `), r.rejects[i]!.detail).toBe(true));
    expect(r.rejects_by_reason).toEqual({ lone_surrogate: cases.length });
    expect(r.lines).toMatchObject({ read: lines.length, parsed: 2 + kept.length, rejected: cases.length });
    expect(r.proxy_access).toBe(2 + kept.length);
    // Counts are what the store holds: nothing went to the store's own dead letters.
    expect(await stored('surrogates')).toBe(r.lines.parsed);
    expect(await stored('surrogates')).toBe(r.events_written);
    expect(await storeRefusals()).toBe(refusalsBefore);
    const dl = await deadLetters(path);
    expect(dl.map((d) => [d.position, d.reason])).toEqual(cases.map((_, i) => [i + 2, 'lone_surrogate']));
    expect(await importRun(path)).toEqual({ lines_parsed: r.lines.parsed, lines_rejected: cases.length, events_written: r.events_written });
    const uas = await t.store.query<{ user_agent: string }>(`SELECT user_agent FROM events WHERE service = 'surrogates' AND user_agent LIKE 'node %' ORDER BY user_agent`);
    expect(uas.map((u) => u.user_agent)).toEqual(['node \\ud800', 'node 😀']);
  });

  it('a lone surrogate in an error-log entry it uses is lone_surrogate too, by file and line', async () => {
    const errorLines = readFileSync(`${CAPTURES}caddy-sdk-restart/caddy-error.log`, 'utf8').trim().split('\n');
    // The entries the join uses: errors of the error log (with a request) and of reverse_proxy (without).
    const used = errorLines.map((l, i) => [l, i] as const).filter(([l]) => /"logger":"http\.(log\.error|handlers\.reverse_proxy)/.test(l) && l.includes('"level":"error"'));
    expect(used.length).toBeGreaterThanOrEqual(2);
    const [msgLine, msgIndex] = used.find(([l]) => l.includes('"request"'))!;
    const [errLine, errIndex] = used.find(([l]) => !l.includes('"request"'))!;
    const bad = [...errorLines];
    bad[msgIndex] = edited(msgLine, (e) => (e.msg = `${e.msg}\ud800`));
    bad[errIndex] = edited(errLine, (e) => (e.error = `${e.error}\udc00`));
    const errorPath = file('surrogates-error.log', bad.join('\n') + '\n');
    const accessPath = file('surrogates-error-access.log', GOOD.join('\n') + '\n');
    const r = await run('surrogates_error', accessPath, { errors: [errorPath] });
    expect(r.rejects.map((x) => [x.file, x.line, x.reason, x.detail.split(':')[0]]).sort()).toEqual(
      [
        [errorPath, msgIndex + 1, 'lone_surrogate', 'msg'],
        [errorPath, errIndex + 1, 'lone_surrogate', 'error'],
      ].sort(),
    );
    expect(r.proxy_access).toBe(3);
    expect(await stored('surrogates_error')).toBe(3);
  });

  it('a row the store still refuses is not counted as imported: its line is store_refused, by file and line', async () => {
    // A store that refuses (for good, as the engine refuses an unparsable row) every events row naming one host.
    const picky = new Proxy(t.store, {
      get(target, prop) {
        if (prop === 'insertJsonEachRow') {
          return async (table: string, body: string | Buffer, options?: { dedupToken?: string }): Promise<void> => {
            if (table === 'events' && body.toString().includes('refuse-me.example')) {
              throw new ContinuityError('CONT_ERR_STORE_QUERY', 'Code: 27. DB::Exception: refused for the test');
            }
            return target.insertJsonEachRow(table, body, options);
          };
        }
        const v = Reflect.get(target, prop) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const refuse = (line: string): string => edited(line, (e) => (e.request.host = 'refuse-me.example'));
    const first = file('refused-1.log', GOOD.join('\n') + '\n');
    const second = file('refused-2.log', [restartLines[6]!, refuse(restartLines[4]!), restartLines[5]!, refuse(authLines[0]!)].join('\n') + '\n');
    expect(JSON.parse(authLines[0]!).status).toBe(401); // a proxy_access and an auth_challenge row
    const r = await run('refused', [first, second], {}, picky);
    const stores = await stored('refused');
    expect(stores).toBe(r.events_written);
    expect(r.proxy_access).toBe(5);
    expect(r.auth_challenges).toBe(0);
    expect(r.lines).toMatchObject({ parsed: 5, rejected: 2 });
    expect(r.rejects_by_reason).toEqual({ store_refused: 2 });
    expect(r.rejects.filter((x) => x.reason === 'store_refused').map((x) => [x.file, x.line]).sort()).toEqual(
      [
        [second, 2],
        [second, 4],
        [second, 4],
      ].sort(),
    );
    expect(r.files.map((f) => [f.lines.parsed, f.lines.rejected, f.events_written])).toEqual([
      [3, 0, 3],
      [2, 2, 2],
    ]);
    expect(await importRun(second)).toEqual({ lines_parsed: 2, lines_rejected: 2, events_written: 2 });
    expect((await deadLetters(second)).map((d) => [d.position, d.reason])).toEqual([
      [2, 'store_refused'],
      [4, 'store_refused'],
    ]);
  });

  it('an empty file (and one of blank lines) imports nothing and says so', async () => {
    const empty = file('empty.log', '');
    const blank = file('blank.log', '\n\r\n   \n\t\n');
    const r = await run('empty', [empty, blank]);
    expect(r.nothing_read).toBe(true);
    expect(r.lines).toEqual({ read: 4, parsed: 0, rejected: 0, skipped: 0, blank: 4 });
    expect(r.events_written).toBe(0);
    expect(r.files.map((f) => f.lines.read)).toEqual([0, 4]);
  });

  it('gzip is detected by its magic bytes, whatever the name; a truncated gzip keeps its lines and reports read_error', async () => {
    const content = restartLines.join('\n') + '\n';
    const gz = gzipSync(content);
    const path = file('access-gzipped.log', gz);
    const r = await run('gzip', path);
    expect(r.files[0]!.gzip).toBe(true);
    expect(r.files[0]!.bytes_read).toBe(gz.length);
    expect(r.proxy_access).toBe(47);
    expect(await stored('gzip')).toBe(47);

    const cutPath = file('access-cut.log.gz', gz.subarray(0, Math.floor(gz.length * 0.6)));
    const cut = await run('gzip_cut', cutPath);
    expect(cut.proxy_access).toBeGreaterThan(0);
    expect(cut.proxy_access).toBeLessThan(47);
    expect(cut.files[0]!.read_error).toMatch(/unexpected end of file/i);
    expect(cut.rejects.at(-1)).toMatchObject({ reason: 'read_error' });
    expect(cut.lines.read).toBe(cut.lines.parsed + cut.lines.rejected + cut.lines.skipped + cut.lines.blank);
    expect(await stored('gzip_cut')).toBe(cut.proxy_access);
  });

  it('a gzip followed by trailing garbage: every line of the gzip imported, the garbage named as read_error', async () => {
    const gz = gzipSync(restartLines.join('\n') + '\n');
    const r = await run('gzip_garbage', file('access-garbage.log.gz', Buffer.concat([gz, Buffer.from('garbage\n')])));
    expect(r.proxy_access).toBe(47);
    expect(await stored('gzip_garbage')).toBe(47);
    expect(r.files[0]!.read_error).toMatch(/^trailing garbage ignored: 8 bytes from byte \d+, after the last complete gzip member/);
    expect(r.rejects).toEqual([{ file: r.files[0]!.path, line: 48, reason: 'read_error', detail: r.files[0]!.read_error }]);
    expect(r.lines).toMatchObject({ read: 48, parsed: 47, rejected: 1 });
  });

  it('a gzip member damaged mid-stream: the lines before the damage imported, the line it cuts is the read_error', async () => {
    // Deflate data byte-aligned after 22 lines and part of the 23rd (a sync flush), then
    // a block of the reserved type: zlib fails there, `gzip -dc` outputs those 22 lines and the part.
    const text = restartLines.slice(0, 22).join('\n') + '\n' + restartLines[22]!.slice(0, 40);
    const header = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
    const data = deflateRawSync(text, { finishFlush: constants.Z_SYNC_FLUSH });
    const path = file('access-damaged.log.gz', Buffer.concat([header, data, Buffer.from([0xff]), gzipSync(restartLines.join('\n'))]));
    const r = await run('gzip_damaged', path);
    expect(r.proxy_access).toBe(22);
    expect(await stored('gzip_damaged')).toBe(22);
    expect(r.rejects).toEqual([
      { file: path, line: 23, reason: 'read_error', detail: 'invalid block type; line 23 was cut off after 40 bytes and not parsed' },
    ]);
    expect(r.lines).toMatchObject({ read: 23, parsed: 22, rejected: 1 });
    expect(r.lines.read).toBe(r.lines.parsed + r.lines.rejected + r.lines.skipped + r.lines.blank);
  });

  it('CRLF line endings and blank lines in between are tolerated', async () => {
    const path = file('crlf.log', `${GOOD[0]}\r\n\r\n${GOOD[1]}\r\n\n${GOOD[2]}`);
    const r = await run('crlf', path);
    expect(r.proxy_access).toBe(3);
    expect(r.lines).toMatchObject({ read: 5, blank: 2, rejected: 0 });
  });

  it('older Caddy: remote_addr "host:port" / "[v6]:port", and Authorization redacted as ["REDACTED"]', async () => {
    const v4 = edited(authLines[2]!, (e) => {
      e.request.remote_addr = '192.0.2.10:40123';
      delete e.request.remote_ip;
      delete e.request.remote_port;
      e.request.headers.Authorization = ['REDACTED'];
    });
    const v6 = edited(authLines[3]!, (e) => {
      e.request.remote_addr = '[2001:db8::7]:51000';
      delete e.request.remote_ip;
      delete e.request.remote_port;
      e.request.headers.Authorization = ['REDACTED'];
    });
    const path = file('old-caddy.log', `${v4}\n${v6}\n`);
    const r = await run('old_caddy', path);
    expect(r.proxy_access).toBe(2);
    const rows = await t.store.query<{ client_address: string; client_port: number; has_credential: boolean }>(
      `SELECT client_address, client_port, has_credential FROM events WHERE service = 'old_caddy' ORDER BY ts`,
    );
    expect(rows).toEqual([
      { client_address: '192.0.2.10', client_port: 40123, has_credential: true },
      { client_address: '2001:db8::7', client_port: 51000, has_credential: true },
    ]);
  });

  it('header names match in any order and case', async () => {
    const canonical = restartLines[2]!; // has Mcp-Session-Id in both request and response headers
    const scrambled = edited(canonical, (e) => {
      const lower = (h: Record<string, unknown>, upper = false): Record<string, unknown> =>
        Object.fromEntries(
          Object.entries(h)
            .reverse()
            .map(([k, v]) => [upper ? k.toUpperCase() : k.toLowerCase(), v]),
        );
      e.request.headers = lower(e.request.headers);
      e.request.headers.authorization = [];
      e.resp_headers = lower(e.resp_headers, true);
    });
    expect(scrambled).toContain('"mcp-session-id"');
    expect(scrambled).toContain('"MCP-SESSION-ID"');
    const path = file('case.log', `${canonical}\n${scrambled}\n`);
    const r = await run('case', path);
    expect(r.proxy_access).toBe(2);
    const rows = await t.store.query<{ request_session_key: string; response_session_key: string; protocol_version: string; user_agent: string; has_credential: boolean }>(
      `SELECT request_session_key, response_session_key, protocol_version, user_agent, has_credential FROM events WHERE service = 'case' ORDER BY has_credential`,
    );
    const key = hasher(SESSION_ID);
    expect(rows).toEqual([
      { request_session_key: key, response_session_key: key, protocol_version: '2025-11-25', user_agent: 'node', has_credential: false },
      { request_session_key: key, response_session_key: key, protocol_version: '2025-11-25', user_agent: 'node', has_credential: true },
    ]);
  });

  it('a combined log (access and error entries in one file) joins upstream errors too', async () => {
    const errorLines = readFileSync(`${CAPTURES}caddy-sdk-restart/caddy-error.log`, 'utf8').trim().split('\n');
    const combined = [...errorLines, ...restartLines].sort((a, b) => (JSON.parse(a) as { ts: number }).ts - (JSON.parse(b) as { ts: number }).ts);
    const path = file('combined.log', combined.join('\n') + '\n');
    const r = await run('combined', path);
    expect(r.proxy_access).toBe(47);
    expect(r.error_entries).toBe(10);
    expect(r.lines.rejected).toBe(0);
    const rows = await t.store.query<{ pg: number; refused: number; cut: number }>(
      `SELECT countIf(proxy_generated) AS pg, countIf(upstream_error = 'connection_refused') AS refused,
              countIf(upstream_error = 'incomplete_response' AND http_method = 'GET' AND http_status = 200 AND NOT proxy_generated) AS cut
       FROM events WHERE service = 'combined'`,
    );
    expect(rows).toEqual([{ pg: 8, refused: 8, cut: 1 }]);
  });

  it('a missing input is CONT_ERR_INPUT_UNREADABLE and nothing is written', async () => {
    const good = file('before-missing.log', GOOD.join('\n') + '\n');
    let thrown: unknown;
    try {
      await run('missing', [good, join(dir, 'no-such-file.log')]);
    } catch (err) {
      thrown = err;
    }
    expect(isContinuityError(thrown, 'CONT_ERR_INPUT_UNREADABLE')).toBe(true);
    expect((thrown as Error).message).toContain('no-such-file.log');
    expect(await stored('missing')).toBe(0);
  });
});
