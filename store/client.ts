import { accessSync, closeSync, constants, fstatSync, openSync, readdirSync, readlinkSync, readSync, realpathSync, statSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import type { createChdbConnection } from 'chdb/connection';
import type { Config } from '../core/config.ts';
import { ContinuityError, isContinuityError } from '../core/errors.ts';
import { ensureDir } from '../core/fs.ts';

/** Options of {@link Store.readOnly}. */
export interface ReadOnlyOptions {
  /** A ClickHouse output format name (e.g. JSONEachRow, CSVWithNames, ArrowStream). */
  format: string;
  /** The most rows the output holds (a LIMIT around the statement). */
  maxRows: number;
  /** The most seconds the statement may take, its wait for its turn included. */
  maxExecutionS: number;
  /** Told the output's row count once it is read (see {@link Store.readOnly}). */
  onResult?: (result: { rows: number | null; limited: boolean }) => void;
}

/**
 * The store: every read and write goes through one `@clickhouse/client`, backed
 * either by the embedded engine (chDB through `chdb/connection`, persisted in the
 * data directory) or by a ClickHouse server (`CLICKHOUSE_URL`). SQL is ClickHouse's,
 * compatible with server 24.8 LTS and later.
 *
 * Settings never travel as per-request `clickhouse_settings`: through
 * `chdb/connection` those become `SET` statements that persist in the embedded
 * session (verified with chdb 3.4.0 — one `readonly=1` query makes every later
 * insert fail; one `insert_deduplication_token` silently drops later inserts;
 * one `max_result_rows` caps all later queries). Every per-statement setting is
 * therefore written as an inline `SETTINGS` clause, which ClickHouse scopes to
 * that statement in both modes. `test/store-settings.test.ts` pins this.
 */
export interface Store {
  readonly mode: 'embedded' | 'server';
  /** The data directory (embedded) or server URL (server), for messages. */
  readonly location: string;
  /** The underlying client; prefer the methods below, which keep settings from leaking. */
  readonly client: ClickHouseClient;

  /**
   * Runs a SELECT with bound `{name:Type}` parameters and returns typed rows.
   * 64-bit integers and decimals come back as JS numbers when they fit in 2^53.
   * @throws ContinuityError CONT_ERR_STORE_QUERY (rejected SQL) or CONT_ERR_STORE_UNAVAILABLE.
   */
  query<T = Record<string, unknown>>(sql: string, params?: Record<string, unknown>): Promise<T[]>;

  /** Runs a statement that returns no rows (DDL, INSERT … SELECT). */
  command(sql: string, params?: Record<string, unknown>): Promise<void>;

  /**
   * Inserts a JSONEachRow body (one JSON object per line; a string, or its UTF-8
   * bytes, which go to the engine as they are) into `table`.
   * @param dedupToken insert_deduplication_token: a retried batch with the same
   *   token is stored once (tables declare a deduplication window).
   */
  insertJsonEachRow(table: string, body: string | Buffer, options?: { dedupToken?: string }): Promise<void>;

  /**
   * Ad hoc SQL: one query (SELECT, WITH … SELECT, UNION, …), read-only as enforced
   * by the store itself (`readonly=1`), with a row limit and an execution-time
   * limit. Arrow formats come uncompressed. Embedded, ad hoc statements run on a
   * connection of their own, one at a time: a long one holds up the next ad hoc
   * statement, not the named queries and reports. `maxExecutionS` covers the wait
   * for its turn too: what is left of it bounds the run.
   * @param options.onResult called once with the output's row count (the engine's
   *   summary `result_rows`; null where the engine gave none) and `limited`: the output
   *   holds `maxRows` rows, so the statement may have more (the limit cut it, or it has
   *   exactly that many: the caller says "may").
   * @returns the raw output in `format` (any ClickHouse output format name).
   * @throws ContinuityError CONT_ERR_READONLY for writes and for table functions
   *   that reach outside the store (file, url, s3, remote, …: the engine refuses them
   *   under readonly=1); CONT_ERR_SQL_REFUSED for a statement with its own SETTINGS
   *   clause (nested ones too), the file() function, system.models, the merge(),
   *   loop() and sqlite() table functions, APPLY transformers, a quoted name holding an
   *   escape or a control character, and SHOW/DESCRIBE/EXPLAIN; CONT_ERR_SQL_TIMEOUT
   *   when it ran out of `maxExecutionS`, or waited that long for its turn and did not
   *   start; CONT_ERR_STORE_QUERY otherwise.
   */
  readOnly(sql: string, options: ReadOnlyOptions): Promise<Buffer>;

  /**
   * Runs a maintenance statement that returns no rows and may take seconds (an
   * `OPTIMIZE … FINAL` of a day's partition, store/compact.ts). Embedded, it runs on a
   * lane of its own, opened on first use, so the named queries, reports and inserts do
   * not wait behind it; on a server, like {@link Store.command}.
   * @throws ContinuityError as {@link Store.command} does.
   */
  maintain(sql: string): Promise<void>;

  /**
   * Statements the embedded engine is running or has queued, on every lane (always 0
   * on a server). A process that exits while one runs crashes in chDB's teardown
   * (SIGSEGV, chdb 3.4), so a forced exit asks this first (cli/signals.ts).
   */
  readonly statements: number;

  /**
   * Closes the store: waits for the named queries, inserts and maintenance queued or
   * running. An ad hoc statement still running ({@link Store.readOnly}) is not waited
   * for: it writes nothing and chDB cannot cancel it, so it ends in the engine at its
   * own time limit, and until then {@link Store.statements} counts it and the process
   * stays up.
   */
  close(): Promise<void>;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const TOKEN = /^[A-Za-z0-9:._\-/]{1,200}$/;
const FORMAT = /^[A-Za-z][A-Za-z0-9]*$/;

// The server client's own log: errors only. Its warnings (a failed ping with a stack
// trace, advice on progress headers) came before the coded error that says the same
// (CONT_ERR_STORE_UNAVAILABLE: found by a break-it pass).
const SERVER_CLIENT_LOG = { level: ClickHouseLogLevel.ERROR };

/**
 * Opens the store described by `config`: a server when `config.clickhouse` is set,
 * otherwise the embedded engine in `config.dataDir`.
 * @throws ContinuityError CONT_ERR_CONFIG when the data directory, or its
 *   `clickhouse` directory, cannot be created or is not readable and writable (the
 *   message names it and --data-dir); CONT_ERR_STORE_LOCKED when another process owns
 *   the data directory; CONT_ERR_STORE_UNAVAILABLE when the store cannot be opened or
 *   reached (embedded: the message names the data directory).
 */
export async function openStore(config: Config): Promise<Store> {
  if (config.clickhouse) {
    const { url, username, password, database } = config.clickhouse;
    if (database !== 'default') {
      const bootstrap = createClient({ url, username, password, log: SERVER_CLIENT_LOG });
      try {
        await bootstrap.command({ query: `CREATE DATABASE IF NOT EXISTS ${database}` });
      } catch (err) {
        throw new ContinuityError('CONT_ERR_STORE_UNAVAILABLE', `${url}: ${(err as Error).message}`, { cause: err });
      } finally {
        await bootstrap.close();
      }
    }
    const client = createClient({ url, username, password, database, request_timeout: 300_000, log: SERVER_CLIENT_LOG });
    const ping = await client.ping();
    if (!ping.success) {
      await client.close();
      throw new ContinuityError('CONT_ERR_STORE_UNAVAILABLE', `${url}: ${ping.error.message}`, { cause: ping.error });
    }
    return wrap(client, 'server', url);
  }
  const dbPath = join(config.dataDir, 'clickhouse');
  // The engine's directory is made (and checked) here, not left to the engine: a
  // data directory in which nothing can be created (/proc/self, a read-only mount)
  // otherwise fails inside the engine with only "Failed to create connection".
  try {
    ensureDir(config.dataDir);
    ensureDir(dbPath);
    accessSync(dbPath, constants.R_OK | constants.W_OK | constants.X_OK);
  } catch (err) {
    throw new ContinuityError('CONT_ERR_CONFIG', `the data directory ${config.dataDir} cannot be used: ${(err as Error).message} (--data-dir, CONTINUITY_DATA_DIR)`, {
      cause: err,
      details: { dataDir: config.dataDir },
    });
  }
  // The engine opens and locks its status file: a FIFO there would hang it for good.
  const status = statusFileKind(join(dbPath, 'status'));
  if (status !== 'file' && status !== 'absent') {
    throw new ContinuityError('CONT_ERR_STORE_UNAVAILABLE', `${join(dbPath, 'status')} is a ${status}, not the engine's status file: remove it`, { details: { dataDir: dbPath } });
  }
  // Told before opening: the engine would print its own "Cannot lock file" line to stderr.
  const holder = lockHolder(dbPath);
  if (holder !== undefined) throw storeOpenError(dbPath, new Error(`the engine's lock file ${join(dbPath, 'status')} is held by process ${holder}`));
  let createChdbConnection: OpenChdb;
  try {
    ({ createChdbConnection } = await loadChdb());
  } catch (err) {
    chdbModule = undefined; // a later open tries again
    throw new ContinuityError(
      'CONT_ERR_STORE_UNAVAILABLE',
      `the embedded engine (chdb) could not be loaded: ${(err as Error).message} (set CLICKHOUSE_URL to use a ClickHouse server instead)`,
      { cause: err, details: { dataDir: config.dataDir } },
    );
  }
  let connection;
  try {
    connection = createChdbConnection({ path: dbPath });
  } catch (err) {
    throw storeOpenError(dbPath, err);
  }
  keepAbortFatal();
  const renewing = renewingConnection(dbPath, connection, createChdbConnection);
  const opened = dataDirIdentity(dbPath);
  return wrap(
    createClient({ connection: renewing.connection }),
    'embedded',
    config.dataDir,
    renewing.insertRaw,
    createClient({ connection: renewing.adhocConnection }),
    createClient({ connection: renewing.maintenanceConnection }),
    renewing.statements,
    () => assertSameDataDir(dbPath, config.dataDir, opened),
  );
}

/**
 * The engine's directory as it was when the store opened (device and inode), or
 * undefined when it cannot be told. (Not its status file: the engine writes that
 * again whenever a connection is renewed.)
 */
function dataDirIdentity(dbPath: string): { dev: number; ino: number } | undefined {
  try {
    const st = statSync(dbPath);
    return { dev: st.dev, ino: st.ino };
  } catch {
    return undefined;
  }
}

/**
 * After each write: the data directory is still the one the store opened. Removed (or
 * replaced) under a running process, the engine recreates bare part directories and
 * reports its writes as done, and they are gone at the next open: the consumer
 * committed their offsets and `serve` counted them written (a break-it pass: 2,000
 * acknowledged events lost). The engine's directory gone, or another in its place, is
 * the sign.
 * @throws ContinuityError CONT_ERR_STORE_UNAVAILABLE (`details.reason = 'data_dir_gone'`),
 *   retriable: the caller keeps the write to retry (the consumer commits nothing), and
 *   only a restart on a directory that exists can take it.
 */
function assertSameDataDir(dbPath: string, dataDir: string, opened: { dev: number; ino: number } | undefined): void {
  if (opened === undefined) return;
  const now = dataDirIdentity(dbPath);
  if (now !== undefined && now.dev === opened.dev && now.ino === opened.ino) return;
  throw new ContinuityError(
    'CONT_ERR_STORE_UNAVAILABLE',
    `the data directory ${dataDir} was removed or replaced while this process had it open: what it writes now is lost when the engine next opens it; stop the process and start it again on the directory (what it accepted and has not written is kept until then)`,
    { details: { dataDir, reason: 'data_dir_gone' } },
  );
}

/**
 * Makes SIGABRT end the process again once the embedded engine has started.
 *
 * The engine installs its own handler for the fatal signals when its first connection
 * opens (chdb 3.4.0, ClickHouse's crash reporting). For SIGABRT that handler never
 * returns in this process: `abort()` hung for good, and so did every fatal error of
 * Node itself, which aborts (a V8 heap out-of-memory: a break-it pass left `serve` at
 * 4.8 GB holding the store's lock and ignoring SIGTERM). A Node listener puts libuv's
 * handler in the engine's place; it returns, and POSIX `abort()` then restores the
 * default action and raises SIGABRT again, so the process ends with status 134 as
 * any Node process does. A SIGABRT sent from outside reaches the listener, which
 * removes itself and raises the signal again with the default action.
 * Idempotent; the engine starts once per process (later connections install nothing).
 */
function keepAbortFatal(): void {
  if (process.listeners('SIGABRT').includes(abortWithDefaultAction)) return;
  process.on('SIGABRT', abortWithDefaultAction);
}

/** The SIGABRT listener of {@link keepAbortFatal}: the default action, taken again. */
function abortWithDefaultAction(): void {
  // (with no listener left, Node gives the signal its default action back)
  process.removeListener('SIGABRT', abortWithDefaultAction);
  process.kill(process.pid, 'SIGABRT');
}

/**
 * An INSERT whose rows travel beside the statement, not inside its text:
 * `INSERT INTO table SETTINGS … FORMAT format` + `body`.
 */
type RawInsert = (table: string, format: 'JSONEachRow', body: string | Buffer, settings: Record<string, string | number>) => Promise<void>;

type OpenChdb = typeof createChdbConnection;
type ChdbConnection = ReturnType<OpenChdb>;

/**
 * The embedded engine's module, loaded on the first embedded open, not at import:
 * loading libchdb maps and relocates a 566 MB library, which costs every process
 * that imports the store about 145 MB of RSS and 60 ms (Node 20, chdb 3.4.0,
 * measured with `process.memoryUsage().rss` around `import('chdb')`): the gateway,
 * a consumer writing to a ClickHouse server (CLICKHOUSE_URL) and every CLI command
 * that reaches a running `serve` over HTTP never use it.
 * @throws whatever loading the native library throws (the caller wraps it).
 */
function loadChdb(): Promise<typeof import('chdb/connection')> {
  chdbModule ??= import('chdb/connection');
  return chdbModule;
}
let chdbModule: Promise<typeof import('chdb/connection')> | undefined;
// chdb ships its Connection typed against @clickhouse/client-common, which
// @clickhouse/client 1.23 bundles under another path: same shape, two declarations.
type ClientConnection = NonNullable<NonNullable<Parameters<typeof createClient>[0]>['connection']>;

/**
 * Inserts in flight at once in embedded mode. The engine runs one statement per
 * connection, and an insert (parse, sort, compress, write a part) keeps one core
 * busy; a second connection lets a second batch be written on the other core
 * (bench/import.ts, 2 cores). More would only queue for the same cores and hold
 * more batches in memory.
 */
const EMBEDDED_INSERT_LANES = 2;

/** One chDB connection that runs one statement at a time and is replaced after a failure. */
interface Lane {
  run<R>(op: (conn: ChdbConnection) => Promise<R>, failed?: (r: R) => boolean): Promise<R>;
  /** Statements queued or running. */
  readonly pending: number;
  /** Closes the lane after the statements queued on it (waiting for them). */
  close(): Promise<void>;
  /**
   * Closes the lane now: statements still queued are refused when their turn comes,
   * and one still running is left to end on its own (its connection closes then;
   * chDB cannot cancel it). For the ad hoc lane only, whose statements write nothing.
   */
  abandon(): void;
}

/**
 * A lane over the data directory `dbPath`: one statement at a time, and a fresh
 * chDB connection (same data directory) after any failure.
 *
 * Why (verified with chdb 3.4.0): when a statement fails after its output format
 * has started writing — a timeout (max_execution_time), throwIf, any runtime
 * error — chDB keeps that partial output (the names/types header, JSON's
 * `{"meta": …}`) in the connection and prepends it to the NEXT result on the same
 * connection; other connections on the same directory are unaffected. A client-side
 * abort is worse: the JS promise rejects at once, the engine runs on, and its
 * eventual leftover lands in whatever runs next. The engine already runs one query
 * per connection at a time, so queuing here costs no throughput; it makes sure no
 * statement is dispatched on a connection whose previous statement has not settled,
 * and none ever on a connection that has failed. A retired connection is closed,
 * which chdb defers until statements still running on it finish. Opening one costs
 * well under a millisecond.
 */
function createLane(dbPath: string, first: ChdbConnection | undefined, open: OpenChdb): Lane {
  let current: ChdbConnection | undefined = first;
  let closed = false;
  let pending = 0;
  let tail: Promise<unknown> = Promise.resolve();
  const enqueue = <R>(step: () => Promise<R>): Promise<R> => {
    pending++;
    const next = tail.then(step).finally(() => {
      pending--;
    });
    tail = next.catch(() => {});
    return next;
  };
  const retire = (conn: ChdbConnection): void => {
    if (current === conn) current = undefined;
    conn.close().catch(() => {});
  };
  return {
    get pending() {
      return pending;
    },
    run: <R>(op: (conn: ChdbConnection) => Promise<R>, failed: (r: R) => boolean = () => false): Promise<R> =>
      enqueue(async () => {
        if (closed) throw new Error('the embedded store is closed');
        let conn = current;
        if (conn === undefined) {
          try {
            conn = current = open({ path: dbPath });
          } catch (err) {
            // (another connection of this process to the store it has open: not "in use
            // by another process" nor "another directory", as storeOpenError would say; a
            // break-it pass saw that on a data directory remounted read-only)
            throw new ContinuityError('CONT_ERR_STORE_UNAVAILABLE', `${dbPath}: this process could not open one more connection to its store: ${firstLine((err as Error)?.message ?? String(err))}`, {
              cause: err,
              details: { dataDir: dbPath },
            });
          }
        }
        try {
          const r = await op(conn);
          if (failed(r)) retire(conn);
          return r;
        } catch (err) {
          retire(conn);
          throw err;
        }
      }),
    close: () =>
      enqueue(async () => {
        closed = true;
        const conn = current;
        current = undefined;
        await conn?.close();
      }),
    abandon: () => {
      closed = true;
      const conn = current;
      current = undefined;
      conn?.close().catch(() => {});
    },
  };
}

/**
 * The embedded engine's connection for `@clickhouse/client` (queries, commands and
 * the client's own inserts, on one {@link Lane}), a second one for ad hoc SQL (its own
 * lane, opened on first use), and the raw insert: on whichever of
 * {@link EMBEDDED_INSERT_LANES} lanes has the fewest statements waiting (the first
 * lane is the client's; the others open on first use).
 */
function renewingConnection(
  dbPath: string,
  first: ChdbConnection,
  open: OpenChdb,
): { connection: ClientConnection; adhocConnection: ClientConnection; maintenanceConnection: ClientConnection; insertRaw: RawInsert; statements: () => number } {
  const main = createLane(dbPath, first, open);
  const lanes: Lane[] = [main];
  // Ad hoc SQL (Store.readOnly) runs on a lane of its own, opened on first use: one
  // statement may run for up to its own time limit (600 s), and on the main lane every
  // named query, report and health check would wait behind it (a break-it pass: a
  // count() waited 19.5 s behind a 20 s statement). Ad hoc statements still queue
  // behind each other, so at most one runs at a time.
  let adhoc: Lane | undefined;
  const adhocLane = (): Lane => (adhoc ??= createLane(dbPath, undefined, open));
  // Maintenance (Store.maintain: a partition's OPTIMIZE … FINAL, seconds at millions of
  // rows) runs on a lane of its own too, for the same reason.
  let maintenance: Lane | undefined;
  const maintenanceLane = (): Lane => (maintenance ??= createLane(dbPath, undefined, open));
  const laneConnection = (lane: () => Lane, close: () => Promise<void>) => ({
    query: (params: Parameters<ChdbConnection['query']>[0]) => lane().run((c) => c.query(params)),
    exec: (params: Parameters<ChdbConnection['exec']>[0]) => lane().run((c) => c.exec(params)),
    command: (params: Parameters<ChdbConnection['command']>[0]) => lane().run((c) => c.command(params)),
    insert: (params: Parameters<ChdbConnection['insert']>[0]) => lane().run((c) => c.insert(params)),
    ping: (params: Parameters<ChdbConnection['ping']>[0]) => lane().run((c) => c.ping(params), (r) => !r.success),
    close,
  });
  // An ad hoc statement still running is not waited for (a break-it pass: serve's
  // SIGTERM took the rest of a 60 s statement whose client had gone): it writes
  // nothing, and chDB cannot cancel it. The statement ends in the engine's thread at
  // its own time limit; the process may exit before that.
  const closeAll = (): Promise<void> => {
    adhoc?.abandon();
    return Promise.all([...lanes, ...(maintenance ? [maintenance] : [])].map((l) => l.close())).then(() => undefined);
  };
  const connection = laneConnection(() => main, closeAll);
  // Closing the store closes every lane (the main client's close); the ad hoc and
  // maintenance clients' own close does nothing more.
  const adhocConnection = laneConnection(adhocLane, async () => undefined);
  const maintenanceConnection = laneConnection(maintenanceLane, async () => undefined);
  const insertLane = (): Lane => {
    let best = lanes[0]!;
    for (const l of lanes) if (l.pending < best.pending) best = l;
    if (best.pending > 0 && lanes.length < EMBEDDED_INSERT_LANES) {
      best = createLane(dbPath, undefined, open);
      lanes.push(best);
    }
    return best;
  };
  // Inserts go through chDB's own insert (`Session.insert`: the rows are handed to the
  // engine as a buffer, the settings become the statement's inline SETTINGS clause),
  // not as text after the statement: the engine, like clickhouse-local, treats a
  // non-terminal stdin as input data, and with rows inline too it refuses the INSERT
  // ("both inlined and external data"): `… | continuity import caddy -` failed.
  const insertRaw: RawInsert = (table, format, body, settings) =>
    insertLane().run(async (c) => {
      // A payload that does not end in a newline goes the inline path in chdb 3.4
      // (and meets the same refusal); a line-delimited one ending in '\n' does not.
      await c.chdb.rawInsert({ table, values: lineTerminated(body), format, settings });
    });
  return {
    connection: connection as unknown as ClientConnection,
    adhocConnection: adhocConnection as unknown as ClientConnection,
    maintenanceConnection: maintenanceConnection as unknown as ClientConnection,
    insertRaw,
    statements: () => [...lanes, ...(adhoc ? [adhoc] : []), ...(maintenance ? [maintenance] : [])].reduce((n, l) => n + l.pending, 0),
  };
}

const NEWLINE = Buffer.from('\n');

/** `body` as bytes ending in a newline (copied only when one must be added or it is a string). */
function lineTerminated(body: string | Buffer): Buffer {
  if (typeof body === 'string') return Buffer.from(body.endsWith('\n') ? body : body + '\n');
  return body.length > 0 && body[body.length - 1] === 0x0a ? body : Buffer.concat([body, NEWLINE]);
}

/**
 * Turns chDB's open failure into a coded error. The engine locks `<dir>/status`
 * (its text names the owning PID) and refuses a second owner with "Cannot lock
 * file …/status"; the JS error only says the connection failed, so the status
 * file tells which case this is.
 */
function storeOpenError(dbPath: string, err: unknown): ContinuityError {
  const statusFile = join(dbPath, 'status');
  const owner = statusOwner(statusFile);
  if (owner !== undefined && owner !== process.pid && isAlive(owner)) {
    return new ContinuityError(
      'CONT_ERR_STORE_LOCKED',
      `${dbPath} is owned by process ${owner}; stop it, use its HTTP API (continuity serve, or continuity consumer --port: /api for queries, the report and SQL, and continuity canary --url for the canary), or pass another --data-dir`,
      { cause: err, details: { dataDir: dbPath, ownerPid: owner } },
    );
  }
  if (owner === process.pid) {
    return new ContinuityError(
      'CONT_ERR_STORE_LOCKED',
      `${dbPath}: this process already has an embedded store open on another directory (the engine allows one per process)`,
      { cause: err, details: { dataDir: dbPath } },
    );
  }
  return new ContinuityError(
    'CONT_ERR_STORE_UNAVAILABLE',
    `the embedded engine cannot open its data directory ${dbPath}: ${(err as Error).message} (--data-dir, CONTINUITY_DATA_DIR)`,
    { cause: err, details: { dataDir: dbPath } },
  );
}

/**
 * The other process whose embedded engine holds `dbPath` open: the engine keeps its
 * `status` file (which names its PID) open and locked while it runs, so the PID it
 * names must be alive and have that file among its open descriptors (Linux /proc).
 * @returns the PID, or undefined when no other process holds it or that cannot be
 *   told (no status file, /proc unreadable): opening the engine then decides.
 */
function lockHolder(dbPath: string): number | undefined {
  let statusFile: string;
  try {
    statusFile = realpathSync(join(dbPath, 'status'));
  } catch {
    return undefined;
  }
  const owner = statusOwner(statusFile);
  if (owner === undefined || owner === process.pid || !isAlive(owner)) return undefined;
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${owner}/fd`);
  } catch {
    return undefined;
  }
  for (const fd of fds) {
    try {
      if (readlinkSync(`/proc/${owner}/fd/${fd}`) === statusFile) return owner;
    } catch {
      // closed meanwhile
    }
  }
  return undefined;
}

/** What `path` is (following links): the engine's status file must be a regular file or absent. */
function statusFileKind(path: string): 'absent' | 'file' | 'directory' | 'FIFO' | 'device' | 'socket' | 'special file' {
  let st: Stats;
  try {
    st = statSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR' ? 'absent' : 'special file';
  }
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'directory';
  if (st.isFIFO()) return 'FIFO';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'device';
  if (st.isSocket()) return 'socket';
  return 'special file';
}

/** The PID the engine's status file names; undefined when there is none or no such file. */
function statusOwner(statusFile: string): number | undefined {
  try {
    const pid = Number(/PID:\s*(\d+)/.exec(readStatusFile(statusFile))?.[1]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined; // none, or not a file the engine wrote
  }
}

/**
 * The head of the engine's `status` file (a few lines: PID, start time, revision),
 * read only from a regular file and at most 4 KiB of it: a status path that is a
 * FIFO or a link to /dev/zero must not hang or exhaust the process.
 * @throws when it is not a regular file or cannot be read.
 */
function readStatusFile(path: string): string {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    if (!fstatSync(fd).isFile()) throw new Error(`${path} is not a regular file`);
    const buf = Buffer.alloc(4096);
    return buf.toString('utf8', 0, readSync(fd, buf, 0, buf.length, 0));
  } finally {
    closeSync(fd);
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Bounds of one ad hoc statement ({@link Store.readOnly}) besides its rows and time:
 * the result's bytes (uncompressed, as the engine counts them per block) and the
 * memory the statement may take. A few wide rows are enough to exhaust the process
 * (5,000 rows of 1 MB each took 22 GB and a SIGSEGV), and the embedded engine shares
 * the process with everything else `serve` holds. The memory bound is what stops such a
 * statement (MEMORY_LIMIT_EXCEEDED, CONT_ERR_STORE_QUERY; 1.7 s and 360 MB for that one);
 * the engine checks the result bytes only per block, after a block is made. The JSON
 * formats' column names, written on every row, are bounded by the same figure before
 * the statement runs (namesFit), and the formatted output by MAX_OUTPUT_BYTES.
 */
export const MAX_RESULT_BYTES = 256 << 20;
export const MAX_MEMORY_BYTES = 2 * 1024 ** 3;

/**
 * The most rows one ad hoc statement returns (`continuity sql --max-rows`, `POST /api/sql`
 * `max_rows`). The memory bound above does not cover the formatted output, which the
 * embedded engine builds whole: 100,000,000 rows of 110 bytes reached 6.6 GB before the
 * result bound stopped them (a break-it pass); a million such rows is about 110 MB.
 */
export const MAX_SQL_ROWS = 1_000_000;

/**
 * A full disk in the words of the engine and of the OS: ClickHouse's NOT_ENOUGH_SPACE
 * (code 243: "Cannot reserve 1.00 MiB, not enough space", raised before a part is
 * written; a CREATE on a full disk says only the text), and a write that met ENOSPC
 * ("No space left on device", errno 28) or EDQUOT ("Disk quota exceeded", errno 122),
 * e.g. as CANNOT_WRITE_TO_FILE_DESCRIPTOR. Other I/O errors are not matched.
 */
const DISK_FULL = /NOT_ENOUGH_SPACE|\bCode: 243\.|not enough space|No space left on device|\bENOSPC\b|errno: 28\b|Disk quota exceeded|\bEDQUOT\b|errno: 122\b/i;
/**
 * The data directory refused a write: a read-only mount or lost permissions (EROFS,
 * EACCES). Like a full disk, the same write succeeds once that is mended, so it is
 * retriable: as a rejected statement, `serve`'s writer dropped every batch it had
 * acknowledged and the consumer stopped (a break-it pass: 50 events lost).
 */
const NOT_WRITABLE = /Read-only file system|\bEROFS\b|errno: 30\b|Permission denied|\bEACCES\b|errno: 13\b/i;

/**
 * The engine's name for an error (`READONLY`, `TIMEOUT_EXCEEDED`, …: ClickHouse's
 * ErrorCodes), as @clickhouse/client parses it into `type` from a server's answer and
 * from chDB's; undefined for an error that did not come from the engine (a refused or
 * dropped connection).
 */
export function engineErrorType(err: unknown): string | undefined {
  const type = (err as { type?: unknown } | null)?.type;
  return typeof type === 'string' && /^[A-Z][A-Z0-9_]*$/.test(type) ? type : undefined;
}

/**
 * The engine's readonly refusal without the name of the engine's user it starts with
 * (`default: Cannot execute query in readonly mode.`: the user is the engine's, not
 * anything the reader chose; a newcomer pass read it as part of the message).
 */
function readonlyMessage(message: string): string {
  return firstLine(message).replace(/^[\w.-]+: (?=Cannot execute query in readonly mode)/, '');
}

/**
 * Turns an error of the engine or the client into a coded error, for a store in `mode`
 * at `location` (data directory or server URL):
 * - a full disk ({@link DISK_FULL}) → CONT_ERR_STORE_UNAVAILABLE (retriable: the same
 *   write succeeds once space is freed), saying so and naming the directory or server,
 *   `details.reason = 'disk_full'`; a data directory that cannot be written (EROFS,
 *   EACCES) → CONT_ERR_STORE_UNAVAILABLE too (retriable), `details.reason = 'not_writable'`;
 * - a write under readonly=1 → CONT_ERR_READONLY; rows both inline and on stdin →
 *   CONT_ERR_STORE_STDIN; a connection that failed or closed (an error that is not the
 *   engine's) → CONT_ERR_STORE_UNAVAILABLE;
 * - anything else → CONT_ERR_STORE_QUERY with the statement (`sql`, clipped) in `details`.
 * With `userSql` (ad hoc SQL: the engine's message may quote the user's text, its
 * literals and names), an engine error is classified by its name ({@link engineErrorType})
 * only, never by words in its message: `SELECT toInt8('No space left on device')` is a
 * rejected statement, not a full disk (found by a break-it pass).
 * A ContinuityError is returned as it is.
 */
export function classifyStoreError(err: unknown, store: Pick<Store, 'mode' | 'location'>, sql: string, options: { userSql?: boolean } = {}): ContinuityError {
  if (err instanceof ContinuityError) return err;
  const e = err as Error & { code?: string; type?: string };
  const message = e.message ?? String(err);
  const type = engineErrorType(err);
  if (options.userSql && type !== undefined) {
    if (type === 'READONLY') return new ContinuityError('CONT_ERR_READONLY', readonlyMessage(message), { cause: err });
    if (type !== 'NOT_ENOUGH_SPACE') return new ContinuityError('CONT_ERR_STORE_QUERY', firstLine(message), { cause: err, details: { sql: sql.slice(0, 500) } });
  }
  // (a full disk and an unwritable directory: the same write succeeds once mended)
  const unwritable = (reason: 'disk_full' | 'not_writable', embedded: string, server: string): ContinuityError =>
    new ContinuityError('CONT_ERR_STORE_UNAVAILABLE', `${store.mode === 'embedded' ? embedded : server}: ${firstLine(message).trim()}`, {
      cause: err,
      details: { ...(store.mode === 'embedded' ? { dataDir: store.location } : { url: store.location }), reason },
    });
  if (DISK_FULL.test(message) || type === 'NOT_ENOUGH_SPACE') {
    return unwritable('disk_full', `the file system of the data directory ${store.location} is full`, `the ClickHouse server ${store.location} has no space left`);
  }
  if (NOT_WRITABLE.test(message)) {
    return unwritable('not_writable', `the data directory ${store.location} cannot be written (read-only or not permitted)`, `the ClickHouse server ${store.location} cannot write its data`);
  }
  if (/readonly mode|READONLY/i.test(message) || type === 'READONLY') {
    return new ContinuityError('CONT_ERR_READONLY', readonlyMessage(message), { cause: err });
  }
  if (/both inlined and external data/.test(message)) {
    return new ContinuityError('CONT_ERR_STORE_STDIN', firstLine(message), { cause: err });
  }
  if (type === undefined && /ECONNREFUSED|ECONNRESET|socket hang up|Timeout error|closed/i.test(message)) {
    return new ContinuityError('CONT_ERR_STORE_UNAVAILABLE', `${store.location}: ${firstLine(message)}`, { cause: err });
  }
  return new ContinuityError('CONT_ERR_STORE_QUERY', firstLine(message), { cause: err, details: { sql: sql.slice(0, 500) } });
}

/**
 * The inline clause `Store.query` ends every statement with: 64-bit integers quoted,
 * as a server writes them by default and the embedded engine does not, so
 * decodeCompact keeps one above 2^53 exact, as a string (inline: a setting sent per
 * request would persist in the embedded session, see Store).
 */
const QUOTE_64BIT = '\nSETTINGS output_format_json_quote_64bit_integers = 1';

function wrap(
  client: ClickHouseClient,
  mode: Store['mode'],
  location: string,
  insertRaw?: RawInsert,
  adhocClient: ClickHouseClient = client,
  maintenanceClient: ClickHouseClient = client,
  statements: () => number = () => 0,
  afterWrite: () => void = () => undefined,
): Store {
  const fail = (err: unknown, sql: string): ContinuityError => classifyStoreError(err, { mode, location }, sql);
  // Ad hoc statements run one at a time, each whole (its checks and its run), so the
  // time one waits for its turn is known when its turn comes (readOnly).
  let adhocTail: Promise<void> = Promise.resolve();

  return {
    mode,
    location,
    client,
    get statements() {
      return statements();
    },
    async query<T>(sql: string, params: Record<string, unknown> = {}): Promise<T[]> {
      try {
        const rs = await client.query({ query: sql.replace(/;\s*$/, '') + QUOTE_64BIT, format: 'JSONCompactEachRowWithNamesAndTypes', query_params: params });
        return decodeCompact<T>(await rs.text());
      } catch (err) {
        throw fail(err, sql);
      }
    },
    async command(sql: string, params: Record<string, unknown> = {}): Promise<void> {
      try {
        await client.command({ query: sql, query_params: params });
      } catch (err) {
        throw fail(err, sql);
      }
    },
    async maintain(sql: string): Promise<void> {
      try {
        await maintenanceClient.command({ query: sql });
      } catch (err) {
        throw fail(err, sql);
      }
    },
    async insertJsonEachRow(table: string, body: string | Buffer, options: { dedupToken?: string } = {}): Promise<void> {
      if (!IDENTIFIER.test(table)) throw new RangeError(`not a table name: ${table}`);
      if (body.length === 0) return;
      // A batch may span many daily partitions (an old log, a backfill): more than the
      // engine's default 100 per INSERT is slower, not wrong, so it must not be refused.
      let settings = ' SETTINGS throw_on_max_partitions_per_insert_block = 0';
      // Embedded: one thread parses each insert's rows. The store already writes two
      // inserts at once (EMBEDDED_INSERT_LANES); splitting each body over more parsing
      // threads on the same cores only added overhead (bench:import, 1,000,000 lines, two
      // pairs of runs: 53.1 and 48.5 CPU-s against 54.4 and 52.9, peak RSS ~25 MB lower).
      const native: Record<string, string | number> = { throw_on_max_partitions_per_insert_block: 0, input_format_parallel_parsing: 0 };
      if (options.dedupToken !== undefined) {
        if (!TOKEN.test(options.dedupToken)) throw new RangeError(`not a deduplication token: ${options.dedupToken}`);
        // The tables materialized views fill from this one (schema/migrations/0006 on)
        // drop the retried batch too, by the same token, instead of storing it again.
        settings += `, insert_deduplicate = 1, insert_deduplication_token = '${options.dedupToken}', deduplicate_blocks_in_dependent_materialized_views = 1`;
        native.insert_deduplicate = 1;
        native.insert_deduplication_token = options.dedupToken;
        native.deduplicate_blocks_in_dependent_materialized_views = 1;
      }
      const sql = `INSERT INTO ${table}${settings} FORMAT JSONEachRow`;
      try {
        if (insertRaw) await insertRaw(table, 'JSONEachRow', body, native);
        else {
          const result = await client.exec({ query: sql, values: Readable.from([body]) });
          result.stream.resume();
        }
      } catch (err) {
        throw fail(err, sql);
      }
      afterWrite();
    },
    async readOnly(sql: string, options: ReadOnlyOptions): Promise<Buffer> {
      if (!FORMAT.test(options.format)) throw new RangeError(`not a format name: ${options.format}`);
      const started = performance.now();
      let release!: () => void;
      const mine = new Promise<void>((resolve) => (release = resolve));
      const previous = adhocTail;
      adhocTail = previous.then(() => mine);
      try {
        // Its turn, or its time out while it waits (a break-it pass saw a statement with
        // timeout_s 3 answered after 7 s, behind an 8 s one): it then leaves the line
        // without running, and the one after it waits only for the one before.
        const waitS = Math.max(1, Math.floor(options.maxExecutionS));
        let timer: NodeJS.Timeout | undefined;
        const outOfTime = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), waitS * 1000)));
        const turn = await Promise.race([previous.then(() => 'turn' as const), outOfTime]).finally(() => clearTimeout(timer));
        if (turn === 'timeout') throw queueTimeout(waitS, waitS);
        return await runReadOnly(sql, options, started);
      } finally {
        release();
      }
    },
    async close(): Promise<void> {
      if (adhocClient !== client) await adhocClient.close();
      await client.close();
    },
  };

  async function runReadOnly(sql: string, options: ReadOnlyOptions, started: number): Promise<Buffer> {
    // (the user's statement: its errors are classified by the engine's error name only)
    const failUser = (err: unknown): ContinuityError => classifyStoreError(err, { mode, location }, sql, { userSql: true });
    const statement = await singleStatement(adhocClient, sql).catch((err: unknown) => {
      throw failUser(err);
    });
    const maxRows = Math.max(1, Math.floor(options.maxRows));
    const maxSeconds = Math.max(1, Math.floor(options.maxExecutionS));
    // The statement becomes a subquery: anything but a query (INSERT, ALTER, SET,
    // SHOW, a second statement) is a syntax error, and the outer readonly=1 applies
    // to all of it (table functions that reach outside the store are refused by the
    // engine) unless the statement sets its own SETTINGS, which inspectWrapped refuses.
    // Arrow output is uncompressed: ClickHouse defaults to LZ4_FRAME, which apache-arrow cannot read.
    // JSON output quotes 64-bit integers (exact in any JSON reader; a server's default, not
    // the embedded engine's) and writes NaN and ±inf as "nan", "inf", "-inf" (by default
    // both were null, the same as NULL: found by a break-it pass), and quotes decimals,
    // which can hold more digits than a JSON reader's double keeps (Decimal128, 256).
    // (lowered below where the JSON formats' names would not fit maxRows rows)
    let limitRows = maxRows;
    const wrappedFor = (seconds: number): string =>
      `SELECT * FROM (\n${statement}\n) LIMIT ${limitRows}\n` +
      `SETTINGS readonly = 1, max_execution_time = ${seconds}, max_result_bytes = ${MAX_RESULT_BYTES}, max_memory_usage = ${MAX_MEMORY_BYTES}, output_format_arrow_compression_method = 'none', ` +
      `output_format_json_quote_64bit_integers = 1, output_format_json_quote_denormals = 1, output_format_json_quote_decimals = 1, ` +
      // (chDB turns them on: addressToLine opened debug files and the symbols gave the install path; a break-it pass)
      `allow_introspection_functions = 0\n` +
      `FORMAT ${options.format}`;
    const refuse = (err: unknown): ContinuityError => {
      const e = failUser(err);
      const type = engineErrorType(err);
      if (e.code === 'CONT_ERR_STORE_QUERY' && type === 'TIMEOUT_EXCEEDED') {
        return new ContinuityError('CONT_ERR_SQL_TIMEOUT', `the statement ran longer than ${maxSeconds} s: ${e.message}`, { cause: err, details: { timeoutS: maxSeconds } });
      }
      // (ClickHouse's SYNTAX_ERROR is code 62; the client reads the type from the message's
      // last parenthesis, which a syntax error's "Expected one of: …" list can end with)
      const syntax = type === 'SYNTAX_ERROR' || (err as { code?: unknown } | null)?.code === '62';
      if (e.code === 'CONT_ERR_STORE_QUERY' && syntax && !/^\s*(SELECT|WITH|\()/i.test(statement)) {
        return new ContinuityError('CONT_ERR_READONLY', 'only queries can run as ad hoc SQL', { cause: err });
      }
      // (the wrapper cannot take INTO OUTFILE, so the engine's message points into the
      // wrapper's text: name the clause instead)
      if (e.code === 'CONT_ERR_STORE_QUERY' && syntax && /\bINTO\s+OUTFILE\b/i.test(statement)) {
        return new ContinuityError('CONT_ERR_SQL_REFUSED', 'INTO OUTFILE does not run as ad hoc SQL: the result comes back as output (continuity sql … --format csv > file)', { cause: err });
      }
      return e;
    };
    await inspectWrapped(adhocClient, wrappedFor(maxSeconds)).catch((err: unknown) => {
      throw refuse(err);
    });
    // The time a statement waited behind others (they run one at a time) counts against
    // its own: a break-it pass found a 1 s statement answered after 14 s behind a
    // 15 s one. What is left bounds each step (whole seconds for max_execution_time,
    // rounded up); none left, the step does not start.
    const secondsLeft = (): number => {
      const waitedS = (performance.now() - started) / 1000;
      const leftS = Math.ceil(maxSeconds - waitedS);
      if (leftS < 1) throw queueTimeout(waitedS, maxSeconds);
      return leftS;
    };
    let namesBound: (ContinuityError & { fitRows: number }) | undefined;
    if (NAMES_EVERY_ROW.test(options.format)) {
      const names = await resultNames(adhocClient, statement, secondsLeft()).catch((err: unknown) => {
        throw refuse(err);
      });
      // Where the names of maxRows rows would not fit, the statement runs with one row more
      // than fit, and only a result that reaches it is refused (a count of one row with a
      // long generated name was refused for the rows it could not have; counting the rows
      // in a statement of their own ran the statement twice: two break-it passes).
      namesBound = namesFit(names, maxRows, options.format);
      if (namesBound) limitRows = namesBound.fitRows + 1;
    }
    const leftS = secondsLeft();
    try {
      const rs = await adhocClient.exec({ query: wrappedFor(leftS) });
      const chunks: Buffer[] = [];
      let bytes = 0;
      for await (const chunk of rs.stream) {
        bytes += (chunk as Buffer).length;
        // (the result bound counts values as the engine holds them: a constant column is
        // one value whatever the rows (repeat('a', 900) over 1,000,000 rows was 903 MB of
        // csv), and a named tuple's element names are written in every value; a break-it pass)
        if (bytes > MAX_OUTPUT_BYTES) {
          rs.stream.destroy();
          throw outputTooLarge(bytes);
        }
        chunks.push(chunk as Buffer);
      }
      const rows = resultRows(rs);
      // (the names' bound: one row past what fits means the result has more; no row count
      // from the engine leaves the output bound above to hold it)
      if (namesBound && rows !== null && rows > namesBound.fitRows) throw namesBound;
      options.onResult?.({ rows, limited: rows !== null && rows >= maxRows });
      return Buffer.concat(chunks);
    } catch (err) {
      if (isContinuityError(err)) throw err;
      throw refuse(err);
    }
  }
}

/**
 * Output formats that write every column's name on every row: ClickHouse's `JSON`
 * (its `data` objects) and the `JSONEachRow` family.
 */
const NAMES_EVERY_ROW = /^JSON(Strings)?(EachRow)?$/;

/**
 * The result columns' names of the ad hoc `statement`, from the engine's analysis of it
 * (run with `LIMIT 0` under the same read-only settings: no row is read, but scalar
 * subqueries run, so it has the statement's time bound).
 * @throws the engine's error for the statement, as the run itself would.
 */
async function resultNames(client: ClickHouseClient, statement: string, maxSeconds: number): Promise<string[]> {
  const rs = await client.query({
    query: `SELECT * FROM (\n${statement}\n) LIMIT 0\nSETTINGS readonly = 1, max_execution_time = ${maxSeconds}, max_memory_usage = ${MAX_MEMORY_BYTES}`,
    format: 'JSONCompactEachRowWithNames',
  });
  const [names] = (await rs.json()) as unknown as [string[]?];
  return names ?? [];
}

/**
 * The refusal of an output whose column names alone, written on each of `maxRows` rows
 * (`format` writes them on every row: {@link NAMES_EVERY_ROW}), would pass
 * {@link MAX_RESULT_BYTES}; undefined when they fit. The engine builds the formatted
 * output whole before any of it is read, and the result bound counts the values only:
 * a 5,000-character alias over 60,000 rows was 300 MB of output and 2.5 GB of memory
 * (a break-it pass). A name counts as the engine writes it in JSON: quoted, `"`
 * `\\` and control characters escaped as JSON.stringify does, `/` as `\\/` and U+2028 and
 * U+2029 as `\\u2028`, `\\u2029`; with its colon and comma.
 * @returns CONT_ERR_SQL_OUTPUT_TOO_LARGE with `fitRows`, the most rows whose names fit
 *   (also in `details`), for the caller to throw when the result has more rows.
 */
export function namesFit(names: readonly string[], maxRows: number, format: string): (ContinuityError & { fitRows: number }) | undefined {
  const perRow = names.reduce((n, name) => n + jsonNameBytes(name) + 2, 0);
  if (perRow * maxRows <= MAX_RESULT_BYTES) return undefined;
  const fitRows = Math.floor(MAX_RESULT_BYTES / perRow);
  const err = new ContinuityError(
    'CONT_ERR_SQL_OUTPUT_TOO_LARGE',
    `${format} writes the column names on every row: ${perRow} bytes a row, so more than ${fitRows} rows would be over ${MAX_RESULT_BYTES / 2 ** 20} MiB of names alone, and the result has more; ` +
      `shorten the column names (AS), ask for at most ${fitRows} rows, or use a format that writes the names once (csv, tsv, arrow)`,
    { details: { namesBytesPerRow: perRow, maxRows, fitRows, limitBytes: MAX_RESULT_BYTES } },
  );
  return Object.assign(err, { fitRows });
}

/** The bytes of `name` as a JSON string the engine writes (see {@link namesFit}). */
function jsonNameBytes(name: string): number {
  let extra = 0;
  for (const c of name) {
    if (c === '/') extra += 1;
    else if (c === '\u2028' || c === '\u2029') extra += 3;
  }
  return Buffer.byteLength(JSON.stringify(name)) + extra;
}

/**
 * The most bytes of formatted output one ad hoc statement returns, whatever its format.
 * The result bound ({@link MAX_RESULT_BYTES}) counts the values as the engine holds
 * them, which is not the output's size: a constant column is one value for any number
 * of rows, and JSON writes a named tuple's element names in every value. The engine
 * builds the output whole first, within its memory bound ({@link MAX_MEMORY_BYTES}:
 * 3 GB of csv stopped there, at 2.5 GB of memory); this bound keeps what is over
 * 512 MiB from being copied and sent on.
 */
export const MAX_OUTPUT_BYTES = 512 << 20;

/** An ad hoc statement's output over {@link MAX_OUTPUT_BYTES} after `bytes` of it. */
function outputTooLarge(bytes: number): ContinuityError {
  return new ContinuityError(
    'CONT_ERR_SQL_OUTPUT_TOO_LARGE',
    `the output passed ${MAX_OUTPUT_BYTES / 2 ** 20} MiB (${bytes} bytes read), the most an ad hoc statement returns; ask for fewer rows or columns, or page with WHERE or LIMIT … OFFSET`,
    { details: { limitBytes: MAX_OUTPUT_BYTES, outputBytes: bytes } },
  );
}

/** An ad hoc statement's refusal after waiting `waitedS` of its `timeoutS` for its turn (and its checks): it did not start. */
function queueTimeout(waitedS: number, timeoutS: number): ContinuityError {
  const waited = Number.isInteger(waitedS) ? String(waitedS) : waitedS.toFixed(1);
  return new ContinuityError('CONT_ERR_SQL_TIMEOUT', `waited ${waited} s behind other ad hoc statements, of timeout_s ${timeoutS}; it did not start`, {
    details: { timeoutS, waited: 'queue' },
  });
}

/** The output's row count from the engine's summary (`result_rows`: chDB's result, or a server's X-ClickHouse-Summary), null without one. */
function resultRows(rs: { summary?: { result_rows?: string } }): number | null {
  const n = Number(rs.summary?.result_rows);
  return rs.summary?.result_rows !== undefined && Number.isSafeInteger(n) && n >= 0 ? n : null;
}

/**
 * Asks the engine to parse `sql` as exactly one statement (`formatQuery` refuses
 * multi-statements) and returns its canonical text without a trailing FORMAT.
 * @throws ContinuityError CONT_ERR_READONLY for a write; CONT_ERR_SQL_REFUSED for
 *   SHOW, DESCRIBE and EXPLAIN, which cannot run inside the read-only wrapper.
 */
async function singleStatement(client: ClickHouseClient, sql: string): Promise<string> {
  const rs = await client
    .query({
      query: 'SELECT formatQuerySingleLine({sql:String}) AS q',
      format: 'JSONEachRow',
      query_params: { sql },
    })
    .catch((err: unknown) => {
      // (the engine's message quotes this wrapper, not the user's statement: say it plainly)
      if (engineErrorType(err) === 'SYNTAX_ERROR' && /Multi-statements are not allowed/.test((err as Error).message)) {
        throw new ContinuityError('CONT_ERR_SQL_REFUSED', 'one statement per call: the text holds more than one (separated by ;)', { cause: err });
      }
      if (/^Empty query\b/.test((err as Error).message ?? '')) {
        throw new ContinuityError('CONT_ERR_SQL_REFUSED', 'the statement is empty (blanks or comments only)', { cause: err });
      }
      throw err;
    });
  const rows = (await rs.json()) as Array<{ q: string }>;
  const q = rows[0]?.q ?? '';
  // Neither check below is a permission check (readonly=1 and inspectWrapped are):
  // they name the refusal early so the message is clear. `q` is the engine's
  // canonical text, so its first word is the statement's keyword.
  if (/^\s*(INSERT|ALTER|CREATE|DROP|TRUNCATE|RENAME|OPTIMIZE|SYSTEM|KILL|GRANT|REVOKE|SET|USE|DELETE|UPDATE|ATTACH|DETACH|EXCHANGE|UNDROP|BACKUP|RESTORE)\b/i.test(q)) {
    throw new ContinuityError('CONT_ERR_READONLY', `the store refuses ${q.split(/\s/)[0]} under readonly=1`);
  }
  // SHOW and DESCRIBE cannot be a subquery, and run on their own they escape the
  // limits (max_result_rows does not cut them, DESCRIBE has no LIMIT) and the
  // guards (INTO OUTFILE writes a file in embedded mode, DESCRIBE file(…) reads one
  // under readonly=1); EXPLAIN as a subquery is the viewExplain table function,
  // which readonly=1 refuses. The system tables answer the same questions.
  const kind = /^\s*(SHOW|DESCRIBE|DESC|EXPLAIN)\b/i.exec(q)?.[1]?.toUpperCase();
  if (kind !== undefined) {
    throw new ContinuityError(
      'CONT_ERR_SQL_REFUSED',
      `${kind === 'DESC' ? 'DESCRIBE' : kind} does not run as ad hoc SQL; use a SELECT on the system tables instead ` +
        "(SHOW TABLES: SELECT name FROM system.tables WHERE database = currentDatabase(); " +
        "DESCRIBE t: SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = 't')",
      { details: { statement: q.slice(0, 500) } },
    );
  }
  // (the engine's canonical text may quote the format's name: FORMAT `Null`)
  return q.replace(/\s+FORMAT\s+(?:\w+|`[^`]+`|"[^"]+")\s*$/i, '');
}

/** One node of `EXPLAIN AST` output: its depth, kind (`Set`, `Function`, …), name, and parent's index. */
interface AstNode {
  readonly depth: number;
  readonly kind: string;
  readonly name: string;
  readonly parent: number;
}

/**
 * Parses `wrapped` (the exact text readOnly runs) with the engine's own parser,
 * `EXPLAIN AST`, which runs under the wrapper's own `readonly = 1` (EXPLAIN applies
 * the explained query's top-level SETTINGS) and executes nothing. Refuses:
 * - any SETTINGS clause but the wrapper's (an AST `Set` node below the outer
 *   SELECT): inside the subquery it would override readonly=1, e.g. `SETTINGS
 *   readonly = 0` lets file() and url() run;
 * - the scalar `file(path)` function, which reads a local file and which
 *   readonly=1 does not stop (the file() table function it does);
 * - system.models, and the merge() and loop() table functions that reach it: it
 *   starts a process outside the store;
 * - first, what the statement's text shows and `EXPLAIN AST` does not
 *   ({@link refusedInText}: an APPLY transformer, a nested SETTINGS clause, file()
 *   inside either, a quoted name holding a newline, sqlite()).
 * The text rules and the AST rules overlap on purpose: each alone was got round.
 * Table functions are left to the engine: under readonly=1 it refuses every one
 * not flagged allow_readonly (file, url, s3, remote, mysql, postgresql, hdfs,
 * sqlite, executable, azureBlobStorage, format, …) and runs only those that stay
 * inside the store (numbers, values, view, merge, generateRandom, null).
 * @throws ContinuityError CONT_ERR_SQL_REFUSED; the engine's error when it cannot parse `wrapped`.
 */
async function inspectWrapped(client: ClickHouseClient, wrapped: string): Promise<void> {
  // The engine's canonical text first, token by token: EXPLAIN AST leaves out what an
  // APPLY transformer holds and prints names raw (a newline too), and both let file()
  // and a SETTINGS clause through (break-it passes); the text keeps everything.
  const refusal = refusedInText(wrapped);
  if (refusal !== undefined) throw new ContinuityError('CONT_ERR_SQL_REFUSED', refusal);
  const rs = await client.query({ query: `EXPLAIN AST ${wrapped}`, format: 'JSONEachRow' });
  const nodes = parseExplainAst(((await rs.json()) as Array<{ explain: string }>).map((r) => r.explain));
  // The wrapper's own SETTINGS: SelectWithUnionQuery > ExpressionList > SelectQuery > Set.
  const outer = nodes.filter((n) => n.kind === 'Set' && n.depth === 3 && nodes[n.parent]?.kind === 'SelectQuery');
  const own = nodes.filter((n) => n.kind === 'Set').length - outer.length;
  if (outer.length !== 1) throw new Error(`EXPLAIN AST: expected the wrapper's SETTINGS, found ${outer.length}`);
  if (own > 0) {
    throw new ContinuityError('CONT_ERR_SQL_REFUSED', 'the statement carries its own SETTINGS clause; the store sets readonly and the limits itself');
  }
  if (nodes.some((n) => n.kind === 'Function' && n.name === 'file' && nodes[n.parent]?.kind !== 'TableExpression')) {
    throw new ContinuityError('CONT_ERR_SQL_REFUSED', 'the file() function reads local files');
  }
  // system.models starts the engine's library bridge, a process of its own, and waits
  // about 2 minutes for it whatever max_execution_time says (a break-it pass: ad hoc SQL
  // held for 115 s, a zombie process per call); merge() and loop() reach it by pattern.
  if (nodes.some((n) => n.kind === 'TableIdentifier' && /^`?system`?\.`?models`?$/.test(n.name))) {
    throw new ContinuityError('CONT_ERR_SQL_REFUSED', 'system.models starts a process outside the store (the library bridge)');
  }
  const reaching = nodes.find((n) => n.kind === 'Function' && (n.name === 'merge' || n.name === 'loop') && nodes[n.parent]?.kind === 'TableExpression');
  if (reaching !== undefined) {
    throw new ContinuityError('CONT_ERR_SQL_REFUSED', `the ${reaching.name}() table function reads tables by pattern, system.models too; name the tables (UNION ALL)`);
  }
}

/** One token of SQL text as the engine's formatQuery writes it ({@link sqlTokens}). */
interface SqlToken {
  /** `word` (a keyword or a bare name), `name` (quoted), `string` (a literal, its content unescaped only of its quotes), `other` (a symbol or number). */
  readonly kind: 'word' | 'name' | 'string' | 'other';
  readonly text: string;
  /** A quoted name holding a backslash escape or a control character. */
  readonly escaped: boolean;
}

/** Splits `sql` into tokens: quoted names and string literals whole (with their escapes), words, and single other characters. */
function sqlTokens(sql: string): SqlToken[] {
  const tokens: SqlToken[] = [];
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i]!;
    if (/\s/.test(c)) continue;
    if (c === "'" || c === '`' || c === '"') {
      let j = i + 1;
      let escaped = false;
      for (; j < sql.length; j++) {
        const code = sql.charCodeAt(j);
        if (sql[j] === '\\') {
          escaped = true;
          j++; // the escaped character
        } else if (sql[j] === c) {
          if (sql[j + 1] === c) j++; // a doubled quote stands for itself
          else break;
        } else if (code < 0x20 || code === 0x7f) escaped = true;
      }
      tokens.push({ kind: c === "'" ? 'string' : 'name', text: sql.slice(i + 1, j), escaped: c !== "'" && escaped });
      i = j;
    } else if (/[A-Za-z_]/.test(c)) {
      const word = /^[A-Za-z_][A-Za-z0-9_]*/.exec(sql.slice(i))![0];
      tokens.push({ kind: 'word', text: word, escaped: false });
      i += word.length - 1;
    } else tokens.push({ kind: 'other', text: c, escaped: false });
  }
  return tokens;
}

/** The tokens inside the parentheses that open at `open` (`tokens[open]` is `(`), to the one that closes them. */
function callTokens(tokens: readonly SqlToken[], open: number): SqlToken[] {
  let depth = 0;
  for (let j = open; j < tokens.length; j++) {
    const text = tokens[j]!.kind === 'other' ? tokens[j]!.text : '';
    if (text === '(') depth++;
    else if (text === ')' && --depth === 0) return tokens.slice(open + 1, j);
  }
  return tokens.slice(open + 1);
}

/** Table functions that take a column list as a string (the engine parses and evaluates it as SQL). */
const STRUCTURE_FUNCTIONS = new Set(['values', 'generaterandom', 'null', 'input']);
/**
 * A column list that may hold an expression: a character beyond names, types, commas and
 * parentheses, or a word of a column declaration's clauses that take one (ALIAS, DEFAULT,
 * MATERIALIZED, EPHEMERAL, TTL, CODEC, CHECK, CONSTRAINT, SETTINGS, …) wherever it stands.
 */
const COLUMN_EXPRESSION = /[^A-Za-z0-9_ ,().`]|ALIAS|DEFAULT|MATERIALIZED|EPHEMERAL|TTL|CODEC|CHECK|CONSTRAINT|SETTINGS|INDEX|PROJECTION|STATISTICS|COMMENT/i;
/** System tables that reach outside the store when read, and what they do. */
const SIDE_EFFECT_TABLES: Readonly<Record<string, string>> = {
  models: 'starts a process outside the store (the library bridge)',
  jemalloc_profile_text: 'writes a heap profile file outside the store',
};
/** Functions refused by name, and why. */
const REFUSED_FUNCTIONS: Readonly<Record<string, string>> = {
  merge: 'table function reads tables by pattern, system.models too; name the tables (UNION ALL)',
  loop: 'table function reads tables by pattern, system.models too; name the tables (UNION ALL)',
  sqlite: 'table function creates its file before readonly refuses it',
  eval: 'table function runs a query built from a string, which the checks cannot see',
  fuzzQuery: 'table function runs a query built from a string, which the checks cannot see',
  // (they parse a column list from a string and run its DEFAULT expressions, file() too,
  // whose result the error message then quoted: a fifth break-it pass)
  structureToProtobufSchema: 'function runs the DEFAULT expressions of the column list it parses',
  structureToCapnProtoSchema: 'function runs the DEFAULT expressions of the column list it parses',
  hasColumnInTable: 'function looks a table name up on disk too (whether a path exists); read system.columns',
};
/** A string literal's words that make it a column list with expressions, or escapes that could hide them. */
const CLAUSE_IN_STRING = /\\|ALIAS|DEFAULT|MATERIALIZED|EPHEMERAL|TTL|CODEC|CHECK|CONSTRAINT|SETTINGS/i;

/**
 * Why ad hoc SQL refuses `wrapped` (the exact text readOnly runs: the engine's canonical
 * text of the statement inside the wrapper), read token by token, or undefined:
 * - a quoted name holding an escape sequence or a control character (EXPLAIN AST
 *   prints it raw, and a newline made a fake node line: a break-it pass);
 * - a SETTINGS clause other than the wrapper's: inside a subquery, an APPLY lambda or a
 *   view it overrides readonly (the engine does not hold a nested one to it);
 * - an APPLY transformer, whose expression EXPLAIN AST does not show;
 * - the name `file` anywhere but right after FROM or JOIN (the scalar function, or
 *   APPLY(file): readonly does not stop it; the table function readonly refuses);
 * - a column list given to values(), generateRandom(), null() or input() as anything
 *   but one plain literal of names and types ({@link COLUMN_EXPRESSION}): the engine
 *   evaluates a column's ALIAS or DEFAULT expression, file() too;
 * - system.models (it starts the library bridge, a process outside the store) and
 *   system.jemalloc_profile_text (it writes a heap profile to /tmp), the merge() and
 *   loop() table functions (they reach them by pattern), sqlite() (it creates its file
 *   before readonly refuses it), eval() and fuzzQuery() (a query from a string; eval is
 *   experimental and off, today), structureToProtobufSchema() and
 *   structureToCapnProtoSchema() (they run a column list's DEFAULT expressions), and
 *   hasColumnInTable() (it looks a name up on disk);
 * - a table named by a path (`FROM '/etc/x'`): the engine's default database looks it
 *   up on disk, and told whether the file exists.
 */
function refusedInText(wrapped: string): string | undefined {
  const tokens = sqlTokens(wrapped);
  const word = (k: number): string | undefined => (tokens[k]?.kind === 'word' ? tokens[k]!.text : undefined);
  let settings = 0;
  for (let k = 0; k < tokens.length; k++) {
    const t = tokens[k]!;
    if (t.escaped) return `a quoted name holds an escape sequence or a control character (${JSON.stringify(t.text.slice(0, 80))}): name columns and aliases with printable characters`;
    // (the engine's default database looks a table name up on disk: `FROM '/path'` told
    // whether a file exists, before readonly refused the read; a sixth pass)
    if ((t.kind === 'name' || t.kind === 'string') && (word(k - 1) === 'FROM' || word(k - 1) === 'JOIN') && t.text.includes('/')) {
      return 'a table named by a path reads the file system; name a table of the store';
    }
    if (t.kind !== 'word' && t.kind !== 'name') continue;
    // a column list is SQL the checks cannot see: values() and generateRandom() evaluate
    // its ALIAS expressions (file() split across concat(), or named with an escape, read
    // /etc/passwd: a third pass), so it must be one plain literal without expressions
    // (a fourth pass: a tab written \t before ALIAS hid the keyword from a word match, and
    // an expression `['…'][1]` hid the literal: only one plain literal passes)
    const fn = t.text.toLowerCase();
    if (STRUCTURE_FUNCTIONS.has(fn) && tokens[k + 1]?.text === '(') {
      const first = tokens[k + 2];
      const plainLiteral = first?.kind === 'string' && !first.text.includes('\\') && !COLUMN_EXPRESSION.test(first.text) && [',', ')'].includes(tokens[k + 3]?.text ?? '');
      // values() reads rows without a column list as data, but takes `('…')` for one
      // (a fifth pass): with no plain list first, no string of its call may hold a clause
      const asData = fn === 'values' && first?.kind !== 'string' && first?.kind !== 'word' && first?.kind !== 'name' && !callTokens(tokens, k + 1).some((a) => a.kind === 'string' && CLAUSE_IN_STRING.test(a.text));
      const none = first?.text === ')';
      if (!plainLiteral && !asData && !none) {
        return `the ${t.text}() table function takes its column list as one plain literal of names and types (letters, digits, _, spaces, commas, parentheses), without ALIAS, DEFAULT or other column expressions`;
      }
    }
    if (t.kind === 'word' && t.text === 'SETTINGS' && ++settings > 1) return 'the statement carries its own SETTINGS clause; the store sets readonly and the limits itself';
    if (t.kind === 'word' && t.text === 'APPLY') return 'an APPLY transformer is not run as ad hoc SQL (the checks cannot see its expression); write the expression out';
    const before = word(k - 1);
    if (t.text === 'file' && before !== 'FROM' && before !== 'JOIN') {
      return 'the file() function reads local files, so the word file is refused outside FROM and JOIN: a column or alias named file needs another name';
    }
    const table = tokens[k + 2]?.text ?? '';
    if (t.text === 'system' && tokens[k + 1]?.text === '.' && Object.hasOwn(SIDE_EFFECT_TABLES, table)) return `system.${table} ${SIDE_EFFECT_TABLES[table]!}`;
    const refused = Object.hasOwn(REFUSED_FUNCTIONS, t.text) ? REFUSED_FUNCTIONS[t.text] : undefined;
    if (refused !== undefined && tokens[k + 1]?.text === '(') return `the ${t.text}() ${refused}`;
  }
  return undefined;
}

/** Reads `EXPLAIN AST` lines ("  Function file (alias f) (children 1)": one space per level). */
function parseExplainAst(lines: string[]): AstNode[] {
  const nodes: AstNode[] = [];
  const open: number[] = []; // index of the last node seen at each depth
  for (const line of lines) {
    const depth = line.length - line.trimStart().length;
    const [kind = '', name = ''] = line.trim().split(/\s+/);
    nodes.push({ depth, kind, name, parent: depth === 0 ? -1 : (open[depth - 1] ?? -1) });
    open[depth] = nodes.length - 1;
    open.length = depth + 1;
  }
  return nodes;
}

function firstLine(message: string): string {
  return message.split('\n')[0]!.slice(0, 500);
}

/**
 * Decodes JSONCompactEachRowWithNamesAndTypes text into one object per row, keyed by
 * the column names: quoted integers and decimals (Int64, UInt64, Int128, Decimal…, as
 * `Store.query` asks the engine to write them) become JS numbers when exactly
 * representable, else stay strings.
 * @param text the format's text: a line of names, a line of types, a JSON array per row.
 * @returns the rows, in order ([] when there are none).
 * @throws SyntaxError when a line is not JSON.
 */
export function decodeCompact<T>(text: string): T[] {
  const lines = text.split('\n');
  if (lines.length < 2 || !lines[1]) return [];
  const names = JSON.parse(lines[0]!) as string[];
  const types = JSON.parse(lines[1]!) as string[];
  const numeric = types.map((t) => /^(Nullable\()?(U?Int(64|128|256)|Decimal)/.test(t));
  const row = rowMaker(names, numeric);
  const out: T[] = [];
  for (let i = 2; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.length > 0) out.push(row(JSON.parse(line) as unknown[]) as T);
  }
  return out;
}

/** A quoted integer or decimal as a number where that is exact, else unchanged. */
function quotedNumber(v: unknown): unknown {
  if (typeof v !== 'string') return v;
  const n = Number(v);
  return Number.isSafeInteger(n) || !/^-?\d+$/.test(v) ? n : v;
}

/**
 * A function that makes one row object of a row's values. It builds each row as one
 * object literal with the names as its keys (each a JSON string literal, so any name is
 * safe), so every row gets the same shape at once: assigning the columns one by one by
 * computed name was about 2/3 of decoding `remint_pairs`' 95,757 rows at 10M events
 * (233-246 ms against 157-183 for the literal, medians of 7, 2026-12-03). A column
 * named `__proto__` would set the prototype in a literal: such rows take the loop, as
 * do all where the process forbids generating code from strings.
 */
function rowMaker(names: string[], numeric: boolean[]): (values: unknown[]) => Record<string, unknown> {
  const fields = names.map((name, c) => `${JSON.stringify(name)}: ${numeric[c] ? `num(v[${c}])` : `v[${c}]`}`);
  if (!names.includes('__proto__')) {
    try {
      return new Function('num', `return (v) => ({ ${fields.join(', ')} });`)(quotedNumber) as (values: unknown[]) => Record<string, unknown>;
    } catch (err) {
      // (Node run with --disallow-code-generation-from-strings: the loop below)
      if (!(err instanceof EvalError)) throw err;
    }
  }
  return (values) => {
    const row: Record<string, unknown> = {};
    for (let c = 0; c < names.length; c++) Object.defineProperty(row, names[c]!, { value: numeric[c] ? quotedNumber(values[c]) : values[c], enumerable: true, writable: true, configurable: true });
    return row;
  };
}
