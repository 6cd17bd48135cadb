import { execFile } from 'node:child_process';
import { connect } from 'node:net';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAMED_QUERIES } from '../queries/index.ts';
import { buildCanaryReport, parseGates, stepCommand, type StepTarget } from '../reports/index.ts';
import { proxyEvents, repeat, type FixtureRequest } from '../test/fixtures/proxy-scenario.ts';
import { openTestStore, type TestStore } from '../test/helpers/store.ts';
import { createContinuityServer, type ContinuityServer } from './index.ts';

// The read API of `continuity serve` on the same fastify instance as the ingest
// gateway, against a real store: events go in through POST /v1/events and come
// back out through /api.

const TOKEN = 'api-test-token-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };
const SERVICE = 'api-s1';
let t: TestStore;
let server: ContinuityServer;

/** S1 of SCENARIOS.md: a session with 2xx, a restart, then 5 refused misses it never recovers from. */
function s1(): FixtureRequest[] {
  return [
    { at: 0, status: 200, minted: 'A' },
    { at: 0.02, status: 202, sid: 'A' },
    ...repeat(3, 1, 1, (at) => ({ at, status: 200, sid: 'A', minted: 'A' })),
    ...repeat(5, 60, 1, (at) => ({ at, status: 404, sid: 'A' })),
  ];
}

beforeAll(async () => {
  t = await openTestStore('api');
  server = await createContinuityServer({ store: t.store, bearerToken: TOKEN, transport: { flushIntervalMs: 20 } });
  const events = proxyEvents(s1()).map((e) => ({ ...e, service: SERVICE }));
  const res = await server.app.inject({ method: 'POST', url: '/v1/events', headers: auth, payload: events });
  expect(res.json()).toEqual({ accepted: events.length });
  await server.transport.flush();
});
afterAll(async () => {
  await server?.shutdown();
  await t?.close();
});

const get = (url: string, headers: Record<string, string> = auth) => server.app.inject({ method: 'GET', url, headers });
const sql = (payload: unknown) => server.app.inject({ method: 'POST', url: '/api/sql', headers: auth, payload: payload as Record<string, unknown> });

describe('GET /api/queries', () => {
  it('lists every named query with its parameters and row shape', async () => {
    const res = await get('/api/queries');
    expect(res.statusCode).toBe(200);
    const { queries } = res.json() as { queries: Array<{ name: string; params: Record<string, string>; columns: Record<string, string> }> };
    expect(queries.map((q) => q.name).sort()).toEqual(Object.keys(NAMED_QUERIES).sort());
    const restarts = queries.find((q) => q.name === 'restarts')!;
    expect(restarts.params).toMatchObject({ t_from: "DateTime64(6, 'UTC')", service: 'String', mcp_paths: 'Array(String)' });
    expect(restarts.columns).toMatchObject({ source: 'String', proxy_5xx: 'UInt64' });
    // each parameter's default, as bound when the parameter is not given
    const { queries: withDefaults } = res.json() as { queries: Array<{ name: string; params: Record<string, string>; defaults: Record<string, unknown> }> };
    for (const q of withDefaults) expect(Object.keys(q.defaults), q.name).toEqual(Object.keys(q.params));
    expect(withDefaults.find((q) => q.name === 'restarts')!.defaults).toEqual({ t_from: '1970-01-01 00:00:00', t_to: '2200-01-01 00:00:00', service: '', environment: '', mcp_paths: [] });
    expect(withDefaults.find((q) => q.name === 'auth_challenges')!.defaults).toMatchObject({ auth_window_s: 60, loop_min: 3 });
    expect(withDefaults.find((q) => q.name === 'session_continuity')!.defaults).toMatchObject({ window_s: 10 });
  });
});

