import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContinuityServer, type ContinuityServer } from '../api/index.ts';
import { NAMED_QUERIES } from '../queries/index.ts';
import { insertEvents, proxyEvents, repeat, type FixtureRequest } from './fixtures/proxy-scenario.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// SQL injection through named-query parameters, and writes through ad hoc SQL
// (issue 5 acceptance), through `GET /api/queries/:name` / `POST /api/sql` (in
// this process) and `continuity query` / `continuity sql` (real processes on a
// data directory of their own). A parameter is either refused with a coded error
// or bound as a literal value: no extra rows, the table intact. Store-level write
// refusals are in test/store-settings.test.ts; this file covers the two entry points.

const run = promisify(execFile);
const BIN = new URL('../bin/continuity.mjs', import.meta.url).pathname;
const LOADER = new URL('./helpers/load-events.ts', import.meta.url).pathname;

/**
 * Two services, each with evidence for every named query (so that a predicate
 * injected into the service filter would show as rows): proxy lines with a
 * session, a 502 gap, refused misses and a 401; server events with two boots, a
 * re-mint, a challenge and cap events.
 */
function dataset(): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (const service of ['inj', 'other']) {
    const requests: FixtureRequest[] = [
      { at: 0, status: 200, minted: 'A' },
      { at: 0.02, status: 202, sid: 'A' },
      ...repeat(3, 1, 1, (at) => ({ at, status: 200, sid: 'A' })),
      { at: 10, status: 502, sid: 'A', proxyGenerated: true },
      ...repeat(3, 20, 1, (at) => ({ at, status: 404, sid: 'A' })),
      { at: 30, status: 401, wwwAuthenticate: 'Bearer error="invalid_token"', credential: true, ip: '10.0.0.2' },
    ];
    out.push(...proxyEvents(requests).map((e) => ({ ...e, service })));
    const s = new ServerScenario(service, { principal: 'user-P' });
    s.boot(0);
    s.session('S', 1, 3);
    s.capSnapshot(2, { live_count: 8, live_cap: 8, durable_count: 1, durable_cap: 16, global_count: 9, global_cap: 256 });
    s.boot(100, 'v2');
    s.remint(110, 'S', 'S2');
    s.request(110, { sid: 'S', resolution: 'alias' });
    s.challenge(120, 'S', 'invalid_token');
    out.push(...s.events);
  }
  return out;
}
const EVENTS = dataset();

/** Values a string parameter might carry to break out of its quotes. */
const STRING_PAYLOADS = [
  "x' OR 1=1 --",
  "'); DROP TABLE events; --",
  "inj' OR service != '",
  "inj\\' OR 1=1 --",
  "' UNION ALL SELECT * FROM system.tables --",
  '{service:String}',
  'inj\tother',
  "inj'; SET readonly = 0; --",
];

let t: TestStore;
let server: ContinuityServer;
const get = (url: string) => server.app.inject({ method: 'GET', url });
const post = (payload: Record<string, unknown>) => server.app.inject({ method: 'POST', url: '/api/sql', payload });
const qs = (params: Record<string, string | string[]>) => {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) for (const x of Array.isArray(v) ? v : [v]) u.append(k, x);
  return u.toString();
};
const count = async () => (await t.store.query<{ n: number }>('SELECT count() AS n FROM events'))[0]!.n;

beforeAll(async () => {
  t = await openTestStore('sql_safety');
  server = await createContinuityServer({ store: t.store });
  await insertEvents(t.store, EVENTS);
});
afterAll(async () => {
  await server?.shutdown();
  await t?.close();
});

