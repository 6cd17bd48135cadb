import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { formatTimeMicros, parseTimeMicros } from '../core/time.ts';
import { ContinuityError } from '../core/errors.ts';
import { readRetention, type Retention, type Store } from '../store/index.ts';

/**
 * Named queries (DESIGN §4): plain ClickHouse SQL in `queries/sql/<name>.sql`
 * with `{name:Type}` placeholders. Values are always bound by the engine, never
 * pasted into the text. Each query declares its parameters (zod, with defaults)
 * and its row shape (column → ClickHouse type), which `continuity query --list`
 * and the HTTP API print.
 */
export interface NamedQuery {
  readonly name: string;
  readonly description: string;
  /** Parameter schema; CLI strings are coerced. */
  readonly params: z.ZodObject;
  /** ClickHouse type of each parameter, as written in the SQL placeholders. */
  readonly paramTypes: Readonly<Record<string, string>>;
  /** Row shape: column name → ClickHouse type. */
  readonly columns: Readonly<Record<string, string>>;
}

/** The earliest time a time parameter takes: 1900-01-01T00:00:00Z, µs since the epoch. */
export const MIN_TIME_PARAM_MICROS = -2_208_988_800_000_000;
/** The latest time a time parameter takes: 2200-01-01T00:00:00Z, µs since the epoch (included). */
export const MAX_TIME_PARAM_MICROS = 7_258_118_400_000_000;

/**
 * µs-precision UTC time ({@link parseTimeMicros}), bound as `DateTime64(6, 'UTC')` so
 * the engine does not read it in the host's time zone either. Eight digits that are
 * also a date in ISO 8601's basic form (`20261203`) are refused as ambiguous rather
 * than read as epoch seconds in 1970 (a break-it pass: `--from 20261203` ran from
 * 1970-08-23); `canary --deploy` takes epoch seconds of 9 digits or more for the same reason.
 */
const Time = z.union([z.number(), z.string().min(1)]).transform((v, ctx) => {
  const basic = typeof v === 'string' ? /^(\d{4})(\d{2})(\d{2})$/.exec(v.trim()) : null;
  const asDate = basic ? parseTimeMicros(`${basic[1]}-${basic[2]}-${basic[3]}`) : undefined;
  if (basic && asDate !== undefined && asDate >= MIN_TIME_PARAM_MICROS && asDate <= MAX_TIME_PARAM_MICROS) {
    ctx.addIssue({
      code: 'custom',
      message: `${basic[0]} is ambiguous: epoch seconds (${formatTimeMicros(Number(basic[0]) * 1e6).slice(0, 19)}) or the date ${basic[1]}-${basic[2]}-${basic[3]}: write the date as ${basic[1]}-${basic[2]}-${basic[3]}, or the seconds as ${basic[0]}.0`,
    });
    return z.NEVER;
  }
  const us = parseTimeMicros(v);
  if (us === undefined || us < MIN_TIME_PARAM_MICROS || us > MAX_TIME_PARAM_MICROS) {
    ctx.addIssue({ code: 'custom', message: 'a time from 1900 to 2200: ISO-8601 / RFC 3339 (no offset: UTC), "YYYY-MM-DD hh:mm:ss[.ffffff]" (UTC) or epoch seconds' });
    return z.NEVER;
  }
  return formatTimeMicros(us);
});

// (one value comma-separated; repeated keys each one path as given, so a path with a
// comma in it can still be named: test/sql-safety.test.ts)
const pathList = z
  .union([z.array(z.string()), z.string()])
  .transform((v) => (Array.isArray(v) ? v : v.split(',').map((s) => s.trim()).filter(Boolean)))
  .pipe(z.array(z.string().startsWith('/')));

/** Parameters every named query takes. */
export const CommonParams = z.object({
  t_from: Time.default('1970-01-01 00:00:00'),
  t_to: Time.default('2200-01-01 00:00:00'),
  service: z.string().max(256).default(''),
  environment: z.string().max(256).default(''),
  mcp_paths: pathList.default([]),
});
const commonTypes = {
  t_from: "DateTime64(6, 'UTC')",
  t_to: "DateTime64(6, 'UTC')",
  service: 'String',
  environment: 'String',
  mcp_paths: 'Array(String)',
} as const;

/**
 * A number, or its decimal text (a CLI or query-string value), then `bounds`:
 * `Number()` alone also took `0x10`, `0b1`, `Infinity` and `''` (0).
 */
const decimal = (bounds: z.ZodNumber) =>
  z
    .union([z.number(), z.string().trim().regex(/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/, 'a decimal number').transform(Number)], {
      // (the union's own message: zod's default for a union is "Invalid input")
      error: (issue) => `a number (got ${JSON.stringify(issue.input)})`,
    })
    .pipe(bounds);

/** Seconds, more than 0 and at most a day (a window, a recency). */
const seconds = () => z.number().positive('more than 0 seconds').max(86_400, 'at most 86400 seconds (a day)');

const windowParam = { window_s: decimal(seconds()).default(10) };

function define(name: string, description: string, extra: z.ZodRawShape, extraTypes: Record<string, string>, columns: Record<string, string>): NamedQuery {
  return { name, description, params: CommonParams.extend(extra), paramTypes: { ...commonTypes, ...extraTypes }, columns };
}

