import { existsSync } from 'node:fs';
import { loadConfig, MAX_RETENTION_DAYS, type Config, type ConfigFlags } from '../core/config.ts';
import { ContinuityError } from '../core/errors.ts';
import { openMigratedStore, type Store } from '../store/index.ts';

/** Global flags every command accepts. */
export interface GlobalFlags {
  dataDir?: string;
}

/** Loads the configuration from the environment and the command's flags. */
export function configFrom(flags: GlobalFlags & ConfigFlags): Config {
  return loadConfig(process.env, flags);
}

/**
 * Opens the configured store for a command, and says on stderr when
 * CONTINUITY_RETENTION_DAYS changed its retention: any command applies it, a read
 * too, and a shorter one drops events (found by a break-it pass: a query with
 * CONTINUITY_RETENTION_DAYS=1 dropped 63% of a store without a word).
 */
export async function openCommandStore(config: Config): Promise<Store> {
  return openMigratedStore(config, {
    onRetentionChange: (from, to, why) =>
      process.stderr.write(
        why !== undefined
          ? `note: this store's retention changed from ${days(from)} to none (kept forever): ${why}; ` +
              `set CONTINUITY_RETENTION_DAYS (at most ${MAX_RETENTION_DAYS}) for a shorter one\n`
          : `note: CONTINUITY_RETENTION_DAYS=${to} changed this store's retention from ${from ? days(from) : 'none (kept forever)'} to ${to ? days(to) : 'none (kept forever)'}` +
              (to !== 0 && (from === 0 || to < from) ? `: events older than ${days(to)} were dropped` : '') +
              '; every command that opens the store with it set applies it\n',
      ),
  });
}

/**
 * Opens the configured store ({@link openCommandStore}), runs `fn`, and always closes the store.
 * @param options.read a command that only reads (query, sql, report, canary): an embedded
 *   store's data directory must exist. A mistyped `--data-dir` made an empty store there
 *   and answered 0 (a newcomer pass).
 * @throws ContinuityError CONT_ERR_CONFIG for a read whose data directory does not exist.
 */
export async function withStore<T>(config: Config, fn: (store: Store) => Promise<T>, options: { read?: boolean } = {}): Promise<T> {
  if (options.read) assertStoreExists(config, 'a read');
  const store = await openCommandStore(config);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/**
 * Refuses a command that works on an existing embedded store (`what`: "a read", "compact")
 * where its data directory does not exist, instead of creating an empty store there (a
 * mistyped --data-dir once "compacted" a new empty store and exited 0: a break-it pass).
 * A ClickHouse server (CLICKHOUSE_URL) is not checked.
 * @throws ContinuityError CONT_ERR_CONFIG naming the directory (`details.dataDir`).
 */
export function assertStoreExists(config: Config, what: string): void {
  if (config.clickhouse || existsSync(config.dataDir)) return;
  throw new ContinuityError(
    'CONT_ERR_CONFIG',
    `no store at ${config.dataDir} (--data-dir, CONTINUITY_DATA_DIR): ${what} does not create one; import, analyze or serve first, or name the store's directory`,
    { details: { dataDir: config.dataDir } },
  );
}

/**
 * Prints a coded error the way every command does: code, message, fix; exit 1
 * (2 for usage and configuration errors).
 */
export function reportError(err: unknown): number {
  if (err instanceof ContinuityError) {
    process.stderr.write(`error ${err.code}: ${err.message}\n  fix: ${err.fix}\n`);
    return err.code === 'CONT_ERR_CONFIG' || err.code === 'CONT_ERR_QUERY_PARAM' || err.code === 'CONT_ERR_QUERY_UNKNOWN' ? 2 : 1;
  }
  process.stderr.write(`unexpected error: ${(err as Error)?.stack ?? String(err)}\n`);
  return 1;
}

/**
 * Parses repeated `--param k=v` flags into an object, as a query string is parsed: a
 * name given more than once holds all its values, in order (an Array parameter such as
 * `mcp_paths` takes them; any other is refused by the query's parameter check, as
 * `GET /api/queries/:name` refuses it). The last value used to win without a word (a
 * break-it pass).
 * @throws ContinuityError CONT_ERR_QUERY_PARAM for a flag without `name=`.
 */
export function parseParams(pairs: string[] = []): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
  for (const p of pairs) {
    const eq = p.indexOf('=');
    if (eq <= 0) throw new ContinuityError('CONT_ERR_QUERY_PARAM', `--param takes name=value, got ${JSON.stringify(p)}`);
    const key = p.slice(0, eq);
    const value = p.slice(eq + 1);
    const had = out[key];
    out[key] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value];
  }
  return { ...out };
}

/**
 * A flag's value as a positive number (a whole one when `whole`; 0 too when `orZero`).
 * @throws ContinuityError CONT_ERR_CONFIG naming the flag, before the store is opened.
 */
export function positiveFlag(flag: string, text: string, whole: boolean, orZero = false): number {
  const v = Number(text);
  if (!/^\s*[0-9.]+\s*$/.test(text) || !Number.isFinite(v) || v < 0 || (v === 0 && !orZero) || (whole && !Number.isSafeInteger(v))) {
    const what = `${orZero ? '' : 'positive '}${whole ? 'whole number' : 'number'}${orZero ? ', 0 or more' : ''}`;
    throw new ContinuityError('CONT_ERR_CONFIG', `${flag} takes a ${what} (got ${JSON.stringify(text)})`);
  }
  return v;
}

/**
 * A TCP port flag: a whole number 0–65535 (0 = any free port).
 * @throws ContinuityError CONT_ERR_CONFIG naming the flag, before the store is opened.
 */
export function portFlag(text: string, flag = '--port'): number {
  const port = Number(text);
  if (!/^\s*\d+\s*$/.test(text) || port > 65_535) throw new ContinuityError('CONT_ERR_CONFIG', `${flag}: not a TCP port: ${JSON.stringify(text)}`);
  return port;
}

/**
 * A server's failure to listen as the coded error a user can act on: a port in use
 * (EADDRINUSE), or an address it may not take (EACCES, EADDRNOTAVAIL), is
 * CONT_ERR_CONFIG naming the address and the flags; anything else is returned as it is.
 */
export function listenError(err: unknown, host: string, port: number): unknown {
  const code = (err as NodeJS.ErrnoException)?.code;
  if (code === 'EADDRINUSE') {
    return new ContinuityError('CONT_ERR_CONFIG', `--port ${port}: ${host}:${port} is already in use by another process; pass another --port, or --port 0 for any free one`, { cause: err });
  }
  if (code === 'EACCES' || code === 'EADDRNOTAVAIL') {
    return new ContinuityError('CONT_ERR_CONFIG', `--host ${host} --port ${port}: cannot listen there (${code}); pass another --host or --port`, { cause: err });
  }
  // a name that does not resolve (getaddrinfo), or not an address at all (256.1.1.1)
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_FAIL' || code === 'EAI_NONAME') {
    return new ContinuityError('CONT_ERR_CONFIG', `--host ${host}: not an address or a name this machine resolves (${code}); pass an IP address such as 127.0.0.1 or 0.0.0.0, or a resolvable name`, { cause: err });
  }
  return err;
}

/**
 * The exit status of a command whose standard output could not be written (cli/main.ts):
 * 1, a failure, unless the command sets another (`canary`: 2, cannot evaluate, since its
 * 1 says a gate failed).
 */
export const outputFailure = { exitCode: 1 };

/** `1 day`, `n days`. */
function days(n: number): string {
  return n === 1 ? '1 day' : `${n} days`;
}