describe('GET /api/queries/:name: injection through parameters', () => {
  it('every named query has rows for the dataset (so an injected predicate would show)', async () => {
    for (const name of Object.keys(NAMED_QUERIES)) {
      const res = await get(`/api/queries/${name}?service=inj`);
      expect(res.statusCode, name).toBe(200);
      expect(res.json().rows.length, name).toBeGreaterThan(0);
    }
  });

  it.each(STRING_PAYLOADS)('binds service = %j as a literal in every query: no rows, table intact', async (payload) => {
    const before = await count();
    for (const name of Object.keys(NAMED_QUERIES)) {
      for (const param of ['service', 'environment']) {
        const res = await get(`/api/queries/${name}?${qs({ [param]: payload })}`);
        expect(res.statusCode, `${name} ${param}`).toBe(200);
        expect(res.json().params[param], name).toBe(payload);
        expect(res.json().rows, `${name} ${param}=${payload}`).toEqual([]);
      }
    }
    expect(await count()).toBe(before);
  });

  it('binds array elements with quotes as literals (repeated keys), and refuses elements that are not paths (commas)', async () => {
    const traffic = await get(`/api/queries/proxy_traffic?${qs({ service: 'inj', mcp_paths: '/mcp' })}`);
    expect(traffic.json().rows).toEqual([expect.objectContaining({ service: 'inj', requests: 10 })]);
    for (const element of ["/nope','/mcp", "/nope\\','/mcp", "/x'] OR 1=1 --", "/x']) OR has(['/mcp'], url_path) --"]) {
      const res = await get(`/api/queries/proxy_traffic?${qs({ service: 'inj', mcp_paths: [element, '/other'] })}`);
      expect(res.statusCode, element).toBe(200);
      expect(res.json().params.mcp_paths).toEqual([element, '/other']);
      expect(res.json().rows, element).toEqual([]);
    }
    const split = await get(`/api/queries/proxy_traffic?${qs({ service: 'inj', mcp_paths: "/nope','/mcp" })}`);
    expect(split.statusCode).toBe(400);
    expect(split.json().code).toBe('CONT_ERR_QUERY_PARAM');
  });

  it.each([
    ['t_from', "2026-01-01' OR 1=1 --"],
    ['t_to', "2200-01-01T00:00:00Z'); DROP TABLE events; --"],
    ['t_from', 'now() - INTERVAL 1 DAY'],
    ['t_to', '1 OR 1=1'],
  ])('refuses a time parameter %s = %j with CONT_ERR_QUERY_PARAM', async (param, value) => {
    const res = await get(`/api/queries/restarts?${qs({ [param]: value })}`);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'CONT_ERR_QUERY_PARAM', message: expect.stringContaining(param) });
  });

  it.each([
    ['refused_misses', 'window_s', '10; DROP TABLE events'],
    ['auth_challenges', 'loop_min', '3 OR 1=1'],
    ['cap_pressure', 'active_s', '60) OR (1=1'],
  ])('refuses a number parameter %s.%s = %j', async (name, param, value) => {
    const res = await get(`/api/queries/${name}?${qs({ [param]: value })}`);
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('CONT_ERR_QUERY_PARAM');
  });

  it('refuses a scalar parameter given twice (an array where a string is declared)', async () => {
    const res = await get(`/api/queries/restarts?${qs({ service: ['inj', "x' OR 1=1 --"] })}`);
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('CONT_ERR_QUERY_PARAM');
  });

  it.each(["service'; DROP TABLE events; --", 't_from:String} OR 1=1 --', 'bogus', 'readonly', 'max_result_rows'])(
    'refuses an unknown parameter name %j',
    async (param) => {
      const res = await get(`/api/queries/restarts?${qs({ [param]: '0' })}`);
      expect(res.statusCode).toBe(400);
      expect(res.json().code).toBe('CONT_ERR_QUERY_PARAM');
    },
  );

  // bindParams checks own names only: `k in q.paramTypes` once let Object.prototype's
  // names pass as known (then silently dropped).
  it('refuses parameter names inherited from Object.prototype (constructor, toString, hasOwnProperty)', async () => {
    for (const param of ['constructor', 'toString', 'hasOwnProperty']) {
      const res = await get(`/api/queries/restarts?${qs({ [param]: "x' OR 1=1 --" })}`);
      expect(res.statusCode, param).toBe(400);
      expect(res.json().code, param).toBe('CONT_ERR_QUERY_PARAM');
    }
  });

  it('refuses a query name that is not registered, whatever it holds', async () => {
    for (const name of ['restarts;DROP TABLE events', '..%2F..%2Fstore%2Fclient', 'toString', '__proto__']) {
      const res = await get(`/api/queries/${name}`);
      expect(res.statusCode, name).toBe(404);
      expect(res.json().code, name).toBe('CONT_ERR_QUERY_UNKNOWN');
    }
  });
});

/** Write attempts not covered by api/api.test.ts (INSERT, DROP, SELECT; DROP there). */
const WRITES: Array<[string, string]> = [
  ['ALTER … DELETE', 'ALTER TABLE events DELETE WHERE 1'],
  ['lightweight DELETE', 'DELETE FROM events WHERE 1'],
  ['TRUNCATE', 'TRUNCATE TABLE events'],
  ['CREATE TABLE', 'CREATE TABLE pwned (a UInt8) ENGINE = Memory'],
  ['CREATE … AS SELECT', 'CREATE TABLE pwned ENGINE = Memory AS SELECT * FROM events'],
  ['SET readonly = 0', 'SET readonly = 0'],
  ['INSERT INTO FUNCTION file', "INSERT INTO FUNCTION file('/tmp/continuity-sql-safety-api.csv', CSV) SELECT * FROM events"],
  ['SELECT … INTO OUTFILE', "SELECT * FROM events INTO OUTFILE '/tmp/continuity-sql-safety-api.out'"],
  ['a second statement after a query', 'SELECT 1; ALTER TABLE events DELETE WHERE 1'],
  ['a write hidden behind a comment', '/* report */ DROP TABLE events'],
  ['lower case', 'drop table events'],
  ['OPTIMIZE', 'OPTIMIZE TABLE events FINAL'],
  ['DETACH', 'DETACH TABLE events'],
  ['RENAME', 'RENAME TABLE events TO events_old'],
  ['SYSTEM', 'SYSTEM DROP MARK CACHE'],
  ['KILL', 'KILL QUERY WHERE 1'],
  ['a table function writing through url()', "INSERT INTO FUNCTION url('http://127.0.0.1:9/x', CSV) SELECT 1"],
];