describe('/api/canary', () => {
  const post = (payload: unknown, headers: Record<string, string> = auth) =>
    server.app.inject({ method: 'POST', url: '/api/canary', headers: { ...headers, 'content-type': 'application/json' }, payload: typeof payload === 'string' ? payload : JSON.stringify(payload) });

  it('is the canary report of `continuity canary`, its verdict and exit code in headers, in json, md or html', async () => {
    // (its next steps are requests to this API: inject's Host is localhost:80, the default port)
    const expected = await buildCanaryReport(t.store, { deploy: 'latest', api: { base: 'http://localhost:80', token: true } });
    expect(expected.deploy).not.toBeNull(); // S1's restart, inferred from the proxy log
    const res = await post({ deploy: 'latest' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['x-continuity-verdict']).toBe(expected.verdict);
    expect(res.headers['x-continuity-exit-code']).toBe(String(expected.exit_code));
    expect(res.json()).toEqual(JSON.parse(JSON.stringify(expected)));
    const md = await post({ deploy: 'latest', format: 'md' });
    expect(md.headers['content-type']).toBe('text/markdown; charset=utf-8');
    expect(md.body.split('\n')[0]).toMatch(/^# (PASS|FAIL) · deploy /);
    const html = await get('/api/canary?deploy=latest&format=html');
    expect(html.statusCode).toBe(200);
    expect(html.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(html.body).toMatch(/^<!doctype html>/i);
    // a GET takes no gates, and says where they go (they were refused as a "request body")
    const gates = await get('/api/canary?deploy=latest&gates=x');
    expect(gates.statusCode).toBe(400);
    expect(gates.json()).toMatchObject({ code: 'CONT_ERR_BAD_REQUEST', message: expect.stringContaining('GET /api/canary takes no gates: POST /api/canary') });
  });

  it('gives its next steps as requests to this API, which answer (this process owns the store: a pasted `continuity query` would meet its lock)', async () => {
    const res = await post({ deploy: 'latest', format: 'json' });
    const { next } = res.json() as { next: Array<{ why: string; command: string }> };
    expect(next.length).toBeGreaterThan(1);
    const bearer = ' -H "authorization: Bearer $CONTINUITY_INGEST_TOKEN"';
    for (const { command } of next) {
      expect(command.startsWith(`curl -s --fail-with-body${bearer} `), command).toBe(true);
      expect(command, 'the token itself is never written').not.toContain(TOKEN);
      // the URL, as the shell passes it (double-quoted or bare: no $, `, \\ or ! in it)
      const url = new URL(command.slice(`curl -s --fail-with-body${bearer} `.length).replace(/^"(.*)"$/, '$1'));
      expect(url.host).toBe('localhost'); // (inject's Host, localhost:80; URL drops the default port)
      const answer = await get(url.pathname + url.search);
      expect(answer.statusCode, `${command}: ${answer.body}`).toBe(200);
    }
    expect(next.some((n) => n.command.includes('/api/queries/'))).toBe(true);
    expect(next.at(-1)!.command).toMatch(/\/api\/report\?(t_from=.*&)?t_to=/);
    // a Host that is more than a host and port names the connection's local address instead
    for (const host of ['evil.example/x?', 'user@evil.example', 'a"$(touch /tmp/pwned)"', 'evil.example:1/']) {
      const forged = await server.app.inject({ method: 'POST', url: '/api/canary', headers: { ...auth, host, 'content-type': 'application/json' }, payload: { deploy: 'latest' } });
      expect(forged.statusCode, host).toBe(200);
      for (const { command } of (forged.json() as { next: Array<{ command: string }> }).next) {
        expect(command, host).toMatch(/^curl -s --fail-with-body -H "authorization: Bearer \$CONTINUITY_INGEST_TOKEN" "?http:\/\/127\.0\.0\.1:80\/api\//);
      }
    }
    // without a token the commands send none
    const tokenless = await buildCanaryReport(t.store, { deploy: 'latest', api: { base: 'http://127.0.0.1:4318/', token: false } });
    for (const { command } of tokenless.next) expect(command, command).toMatch(/^curl -s --fail-with-body "?http:\/\/127\.0\.0\.1:4318\/api\//);
  });

  it('writes SQL, parameters and scopes with shell-special characters so that the pasted curl gets the answer', async () => {
    const base = await server.listen('127.0.0.1', 0);
    // (the server answers in this process: the shell runs beside it, not blocking it)
    const run = async (t: StepTarget) => {
      const command = stepCommand(t, { api: { base: `${base.base}/`, token: true } });
      const r = await promisify(execFile)('bash', ['-c', `${command} -w '\\n%{http_code}'`], { encoding: 'utf8', env: { ...process.env, CONTINUITY_INGEST_TOKEN: TOKEN }, timeout: 60_000 });
      const lines = r.stdout.trim().split('\n');
      return { command, status: lines.at(-1), body: lines.slice(0, -1).join('\n') };
    };
    const sqlStep = await run({ kind: 'sql', sql: `SELECT 'it''s $HOME \\ "quoted" !' AS x` });
    expect(sqlStep.status, sqlStep.body).toBe('200');
    expect(sqlStep.body).toContain('"it\'s $HOME \\\\ \\"quoted\\" !"');
    const queryStep = await run({ kind: 'query', name: 'restarts', params: { service: `a b&c='$x'`, t_to: '2200-01-01T00:00:00Z' } });
    expect(queryStep.status, queryStep.body).toBe('200');
    expect(JSON.parse(queryStep.body)).toMatchObject({ query: 'restarts', params: { service: `a b&c='$x'` } });
    // a Host without its port, and no Host at all (HTTP/1.0), name the port the request reached
    const port = Number(new URL(base.base).port);
    const ask = (head: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => socket.write(`GET /api/canary?deploy=latest ${head}\r\nauthorization: Bearer ${TOKEN}\r\n\r\n`));
        let text = '';
        socket.on('data', (c: Buffer) => (text += c.toString('utf8')));
        socket.on('end', () => resolve(text.slice(text.indexOf('\r\n\r\n') + 4)));
        socket.on('error', reject);
      });
    for (const [head, host] of [['HTTP/1.1\r\nhost: localhost\r\nconnection: close', 'localhost'], ['HTTP/1.0', '127\\.0\\.0\\.1']] as const) {
      const body = await ask(head);
      const next = (JSON.parse(body) as { next?: Array<{ command: string }> }).next;
      expect(next, body).toBeInstanceOf(Array);
      for (const { command } of next!) expect(command, head).toMatch(new RegExp(`"?http://${host}:${port}/api/`));
    }
    const reportStep = await run({ kind: 'report', params: { service: SERVICE } });
    expect(reportStep.status, reportStep.body).toBe('200');
    expect(JSON.parse(reportStep.body)).toMatchObject({ range: { service: SERVICE } });
  });

  it('takes a gates object as a gates file would give it, and durations as the flags do', async () => {
    const gates = { sessions_lost_tools: { max: 5 }, refused_after_boot: { enabled: false } };
    const expected = await buildCanaryReport(t.store, { deploy: 'latest', afterS: 600, gates: parseGates(JSON.stringify(gates), 'g.json') });
    const res = await post({ deploy: 'latest', after: '10m', gates });
    expect(res.statusCode, res.body).toBe(200);
    expect((res.json() as { gates: unknown }).gates).toEqual(JSON.parse(JSON.stringify(expected.gates)));
    expect(res.headers['x-continuity-exit-code']).toBe(String(expected.exit_code));
  });

  it('refuses a bad body, duration or gates object with 400 CONT_ERR_BAD_REQUEST, and needs the token', async () => {
    for (const [payload, words] of [
      [{}, /deploy: /],
      [{ deploy: 'latest', after: 'soon' }, /after: "soon" is not a duration/],
      [{ deploy: 'latest', gates: { nope: { max: 1 } } }, /field nope: unknown gate; the gates: proxy_5xx_in_gap, /],
      [{ deploy: 'latest', gates: { proxy_5xx_in_gap: { max: -1 } } }, /field proxy_5xx_in_gap\.max/],
      [{ deploy: 'latest', format: 'pdf' }, /format: /],
      [{ deploy: 'latest', gates: null }, /gates: holds no gates/],
      [{ deploy: 'latest', extra: 1 }, /extra/],
      [`{"deploy":"latest","gates":{"proxy_5xx_in_gap":{"max":${'['.repeat(5000)}${']'.repeat(5000)}}}}`, /^the request is malformed: gates: field proxy_5xx_in_gap\.max: /],
      // (500,000 keys once froze serve for minutes: the problems listed are the first ten)
      [{ deploy: 'latest', gates: Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`k${i}`, 1])) }, /^the request is malformed: gates: field k0: unknown gate; field k1: unknown gate; .*; and 199990 more; the gates: proxy_5xx_in_gap, [a-z_, ]+$/],
    ] as const) {
      const res = await post(payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json(), JSON.stringify(payload)).toMatchObject({ code: 'CONT_ERR_BAD_REQUEST', message: expect.stringMatching(words) });
    }
    expect((await post({ deploy: 'latest' }, {})).statusCode).toBe(401);
  });
});