/** The named queries, by name. */
export const NAMED_QUERIES: Readonly<Record<string, NamedQuery>> = Object.freeze({
  restarts: define('restarts', 'Each restart (server boots first, then proxy-inferred ones) with its evidence, downtime and the proxy 5xx in its gap. ' +
    'down_from: the previous boot\'s shutdown, else its last 2xx, else its last event (server); the last response the upstream served before the gap, of any status (proxy). ' +
    'downtime_s: down_from to the boot (server); the first proxy-generated 5xx to up_at, the outage the proxy saw (proxy). ' +
    'proxy_5xx and sessions_refused are proxy evidence on every row: the proxy-generated 5xx in the gap, and the sessions whose 2xx turned into refused misses in the proxy log at this restart ' +
    '(0 where the proxy logged none; the servers\' own refused misses are counted per boot by refused_misses).', {}, {}, {
    service: 'String',
    source: 'String',
    evidence: 'String',
    boot_id: 'String',
    release: 'String',
    // the boot before ('' on proxy rows): possibly the service's first boot, which is no restart and has no row
    prev_boot_id: 'String',
    prev_release: 'String',
    down_from: 'DateTime64(6)',
    up_at: 'Nullable(DateTime64(6))',
    downtime_s: 'Nullable(Float64)',
    proxy_5xx: 'UInt64',
    proxy_5xx_post: 'UInt64',
    proxy_5xx_get: 'UInt64',
    sessions_refused: 'UInt64',
  }),
  refused_misses: define(
    'refused_misses',
    'Refused misses per boot by reason, status and method, and what the same session did next. ' +
      'boot: the boot_id on server rows (its time: restarts); on proxy rows the number of the proxy-inferred restart before the miss (0: none in the range), whose time is boot_at (null on server rows). ' +
      'misses_active / sessions_active: those on sessions served in the range before the miss (a 2xx through the proxy, a successful request on the server), not on sessions already stale when the range began.',
    windowParam,
    { window_s: 'Float64' },
    {
      source: 'String',
      boot: 'String',
      boot_at: 'Nullable(DateTime64(6))',
      reason: 'String',
      http_status: 'UInt16',
      http_method: 'String',
      mcp_method: 'String',
      next: 'String',
      misses: 'UInt64',
      sessions: 'UInt64',
      misses_active: 'UInt64',
      sessions_active: 'UInt64',
    },
  ),
  remint_pairs: define('remint_pairs', 'Distinct stale → replacement session pairs, adopted or orphaned.', windowParam, { window_s: 'Float64' }, {
    stale_session_key: 'String',
    replacement_session_key: 'String',
    mode: 'String',
    inferred: 'UInt8',
    events: 'UInt64',
    alias_hits: 'UInt64',
    refused_at: 'DateTime64(6)',
    reinitialized_at: 'DateTime64(6)',
    recovery_s: 'Float64',
    adopted: 'Bool',
  }),
  auth_challenges: define(
    'auth_challenges',
    'Authentication challenges by hour, user agent and class, judged benign, lost, loop or unresolved.',
    {
      auth_window_s: decimal(seconds()).default(60),
      loop_min: decimal(z.number().int().min(2).max(1000)).default(3),
    },
    { auth_window_s: 'Float64', loop_min: 'UInt32' },
    { hour: 'DateTime', user_agent: 'String', challenge_class: 'String', http_status: 'UInt16', verdict: 'String', challenges: 'UInt64' },
  ),
  settlements: define(
    'settlements',
    'Arrivals joined to settlements by arrival_id per boot and method: settled share, unsettled at shutdown, outcomes, latency.',
    {},
    {},
    {
      service: 'String',
      boot_id: 'String',
      boot_ended: 'UInt8',
      mcp_method: 'String',
      arrivals: 'UInt64',
      settled: 'UInt64',
      unsettled: 'UInt64',
      streams_open: 'UInt64',
      unsettled_at_shutdown: 'UInt64',
      settled_share: 'Float64',
      ok: 'UInt64',
      jsonrpc_error: 'UInt64',
      tool_error: 'UInt64',
      refused: 'UInt64',
      auth_challenge: 'UInt64',
      other: 'UInt64',
      p50_ms: 'Float64',
      p95_ms: 'Float64',
      p99_ms: 'Float64',
    },
  ),
  cap_pressure: define(
    'cap_pressure',
    'Per principal: latest live/durable session counts against caps, at cap or not, evictions by cap kind and of victims active within active_s; the service’s global-cap headroom.',
    { active_s: decimal(seconds()).default(60) },
    { active_s: 'Float64' },
    {
      service: 'String',
      principal_key: 'String',
      last_at: 'DateTime64(6)',
      live_count: 'UInt32',
      live_cap: 'UInt32',
      durable_count: 'UInt32',
      durable_cap: 'UInt32',
      at_cap: 'Bool',
      principals_at_cap: 'UInt64',
      evictions: 'UInt64',
      evicted_live: 'UInt64',
      evicted_durable: 'UInt64',
      evicted_global: 'UInt64',
      evicted_active: 'UInt64',
      global_count: 'Nullable(UInt32)',
      global_cap: 'Nullable(UInt32)',
      global_headroom: 'Nullable(Int64)',
    },
  ),
  proxy_errors: define(
    'proxy_errors',
    'Proxy-generated 5xx per restart gap and the gap duration distribution: gap_s, s, from the gap’s first proxy-generated 5xx to the first response served after it (null: not back when the range ends; longer than first_5xx..last_5xx); gap_p50_s the median gap of the range (of an even count, the upper middle one); gap_max_s the longest.',
    {},
    {},
    {
      service: 'String',
      first_5xx: 'DateTime64(6)',
      last_5xx: 'DateTime64(6)',
      gap_s: 'Nullable(Float64)',
      proxy_5xx: 'UInt64',
      proxy_5xx_post: 'UInt64',
      proxy_5xx_get: 'UInt64',
      gap_p50_s: 'Nullable(Float64)',
      gap_max_s: 'Nullable(Float64)',
    },
  ),
  proxy_traffic: define(
    'proxy_traffic',
    'Requests to the MCP endpoint as the proxy saw them, per service: ok (upstream 2xx delivered whole: a response the proxy logged an upstream error for, a stream the restart cut, is not ok), proxy-generated 5xx, refused misses, challenges (rates where no server recorded arrivals).',
    {},
    {},
    {
      service: 'String',
      requests: 'UInt64',
      ok: 'UInt64',
      proxy_generated_5xx: 'UInt64',
      upstream_5xx: 'UInt64',
      refused: 'UInt64',
      challenged: 'UInt64',
      sessions: 'UInt64',
    },
  ),
  session_continuity: define(
    'session_continuity',
    'Sessions minted but unused, stale, recovered, unrecovered, abandoned after failure, surviving restarts; by user-agent family and origin.',
    windowParam,
    { window_s: 'Float64' },
    {
      ua_family: 'String',
      origin: 'String',
      sessions: 'UInt64',
      minted_unused: 'UInt64',
      stale: 'UInt64',
      recovered: 'UInt64',
      unrecovered_stale: 'UInt64',
      unrecovered_new: 'UInt64',
      abandoned_after_failure: 'UInt64',
      survived_1: 'UInt64',
      survived_2: 'UInt64',
    },
  ),
});

const sqlCache = new Map<string, string>();

const sqlFiles = new Map<string, string>();
/** A file of `sql/` (without `.sql`), read once: fragments are read by every query that requires them. */
function readSql(path: string): string {
  let text = sqlFiles.get(path);
  if (text === undefined) {
    text = readFileSync(new URL(`./sql/${path}.sql`, import.meta.url), 'utf8');
    sqlFiles.set(path, text);
  }
  return text;
}

/** `-- requires: a, b` in a query or fragment header: the fragments it reads. */
function requiresOf(text: string): string[] {
  const m = /^--\s*requires:\s*(.+)$/m.exec(text);
  return m ? m[1]!.split(',').map((s) => s.trim()).filter(Boolean) : [];
}

/**
 * Fragments `names` need, dependencies first, each once.
 * @throws Error on a cycle or a name that is not a file in `sql/lib/`.
 */
function fragmentOrder(names: readonly string[], substitutes: Substitutes = {}, order: string[] = [], visiting = new Set<string>()): string[] {
  for (const name of names) {
    if (order.includes(name)) continue;
    if (!/^[a-z_]+$/.test(name)) throw new Error(`not a fragment name: ${name}`);
    if (visiting.has(name)) throw new Error(`fragments require each other: ${[...visiting, name].join(' → ')}`);
    visiting.add(name);
    fragmentOrder(requiresOf(readSql(`lib/${fragmentFile(name, substitutes)}`)), substitutes, order, visiting);
    visiting.delete(name);
    order.push(name);
  }
  return order;
}

/**
 * Fragments read from another file of `sql/lib/` under their own name: fragment
 * name → file name (without `.sql`). A narrowed form ({@link NARROWED_QUERIES}) puts
 * a fragment whose rows its check proved unneeded in place of one that reads them.
 */
export type Substitutes = Readonly<Record<string, string>>;

/** The file that fragment `name` is read from under `substitutes`. @throws Error when the file name is not a fragment name. */
function fragmentFile(name: string, substitutes: Substitutes): string {
  const file = Object.hasOwn(substitutes, name) ? substitutes[name]! : name;
  if (!/^[a-z_]+$/.test(file)) throw new Error(`not a fragment name: ${file}`);
  return file;
}

/**
 * The SQL text of a named query (or of a check, `checks/<name>`), as sent to the
 * store: `sql/<name>.sql` with the
 * fragments its header requires (`-- requires: proxy_lines, …`, files in
 * `sql/lib/`, transitively, dependencies first) prepended as common table
 * expressions. A fragment is one CTE body shared by several queries; the engine
 * inlines a CTE at each reference, so each reader's filters and columns reach the
 * table scan, and a query that needs a fragment's rows in several places reads them
 * once into a scalar (`WITH (SELECT groupArray(…) FROM fragment) AS rows`), which the
 * engine evaluates once per query. (`WITH … AS MATERIALIZED` would say the same; it
 * is experimental in ClickHouse 26.7 and hangs or returns wrong rows when one
 * materialized CTE reads another, so it is not used.) Fragments read the same
 * `{name:Type}` parameters as the query; `test/queries-registry.test.ts` checks that
 * every placeholder is declared with its type.
 * @param substitutes fragments read from other files under their own names
 *   ({@link Substitutes}); none by default.
 * @throws Error when a query or fragment file is missing or fragments form a cycle.
 */
export function querySql(name: string, substitutes: Substitutes = {}): string {
  const key = Object.keys(substitutes).length === 0 ? name : `${name} ${JSON.stringify(Object.entries(substitutes).sort())}`;
  let sql = sqlCache.get(key);
  if (sql === undefined) {
    sql = withFragments(readSql(name), substitutes);
    sqlCache.set(key, sql);
  }
  return sql;
}

/**
 * `text` (SQL with an optional `-- requires: …` header) with the fragments it
 * requires prepended, as {@link querySql} composes named queries; for ad hoc
 * analysis and benchmarks over the same building blocks.
 * @param substitutes fragments read from other files under their own names ({@link Substitutes}).
 * @throws Error when a fragment file is missing or fragments form a cycle.
 */
export function withFragments(text: string, substitutes: Substitutes = {}): string {
  const fragments = fragmentOrder(requiresOf(text), substitutes);
  if (fragments.length === 0) return text;
  const ctes = fragments.map((f) => `${f} AS\n(\n${readSql(`lib/${fragmentFile(f, substitutes)}`).trimEnd()}\n)`).join(',\n');
  // The query's own WITH list (if any) continues after the fragments.
  const lines = text.split('\n');
  const first = lines.findIndex((l) => l.trim() !== '' && !l.trimStart().startsWith('--'));
  const head = lines.slice(0, first).join('\n');
  const rest = lines.slice(first).join('\n');
  const own = /^\s*WITH\b/i.exec(rest);
  return `${head}\nWITH\n${ctes}${own ? ',' + rest.slice(own[0].length) : '\n' + rest}`;
}