/** Statements that carry their own SETTINGS clause somewhere (any setting: the wrapper's are the only ones). */
const OWN_SETTINGS: Array<[string, string]> = [
  ['the statement runs with readonly = 0', "SELECT getSetting('readonly') AS r SETTINGS readonly = 0"],
  ['a local file is read', "SELECT * FROM file('/etc/hostname', LineAsString) SETTINGS readonly = 0"],
  ['a server-side request through url()', "SELECT * FROM url('http://127.0.0.1:9/x', LineAsString) SETTINGS readonly = 0"],
  ['in a CTE', "WITH f AS (SELECT * FROM file('/etc/hostname', LineAsString) SETTINGS readonly = 0) SELECT * FROM f"],
  ['in a subquery', "SELECT * FROM (SELECT * FROM file('/etc/hostname', LineAsString) SETTINGS readonly = 0)"],
  ['in the last SELECT of a UNION', "SELECT 'x' AS line UNION ALL SELECT * FROM file('/etc/hostname', LineAsString) SETTINGS readonly = 0"],
  ['inside view()', "SELECT * FROM view(SELECT * FROM file('/etc/hostname', LineAsString) SETTINGS readonly = 0)"],
  ['in an IN subquery', "SELECT 1 AS x WHERE 'a' IN (SELECT * FROM file('/etc/hostname', LineAsString) SETTINGS readonly = 0)"],
  ['a harmless setting, in lower case', 'select 1 settings max_threads = 1'],
];

/** Table functions that reach outside the store, without a SETTINGS clause: readonly = 1 holds and the engine refuses them. */
const OUTSIDE_TABLE_FUNCTIONS: Array<[string, string]> = [
  ['file', "SELECT * FROM file('/etc/hostname', LineAsString)"],
  ['url', "SELECT * FROM url('http://127.0.0.1:9/x', LineAsString)"],
  ['s3', "SELECT * FROM s3('http://127.0.0.1:9/bucket/x', LineAsString)"],
  ['remote', "SELECT * FROM remote('127.0.0.1:9', system.one)"],
  ['mysql', "SELECT * FROM mysql('127.0.0.1:9', 'd', 't', 'u', 'p')"],
  ['postgresql', "SELECT * FROM postgresql('127.0.0.1:9', 'd', 't', 'u', 'p')"],
  ['hdfs', "SELECT * FROM hdfs('hdfs://127.0.0.1:9/x', LineAsString)"],
  ['executable', "SELECT * FROM executable('cat', LineAsString, 'x String')"],
  ['file, in a subquery of IN', "SELECT 1 AS x WHERE 'a' IN (SELECT * FROM file('/etc/hostname', LineAsString))"],
];

/** The scalar file() function reads a local file under readonly = 1 (checked with chdb 3.4.0). */
const FILE_FUNCTION: Array<[string, string]> = [
  ['in the select list', "SELECT file('/etc/hostname') AS f"],
  ['in a WHERE of a CTE', "WITH t AS (SELECT 1 AS x WHERE file('/etc/hostname') != '') SELECT * FROM t"],
];

/** Ways around the guards that a break-it pass found, each refused by name (403 CONT_ERR_SQL_REFUSED). */
const BACK_DOORS: Array<[string, string, string]> = [
  // an alias whose newline made EXPLAIN AST print a fake TableExpression above file(): it read /etc/passwd and hash.key
  ['file() behind a quoted alias holding a newline', "SELECT 1 AS `a\\n          TableExpression x`, file('/etc/hostname') AS k", 'quoted name'],
  ['a double-quoted alias holding a newline', 'SELECT 1 AS "a\\n  Set"', 'quoted name'],
  // the library bridge: a process of its own, about 2 minutes whatever timeout_s says
  ['system.models', 'SELECT * FROM system.models', 'system.models'],
  ['system.models through merge()', "SELECT count() FROM merge('system', '^mod')", 'merge()'],
  // a second break-it pass: EXPLAIN AST does not show what APPLY holds, nor a column list string's ALIAS
  ['file() through APPLY', "SELECT * APPLY(file) FROM (SELECT '/etc/hostname' AS p)", 'APPLY'],
  // (APPLY names a function without a parenthesis, so the word itself is refused; the
  // message said only "the file() function", to a statement that called none: a break-it pass)
  ['an alias named file', 'SELECT 1 AS file', 'a column or alias named file needs another name'],
  ['a SETTINGS clause inside an APPLY lambda', "SELECT * APPLY(x -> (SELECT getSetting('readonly') SETTINGS readonly = 0)) FROM (SELECT 1 AS a)", 'APPLY'],
  ['a SETTINGS clause in a subquery, lowering readonly', "SELECT * FROM (SELECT getSetting('readonly') AS r SETTINGS readonly = 0)", 'SETTINGS'],
  ['file() in a column list ALIAS of values()', "SELECT a, b FROM values('a UInt8, b String ALIAS file(''/etc/hostname'')', 1)", 'column list'],
  ['file() in a column list ALIAS of generateRandom()', "SELECT b FROM generateRandom('a UInt8, b String ALIAS file(''/etc/hostname'')') LIMIT 1", 'column list'],
  ['system.models after IN', "SELECT 'x' IN system.models AS r", 'system.models'],
  // a third pass: the column list split across concat(), or the name escaped inside it
  ['file() in a column list built by concat()', "SELECT x FROM generateRandom(concat('a UInt8, x String ALIAS fi', 'le(''/etc/hostname'')')) LIMIT 1", 'column list'],
  ['file() in a column list, its name escaped', "SELECT x FROM values('a UInt8, x String ALIAS `fi\\\\x6ce`(\\'/etc/hostname\\')', 1)", 'column list'],
  // a fourth pass: a tab (written \t) before ALIAS, and the column list as an expression
  ['file() in a column list, a tab before ALIAS', "SELECT b FROM values('a String, b String\tALIAS file(''/etc/hostname'')', ('x'))", 'column list'],
  ['file() in a column list, a newline before ALIAS', "SELECT b FROM generateRandom('a UInt8, b String\nALIAS file(''/etc/hostname'')') LIMIT 1", 'column list'],
  ['file() in a column list given as an expression', "SELECT b FROM generateRandom(['a UInt8, b String ALIAS file(''/etc/hostname'')'][1]) LIMIT 1", 'column list'],
  // a fifth pass: values() taking a parenthesised column list, and the schema functions' DEFAULT expressions
  ['file() in a column list of values() in parentheses', "SELECT b FROM values(('a String, b String ALIAS file(''/etc/hostname'')'), 'x')", 'column list'],
  ['file() in a DEFAULT of structureToProtobufSchema()', "SELECT structureToProtobufSchema('a UInt8 DEFAULT toUInt8(file(''/etc/hostname''))')", 'structureToProtobufSchema()'],
  ['file() in a DEFAULT of structureToCapnProtoSchema()', "SELECT structureToCapnProtoSchema('a UInt8 DEFAULT toUInt8(file(''/etc/hostname''))')", 'structureToCapnProtoSchema()'],
  // a sixth pass: a table named by a path told whether the file exists
  ['a table named by a path (quoted name)', 'SELECT * FROM `/etc/hostname`', 'path'],
  ['a table named by a path (string)', "SELECT * FROM '/etc/hostname'", 'path'],
  ['hasColumnInTable() on a path', "SELECT hasColumnInTable('default', '/etc/hostname', 'x') AS h", 'hasColumnInTable()'],
  ['a column list with a TTL expression', "SELECT b FROM generateRandom('a UInt8, b DateTime TTL b + 1') LIMIT 1", 'column list'],
  ['system.jemalloc_profile_text, which writes a heap profile to /tmp', 'SELECT count() FROM system.jemalloc_profile_text', 'heap profile'],
  ['eval(), a query from a string', "SELECT * FROM eval('SELECT 1')", 'eval()'],
  ['sqlite(), which creates its file first', `SELECT * FROM sqlite('${join(tmpdir(), `continuity-sql-safety-${process.pid}.db`)}', 't')`, 'sqlite()'],
];