describe('GET /api/queries/:name', () => {
  it('runs the named query with bound parameters and returns JSON rows', async () => {
    const res = await get(`/api/queries/refused_misses?service=${SERVICE}&window_s=5`);
    expect(res.statusCode).toBe(200);
    const body = res.json() as { query: string; params: Record<string, unknown>; rows: Array<Record<string, unknown>> };
    expect(body.query).toBe('refused_misses');
    expect(body.params).toMatchObject({ service: SERVICE, window_s: 5 });
    const misses = body.rows.reduce((n, r) => n + Number(r.misses), 0);
    expect(misses).toBe(5);
    expect(body.rows.every((r) => r.reason === 'unknown_after_boot')).toBe(true);
  });

  it('takes array parameters repeated or comma-separated', async () => {
    const repeated = await get(`/api/queries/restarts?service=${SERVICE}&mcp_paths=/mcp&mcp_paths=/other`);
    const commas = await get(`/api/queries/restarts?service=${SERVICE}&mcp_paths=/mcp,/other`);
    expect(repeated.statusCode).toBe(200);
    expect(repeated.json().params.mcp_paths).toEqual(['/mcp', '/other']);
    expect(commas.json().rows).toEqual(repeated.json().rows);
    expect(repeated.json().rows.length).toBeGreaterThan(0);
  });

  it('says in warnings where its mcp_paths match no proxy line, as query says it on stderr (a newcomer pass: rows [] alone)', async () => {
    const wrong = (await get(`/api/queries/restarts?service=${SERVICE}&mcp_paths=/mcp/`)).json();
    expect(wrong.rows).toEqual([]);
    expect(wrong.warnings).toHaveLength(1);
    expect(wrong.warnings[0]).toMatch(/^The mcp_paths parameter \(\/mcp\/\) matches no proxy line in this range; the proxy log's MCP endpoint looks like \/mcp/);
    const some = (await get(`/api/queries/restarts?service=${SERVICE}&mcp_paths=/mcp,/other`)).json();
    expect(some.warnings[0]).toMatch(/^The mcp_paths parameter: \/other matches no proxy line in this range \(\/mcp does\)/);
    expect((await get(`/api/queries/restarts?service=${SERVICE}`)).json().warnings).toEqual([]);
    // a query of server events alone reads no proxy line: nothing to warn about (a break-it pass)
    expect((await get(`/api/queries/cap_pressure?service=${SERVICE}&mcp_paths=/mcp/`)).json().warnings).toEqual([]);
  });

  it('answers a bad parameter with 400 and the coded error', async () => {
    const res = await get('/api/queries/refused_misses?window_s=soon');
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'CONT_ERR_QUERY_PARAM', fix: expect.any(String), message: expect.stringContaining('window_s: a number (got "soon")') });
    // escapes that are no UTF-8 would stay literal text and match nothing: refused
    for (const url of ['/api/queries/restarts?service=%ff%fe', '/api/queries/restarts?service=%ED%A0%80', '/api/report?service=%C3']) {
      const bad = await get(url);
      expect(bad.statusCode, url).toBe(400);
      expect(bad.json(), url).toMatchObject({ code: 'CONT_ERR_QUERY_PARAM', message: expect.stringContaining('is not percent-encoded UTF-8') });
    }
    expect((await get('/api/queries/restarts?service=caf%C3%A9')).statusCode).toBe(200);
    const unknown = await get('/api/queries/restarts?colour=blue');
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json()).toMatchObject({ code: 'CONT_ERR_QUERY_PARAM', message: expect.stringContaining('colour') });
  });

  it('answers an unknown query with 404 CONT_ERR_QUERY_UNKNOWN', async () => {
    const res = await get('/api/queries/no_such_query');
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: 'CONT_ERR_QUERY_UNKNOWN' });
  });
});

