import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertSomethingImported, convertCaddyLogs, importCaddyLogs, type ImportReport } from '../collectors/index.ts';
import { hasherForConfig, isContinuityError, type KeyedHasher } from '../core/index.ts';
import { parseEvent } from '../schema/index.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

const CAPTURES = fileURLToPath(new URL('./fixtures/captures/', import.meta.url));
const RESTART = {
  access: [`${CAPTURES}caddy-sdk-restart/caddy-access.log`],
  errors: [`${CAPTURES}caddy-sdk-restart/caddy-error.log`],
};
const AUTH = {
  access: [`${CAPTURES}caddy-sdk-auth/caddy-access.log`],
  errors: [`${CAPTURES}caddy-sdk-auth/caddy-error.log`],
};
const RESTART_SESSION_ID = '4f2b62a4-4517-4309-8dd1-da4057041770';

let t: TestStore;
let hasher: KeyedHasher;

beforeAll(async () => {
  t = await openTestStore('caddy_import');
  hasher = hasherForConfig(t.config);
});
afterAll(async () => {
  await t?.close();
});

interface AccessRow {
  http_method: string;
  http_status: number;
  proxy_generated: boolean;
  upstream_error: string;
  request_session_key: string;
  session_key: string;
  has_credential: boolean;
  url_path: string;
}

describe('every event from the captures satisfies the contract (parseEvent)', () => {
  for (const [name, inputs] of Object.entries({ restart: RESTART, auth: AUTH })) {
    it(name, async () => {
      const rows: string[] = [];
      const report = await convertCaddyLogs({ ...inputs, hasher: hasherForConfig(t.config), service: 'mcp' }, (row) => {
        rows.push(row);
      });
      expect(rows.length).toBe(report.events_written);
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) {
        const parsed = parseEvent(JSON.parse(row));
        expect(parsed.ok ? [] : parsed.issues, row).toEqual([]);
      }
    });
  }
});