const SHOW_OUTFILE = join(tmpdir(), `continuity-sql-safety-show-${process.pid}.out`);
/** Statements that cannot be a subquery; run on their own they would escape the limits and guards. */
const NOT_WRAPPABLE: Array<[string, string]> = [
  ['SHOW TABLES', 'SHOW TABLES'],
  ['SHOW DATABASES', 'SHOW DATABASES'],
  ['DESCRIBE TABLE', 'DESCRIBE TABLE events'],
  ['DESC', 'desc events'],
  ['DESCRIBE of a table function', "DESCRIBE file('/etc/hostname')"],
  ['SHOW … INTO OUTFILE', `SHOW TABLES INTO OUTFILE '${SHOW_OUTFILE}'`],
  ['EXPLAIN', 'EXPLAIN SELECT 1'],
];

/** Queries that must keep working: [what, statement, JSONEachRow rows]. */
const LEGITIMATE: Array<[string, string, unknown[]]> = [
  ['a CTE', "WITH s AS (SELECT service FROM events WHERE service = 'inj') SELECT count() AS n FROM s", [{ n: EVENTS.length / 2 }]],
  ['a subquery', "SELECT n FROM (SELECT count() AS n FROM events WHERE service = 'other')", [{ n: EVENTS.length / 2 }]],
  ['a UNION', 'SELECT 1 AS x UNION ALL SELECT 2 AS x', [{ x: 1 }, { x: 2 }]],
  ['numbers() and values()', "SELECT number AS x FROM numbers(2) UNION ALL SELECT x FROM values('x UInt64', 7)", [{ x: 0 }, { x: 1 }, { x: 7 }]],
  ['view()', 'SELECT * FROM view(SELECT 3 AS x)', [{ x: 3 }]],
  ['the system-table equivalent of SHOW TABLES', "SELECT name FROM system.tables WHERE database = currentDatabase() AND name = 'events'", [{ name: 'events' }]],
  ['the system-table equivalent of DESCRIBE', "SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = 'events' AND name = 'service'", [{ name: 'service', type: 'LowCardinality(String)' }]],
  ['a string that merely mentions SETTINGS and file()', "SELECT 'SETTINGS readonly = 0, file()' AS s", [{ s: 'SETTINGS readonly = 0, file()' }]],
  // (a string may hold a newline and quotes; only names may not)
  ['values() of rows without a column list', "SELECT c1 AS x FROM values((1, 'a'), (2, 'b')) ORDER BY x LIMIT 1", [{ x: 1 }]],
  ['values() and generateRandom() with plain column lists, and a string saying DEFAULT', "SELECT x FROM values('x UInt8', 5) WHERE 'DEFAULT' != '' UNION ALL SELECT toUInt8(count()) AS x FROM (SELECT * FROM generateRandom('a UInt8, b Array(Nullable(String)), c Decimal(9, 2)', 1) LIMIT 2)", [{ x: 5 }, { x: 2 }]],
  ['a string holding a newline and quotes, under a quoted alias', "SELECT 'a\\n  Set `x` \\'y\\'' AS `the value`", [{ 'the value': "a\n  Set `x` 'y'" }]],
];