/** The deployment's settings that are defaults of query parameters (core/config.ts). */
export interface QueryDefaults {
  /** CONTINUITY_MCP_PATHS: the MCP endpoint paths (empty: inferred), the `mcp_paths` parameter. */
  readonly mcpPaths?: readonly string[];
  /** CONTINUITY_REMINT_WINDOW_S: the window of inferred re-mints and recoveries, s, the `window_s` parameter. */
  readonly remintWindowS?: number;
}

/**
 * `params` with the deployment's defaults (`defaults`) filled in where query `name`
 * takes the parameter and `params` does not give it; a given value always wins.
 * `name` undefined: every parameter a default exists for (the report, which hands
 * each query its own).
 * @throws ContinuityError CONT_ERR_QUERY_UNKNOWN for an unknown name.
 */
export function withQueryDefaults(name: string | undefined, params: Record<string, unknown>, defaults: QueryDefaults): Record<string, unknown> {
  const takes = (k: string) => name === undefined || Object.hasOwn(getQuery(name).paramTypes, k);
  const out: Record<string, unknown> = {};
  if (defaults.mcpPaths?.length && takes('mcp_paths')) out.mcp_paths = [...defaults.mcpPaths];
  if (defaults.remintWindowS !== undefined && takes('window_s')) out.window_s = defaults.remintWindowS;
  return { ...out, ...params };
}

/**
 * What each parameter of query `name` is when not given: its schema's default with the
 * deployment's (`defaults`, {@link withQueryDefaults}) over it, as bound (times as
 * 'YYYY-MM-DD hh:mm:ss[.ffffff]' UTC, numbers as numbers, lists as arrays). For
 * `continuity query --list` and `GET /api/queries`.
 * @throws ContinuityError CONT_ERR_QUERY_UNKNOWN for an unknown name.
 */
export function paramDefaults(name: string, defaults: QueryDefaults = {}): Record<string, unknown> {
  const q = getQuery(name);
  const bound = bindParams(name, withQueryDefaults(name, {}, defaults));
  return Object.fromEntries(Object.keys(q.paramTypes).map((k) => [k, bound[k]]));
}

/** One named query as `GET /api/queries` and `continuity query --list --format json` describe it. */
export interface QueryDescription {
  readonly name: string;
  readonly description: string;
  /** Parameter name → ClickHouse type. */
  readonly params: Readonly<Record<string, string>>;
  /** What each parameter is when not given ({@link paramDefaults}: the deployment's settings included). */
  readonly defaults: Record<string, unknown>;
  /** Row column name → ClickHouse type. */
  readonly columns: Readonly<Record<string, string>>;
}

/** Every named query, described with the deployment's `defaults` ({@link QueryDescription}). */
export function describeQueries(defaults: QueryDefaults = {}): QueryDescription[] {
  return Object.values(NAMED_QUERIES).map((q) => ({ name: q.name, description: q.description, params: q.paramTypes, defaults: paramDefaults(q.name, defaults), columns: q.columns }));
}

/** Looks up a named query. @throws ContinuityError CONT_ERR_QUERY_UNKNOWN */
export function getQuery(name: string): NamedQuery {
  const q = Object.hasOwn(NAMED_QUERIES, name) ? NAMED_QUERIES[name] : undefined;
  if (!q) throw new ContinuityError('CONT_ERR_QUERY_UNKNOWN', `${JSON.stringify(name)}; known: ${Object.keys(NAMED_QUERIES).join(', ')}`);
  return q;
}

/**
 * Validates `params` for query `name` (unknown names are refused) and applies defaults.
 * @throws ContinuityError CONT_ERR_QUERY_PARAM listing each problem.
 */
export function bindParams(name: string, params: Record<string, unknown>): Record<string, unknown> {
  const q = getQuery(name);
  const unknown = Object.keys(params).filter((k) => !Object.hasOwn(q.paramTypes, k));
  if (unknown.length > 0) {
    throw new ContinuityError('CONT_ERR_QUERY_PARAM', `${name} takes no parameter ${unknown.join(', ')}; it takes ${Object.keys(q.paramTypes).join(', ')}`);
  }
  return parseParams(name, q.params, q.paramTypes, params);
}

/**
 * The parameters of a report over every named query (`continuity report`, `GET
 * /api/report`), parsed once, up front, as each query will parse its own: a bad one
 * is then the report's error, not that of whichever query bound it first
 * (`restarts: t_from …`, found by a newcomer pass).
 * @param flags the CLI's flag for a parameter (`t_from` → `--from`): given, errors name
 *   the flags and are CONT_ERR_CONFIG; without, they name the parameters and are
 *   CONT_ERR_QUERY_PARAM.
 * @returns the parameters as given (each query applies its own defaults)
 * @throws ContinuityError CONT_ERR_QUERY_PARAM (or CONT_ERR_CONFIG) listing each problem.
 */
export function checkReportParams(params: Record<string, unknown>, flags?: Readonly<Record<string, string>>): Record<string, unknown> {
  const { schema, types } = (reportSchema ??= unionOfQueries());
  const unknown = Object.keys(params).filter((k) => !Object.hasOwn(types, k));
  if (unknown.length > 0) throw new ContinuityError('CONT_ERR_QUERY_PARAM', `the report takes no parameter ${unknown.join(', ')}; it takes ${Object.keys(types).join(', ')}`);
  if (!flags) {
    parseParams('the report', schema, types, params);
    return params;
  }
  try {
    parseParams('', schema, types, params, (k) => flags[k] ?? k);
  } catch (err) {
    // the same problems, named by the flags typed: a configuration error of the command
    if (err instanceof ContinuityError && err.code === 'CONT_ERR_QUERY_PARAM') throw new ContinuityError('CONT_ERR_CONFIG', err.detail, { cause: err, details: err.details });
    throw err;
  }
  return params;
}

/** Every named query's parameters in one schema (built on first use by {@link checkReportParams}). */
let reportSchema: { schema: z.ZodObject; types: Record<string, string> } | undefined;

function unionOfQueries(): { schema: z.ZodObject; types: Record<string, string> } {
  const types: Record<string, string> = {};
  let schema = z.object({});
  for (const q of Object.values(NAMED_QUERIES)) {
    Object.assign(types, q.paramTypes);
    schema = schema.extend(q.params.shape);
  }
  return { schema, types };
}

/**
 * `params` parsed by `schema` (types per `paramTypes`), defaults applied; `label` names
 * the query in errors ('' : the problems alone), `name` each parameter (the CLI's flag
 * for it, say).
 * @throws ContinuityError CONT_ERR_QUERY_PARAM listing each problem.
 */