describe('caddy-sdk-restart capture', () => {
  let report: ImportReport;
  const service = 'restart';

  beforeAll(async () => {
    report = await importCaddyLogs(t.store, { ...RESTART, hasher, service });
  });

  it('reports what it read', () => {
    expect(report.proxy_access).toBe(47);
    expect(report.auth_challenges).toBe(0);
    expect(report.events_written).toBe(47);
    expect(report.lines.rejected).toBe(0);
    // 8 dial-refused entries with a request + 2 request-less stream-cut lines.
    expect(report.error_entries).toBe(10);
    expect(report.joined_upstream_errors).toBe(9);
    expect(report.nothing_read).toBe(false);
    const access = report.files.find((f) => f.kind === 'access')!;
    expect(access.lines).toEqual({ read: 47, parsed: 47, rejected: 0, skipped: 0, blank: 0 });
    // The error log's runtime lines ("server running", tls, admin) are skipped, not rejected.
    const errors = report.files.find((f) => f.kind === 'error')!;
    expect(errors.lines.rejected).toBe(0);
    expect(errors.lines.skipped).toBe(errors.lines.read - 10);
    expect(report.lines.read).toBe(report.lines.parsed + report.lines.rejected + report.lines.skipped + report.lines.blank);
  });

  it('stores 47 proxy_access events: 13×200, 1×202, 25×404, 8×502', async () => {
    const rows = await t.store.query<{ http_status: number; n: number }>(
      `SELECT http_status, count() AS n FROM events WHERE event_type = 'proxy_access' AND service = {service:String}
       GROUP BY http_status ORDER BY http_status`,
      { service },
    );
    expect(rows).toEqual([
      { http_status: 200, n: 13 },
      { http_status: 202, n: 1 },
      { http_status: 404, n: 25 },
      { http_status: 502, n: 8 },
    ]);
  });

  it('marks the 8 proxy-generated 502s (6 POST, 2 GET), joined to connection_refused', async () => {
    const rows = await t.store.query<AccessRow>(
      `SELECT http_method, http_status, upstream_error FROM events
       WHERE event_type = 'proxy_access' AND service = {service:String} AND proxy_generated ORDER BY ts`,
      { service },
    );
    expect(rows).toHaveLength(8);
    expect(rows.filter((r) => r.http_method === 'POST')).toHaveLength(6);
    expect(rows.filter((r) => r.http_method === 'GET')).toHaveLength(2);
    for (const r of rows) expect(r).toMatchObject({ http_status: 502, upstream_error: 'connection_refused' });
  });

  it('joins the cut GET SSE stream (200) with incomplete_response, not proxy_generated', async () => {
    const rows = await t.store.query<AccessRow>(
      `SELECT http_method, http_status, proxy_generated, upstream_error FROM events
       WHERE event_type = 'proxy_access' AND service = {service:String} AND upstream_error = 'incomplete_response'`,
      { service },
    );
    expect(rows).toEqual([{ http_method: 'GET', http_status: 200, proxy_generated: false, upstream_error: 'incomplete_response' }]);
  });

  it('has 25 refused misses (24 POST, 1 DELETE) on one request_session_key, and one session throughout', async () => {
    const misses = await t.store.query<{ http_method: string; n: number; keys: number }>(
      `SELECT http_method, count() AS n, uniqExact(request_session_key) AS keys FROM events
       WHERE event_type = 'proxy_access' AND service = {service:String} AND http_status = 404 GROUP BY http_method ORDER BY http_method`,
      { service },
    );
    expect(misses).toEqual([
      { http_method: 'DELETE', n: 1, keys: 1 },
      { http_method: 'POST', n: 24, keys: 1 },
    ]);
    const [sessions] = await t.store.query<{ keys: number; all_keys: number; with_key: number }>(
      `SELECT uniqExactIf(session_key, session_key != '') AS keys,
              uniqExactIf(request_session_key, request_session_key != '') + 0 AS all_keys,
              countIf(session_key != '') AS with_key
       FROM events WHERE event_type = 'proxy_access' AND service = {service:String}`,
      { service },
    );
    expect(sessions).toMatchObject({ keys: 1, all_keys: 1, with_key: 47 });
    // The key is the deployment's keyed hash of the raw id (continuity hash <id> finds it).
    const [key] = await t.store.query<{ k: string }>(
      `SELECT any(session_key) AS k FROM events WHERE event_type = 'proxy_access' AND service = {service:String} AND session_key != ''`,
      { service },
    );
    expect(key?.k).toBe(hasher(RESTART_SESSION_ID));
  });

  it('never stores the raw session id, in any String column of any table it wrote', async () => {
    const tables = ['events', 'dead_letters', 'import_runs'];
    for (const table of tables) {
      const dump = await t.store.query<{ row: string }>(`SELECT toJSONString(tuple(*)) AS row FROM ${table}`);
      const text = dump.map((r) => r.row).join('\n');
      // The dump does hold the rows' strings (so the check below can fail).
      if (table === 'events') expect(text).toContain('127.0.0.1:8080');
      if (table === 'import_runs') expect(text).toContain('caddy-sdk-restart');
      expect(text).not.toContain(RESTART_SESSION_ID);
      expect(text).not.toContain(RESTART_SESSION_ID.slice(0, 13));
    }
    // The engine's own full-text view agrees.
    const [hits] = await t.store.query<{ n: number }>(
      `SELECT count() AS n FROM events WHERE position(toJSONString(tuple(*)), {id:String}) > 0`,
      { id: RESTART_SESSION_ID },
    );
    expect(hits?.n).toBe(0);
  });

  it('writes one import_runs row per input file', async () => {
    const runs = await t.store.query<{ kind: string; origin: string; lines_read: number; lines_parsed: number; events_written: number; content_hash: string }>(
      `SELECT kind, origin, lines_read, lines_parsed, events_written, content_hash FROM import_runs
       WHERE origin LIKE '%caddy-sdk-restart%' ORDER BY kind`,
    );
    expect(runs.slice(0, 2)).toEqual([
      { kind: 'caddy_access', origin: RESTART.access[0], lines_read: 47, lines_parsed: 47, events_written: 47, content_hash: expect.stringMatching(/^[0-9a-f]{64}$/) },
      { kind: 'caddy_error', origin: RESTART.errors[0], lines_read: 23, lines_parsed: 10, events_written: 0, content_hash: expect.stringMatching(/^[0-9a-f]{64}$/) },
    ]);
  });

  it('importing the same files again stores nothing twice (deterministic ids + deduplication token)', async () => {
    const count = async (): Promise<number> =>
      (await t.store.query<{ n: number }>(`SELECT count() AS n FROM events WHERE service = {service:String}`, { service }))[0]!.n;
    expect(await count()).toBe(47);
    const again = await importCaddyLogs(t.store, { ...RESTART, hasher, service });
    expect(again.events_written).toBe(47);
    expect(await count()).toBe(47);
    const [ids] = await t.store.query<{ n: number }>(`SELECT uniqExact(event_id) AS n FROM events WHERE service = {service:String}`, { service });
    expect(ids?.n).toBe(47);
  });
});