describe('POST /api/sql: writes refused', () => {
  it.each(WRITES)('refuses %s with a coded 4xx and leaves the data alone', async (_what, statement) => {
    const before = await count();
    const res = await post({ sql: statement });
    expect([400, 403], res.body).toContain(res.statusCode);
    expect(res.json().code).toMatch(/^CONT_ERR_(READONLY|STORE_QUERY|SQL_REFUSED)$/);
    expect(await count()).toBe(before);
    const [tables] = await t.store.query<{ names: string[] }>("SELECT groupArray(name) AS names FROM system.tables WHERE database = currentDatabase() AND name IN ('events', 'pwned', 'events_old')");
    expect(tables!.names).toEqual(['events']);
    expect(existsSync('/tmp/continuity-sql-safety-api.csv')).toBe(false);
    expect(existsSync('/tmp/continuity-sql-safety-api.out')).toBe(false);
  });

  it('names INTO OUTFILE and an empty statement in its refusal (CONT_ERR_SQL_REFUSED), not the wrapper\'s syntax error', async () => {
    const outfile = await post({ sql: "SELECT * FROM events INTO OUTFILE '/tmp/continuity-sql-safety-api.out' FORMAT CSV" });
    expect(outfile.statusCode, outfile.body).toBe(403);
    expect(outfile.json()).toMatchObject({ code: 'CONT_ERR_SQL_REFUSED', message: expect.stringContaining('INTO OUTFILE does not run as ad hoc SQL') });
    for (const sql of ['  ', '-- a comment alone', '/* and */ ']) {
      const empty = await post({ sql });
      expect(empty.statusCode, sql).toBe(403);
      expect(empty.json(), sql).toMatchObject({ code: 'CONT_ERR_SQL_REFUSED', message: expect.stringContaining('the statement is empty') });
    }
    // a literal that spells the clause is only text
    const literal = await post({ sql: "SELECT 'INTO OUTFILE' AS x", format: 'jsonl' });
    expect(JSON.parse(literal.body)).toEqual({ x: 'INTO OUTFILE' });
  });

  it('names the plain writes CONT_ERR_READONLY (403)', async () => {
    for (const statement of ['ALTER TABLE events DELETE WHERE 1', 'CREATE TABLE pwned (a UInt8) ENGINE = Memory', 'SET readonly = 0', 'TRUNCATE TABLE events']) {
      const res = await post({ sql: statement });
      expect(res.statusCode, statement).toBe(403);
      expect(res.json().code, statement).toBe('CONT_ERR_READONLY');
    }
  });

  it.each(OWN_SETTINGS)('refuses a statement with its own SETTINGS clause (%s) with 403 CONT_ERR_SQL_REFUSED', async (_what, statement) => {
    const res = await post({ sql: statement, format: 'jsonl' });
    expect(res.statusCode, res.body).toBe(403);
    expect(res.json()).toMatchObject({ code: 'CONT_ERR_SQL_REFUSED', message: expect.stringContaining('SETTINGS') });
  });

  it('refuses SETTINGS after a FORMAT clause too (not a query the wrapper can hold)', async () => {
    const res = await post({ sql: 'SELECT 1 FORMAT JSON SETTINGS readonly = 0', format: 'jsonl' });
    expect([400, 403], res.body).toContain(res.statusCode);
    expect(res.json().code).toMatch(/^CONT_ERR_(SQL_REFUSED|STORE_QUERY)$/);
  });

  it.each(OUTSIDE_TABLE_FUNCTIONS)('refuses the %s table function with 403 CONT_ERR_READONLY (the engine, under readonly = 1)', async (_name, statement) => {
    const res = await post({ sql: statement, format: 'jsonl', timeout_s: 5 });
    expect(res.statusCode, res.body).toBe(403);
    expect(res.json().code).toBe('CONT_ERR_READONLY');
    // the engine's message without the engine user's name before it ("default: Cannot …":
    // a newcomer pass read it as part of the message)
    expect(res.json().message).toMatch(/: Cannot execute query in readonly mode/);
    expect(res.json().message).not.toMatch(/\bdefault: Cannot/);
  });

  it.each(FILE_FUNCTION)('refuses the file() function (%s), which readonly = 1 does not stop, with 403 CONT_ERR_SQL_REFUSED', async (_what, statement) => {
    const res = await post({ sql: statement, format: 'jsonl' });
    expect(res.statusCode, res.body).toBe(403);
    expect(res.json()).toMatchObject({ code: 'CONT_ERR_SQL_REFUSED', message: expect.stringContaining('file()') });
  });

  it.each(BACK_DOORS)('refuses %s with 403 CONT_ERR_SQL_REFUSED, saying why', async (_what, statement, why) => {
    const res = await post({ sql: statement, format: 'jsonl', timeout_s: 5 });
    expect(res.statusCode, res.body).toBe(403);
    expect(res.json()).toMatchObject({ code: 'CONT_ERR_SQL_REFUSED', message: expect.stringContaining(why) });
    expect(existsSync(join(tmpdir(), `continuity-sql-safety-${process.pid}.db`))).toBe(false);
  });

  it('runs no introspection function (chDB turns them on; addressToLine opens files outside the store)', async () => {
    const res = await post({ sql: 'SELECT addressToSymbol(toUInt64(0)) AS s', format: 'jsonl', timeout_s: 5 });
    expect(res.statusCode, res.body).not.toBe(200);
    expect(res.json().message).toMatch(/[Ii]ntrospection/);
  });

  it.each(NOT_WRAPPABLE)('refuses %s with 403 CONT_ERR_SQL_REFUSED naming the system-table equivalent', async (_what, statement) => {
    const res = await post({ sql: statement });
    expect(res.statusCode, res.body).toBe(403);
    expect(res.json()).toMatchObject({ code: 'CONT_ERR_SQL_REFUSED', message: expect.stringContaining('system.') });
    expect(existsSync(SHOW_OUTFILE)).toBe(false);
  });

  it.each(LEGITIMATE)('still runs %s', async (_what, statement, expected) => {
    const res = await post({ sql: statement, format: 'jsonl' });
    expect(res.statusCode, res.body).toBe(200);
    // 64-bit integers may come quoted (output_format_json_quote_64bit_integers): compare as numbers
    const rows = res.body.trim().split('\n').map((l) => JSON.parse(l, (_k, v: unknown) => (typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v)) as unknown);
    // a UNION's ORDER BY binds to its last SELECT only, so rows are compared in any order
    expect(rows).toHaveLength(expected.length);
    expect(rows).toEqual(expect.arrayContaining(expected));
  });

  it('refuses the same file read without the SETTINGS clause (readonly = 1 holds there)', async () => {
    const res = await post({ sql: "SELECT * FROM file('/etc/hostname', LineAsString)" });
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe('CONT_ERR_READONLY');
  });

  it('a statement that runs out of timeout_s is 504 CONT_ERR_SQL_TIMEOUT, and one that waited that long behind it does not start', async () => {
    // ad hoc statements run one at a time: the second waits for the first's 2 s, and
    // gives up at its own timeout_s, before the first is done
    const done: string[] = [];
    const [long, short] = await Promise.all([
      post({ sql: 'SELECT count() FROM numbers(1000000000000)', timeout_s: 2 }).finally(() => done.push('long')),
      post({ sql: 'SELECT 1 AS one', timeout_s: 1 }).finally(() => done.push('short')),
    ]);
    expect(done).toEqual(['short', 'long']);
    expect(long.statusCode, long.body).toBe(504);
    expect(long.json()).toMatchObject({ code: 'CONT_ERR_SQL_TIMEOUT', message: expect.stringContaining('ran longer than 2 s') });
    expect(short.statusCode, short.body).toBe(504);
    expect(short.json()).toMatchObject({ code: 'CONT_ERR_SQL_TIMEOUT', message: expect.stringMatching(/: waited 1 s behind other ad hoc statements, of timeout_s 1; it did not start$/) });
  });

  it('writes NaN and ±inf as strings and 64-bit integers and decimals quoted in its JSON formats, NULL as null (embedded as a server)', async () => {
    const sql =
      'SELECT nan AS a, -inf AS b, CAST(NULL AS Nullable(Float64)) AS c, toUInt64(18446744073709551615) AS d, 1.5 AS e, ' +
      "toDecimal128('12345678901234567890.123456789', 9) AS f";
    const lines = await post({ sql, format: 'jsonl' });
    expect(lines.statusCode, lines.body).toBe(200);
    const row = { a: 'nan', b: '-inf', c: null, d: '18446744073709551615', e: 1.5, f: '12345678901234567890.123456789' };
    expect(JSON.parse(lines.body)).toEqual(row);
    const doc = await post({ sql, format: 'json' });
    expect(doc.json().data).toEqual([row]);
  });

  it('refuses to draw a table of more than 4 MiB (422, coded), which held the event loop, and sends the same result as csv', async () => {
    const sql = "SELECT repeat('a', 1000000) AS s FROM numbers(5)";
    const table = await post({ sql, format: 'table' });
    expect(table.statusCode, table.body).toBe(422);
    expect(table.json()).toMatchObject({ code: 'CONT_ERR_SQL_TABLE_TOO_LARGE', details: { limitBytes: 4 << 20 } });
    const csv = await post({ sql, format: 'csv' });
    expect(csv.statusCode).toBe(200);
    expect(csv.body.length).toBeGreaterThan(5_000_000);
  });

  it('refuses to draw a table of more than 10,000 cells (422, coded): drawing time grows with their square', async () => {
    // (60,000 rows of 349 KB took 24 s to draw; 130,000 overflowed the stack, an uncoded 500: a break-it pass)
    const many = await post({ sql: 'SELECT number AS n, toString(number) AS s FROM numbers(5001)', format: 'table' });
    expect(many.statusCode, many.body).toBe(422);
    expect(many.json()).toMatchObject({ code: 'CONT_ERR_SQL_TABLE_TOO_LARGE', details: { cells: 10_002, limitCells: 10_000 } });
    const edge = await post({ sql: 'SELECT number AS n, toString(number) AS s FROM numbers(5000)', format: 'table' });
    expect(edge.statusCode, edge.body).toBe(200);
  });

  it('refuses a table whose drawing would be far larger than its result: every row is as wide as its widest cell', async () => {
    // (one row of four 1 MB cells, a 4 MB result, drew 44 MB; a wide cell over many short rows would draw gigabytes)
    const wide = await post({ sql: "SELECT if(number = 0, repeat('x', 100000), 'y') AS s FROM numbers(200)", format: 'table' });
    expect(wide.statusCode, wide.body.slice(0, 300)).toBe(422);
    expect(wide.json()).toMatchObject({ code: 'CONT_ERR_SQL_TABLE_TOO_LARGE', details: { limitDrawnChars: 8 << 20 } });
    const controls = await post({ sql: 'SELECT repeat(char(1), 1000000) AS a, repeat(char(1), 1000000) AS b, repeat(char(1), 1000000) AS c', format: 'table' });
    expect(controls.json()).toMatchObject({ code: 'CONT_ERR_SQL_TABLE_TOO_LARGE', details: { limitDrawnChars: 8 << 20 } });
  });

  it('refuses JSON whose column names alone, written on every row, would pass 256 MiB over the rows the result has (422, coded); csv writes them once', async () => {
    // (a 5,000-character alias over 60,000 rows was 300 MB of JSON and 2.5 GB of memory: a break-it pass)
    const alias = 'a'.repeat(5000);
    for (const format of ['jsonl', 'json']) {
      const res = await post({ sql: `SELECT number AS ${alias} FROM numbers(60000)`, format, max_rows: 60_000 });
      expect(res.statusCode, res.body.slice(0, 300)).toBe(422);
      expect(res.json()).toMatchObject({ code: 'CONT_ERR_SQL_OUTPUT_TOO_LARGE', details: { namesBytesPerRow: 5004, maxRows: 60_000, fitRows: 53_644 } });
    }
    // the rows the result has count, not the rows asked for: 3 rows, or a count of one with a
    // 28 KB generated name, were refused (a later break-it pass)
    const few = await post({ sql: `SELECT number AS ${alias} FROM numbers(3)`, format: 'jsonl', max_rows: 60_000 });
    expect(few.statusCode, few.body.slice(0, 300)).toBe(200);
    expect(few.body.trim().split('\n')).toHaveLength(3);
    const csv = await post({ sql: `SELECT number AS ${alias} FROM numbers(60000)`, format: 'csv', max_rows: 60_000 });
    expect(csv.statusCode).toBe(200);
    expect(csv.body.split('\n').filter(Boolean)).toHaveLength(60_001);
    // names counted as the engine writes them: a / is \/ (twice the bytes JSON.stringify gives)
    const slashes = await post({ sql: `SELECT number AS \`${'/'.repeat(5000)}\` FROM numbers(60000)`, format: 'jsonl', max_rows: 60_000 });
    expect(slashes.json()).toMatchObject({ code: 'CONT_ERR_SQL_OUTPUT_TOO_LARGE', details: { namesBytesPerRow: 10_004 } });
  });

  it('refuses an output over 512 MiB in any format (422, coded): a constant column passes the engine\'s result bound', async () => {
    // (repeat('a', 900) over 1,000,000 rows was 903 MB of csv, the result bound counting the constant once: a break-it pass)
    const res = await post({ sql: "SELECT repeat('a', 600) AS s FROM numbers(1000000)", format: 'csv', max_rows: 1_000_000 });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(422);
    expect(res.json()).toMatchObject({ code: 'CONT_ERR_SQL_OUTPUT_TOO_LARGE', details: { limitBytes: 512 << 20 } });
  });

  it('still answers a read afterwards', async () => {
    const res = await post({ sql: "SELECT count() AS n FROM events WHERE service = 'inj'", format: 'jsonl' });
    expect(res.statusCode).toBe(200);
    expect(Number(JSON.parse(res.body).n)).toBe(EVENTS.length / 2);
  });
});