function parseParams(
  label: string,
  schema: z.ZodObject,
  paramTypes: Readonly<Record<string, string>>,
  params: Record<string, unknown>,
  name: (key: string) => string = (key) => key,
): Record<string, unknown> {
  const at = (text: string): string => (label ? `${label}: ${text}` : text);
  // A query string repeats a key as an array; only Array parameters take several values.
  const repeated = Object.keys(params).filter((k) => Array.isArray(params[k]) && !paramTypes[k]!.startsWith('Array('));
  if (repeated.length > 0) {
    throw new ContinuityError('CONT_ERR_QUERY_PARAM', at(`${repeated.map(name).join(', ')} given more than once; it takes one value`), {
      details: { issues: repeated.map((k) => `${name(k)}: given more than once`) },
    });
  }
  const parsed = schema.safeParse(params);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.map((p) => name(String(p))).join('.')}: ${i.message}`);
    throw new ContinuityError('CONT_ERR_QUERY_PARAM', at(issues.join('; ')), { details: { issues } });
  }
  const data = parsed.data as Record<string, unknown>;
  // Both are 'YYYY-MM-DD hh:mm:ss.ffffff' (UTC) after parsing, so text order is time order.
  if (String(data.t_from) >= String(data.t_to)) {
    throw new ContinuityError('CONT_ERR_QUERY_PARAM', at(`${name('t_from')} (${data.t_from}) must be before ${name('t_to')} (${data.t_to})`));
  }
  return data;
}

/**
 * Parameters the store binds that no caller gives: name → ClickHouse type
 * ({@link bindInternalParams} binds those a text reads).
 * - `endpoint_paths`: the MCP endpoint's paths for the query's range, service and
 *   environment (fragment `proxy_endpoints`: inferred from session evidence, or
 *   `mcp_paths` when given), resolved in a first, cheap query. Bound as a constant,
 *   the path test costs next to nothing per row and leaves every scalar subquery of
 *   the fragments cacheable; the same test as a subquery was re-run at every
 *   reference of a fragment.
 * - `whole_hour_lo`, `whole_hour_hi`, `whole_from`, `whole_to`: the hours the range
 *   covers whole ({@link wholeHours}), which readers of the hourly rollups take from
 *   them (and `whole_day_lo`, `whole_day_hi`: the days among them, which
 *   `session_facts` takes from the daily rollups of 0016): seconds for the rollups'
 *   `DateTime` hours, and the same bounds as
 *   `DateTime64` for the row tables' `ts` (compared with a `DateTime`, the engine
 *   skipped granules of a `DateTime64` key that start in the second before the
 *   bound: test/queries-datetime-bounds.test.ts).
 * - `whole_minute_lo`, `whole_minute_hi`, `whole_minute_from`, `whole_minute_to`:
 *   the minutes the range covers whole ({@link wholeMinutes}), which auth_challenges
 *   reads from the 2xx by the minute (`ok_minutes`, schema/migrations/0017); the same
 *   pairs of types as the hours'.
 * - `proxy_gap_minutes`, `proxy_gap_scan`: the minutes of the proxy's lines the
 *   restart gaps (fragment `proxy_seq`) read, and whether they must read every line
 *   instead ({@link resolveProxyGapWindow}). As constants the minutes select granules
 *   by the primary key, which a subquery set inside a scalar would not do without
 *   being evaluated again at each reference.
 */
export const INTERNAL_PARAM_TYPES: Readonly<Record<string, string>> = Object.freeze({
  endpoint_paths: 'Array(String)',
  whole_hour_lo: 'UInt32',
  whole_hour_hi: 'UInt32',
  whole_day_lo: 'UInt32',
  whole_day_hi: 'UInt32',
  whole_from: "DateTime64(6, 'UTC')",
  whole_to: "DateTime64(6, 'UTC')",
  whole_minute_lo: 'UInt32',
  whole_minute_hi: 'UInt32',
  whole_minute_from: "DateTime64(6, 'UTC')",
  whole_minute_to: "DateTime64(6, 'UTC')",
  proxy_gap_minutes: "Array(DateTime('UTC'))",
  proxy_gap_scan: 'UInt8',
});

/** The rollups' last hour: their `ts` is a DateTime (UInt32 seconds, up to 2106-02-07 06:28:15 UTC), whose last hour starts at 06:00:00. */
const LAST_ROLLUP_HOUR_S = 4_294_965_600;
const HOUR_US = 3_600_000_000;
const DAY_S = 86_400;
const MINUTE_US = 60_000_000;

/**
 * Bound time `k` of `bound` in µs since the epoch, a time before 1970 as 1970 (0).
 * @throws RangeError when it is not a bound time ('YYYY-MM-DD hh:mm:ss.ffffff', UTC).
 */
function boundMicros(bound: Record<string, unknown>, k: 't_from' | 't_to'): number {
  const v = parseTimeMicros(String(bound[k]));
  if (v === undefined) throw new RangeError(`${k} is not a bound time: ${String(bound[k])}`);
  return Math.max(v, 0);
}

/**
 * The hours that `[t_from, t_to)` covers whole, as the hourly rollups key them
 * (`proxy_sessions`, `server_sessions`, schema/migrations/0008):
 * `[whole_hour_lo, whole_hour_hi)` in seconds since the epoch, `whole_hour_lo` being
 * `t_from` rounded up to the hour and `whole_hour_hi` `t_to` rounded down. A reader
 * takes those hours from a rollup and the hours the range cuts from the rows, so any
 * range is exact. The range holds no whole hour when `whole_hour_lo >= whole_hour_hi`.
 * `[whole_day_lo, whole_day_hi)`: the UTC days among those hours (the daily rollups,
 * schema/migrations/0016; `whole_hour_lo` rounded up to the day and `whole_hour_hi`
 * down; none when `whole_day_lo >= whole_day_hi`).
 * Times before 1970 count as 1970 and hours after the rollups' last one are not
 * whole: a rollup's DateTime holds neither. `whole_from` and `whole_to` are the same
 * bounds as the hours' as bound times ('YYYY-MM-DD hh:mm:ss.ffffff', UTC), for the row tables.
 * @param bound the bound common parameters: `t_from`, `t_to` as {@link bindParams}
 *   returns them ('YYYY-MM-DD hh:mm:ss.ffffff', UTC).
 * @param keptFrom µs since the epoch before which no hour is whole (default 0): the
 *   store's retention edge ({@link rollupsKeptFrom}). A rollup row expires with its
 *   hour's or day's first second, the rows in it one by one up to an hour or a day
 *   later, so an hour or day that starts before the edge is read from the rows.
 * @throws RangeError when either time is not such a text.
 */
export function wholeHours(bound: Record<string, unknown>, keptFrom = 0): { whole_hour_lo: number; whole_hour_hi: number; whole_day_lo: number; whole_day_hi: number; whole_from: string; whole_to: string } {
  const lo = Math.min(Math.ceil(Math.max(boundMicros(bound, 't_from'), keptFrom) / HOUR_US) * 3600, LAST_ROLLUP_HOUR_S);
  const hi = Math.min(Math.floor(boundMicros(bound, 't_to') / HOUR_US) * 3600, LAST_ROLLUP_HOUR_S);
  return {
    whole_hour_lo: lo,
    whole_hour_hi: hi,
    // (at most the last hour: rounded up from a time after 2106-02-07 00:00, the day
    // would overflow the UInt32 it is bound as, and wrap to 1970)
    whole_day_lo: Math.min(Math.ceil(lo / DAY_S) * DAY_S, LAST_ROLLUP_HOUR_S),
    whole_day_hi: Math.floor(hi / DAY_S) * DAY_S,
    whole_from: formatTimeMicros(lo * 1e6),
    whole_to: formatTimeMicros(hi * 1e6),
  };
}

/** The last minute a DateTime holds whole starts at 2106-02-07 06:27:00 UTC (its last second is 06:28:15). */
const LAST_WHOLE_MINUTE_S = 4_294_967_220;

/**
 * The minutes that `[t_from, t_to)` covers whole, as `ok_minutes` keys them
 * (schema/migrations/0017): `[whole_minute_lo, whole_minute_hi)` in seconds since the
 * epoch, `t_from` rounded up to the minute and `t_to` down; none when
 * `whole_minute_lo >= whole_minute_hi`. `whole_minute_from` and `whole_minute_to`: the
 * same bounds as bound times, for the row tables. Times before 1970 count as 1970;
 * minutes after the last one a DateTime holds whole are not whole.
 * @param bound the bound common parameters, as {@link wholeHours} takes them.
 * @param keptFrom µs since the epoch before which no minute is whole (default 0): the
 *   store's retention edge, as {@link wholeHours} takes it.
 * @throws RangeError when either time is not a bound time.
 */
export function wholeMinutes(bound: Record<string, unknown>, keptFrom = 0): { whole_minute_lo: number; whole_minute_hi: number; whole_minute_from: string; whole_minute_to: string } {
  const lo = Math.min(Math.ceil(Math.max(boundMicros(bound, 't_from'), keptFrom) / MINUTE_US) * 60, LAST_WHOLE_MINUTE_S);
  const hi = Math.min(Math.floor(boundMicros(bound, 't_to') / MINUTE_US) * 60, LAST_WHOLE_MINUTE_S);
  return { whole_minute_lo: lo, whole_minute_hi: hi, whole_minute_from: formatTimeMicros(lo * 1e6), whole_minute_to: formatTimeMicros(hi * 1e6) };
}

/**
 * Adds to `bound` (in place) the internal parameters ({@link INTERNAL_PARAM_TYPES})
 * that `sql` reads, and returns it. `bound` must hold the common parameters, as
 * {@link bindParams} returns them.
 * @param memo endpoint paths and gap windows already resolved for these common
 *   parameters ({@link EndpointPathsMemo}).
 * @throws a store error from resolving the endpoint paths or the gap window.
 */
export async function bindInternalParams(store: Store, sql: string, bound: Record<string, unknown>, memo?: EndpointPathsMemo): Promise<Record<string, unknown>> {
  if (sql.includes('{endpoint_paths:') || sql.includes('{proxy_gap_')) bound.endpoint_paths = await resolveEndpointPaths(store, bound, memo);
  const hours = /\{whole_(hour_lo|hour_hi|day_lo|day_hi|from|to):/.test(sql);
  const minutes = sql.includes('{whole_minute_');
  const keptFrom = hours || minutes ? await rollupsKeptFrom(store) : 0;
  if (hours) Object.assign(bound, wholeHours(bound, keptFrom));
  if (minutes) Object.assign(bound, wholeMinutes(bound, keptFrom));
  if (sql.includes('{proxy_gap_')) {
    const gaps = await resolveProxyGapWindow(store, bound, memo);
    bound.proxy_gap_minutes = gaps.minutes;
    bound.proxy_gap_scan = gaps.scan ? 1 : 0;
  }
  return bound;
}

/** The retention of each store, read once ({@link rollupsKeptFrom}). */
const retentions = new WeakMap<Store, Promise<Retention>>();

/**
 * How far past the retention's cutoff a rollup bucket must start to be read whole
 * (µs): the engine drops a row whose `ts` + the retention is past its own now, which
 * keeps moving between this bind and the statement's merge or write.
 */
const RETENTION_EDGE_MARGIN_US = 60_000_000;

/**
 * The earliest time (µs since the epoch) from which `store`'s rollups hold every hour,
 * day and minute whole: its retention cutoff (store/retention.ts) plus a minute, or 0
 * when it keeps events for ever. The rollups (schema/migrations/0008, 0014, 0016,
 * 0017) expire a bucket's row with the bucket's first second, while the rows in it
 * expire one by one up to a day later (and a bucket written already past its first
 * second's expiry is dropped as it is written), so a bucket that starts before the
 * cutoff may have lost its row while its rows are kept: such a bucket is read from
 * the rows ({@link wholeHours}, {@link wholeMinutes}). Found by a break-it pass: a log of
 * 2026-12-03 12:00-16:00 imported under a 2-day retention at 13:55 on 2026-12-05 (its
 * lines after 13:54 kept, its day's rollup row dropped as written) gave
 * `session_continuity` no session over a range that held the day whole, and 154 over
 * one that began at 13:00. The retention is read once per
 * store ({@link readRetention}, which re-reads it now and then); a failed read is
 * forgotten, so the next call tries again.
 * @throws the store's coded error when the retention cannot be read (CONT_ERR_STORE_*).
 */
export async function rollupsKeptFrom(store: Store): Promise<number> {
  let retention = retentions.get(store);
  if (retention === undefined) {
    retention = readRetention(store);
    retentions.set(store, retention);
    retention.catch(() => retentions.delete(store));
  }
  const cutoff = (await retention).cutoffMicros();
  return Number.isFinite(cutoff) ? Math.max(cutoff + RETENTION_EDGE_MARGIN_US, 0) : 0;
}

/** Minutes before and after a 5xx's minute whose lines the restart gaps read. */
const GAP_NEAR_MINUTES = 2;
/**
 * Ranges up to this long (µs) read every line for the restart gaps without resolving
 * a window: at 10M events (about 70k proxy lines an hour) grouping 12 hours of lines
 * costs about what the window's two queries do (50–70 ms).
 */
const GAP_SCAN_UP_TO_US = 12 * HOUR_US;

/**
 * Which of the proxy's lines the restart gaps read (DESIGN §4; fragment
 * `proxy_seq`), for `bound`'s range, service and environment: `minutes`, every
 * minute (its start, 'YYYY-MM-DD hh:mm:ss' UTC) within 2 of one that holds a
 * proxy-generated 5xx on the endpoint (`checks/proxy_5xx_minutes.sql`), and `scan`,
 * true when some 5xx's last served line before it or first after it may lie
 * outside those minutes, so every line must be read (`checks/proxy_gap_window.sql`,
 * run with the minutes bound). A range of 12 hours or less is read whole (no
 * minutes, `scan` true) without a query. `bound` must hold the common parameters
 * and `endpoint_paths`.
 * @param memo a window already resolved for these parameters is taken from it, and
 *   a new one put in it, beside the endpoint paths ({@link EndpointPathsMemo}).
 * @throws a store error.
 */
export function resolveProxyGapWindow(store: Store, bound: Record<string, unknown>, memo?: EndpointPathsMemo): Promise<{ minutes: string[]; scan: boolean }> {
  const params = Object.fromEntries([...Object.keys(commonTypes), 'endpoint_paths'].map((k) => [k, bound[k]]));
  const span = (parseTimeMicros(String(bound.t_to)) ?? 0) - (parseTimeMicros(String(bound.t_from)) ?? 0);
  if (span <= GAP_SCAN_UP_TO_US) return Promise.resolve({ minutes: [], scan: true });
  return memoized(`proxy_gap_window ${JSON.stringify(params)}`, memo, async () => {
    const [row] = await store.query<{ minutes: string[] }>(await statementSql(store, 'checks/proxy_5xx_minutes'), params);
    // minute starts as µs; a DateTime parameter takes the text without the fraction
    const near = new Set<number>();
    for (const m of row?.minutes ?? []) {
      const at = parseTimeMicros(m);
      if (at === undefined) throw new RangeError(`the store returned a minute that is not a time: ${m}`);
      for (let k = -GAP_NEAR_MINUTES; k <= GAP_NEAR_MINUTES; k++) near.add(at + k * MINUTE_US);
    }
    const minutes = [...near].map((us) => formatTimeMicros(us).slice(0, 19));
    if (minutes.length === 0) return { minutes, scan: false };
    const [check] = await store.query<{ scan: number }>(await statementSql(store, 'checks/proxy_gap_window'), { ...params, proxy_gap_minutes: minutes, proxy_gap_near: GAP_NEAR_MINUTES });
    return { minutes, scan: check?.scan === 1 };
  });
}

/**
 * What `resolve` gives, taken from `memo` under `key` when there, else resolved and
 * put there (the promise: concurrent callers share one resolution).
 * @throws what `resolve` throws (and the rejected promise stays in `memo`).
 */
function memoized<T>(key: string, memo: EndpointPathsMemo | undefined, resolve: () => Promise<T>): Promise<T> {
  const known = memo?.get(key);
  if (known) return known as Promise<T>;
  const value = resolve();
  memo?.set(key, value);
  return value;
}

/**
 * The MCP endpoint's paths for `bound`'s range, service and environment (DESIGN §4:
 * every path on which a request carried Mcp-Session-Id or Mcp-Protocol-Version or
 * a response minted a session, unless `mcp_paths` names them; never a discovery
 * probe). `bound` must hold the common parameters, as {@link bindParams} returns them.
 * @param memo paths already resolved for these common parameters are taken from it,
 *   and new ones are put in it (see {@link EndpointPathsMemo}).
 * @returns the paths, in no particular order; empty when the range holds no MCP traffic.
 * @throws a store error.
 */
export async function resolveEndpointPaths(store: Store, bound: Record<string, unknown>, memo?: EndpointPathsMemo): Promise<string[]> {
  const common = Object.fromEntries(Object.keys(commonTypes).map((k) => [k, bound[k]]));
  endpointSql ??= withFragments('-- requires: proxy_endpoints\nSELECT groupUniqArray(url_path) AS paths FROM proxy_endpoints');
  return memoized(JSON.stringify(common), memo, async () => {
    const [row] = await store.query<{ paths: string[] }>(endpointSql! + (await analysisSettings(store, 'proxy_endpoints')), { ...common, ...wholeHours(common, await rollupsKeptFrom(store)) });
    return row?.paths ?? [];
  });
}
let endpointSql: string | undefined;

/**
 * Endpoint paths already resolved, by common parameters ({@link resolveEndpointPaths}),
 * and the restart gaps' windows ({@link resolveProxyGapWindow}, under keys of their
 * own): a caller that runs several queries over the same range and scope (a report)
 * passes one to {@link runQuery} so each is resolved once. Valid while the store's
 * proxy lines do not change: a report's lifetime, not a server's.
 */
export type EndpointPathsMemo = Map<string, Promise<unknown>>;

/**
 * What {@link checkMcpPaths} found: do the configured MCP endpoint paths match the
 * proxy log? Paths are URL paths as the proxy logged them.
 */
export interface McpPathsCheck {
  /** The configured paths (`mcp_paths`, by default CONTINUITY_MCP_PATHS), as given. */
  readonly configured: readonly string[];
  /** Configured paths with at least one proxy line in the range and scope (discovery probes aside). */
  readonly matched: readonly string[];
  /** Configured paths with no proxy line there. */
  readonly unmatched: readonly string[];
  /**
   * Paths the inference would take as the MCP endpoint without `mcp_paths`
   * (proxy_endpoints.sql) that are not configured: the most lines with MCP session
   * headers first, at most 5.
   */
  readonly endpoints: readonly string[];
  /** How many such paths in all (≥ `endpoints.length`). */
  readonly endpoint_count: number;
  /**
   * `none_match`: no configured path matches a proxy line while the log shows an MCP
   * endpoint elsewhere, so every proxy-derived number is 0 because of the setting;
   * `some_unmatched`: some configured paths match nothing, the others match;
   * `ok`: every configured path matches, or the range holds no MCP traffic at all.
   */
  readonly verdict: 'ok' | 'none_match' | 'some_unmatched';
  /** The warning for the reader, naming the configured paths and the endpoint the log shows; null when `verdict` is `ok`. */
  readonly warning: string | null;
}

/**
 * Checks the configured MCP endpoint paths (`mcp_paths`) against the proxy log, so
 * that a wrong CONTINUITY_MCP_PATHS (`/mcp/` where the proxy logged `/mcp`) is said
 * aloud instead of reading as a clean range. The rule is DESIGN §4's endpoint
 * (fragment `proxy_endpoints`: every path on which a request carried Mcp-Session-Id
 * or Mcp-Protocol-Version or a response minted a session, unless `mcp_paths` names
 * the paths; never a discovery probe), and DESIGN §5: bad input never passes silently.
 *
 * One query (queries/sql/checks/mcp_paths.sql) over `params`' range, service and
 * environment; none when `mcp_paths` is empty (the endpoint is inferred, so it
 * cannot miss). Other keys of `params` are ignored, so a report's parameters can be
 * passed as they are.
 *
 * @param params the common parameters (CommonParams: t_from, t_to, service,
 *   environment, mcp_paths), raw (as a caller gives them) or bound.
 * @param where where the lines were looked for, for the warning ("in this range").
 * @param setting where the paths came from, named by the warning: the deployment's
 *   CONTINUITY_MCP_PATHS (default), or a request's own `mcp_paths` parameter (a newcomer
 *   pass: `/api/report?mcp_paths=/mcp/` blamed the environment variable, which was unset).
 * @returns null when `mcp_paths` is empty, else the check.
 * @throws ContinuityError CONT_ERR_QUERY_PARAM for a bad common parameter, or a store error.
 */
export async function checkMcpPaths(store: Store, params: Record<string, unknown>, where = 'in this range', setting: McpPathsSetting = 'CONTINUITY_MCP_PATHS'): Promise<McpPathsCheck | null> {
  const bound = bindCheckParams('mcp_paths check', params);
  const configured = bound.mcp_paths as string[];
  if (configured.length === 0) return null;
  const [row] = await store.query<{ matched: string[]; endpoints: string[]; endpoint_count: number | string }>(await statementSql(store, 'checks/mcp_paths'), bound);
  const found = new Set(row?.matched ?? []);
  const matched = configured.filter((p) => found.has(p));
  const unmatched = configured.filter((p) => !found.has(p));
  const endpoints = row?.endpoints ?? [];
  const endpointCount = Number(row?.endpoint_count ?? 0);
  const verdict = matched.length === 0 ? (endpointCount > 0 ? 'none_match' : 'ok') : unmatched.length > 0 ? 'some_unmatched' : 'ok';
  const check = { configured, matched, unmatched, endpoints, endpoint_count: endpointCount, verdict } as const;
  return { ...check, warning: mcpPathsWarning(check, where, setting) };
}

/** A check's own parameters: their schema, their ClickHouse types, and the values given. */
interface CheckParams {
  readonly schema: z.ZodRawShape;
  readonly types: Readonly<Record<string, string>>;
  readonly values: Record<string, unknown>;
}

/**
 * `params`' common parameters (CommonParams) bound for a check query, other keys
 * ignored (so a report's parameters can be passed as they are), with the check's own
 * parameters (`own`) parsed and bound as a named query's are.
 * @throws ContinuityError CONT_ERR_QUERY_PARAM naming `label` for a bad parameter.
 */
function bindCheckParams(label: string, params: Record<string, unknown>, own?: CheckParams): Record<string, unknown> {
  const given = Object.fromEntries(Object.keys(commonTypes).filter((k) => params[k] !== undefined).map((k) => [k, params[k]]));
  return own
    ? parseParams(label, CommonParams.extend(own.schema), { ...commonTypes, ...own.types }, { ...given, ...own.values })
    : parseParams(label, CommonParams, commonTypes, given);
}

/**
 * Runs the check `sql/checks/<name>.sql` with its parameters bound by
 * {@link bindCheckParams}; the endpoint paths are resolved when the SQL reads them.
 * @param memo endpoint paths already resolved by the caller ({@link EndpointPathsMemo}).
 * @throws ContinuityError CONT_ERR_QUERY_PARAM naming the check for a bad parameter, or a store error.
 */
async function runCheck<T>(store: Store, name: string, params: Record<string, unknown>, own?: CheckParams, memo?: EndpointPathsMemo): Promise<T[]> {
  const bound = bindCheckParams(`${name} check`, params, own);
  const sql = await statementSql(store, `checks/${name}`);
  await bindInternalParams(store, sql, bound, memo);
  return store.query<T>(sql, bound);
}

/**
 * The statement sent for named query or check `name` (`checks/<name>`): its SQL
 * ({@link querySql}) with the inline settings it runs with on `store`
 * ({@link analysisSettings}).
 * @throws Error when a query or fragment file is missing; a store error from the settings lookup.
 */
async function statementSql(store: Store, name: string): Promise<string> {
  return querySql(name) + (await analysisSettings(store, name));
}

/** One server restart, as the `restarts` query's server rows name it (times are store DateTime64 text, UTC). */
export interface ServerRestart {
  readonly service: string;
  /** The new boot. */
  readonly boot_id: string;
  readonly release: string;
  /** The boot, as `restarts.up_at`. */
  readonly up_at: string;
  /** The boot before's shutdown, else last 2xx, else last event, as `restarts.down_from`. */
  readonly down_from: string;
  /** The boot that ended, as `restarts.prev_boot_id`. */
  readonly prev_boot_id: string;
}

/**
 * The server restarts in scope: every boot that follows an earlier boot of its
 * service (fragment `server_boots`, as the `restarts` query's server rows), without
 * the proxy inference, which is most of the cost of `restarts` over a whole store.
 * The canary report resolves its deploy from these, then reads the `restarts` row
 * over the life of the boot that ended (reports/canary.ts).
 *
 * One query (queries/sql/checks/server_restarts.sql) over `params`' range, service
 * and environment; other keys of `params` are ignored.
 * @returns the restarts in time order (up_at, service, boot_id).
 * @throws ContinuityError CONT_ERR_QUERY_PARAM for a bad common parameter, or a store error.
 */
export async function listServerRestarts(store: Store, params: Record<string, unknown>): Promise<ServerRestart[]> {
  return runCheck<ServerRestart>(store, 'server_restarts', params);
}

/** The events of a range and scope ({@link eventSpan}). */
export interface EventSpan {
  /** The first and the last event's time (store DateTime64 text, UTC); null without events. */
  readonly first_at: string | null;
  readonly last_at: string | null;
}

/**
 * The first and the last event in `params`' range, service and environment, either
 * source. The canary report notes a deploy window or a baseline that runs past them.
 *
 * One query (queries/sql/checks/event_span.sql); other keys of `params` are ignored.
 * @throws ContinuityError CONT_ERR_QUERY_PARAM for a bad common parameter, or a store error.
 */
export async function eventSpan(store: Store, params: Record<string, unknown>): Promise<EventSpan> {
  const [row] = await runCheck<{ first_at: string | null; last_at: string | null }>(store, 'event_span', params);
  return { first_at: row?.first_at ?? null, last_at: row?.last_at ?? null };
}

/** The restart a {@link countSessionsAcross} count is taken across, as a `restarts` row names it. */
export interface RestartSpan {
  /** The last moment the old instance served (`restarts.down_from`): store DateTime64 text (UTC) or ISO-8601. */
  readonly from: string;
  /** The first moment the new one served (`restarts.up_at`; `from` when it never came back). */
  readonly to: string;
  /** The restarted service (`restarts.service`; '' for an unlabelled proxy log). */
  readonly service: string;
  /** `server`: a boot that follows an earlier one; `proxy`: inferred from the proxy log (`restarts.source`). */
  readonly source: 'server' | 'proxy';
}

/**
 * How many sessions kept working across one restart: keyed sessions of the
 * restarted service whose first 2xx in `params`' range is before the restart and
 * whose last 2xx in it is after it, both strict; the restart runs from the earlier
 * to the later of `span.from` and `span.to`, so where old and new instances
 * overlapped a session counts only if served before the new boot and after the old
 * instance's end. A server restart's sessions are seen by the server (settlements
 * with outcome ok) and by the proxy in lines labelled with its service or
 * unlabelled (the `restarts` query's rule for a proxy restart bracketing a boot); a
 * proxy-inferred restart's, in the proxy lines with its label only. This is
 * session_continuity's `survived_1` test (queries/sql/session_continuity.sql)
 * applied to this one restart and service, read from the server's hourly rollup
 * and the rows (queries/sql/checks/sessions_across.sql), in about a tenth of that
 * query's time. The canary report counts its deploy's survivors with it:
 * `survived_1` over the boot's life counted sessions that survived any restart in
 * it, another service's too.
 *
 * @param params the common parameters (CommonParams), raw or bound; other keys are ignored.
 * @param span the restart; its times parse as CommonParams' times do.
 * @param memo endpoint paths already resolved by the caller ({@link EndpointPathsMemo}).
 * @returns the number of sessions.
 * @throws ContinuityError CONT_ERR_QUERY_PARAM for a bad common parameter or span, or a store error.
 */
export async function countSessionsAcross(store: Store, params: Record<string, unknown>, span: RestartSpan, memo?: EndpointPathsMemo): Promise<number> {
  const own: CheckParams = {
    schema: { span_from: Time, span_to: Time, span_service: z.string().max(256), span_source: z.enum(['server', 'proxy']) },
    types: { span_from: "DateTime64(6, 'UTC')", span_to: "DateTime64(6, 'UTC')", span_service: 'String', span_source: 'String' },
    values: { span_from: span.from, span_to: span.to, span_service: span.service, span_source: span.source },
  };
  const [row] = await runCheck<{ sessions: number | string }>(store, 'sessions_across', params, own, memo);
  return Number(row?.sessions ?? 0);
}

/** One row of {@link countSessionOutcomes}: the `session_continuity` row of a user-agent family and origin, without survived_1/2. */
export type SessionOutcomes = {
  readonly ua_family: string;
  readonly origin: string;
  readonly sessions: number;
  readonly minted_unused: number;
  readonly stale: number;
  readonly recovered: number;
  readonly unrecovered_stale: number;
  readonly unrecovered_new: number;
  readonly abandoned_after_failure: number;
};

/**
 * What happened to the sessions in `params`' range and scope, by user-agent family
 * and origin: the `session_continuity` query's rows and counts (fragment
 * `session_facts`, the same for both) without `survived_1`/`survived_2`, which need
 * every restart in the range (fragment `restart_spans`: about 0.4 s of analysis
 * whatever the range, and the proxy inference over it). The canary report's gate 4
 * (sessions that lost their tools) reads it over the deploy window.
 *
 * One query (queries/sql/checks/session_outcomes.sql); `window_s` (s, as
 * session_continuity's) is read from `params`, other keys are ignored.
 * @param memo endpoint paths already resolved by the caller ({@link EndpointPathsMemo}).
 * @returns one row per family and origin, most sessions first.
 * @throws ContinuityError CONT_ERR_QUERY_PARAM for a bad common parameter or window, or a store error.
 */
export async function countSessionOutcomes(store: Store, params: Record<string, unknown>, memo?: EndpointPathsMemo): Promise<SessionOutcomes[]> {
  const own: CheckParams = { schema: windowParam, types: { window_s: 'Float64' }, values: { window_s: params.window_s } };
  const rows = await runCheck<Record<keyof SessionOutcomes, string | number>>(store, 'session_outcomes', params, own, memo);
  return rows.map((r) => ({
    ua_family: String(r.ua_family),
    origin: String(r.origin),
    sessions: Number(r.sessions),
    minted_unused: Number(r.minted_unused),
    stale: Number(r.stale),
    recovered: Number(r.recovered),
    unrecovered_stale: Number(r.unrecovered_stale),
    unrecovered_new: Number(r.unrecovered_new),
    abandoned_after_failure: Number(r.abandoned_after_failure),
  }));
}

/** Challenges of one class and status ({@link countChallenges}). */
export type ChallengeCount = {
  /** RFC 6750 §3.1 class (invalid_token, insufficient_scope, …), as `auth_challenges.challenge_class`. */
  readonly challenge_class: string;
  readonly http_status: number;
  readonly challenges: number;
};

/**
 * The 401/403 challenges in `params`' range and scope by class and status, counted
 * as the `auth_challenges` query counts them (fragment `auth_challenge_rows`: proxy
 * and server evidence together, a request both recorded counted once), so the sum of
 * that query's `challenges` over a class is this count; without its verdicts, which
 * need every 2xx around the challenges and cost most of its time. The canary report
 * reads its baseline's invalid_token count from it.
 *
 * One query (queries/sql/checks/challenge_counts.sql); other keys of `params` are ignored.
 * @returns one row per class and status, by class then status.
 * @throws ContinuityError CONT_ERR_QUERY_PARAM for a bad common parameter, or a store error.
 */
export async function countChallenges(store: Store, params: Record<string, unknown>): Promise<ChallengeCount[]> {
  const rows = await runCheck<{ challenge_class: string; http_status: number | string; challenges: number | string }>(store, 'challenge_counts', params);
  return rows.map((r) => ({ challenge_class: r.challenge_class, http_status: Number(r.http_status), challenges: Number(r.challenges) }));
}

/**
 * Whether a named query reads the proxy's lines: its SQL filters them by the endpoint's
 * paths (`{endpoint_paths:…}`, resolved from `mcp_paths`), so configured paths that match
 * no line can empty its proxy-derived rows. `cap_pressure` and `settlements` read server
 * events only, and were warned about all the same (a break-it pass).
 */
export function readsProxyLines(name: string): boolean {
  return querySql(name).includes('{endpoint_paths:');
}

/** Where configured MCP endpoint paths came from ({@link checkMcpPaths}'s warning names it). */
export type McpPathsSetting = 'CONTINUITY_MCP_PATHS' | 'mcp_paths';

function mcpPathsWarning(c: Omit<McpPathsCheck, 'warning'>, where: string, setting: McpPathsSetting): string | null {
  const more = c.endpoint_count > c.endpoints.length ? ` (and ${c.endpoint_count - c.endpoints.length} more path(s) with MCP session headers)` : '';
  const named = setting === 'mcp_paths' ? 'The mcp_paths parameter' : 'CONTINUITY_MCP_PATHS';
  if (c.verdict === 'none_match') {
    return (
      `${named} (${sayPaths(c.configured)}) matches no proxy line ${where}; the proxy log's MCP endpoint looks like ${sayPaths(c.endpoints)}${more}. ` +
      `The proxy-derived numbers count nothing: correct ${setting === 'mcp_paths' ? 'the mcp_paths parameter, or leave it out' : 'CONTINUITY_MCP_PATHS (or the mcp_paths parameter), or leave it unset'} to infer the endpoint.`
    );
  }
  if (c.verdict === 'some_unmatched') {
    const verb = (paths: readonly string[], one: string, several: string) => (paths.length === 1 ? one : several);
    return (
      `${named}: ${sayPaths(c.unmatched)} ${verb(c.unmatched, 'matches', 'match')} no proxy line ${where} (${sayPaths(c.matched)} ${verb(c.matched, 'does', 'do')}); ` +
      `the proxy-derived numbers count only ${sayPaths(c.matched)}.` +
      (c.endpoints.length ? ` The proxy log also shows MCP session headers on ${sayPaths(c.endpoints)}${more}, not counted.` : '')
    );
  }
  return null;
}