describe('caddy-sdk-auth capture', () => {
  let report: ImportReport;
  const service = 'auth';

  beforeAll(async () => {
    report = await importCaddyLogs(t.store, { ...AUTH, hasher, service });
  });

  it('stores 16 proxy_access and 3 auth_challenge events', async () => {
    expect(report.proxy_access).toBe(16);
    expect(report.auth_challenges).toBe(3);
    expect(report.events_written).toBe(19);
    const rows = await t.store.query<{ event_type: string; n: number }>(
      `SELECT event_type, count() AS n FROM events WHERE service = {service:String} GROUP BY event_type ORDER BY event_type`,
      { service },
    );
    expect(rows).toEqual([
      { event_type: 'auth_challenge', n: 3 },
      { event_type: 'proxy_access', n: 16 },
    ]);
  });

  it('classifies the challenges: 1 missing_credential, 2 invalid_token', async () => {
    const rows = await t.store.query<{ challenge_class: string; has_credential: boolean; has_resource_metadata: boolean; http_status: number }>(
      `SELECT challenge_class, has_credential, has_resource_metadata, http_status FROM events
       WHERE service = {service:String} AND event_type = 'auth_challenge' ORDER BY ts`,
      { service },
    );
    expect(rows).toEqual([
      { challenge_class: 'missing_credential', has_credential: false, has_resource_metadata: true, http_status: 401 },
      { challenge_class: 'invalid_token', has_credential: true, has_resource_metadata: false, http_status: 401 },
      { challenge_class: 'invalid_token', has_credential: true, has_resource_metadata: false, http_status: 401 },
    ]);
  });

  it('takes a 403 for a challenge only with WWW-Authenticate (a bare 403 was a missing_credential challenge)', async () => {
    const line = readFileSync(AUTH.access[0]!, 'utf8').split('\n').find((l) => l.includes('"status":401'))!;
    const dir = mkdtempSync(join(tmpdir(), 'caddy-403-'));
    const bare = line.replace('"status":401', '"status":403').replace(/"Www-Authenticate":\[[^\]]*\],?/, '');
    const scoped = line.replace('"status":401', '"status":403');
    writeFileSync(join(dir, 'access.log'), `${bare}\n${scoped}\n`);
    const svc = `${service}-403`;
    const r = await importCaddyLogs(t.store, { access: [join(dir, 'access.log')], hasher, service: svc });
    expect(r.proxy_access).toBe(2);
    expect(r.auth_challenges).toBe(1);
    const rows = await t.store.query<{ http_status: number }>(`SELECT http_status FROM events WHERE service = {svc:String} AND event_type = 'auth_challenge'`, { svc });
    expect(rows).toEqual([{ http_status: 403 }]);
  });

  it('counts a redacted `Authorization: []` as a credential', async () => {
    const lines = readFileSync(AUTH.access[0]!, 'utf8').trim().split('\n');
    const withEmptyAuth = lines.filter((l) => l.includes('"Authorization":[]')).length;
    expect(withEmptyAuth).toBeGreaterThan(0);
    const [row] = await t.store.query<{ n: number }>(
      `SELECT countIf(has_credential) AS n FROM events WHERE service = {service:String} AND event_type = 'proxy_access'`,
      { service },
    );
    expect(row?.n).toBe(withEmptyAuth);
  });

  it('keeps the OAuth discovery probes as plain 404s with their paths', async () => {
    const rows = await t.store.query<{ url_path: string }>(
      `SELECT url_path FROM events WHERE service = {service:String} AND event_type = 'proxy_access' AND http_status = 404 ORDER BY ts`,
      { service },
    );
    expect(rows.map((r) => r.url_path)).toEqual([
      '/.well-known/oauth-protected-resource/mcp',
      '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-authorization-server',
      '/.well-known/openid-configuration',
      '/register',
    ]);
  });
});