describe('GET /api/report', () => {
  it('returns the continuity report for the range and filters', async () => {
    const res = await get(`/api/report?service=${SERVICE}`);
    expect(res.statusCode).toBe(200);
    const report = res.json();
    expect(report.range.service).toBe(SERVICE);
    expect(report.refused_misses).toMatchObject({ total: 5, by_reason: { unknown_after_boot: 5 } });
    expect(report.sessions.unrecovered_stale).toBe(1);
    expect(report.findings.length).toBeGreaterThan(0);
  });

  it("names the request's own mcp_paths where it matches no proxy line (a newcomer pass: the unset CONTINUITY_MCP_PATHS was blamed)", async () => {
    const res = await get(`/api/report?service=${SERVICE}&mcp_paths=/nowhere`);
    expect(res.statusCode).toBe(200);
    expect(res.json().findings[0]).toMatch(/^The mcp_paths parameter \(\/nowhere\) matches no proxy line in this range; .*correct the mcp_paths parameter, or leave it out/);
  });

  it('refuses parameters no query takes', async () => {
    const res = await get('/api/report?servise=x');
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'CONT_ERR_QUERY_PARAM' });
  });
});

describe('POST /api/sql', () => {
  it('runs one read-only statement and answers in ClickHouse JSON by default', async () => {
    const res = await sql({ sql: `SELECT event_type, count() AS n FROM events WHERE service = '${SERVICE}' GROUP BY event_type` });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const body = res.json() as { data: Array<{ event_type: string; n: string | number }>; rows: number };
    expect(body.data).toEqual([{ event_type: 'proxy_access', n: expect.anything() }]);
    expect(Number(body.data[0]!.n)).toBe(10);
  });

  it('renders format table as a text table with stored values inert (an escape sequence as text)', async () => {
    const res = await sql({ sql: "SELECT concat('ua', char(27), '[2J') AS ua, toUInt64(18446744073709551615) AS big" , format: 'table' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    expect(res.body).not.toContain('\u001b');
    expect(res.body).toMatch(/│ ua\\x1B\[2J │ 18446744073709551615 │/);
  });

  it('honours format and max_rows', async () => {
    const res = await sql({ sql: 'SELECT number FROM system.numbers', format: 'csv', max_rows: 3, timeout_s: 5 });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/csv/);
    expect(res.body.trim().split(/\r?\n/)).toEqual(['"number"', '0', '1', '2']);
    // the cut is said in headers, the body stays the result alone
    expect(res.headers['x-continuity-rows']).toBe('3');
    expect(res.headers['x-continuity-row-limit']).toBe('reached: max_rows 3; the result may have more');
    const under = await sql({ sql: 'SELECT number FROM numbers(2)', format: 'csv', max_rows: 3, timeout_s: 5 });
    expect(under.headers['x-continuity-rows']).toBe('2');
    expect(under.headers['x-continuity-row-limit']).toBeUndefined();
  });

  it('refuses writes with 403 CONT_ERR_READONLY and leaves the data alone', async () => {
    for (const statement of [`INSERT INTO events (event_id) VALUES (generateUUIDv4())`, 'DROP TABLE events', 'SELECT 1; DROP TABLE events']) {
      const res = await sql({ sql: statement });
      expect(res.statusCode, statement).toBe(403);
      expect(res.json().code, statement).toBe(statement.startsWith('SELECT 1;') ? 'CONT_ERR_SQL_REFUSED' : 'CONT_ERR_READONLY');
    }
    const readonlyInsert = await sql({ sql: `INSERT INTO events (event_id) VALUES (generateUUIDv4())` });
    expect(readonlyInsert.json().code).toBe('CONT_ERR_READONLY');
    const [row] = await t.store.query<{ n: number }>('SELECT count() AS n FROM events');
    expect(row!.n).toBe(10);
  });

  it('answers a rejected statement with 400 CONT_ERR_STORE_QUERY and a bad body with 400 CONT_ERR_BAD_REQUEST', async () => {
    const bad = await sql({ sql: 'SELEC 1' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().code).toBe('CONT_ERR_STORE_QUERY');
    for (const body of [{}, { sql: 'SELECT 1', format: 'xml' }, { sql: 'SELECT 1', max_rows: 0 }, { sql: 'SELECT 1', timeout_s: 0.5 }, { sql: 'SELECT 1', timeout_s: 601 }, { sql: 'SELECT 1', extra: true }]) {
      const res = await sql(body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().code).toBe('CONT_ERR_BAD_REQUEST');
    }
  });
});

describe('authentication', () => {
  it('requires the bearer token on the read API as on the ingest routes', async () => {
    for (const url of ['/api/queries', '/api/report', '/api/queries/restarts']) {
      const res = await get(url, {});
      expect(res.statusCode, url).toBe(401);
      expect(res.json().code).toBe('CONT_ERR_UNAUTHORIZED');
      expect(res.headers['www-authenticate']).toMatch(/^Bearer /);
    }
    // a missing header, another scheme and another token are told apart (RFC 6750 §3.1:
    // error="invalid_token" only where a token was sent)
    const none = await get('/api/queries', {});
    expect(none.json().message).toBe('the request lacks a valid bearer token: no Authorization header');
    expect(none.headers['www-authenticate']).toBe('Bearer realm="continuity-api"');
    const basic = await get('/api/queries', { authorization: 'Basic dXNlcjpwYXNz' });
    expect(basic.json().message).toBe('the request lacks a valid bearer token: the Authorization header is not a Bearer credential (`Bearer <token>`)');
    const wrong = await get('/api/queries', { authorization: 'Bearer wrong-token-0123456789abc' });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json()).toMatchObject({ message: 'the request lacks a valid bearer token: the bearer token does not match the one this server was started with', details: { error: 'invalid_token' } });
    expect(wrong.headers['www-authenticate']).toBe('Bearer realm="continuity-api", error="invalid_token"');
    const ingest = await server.app.inject({ method: 'POST', url: '/v1/events', payload: [], headers: { authorization: 'Bearer wrong-token-0123456789abc' } });
    expect(ingest.statusCode).toBe(401);
    expect(ingest.headers['www-authenticate']).toBe('Bearer realm="continuity-ingest", error="invalid_token"');
  });
});

describe('unknown routes', () => {
  it('answers 404 CONT_ERR_NOT_FOUND in the coded error shape, under /api and outside it', async () => {
    for (const [method, url] of [
      ['GET', '/api/nope'],
      ['POST', '/api/queries'],
      ['POST', '/v2/whatever'],
      ['GET', '/'],
    ] as const) {
      const res = await server.app.inject({ method, url, headers: auth, payload: method === 'POST' ? {} : undefined });
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      const body = res.json() as Record<string, unknown>;
      expect(Object.keys(body).sort()).toEqual(['code', 'details', 'fix', 'message']);
      expect(body).toMatchObject({ code: 'CONT_ERR_NOT_FOUND', message: expect.stringContaining(`${method} ${url}`), details: { method, url } });
    }
    // fastify parses a body before it finds no route: a malformed one must not turn the 404 into a 400.
    const malformed = await server.app.inject({ method: 'POST', url: '/api/nope', headers: { ...auth, 'content-type': 'application/json' }, payload: '{"oops' });
    expect(malformed.statusCode).toBe(404);
    expect(malformed.json().code).toBe('CONT_ERR_NOT_FOUND');
  });
});

describe('media types (RFC 9110 §15.5.16)', () => {
  it('answers a body of another type on POST /api/sql with 415 naming application/json', async () => {
    for (const [type, payload] of [
      ['text/plain', 'SELECT 1'],
      ['application/xml', '<sql>SELECT 1</sql>'],
      ['application/x-www-form-urlencoded', 'sql=SELECT%201'],
      ['application/x-protobuf', 'SELECT 1'],
    ] as const) {
      const res = await server.app.inject({ method: 'POST', url: '/api/sql', headers: { ...auth, 'content-type': type }, payload });
      expect(res.statusCode, type).toBe(415);
      const body = res.json() as Record<string, unknown>;
      expect(Object.keys(body).sort()).toEqual(['code', 'details', 'fix', 'message']);
      expect(body).toMatchObject({ code: 'CONT_ERR_UNSUPPORTED_MEDIA', message: expect.stringContaining('application/json'), details: { accepted: ['application/json'] } });
    }
    // A body without Content-Type is refused too; no body at all is the route's own 400.
    const untyped = await server.app.inject({ method: 'POST', url: '/api/sql', headers: auth, payload: '{"sql":"SELECT 1"}' });
    expect(untyped.statusCode).toBe(415);
    expect(untyped.json()).toMatchObject({ code: 'CONT_ERR_UNSUPPORTED_MEDIA', details: { contentType: null, accepted: ['application/json'] } });
    const empty = await server.app.inject({ method: 'POST', url: '/api/sql', headers: auth });
    expect(empty.statusCode).toBe(400);
    expect(empty.json().code).toBe('CONT_ERR_BAD_REQUEST');
  });

  it('matches the media type case-insensitively and ignores its parameters (RFC 9110 §8.3.1)', async () => {
    const res = await server.app.inject({ method: 'POST', url: '/api/sql', headers: { ...auth, 'content-type': 'Application/JSON; charset=UTF-8' }, payload: '{"sql":"SELECT 1 AS one"}' });
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toEqual([{ one: 1 }]);
  });
});

describe('request bodies: size and content coding', () => {
  const LIMIT = 10 * 1024 * 1024; // the gateway's default body limit, which the read API shares
  const post = (url: string, headers: Record<string, string>, payload: string | Buffer) =>
    server.app.inject({ method: 'POST', url, headers: { ...auth, 'content-type': 'application/json', ...headers }, payload });

  it('answers a body over the limit with 413 CONT_ERR_BODY_TOO_LARGE (RFC 9110 §15.5.14) on /api as on /v1', async () => {
    const big = JSON.stringify({ sql: `SELECT '${'x'.repeat(LIMIT)}'` });
    // Measured after decoding: a small gzip body that inflates past the limit is refused the same way.
    const bomb = gzipSync(big);
    expect(bomb.length).toBeLessThan(LIMIT / 100);
    for (const [url, headers, payload] of [
      ['/api/sql', {}, big],
      ['/api/sql', { 'content-encoding': 'gzip' }, bomb],
      ['/v1/events', {}, big],
      ['/v1/logs', {}, big],
    ] as const) {
      const res = await post(url, headers, payload);
      const label = `${url} ${JSON.stringify(headers)}`;
      expect(res.statusCode, label).toBe(413);
      expect(res.json(), label).toEqual({
        code: 'CONT_ERR_BODY_TOO_LARGE',
        message: expect.stringContaining(`${LIMIT} bytes`),
        fix: expect.any(String),
        details: { limitBytes: LIMIT },
      });
    }
  });

  it('answers an unsupported Content-Encoding with 415 CONT_ERR_UNSUPPORTED_MEDIA naming the coding (RFC 9110 §15.5.16), on every route that takes a body', async () => {
    for (const url of ['/api/sql', '/v1/events', '/v1/logs']) {
      for (const coding of ['br', 'zstd', 'compress']) {
        const res = await post(url, { 'content-encoding': coding }, '{"sql":"SELECT 1"}');
        const label = `${url} ${coding}`;
        expect(res.statusCode, label).toBe(415);
        const body = res.json() as Record<string, unknown>;
        expect(body, label).toEqual({
          code: 'CONT_ERR_UNSUPPORTED_MEDIA',
          message: expect.stringMatching(new RegExp(`content coding.*Content-Encoding ${coding}\\b.*gzip, deflate`)),
          fix: expect.stringContaining('Content-Encoding'),
          details: { contentEncoding: coding, acceptedEncodings: ['gzip', 'deflate'] },
        });
      }
    }
  });

  it('still decodes a gzip body on /api/sql', async () => {
    const res = await post('/api/sql', { 'content-encoding': 'gzip' }, gzipSync('{"sql":"SELECT 2 AS two"}'));
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toEqual([{ two: 2 }]);
  });
});

describe('authorization scheme (RFC 9110 §11.1)', () => {
  it('accepts the Bearer scheme in any case', async () => {
    for (const scheme of ['bearer', 'BEARER', 'bEaReR']) {
      const res = await get('/api/queries', { authorization: `${scheme} ${TOKEN}` });
      expect(res.statusCode, scheme).toBe(200);
      const ingest = await server.app.inject({ method: 'POST', url: '/v1/events', headers: { authorization: `${scheme} ${TOKEN}` }, payload: [] });
      expect(ingest.statusCode, scheme).toBe(200);
    }
  });

  it('still refuses another scheme, a missing token, a wrong token and a token glued to the scheme', async () => {
    for (const header of [`Basic ${TOKEN}`, 'bearer', 'bearer ', `bearer${TOKEN}`, `bearer ${TOKEN}x`, `bearer ${TOKEN.toUpperCase()}`, `xbearer ${TOKEN}`]) {
      const res = await get('/api/queries', { authorization: header });
      expect(res.statusCode, header).toBe(401);
      expect(res.json().code).toBe('CONT_ERR_UNAUTHORIZED');
    }
  });
});