/** Paths for a sentence: plain when printable, JSON-quoted otherwise, each cut at 100 characters (they come from the proxy log). */
function sayPaths(paths: readonly string[]): string {
  return paths
    .map((p) => (p.length > 100 ? `${p.slice(0, 100)}…` : p))
    .map((p) => (/^[\x21-\x7e]+$/.test(p) ? p : JSON.stringify(p)))
    .join(', ');
}

/**
 * Named queries with a narrower form: where the check `checks/<check>.sql` counts
 * nothing (`n` = 0) over the query's range and scope, the query's rows are those of
 * `sql/<sql>.sql` composed with `substitutes` ({@link Substitutes}: fragments read
 * from other files), which skips the work that could only have added rows the check
 * would have counted. `test/queries-narrowed.test.ts` checks both forms give the
 * same rows, and that each check counts at least what the skipped work would add.
 * - `refused_misses` keeps a proxy miss only where no server recorded it (DESIGN §4:
 *   server evidence is preferred), so where the servers recorded every miss the
 *   proxy logged (`proxy_misses_alone` = 0) its rows are the servers' alone, without
 *   the proxy's restart inference (at 10M events with both sources, 0.5 s instead
 *   of 1.1 s).
 * - `session_continuity` reads the restarts only as spans a session must straddle
 *   (`restart_spans`), and a proxy session transition (a 2xx, then a refused miss)
 *   makes a span only when no proxy-generated 5xx of its service lies between the
 *   two (otherwise it is credited to that gap, whose span is the gap's). Where no
 *   refused miss can be such a transition (`unmatched_transitions` = 0) the
 *   transitions are not computed, and the spans are read from the boots and the gaps
 *   alone (`restart_spans_no_transitions`): 0.3 s less at 10M events, and about 40 ms
 *   less again for the spans built without the restarts' evidence.
 *
 * The check and the query are two statements: a proxy miss written between them is
 * counted by the next call, as a miss written after a query is.
 */