describe('mapping rules', () => {
  const dir = mkdtempSync(join(tmpdir(), 'caddy-map-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const base = JSON.parse(readFileSync(RESTART.access[0]!, 'utf8').split('\n')[2]!) as Record<string, any>;

  it('drops the query string, keeps Origin and the principal as a keyed hash, parses name/version user agents', async () => {
    const entry = structuredClone(base);
    entry.request.uri = '/mcp?access_token=sekrit-token-123&x=1';
    entry.request.headers.Origin = ['https://claude.ai'];
    entry.request.headers['User-Agent'] = ['claude-code/1.0.43 (external, cli)'];
    entry.user_id = 'alice@example.com';
    const path = join(dir, 'mapping.log');
    writeFileSync(path, JSON.stringify(entry) + '\n');
    await importCaddyLogs(t.store, { access: [path], hasher, service: 'mapping' });
    const [row] = await t.store.query<Record<string, unknown>>(
      `SELECT url_path, attrs, principal_key, client_name, client_version, user_agent, ts, duration_ms, bytes, source
       FROM events WHERE service = 'mapping'`,
    );
    expect(row).toEqual({
      url_path: '/mcp',
      attrs: { 'http.host': '127.0.0.1:8080', 'http.origin': 'https://claude.ai', 'caddy.logger': 'http.log.access.log0' },
      principal_key: hasher('alice@example.com'),
      client_name: 'claude-code',
      client_version: '1.0.43',
      user_agent: 'claude-code/1.0.43 (external, cli)',
      ts: '2026-11-30 04:04:32.592839',
      duration_ms: 4.343555,
      bytes: 294,
      source: 'proxy',
    });
    const [dump] = await t.store.query<{ n: number }>(
      `SELECT countIf(position(toJSONString(tuple(*)), 'sekrit') > 0 OR position(toJSONString(tuple(*)), 'alice@') > 0) AS n FROM events`,
    );
    expect(dump?.n).toBe(0);
  });

  it('event ids are RFC 9562 version 8 UUIDs derived from the event kind and the line', async () => {
    const ids = async () => {
      const rows: Array<{ event_id: string; event_type: string }> = [];
      await convertCaddyLogs({ ...AUTH, hasher }, (row) => {
        rows.push(JSON.parse(row) as { event_id: string; event_type: string });
      });
      return rows;
    };
    const first = await ids();
    const second = await ids();
    expect(second).toEqual(first);
    for (const r of first) expect(r.event_id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(first.map((r) => r.event_id)).size).toBe(first.length);
  });
});

describe('progress', () => {
  it('reports bytes read against the file size, per input, error logs first', async () => {
    const seen: Array<{ kind: string; fileIndex: number; fileCount: number; bytesRead: number; totalBytes: number | undefined }> = [];
    await importCaddyLogs(t.store, {
      ...AUTH,
      hasher,
      service: 'progress',
      onProgress: (p) => seen.push({ kind: p.kind, fileIndex: p.fileIndex, fileCount: p.fileCount, bytesRead: p.bytesRead, totalBytes: p.totalBytes }),
    });
    const last = (i: number) => seen.filter((p) => p.fileIndex === i).at(-1);
    expect(last(0)).toMatchObject({ kind: 'error', fileCount: 2, bytesRead: 1631, totalBytes: 1631 });
    expect(last(1)).toMatchObject({ kind: 'access', fileCount: 2, bytesRead: 12190, totalBytes: 12190 });
  });
});

describe('nothing imported', () => {
  it('an error log passed as the access log reads no access entry: nothing_read, and the helper throws CONT_ERR_NOTHING_IMPORTED', async () => {
    const report = await importCaddyLogs(t.store, { access: AUTH.errors, hasher, service: 'nothing' });
    expect(report.nothing_read).toBe(true);
    expect(report.lines.skipped).toBe(13);
    let thrown: unknown;
    try {
      assertSomethingImported(report);
    } catch (err) {
      thrown = err;
    }
    expect(isContinuityError(thrown, 'CONT_ERR_NOTHING_IMPORTED')).toBe(true);
    // the counts in the message add up to the lines read (blank ones were left out)
    const l = report.lines;
    expect((thrown as Error).message).toMatch(new RegExp(`: ${l.read} lines read, ${l.skipped} skipped, ${l.blank} blank$`));
    expect(l.skipped + l.blank + l.parsed + l.rejected).toBe(l.read);
    // an error log with entries about upstream requests is named as one (a newcomer pass)
    const errors = await importCaddyLogs(t.store, { access: RESTART.errors, hasher, service: 'nothing' });
    expect(() => assertSomethingImported(errors)).toThrow(/; the input holds 10 Caddy error-log entries about upstream requests and no access entry: an error log is given with --errors, beside its access log$/);
  });
});

describe('an import that relabels lines imported before (a newcomer pass: said nothing)', () => {
  // (this file's store, one per process: the logs copied with a space after each line,
  // so their contents are none the other tests imported)
  let dir: string;
  const copy = (from: string, name: string, count?: number): string => {
    const lines = readFileSync(from, 'utf8').split('\n').filter(Boolean).slice(0, count);
    const path = join(dir, name);
    writeFileSync(path, lines.map((l) => `${l} `).join('\n') + '\n');
    return path;
  };
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'continuity-relabel-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('names the labels the latest earlier import of the same content gave, and nothing where they are the same', async () => {
    const access = [copy(RESTART.access[0]!, 'restart.log')];
    const first = await importCaddyLogs(t.store, { access, hasher, service: 'relabel-a' });
    expect(first.relabelled).toEqual([]);
    const unlabelled = await importCaddyLogs(t.store, { access, hasher });
    expect(unlabelled.relabelled).toEqual([{ path: access[0], before: [{ service: 'relabel-a', environment: '' }], now: { service: '', environment: '' } }]);
    // the lines carry no service now: the same import again relabels nothing
    expect((await importCaddyLogs(t.store, { access, hasher })).relabelled).toEqual([]);
    const [n] = await t.store.query<{ n: number }>("SELECT count() AS n FROM proxy_access FINAL WHERE service = 'relabel-a'");
    expect(Number(n!.n)).toBe(0);
  });

  it('compares a log that grew with the import of its first part', async () => {
    const part = copy(AUTH.access[0]!, 'part.log', 8);
    const whole = copy(AUTH.access[0]!, 'whole.log');
    expect((await importCaddyLogs(t.store, { access: [part], hasher, service: 'relabel-x' })).relabelled).toEqual([]);
    const grown = await importCaddyLogs(t.store, { access: [whole], hasher, service: 'relabel-y', environment: 'prod' });
    expect(grown.files[0]!.prefix_hashes).toHaveLength(1);
    expect(grown.relabelled).toEqual([{ path: whole, before: [{ service: 'relabel-x', environment: '' }], now: { service: 'relabel-y', environment: 'prod' } }]);
    // the grown log relabelled its first part's lines too: imported again as it is, it
    // relabels nothing (its first part's own old labels were named again: a break-it pass)
    expect((await importCaddyLogs(t.store, { access: [whole], hasher, service: 'relabel-y', environment: 'prod' })).relabelled).toEqual([]);
    // and its first part given again with other labels names the grown log's
    expect((await importCaddyLogs(t.store, { access: [part], hasher, service: 'relabel-z' })).relabelled).toEqual([
      { path: part, before: [{ service: 'relabel-y', environment: 'prod' }], now: { service: 'relabel-z', environment: '' } },
    ]);
  });
});