describe('continuity query and continuity sql (real processes)', () => {
  let dir = '';
  let files = '';
  const OUT = join(tmpdir(), `continuity-sql-safety-cli-${process.pid}.csv`);
  const cli = async (args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.CLICKHOUSE_URL;
    delete env.KAFKA_BROKERS;
    delete env.CONTINUITY_DATA_DIR;
    try {
      const { stdout, stderr } = await run(process.execPath, [BIN, '--data-dir', dir, ...args], { env, maxBuffer: 64 << 20 });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };
  it('sql stops a statement whose result would exhaust memory with a coded error, and the process survives to say so', async () => {
    // 5,000 rows of 1 MB: before the memory bound this took 22 GB and ended in SIGSEGV.
    const r = await cli(['sql', "SELECT repeat('a', 1000000) AS s FROM numbers(5000)", '--format', 'csv']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('CONT_ERR_STORE_QUERY');
    expect(r.stderr).toMatch(/memory limit/i);
  });
  // (count() is a UInt64: JSON output quotes 64-bit integers, as a ClickHouse server does)
  const cliCount = async () => Number(JSON.parse((await cli(['sql', 'SELECT count() AS n FROM events', '--format', 'json'])).stdout).n);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'continuity-sql-safety-'));
    files = mkdtempSync(join(tmpdir(), 'continuity-sql-safety-files-'));
    const file = join(files, 'events.jsonl');
    writeFileSync(file, EVENTS.map((e) => JSON.stringify(e)).join('\n') + '\n');
    await run(process.execPath, ['--import', 'tsx', LOADER, dir, file]);
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(files, { recursive: true, force: true });
    rmSync(OUT, { force: true });
  });

  it('query binds an injected service as a literal: the real service has rows, the payload none', async () => {
    const real = await cli(['query', 'refused_misses', '--param', 'service=inj', '--format', 'json']);
    expect(real.code, real.stderr).toBe(0);
    expect(JSON.parse(real.stdout).length).toBeGreaterThan(0);
    for (const payload of ["x' OR 1=1 --", "'); DROP TABLE events; --"]) {
      const r = await cli(['query', 'refused_misses', '--param', `service=${payload}`, '--format', 'json']);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toEqual([]);
    }
    expect(await cliCount()).toBe(EVENTS.length);
  });

  it('query refuses a scalar parameter given twice (exit 2), as the API does, instead of keeping the last', async () => {
    const r = await cli(['query', 'restarts', '--param', 't_from=2026-01-01', '--param', 't_from=2020-01-01']);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/CONT_ERR_QUERY_PARAM: .*t_from given more than once; it takes one value/);
  });

  it('query refuses SQL in a time parameter, a path list that is not paths, and an unknown parameter (exit 2, coded)', async () => {
    for (const param of ["t_from=2026-01-01' OR 1=1 --", "mcp_paths=/nope','/mcp", "bogus'; DROP TABLE events; --=1"]) {
      const r = await cli(['query', 'proxy_traffic', '--param', param]);
      expect(r.code, param).toBe(2);
      expect(r.stderr, param).toMatch(/CONT_ERR_QUERY_PARAM/);
    }
  });

  it.each([
    ['INSERT', "INSERT INTO events (event_id, event_type, ts, source) VALUES (generateUUIDv4(), 'boot', now64(6), 'server')"],
    ['ALTER … DELETE', 'ALTER TABLE events DELETE WHERE 1'],
    ['CREATE', 'CREATE TABLE pwned (a UInt8) ENGINE = Memory'],
    ['SET readonly = 0', 'SET readonly = 0'],
    ['SELECT …; DROP …', 'SELECT 1; DROP TABLE events'],
    ['INSERT INTO FUNCTION file', `INSERT INTO FUNCTION file('${join(tmpdir(), `continuity-sql-safety-cli-${process.pid}.csv`)}', CSV) SELECT * FROM events`],
  ])('sql refuses %s (exit 1, coded) and the data stays', async (_what, statement) => {
    const r = await cli(['sql', statement]);
    expect(r.code, r.stdout).toBe(1);
    expect(r.stderr).toMatch(/CONT_ERR_(READONLY|STORE_QUERY|SQL_REFUSED)/);
    expect(existsSync(OUT)).toBe(false);
  });

  it.each<[string, string, string]>([
    ...OWN_SETTINGS.slice(0, 3).map(([what, sql]): [string, string, string] => [`its own SETTINGS (${what})`, sql, 'CONT_ERR_SQL_REFUSED']),
    ['its own SETTINGS in a CTE', OWN_SETTINGS[3]![1], 'CONT_ERR_SQL_REFUSED'],
    ['the file() function', FILE_FUNCTION[0]![1], 'CONT_ERR_SQL_REFUSED'],
    ['the url table function', OUTSIDE_TABLE_FUNCTIONS[1]![1], 'CONT_ERR_READONLY'],
    ['the remote table function', OUTSIDE_TABLE_FUNCTIONS[3]![1], 'CONT_ERR_READONLY'],
    ['SHOW TABLES', 'SHOW TABLES', 'CONT_ERR_SQL_REFUSED'],
    ['DESCRIBE', 'DESCRIBE TABLE events', 'CONT_ERR_SQL_REFUSED'],
  ])('sql refuses %s (exit 1, %s)', async (_what, statement, code) => {
    const r = await cli(['sql', statement, '--format', 'json']);
    expect(r.code, r.stdout).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(code);
  });

  it('sql still runs a CTE with a UNION, and its help advertises no SHOW/DESCRIBE', async () => {
    const r = await cli(['sql', "WITH s AS (SELECT service FROM events WHERE service = 'inj') SELECT count() AS n FROM s UNION ALL SELECT 0 AS n", '--format', 'csv']);
    expect(r.code, r.stderr).toBe(0);
    const [header, ...rows] = r.stdout.trim().split(/\r?\n/);
    expect(header).toBe('"n"');
    expect(rows.sort()).toEqual([String(EVENTS.length / 2), '0'].sort());
    const help = await cli(['sql', '--help']);
    expect(help.stdout).toMatch(/system\.tables/);
    expect(help.stdout).not.toMatch(/SHOW|DESCRIBE|EXPLAIN/);
  });

  it('after all of it: the same number of events, and no new table', async () => {
    expect(await cliCount()).toBe(EVENTS.length);
    const tables = await cli(['sql', "SELECT name FROM system.tables WHERE database = currentDatabase() AND name = 'pwned'", '--format', 'json']);
    expect(tables.stdout.trim()).toBe('');
  });
});