export const NARROWED_QUERIES: Readonly<Record<string, { readonly check: string; readonly sql: string; readonly substitutes?: Substitutes }>> = Object.freeze({
  refused_misses: { check: 'proxy_misses_alone', sql: 'narrowed/refused_misses' },
  session_continuity: { check: 'unmatched_transitions', sql: 'session_continuity', substitutes: { restart_spans: 'restart_spans_no_transitions' } },
});

/**
 * The SQL that answers named query `name` over `bound` (its parameters, as
 * {@link bindParams} returns them): its narrower form where {@link NARROWED_QUERIES}'
 * check counts nothing, else the query's own ({@link querySql}). Resolves the
 * internal parameters of the check and of the SQL into `bound` (in place).
 * @param memo endpoint paths already resolved by the caller ({@link EndpointPathsMemo}).
 * @returns the SQL text (with its inline settings, {@link analysisSettings}) and which form it is (`narrowed`).
 * @throws a store error from the check or from resolving internal parameters.
 */
export async function resolveQuerySql(store: Store, name: string, bound: Record<string, unknown>, memo?: EndpointPathsMemo): Promise<{ sql: string; narrowed: boolean }> {
  const narrower = NARROWED_QUERIES[name];
  let narrowed = false;
  if (narrower !== undefined) {
    // (the check and the SQL resolve the same endpoint paths and gap window: once)
    memo ??= new Map();
    const check = await statementSql(store, `checks/${narrower.check}`);
    const [row] = await store.query<{ n: number | string }>(check, await bindInternalParams(store, check, bound, memo));
    narrowed = Number(row?.n) === 0;
  }
  const sql = narrowed && narrower ? querySql(narrower.sql, narrower.substitutes) : querySql(name, PARAM_FORMS[name]?.(bound) ?? {});
  await bindInternalParams(store, sql, bound, memo);
  return { sql: sql + (await analysisSettings(store, name)), narrowed };
}

/**
 * The shortest span of whole minutes (s) over which `auth_challenges` reads the 2xx by
 * the minute (lib/auth_ok_minutes.sql, `ok_minutes` of schema/migrations/0017); a
 * shorter range reads the rows (lib/auth_ok_rows.sql). The minutes cost a fixed
 * part (the loop-within-a-minute clients found from the challenges, about 60-85 ms,
 * and the edges read from the rows) that only a long range wins back. At 10M events
 * (medians of 7 side by side, ms, minutes against rows): the canary's 15-minute
 * window 349-457 against 227-297, 3 h 396 / 316, 6 h 577 / 451, 12 h 737 / 595,
 * 24 h 670 / 714, the whole 2 days 958 / 1,213 (docs/queries.md).
 */
export const AUTH_MINUTES_MIN_SPAN_S = 24 * 3600;

/**
 * Which `auth_challenges` form answers `bound`: the 2xx by the minute where the window
 * is at least 60 s and the range holds {@link AUTH_MINUTES_MIN_SPAN_S} of whole
 * minutes (a day), else the rows alone. Both give the same rows (test/queries-auth-minutes.test.ts).
 * @throws RangeError when `bound`'s times are not bound times.
 */
export function authOkForm(bound: Record<string, unknown>): Substitutes {
  const { whole_minute_lo: lo, whole_minute_hi: hi } = wholeMinutes(bound);
  return Number(bound.auth_window_s) >= 60 && hi - lo >= AUTH_MINUTES_MIN_SPAN_S ? {} : { auth_ok_minutes: 'auth_ok_rows' };
}

/** Named queries read in another form chosen by their parameters alone ({@link Substitutes}). */
const PARAM_FORMS: Readonly<Record<string, (bound: Record<string, unknown>) => Substitutes>> = Object.freeze({
  auth_challenges: authOkForm,
});

/**
 * Query-analysis settings that some statements run with, by query name (checks as
 * `checks/<name>`). They are appended to the statement as an inline SETTINGS clause;
 * the store's `query` sends no per-request settings (store/client.ts says why).
 *
 * - `optimize_and_compare_chain`: ClickHouse 25.2 and later turn it on by default. It
 *   adds the constant comparisons that follow from each AND chain, and its cost is
 *   hashing query-tree nodes (ClickHouse docs, `optimize_and_compare_chain_max_hash_work`).
 *   Over the large tree of `session_facts` it took about 110 ms of every call on an
 *   empty store and folded nothing.
 *   - `session_continuity` at 10M events: 1,411 ms with it, 1,307 without (medians of
 *     15, side by side).
 *   - The canary's `session_outcomes` over a 45-minute window: 474 against 433 ms
 *     (medians of 11).
 *   - The other named queries gained nothing, so they keep the default.
 *   - Turning it off never changes the rows (ClickHouse docs).
 *
 * A setting the engine does not list in `system.settings` is not sent (see
 * {@link analysisSettings}).
 */
const ANALYSIS_SETTINGS: Readonly<Record<string, Readonly<Record<string, number>>>> = Object.freeze({
  session_continuity: { optimize_and_compare_chain: 0 },
  'checks/session_outcomes': { optimize_and_compare_chain: 0 },
});

/**
 * Settings every named query and check runs with: no compilation of its expressions,
 * aggregate functions or sort descriptions to machine code (ClickHouse's JIT:
 * `compile_expressions`, `compile_aggregate_expressions`, `compile_sort_description`,
 * on by default). The engine compiles a statement's expressions the fourth time it runs
 * them in a process (`min_count_to_compile_*` = 3), and that run pays for the
 * compilation: `session_continuity` at 10M events 1,449–1,558 ms against 720–760 for the
 * compiled runs after it and 760–910 for the runs before. Without it, every run took
 * what the compiled ones take (707–831 ms; medians of runs 5–9 in one process, three
 * processes each, alternating: 719 / 722 / 738 compiled, 733 / 733 / 733 without), and
 * the other named queries the same within ±5%. So nothing is compiled, and no call pays
 * for it (docs/queries.md, "Compilation off", 2026-12-05). Compilation never changes a
 * row (ClickHouse docs).
 */
const NO_COMPILATION: Readonly<Record<string, number>> = Object.freeze({
  compile_expressions: 0,
  compile_aggregate_expressions: 0,
  compile_sort_description: 0,
});

/** Every setting name {@link ANALYSIS_SETTINGS} and {@link NO_COMPILATION} hold: what {@link analysisSettings} looks up. */
const ANALYSIS_SETTING_NAMES = [...new Set([...Object.keys(NO_COMPILATION), ...Object.values(ANALYSIS_SETTINGS).flatMap((s) => Object.keys(s))])];

/** The settings of {@link ANALYSIS_SETTING_NAMES} each store's engine knows, looked up once per store. */
const knownSettings = new WeakMap<Store, Promise<ReadonlySet<string>>>();

/**
 * The inline SETTINGS clause (a new line, then `SETTINGS name = value, …`) that named
 * query or check `name` (`checks/<name>`) runs with on `store`: its
 * {@link NO_COMPILATION} and {@link ANALYSIS_SETTINGS} that the store's engine lists in `system.settings`. A
 * server older than a setting rejects the setting by name, and does not run the pass
 * it turns off either. Returns '' when there is nothing to send. The lookup runs once
 * per store. A failed lookup is forgotten, so the next call tries again.
 * @throws a store error from the lookup.
 */
export async function analysisSettings(store: Store, name: string): Promise<string> {
  const wanted = { ...NO_COMPILATION, ...ANALYSIS_SETTINGS[name] };
  let known = knownSettings.get(store);
  if (known === undefined) {
    known = store
      .query<{ name: string }>('SELECT name FROM system.settings WHERE name IN {names:Array(String)}', { names: ANALYSIS_SETTING_NAMES })
      .then((rows) => new Set(rows.map((r) => r.name)));
    knownSettings.set(store, known);
    known.catch(() => knownSettings.delete(store));
  }
  const names = await known;
  const sent = Object.entries(wanted).filter(([k]) => names.has(k));
  return sent.length === 0 ? '' : `\nSETTINGS ${sent.map(([k, v]) => `${k} = ${v}`).join(', ')}`;
}

/**
 * Runs a named query with bound parameters (in its narrower form where one applies:
 * {@link NARROWED_QUERIES}).
 * @param endpointPaths endpoint paths resolved by earlier queries of the same caller
 *   (see {@link EndpointPathsMemo}); without it they are resolved for this query.
 * @returns rows shaped as the query's `columns` declare.
 * @throws ContinuityError CONT_ERR_QUERY_UNKNOWN, CONT_ERR_QUERY_PARAM, or a store error.
 */
export async function runQuery<T = Record<string, unknown>>(store: Store, name: string, params: Record<string, unknown> = {}, endpointPaths?: EndpointPathsMemo): Promise<T[]> {
  const bound = bindParams(name, params);
  const { sql } = await resolveQuerySql(store, name, bound, endpointPaths);
  return store.query<T>(sql, bound);
}
