import type { FastifyError, FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { assertMediaType, bearerChallenge, codedRequestError, ContinuityError, createBearerCheck, isContinuityError, unauthorized } from '../core/index.ts';
import { NAMED_QUERIES, bindParams, checkMcpPaths, readsProxyLines, describeQueries, getQuery, runQuery, withQueryDefaults, type QueryDefaults } from '../queries/index.ts';
import { tsvTable } from '../core/table.ts';
import { buildCanaryReport, buildContinuityReport, CANARY_FORMATS, gatesFromData, parseDuration, renderCanary, type CanaryFormat } from '../reports/index.ts';
import { MAX_SQL_ROWS, type Store } from '../store/index.ts';

/** Options of {@link apiRoutes}. */
export interface ApiOptions {
  /** The store every route reads (the process that owns it serves it). */
  store: Store;
  /** When set, every route requires `Authorization: Bearer <token>` (the same token as the ingest routes; scheme in any case, RFC 9110 §11.1). */
  bearerToken?: string | undefined;
  /** The deployment's defaults of query parameters (CONTINUITY_MCP_PATHS, CONTINUITY_REMINT_WINDOW_S); a request's own values win. */
  queryDefaults?: QueryDefaults | undefined;
}

/**
 * `POST /api/sql` output formats: name → ClickHouse output format and the
 * response content type. `json` is ClickHouse's `JSON` format
 * (`{ meta, data, rows, statistics }`; 64-bit integers are quoted); `table` is a text
 * table drawn from `TSVWithNames` here, as `continuity sql` draws it (core/table.ts).
 */
export const SQL_FORMATS = {
  json: { format: 'JSON', contentType: 'application/json; charset=utf-8' },
  jsonl: { format: 'JSONEachRow', contentType: 'application/x-ndjson; charset=utf-8' },
  csv: { format: 'CSVWithNames', contentType: 'text/csv; charset=utf-8' },
  tsv: { format: 'TSVWithNames', contentType: 'text/tab-separated-values; charset=utf-8' },
  // (rendered here from TSVWithNames, as `continuity sql` renders it: the engine's Pretty
  // formats write an escape sequence in a stored value to a terminal as it is)
  table: { format: 'TSVWithNames', contentType: 'text/plain; charset=utf-8' },
  arrow: { format: 'ArrowStream', contentType: 'application/vnd.apache.arrow.stream' },
} as const;

/** Body of `POST /api/sql`. */
const SqlBody = z
  .object({
    sql: z.string().min(1).max(100_000),
    format: z.enum(Object.keys(SQL_FORMATS) as [keyof typeof SQL_FORMATS, ...Array<keyof typeof SQL_FORMATS>]).default('json'),
    max_rows: z.number().int().min(1).max(MAX_SQL_ROWS).default(10_000),
    timeout_s: z.number().int().min(1).max(600).default(30),
  })
  .strict();

/** Body of `POST /api/canary` (and the query string of `GET /api/canary`, without `gates`). */
const CanaryBody = z
  .object({
    deploy: z.string().trim().min(1).max(256),
    after: z.string().max(32).optional(),
    baseline: z.string().max(32).optional(),
    service: z.string().max(256).optional(),
    environment: z.string().max(256).optional(),
    format: z.enum(CANARY_FORMATS as unknown as [CanaryFormat, ...CanaryFormat[]]).default('json'),
    // a gates file's contents as JSON (reports/canary.ts GatesFileSchema validates it)
    gates: z.unknown().optional(),
  })
  .strict();

/**
 * The base URL a request reached this server at, for links back to it: the scheme and
 * the `Host` header (RFC 9110 §7.2) when that is a plain host and port; otherwise (a
 * path, user info or anything else a URL would read as more than an authority) the
 * local address the connection came in on, so a forged Host cannot make a printed
 * command send its token elsewhere.
 */
function selfBase(req: FastifyRequest): string {
  const scheme = req.protocol === 'https' ? 'https' : 'http';
  // (a Host without its port, which RFC 9110 §7.2 allows for the scheme's default, reached this port)
  const port = req.socket.localPort ?? (scheme === 'https' ? 443 : 80);
  const m = /^([\w.-]+|\[[\da-fA-F:.]+\])(?::(\d{1,5}))?$/.exec(req.host ?? '');
  if (m) return `${scheme}://${m[1]}:${m[2] ?? port}`;
  const local = (req.socket.localAddress ?? '127.0.0.1').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
  return `${scheme}://${local.includes(':') ? `[${local}]` : local}:${port}`;
}

/** Content type of each canary format. */
const CANARY_TYPES: Readonly<Record<CanaryFormat, string>> = {
  json: 'application/json; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
  html: 'text/html; charset=utf-8',
};

/** Parameters `GET /api/report` accepts: every parameter of the named queries it runs. */
const REPORT_PARAMS = new Set(Object.values(NAMED_QUERIES).flatMap((q) => Object.keys(q.paramTypes)));

/**
 * The read API of `continuity serve` (DESIGN §2: while a long-running process owns
 * the embedded data directory, other programs read the store through it). Register
 * with a prefix: `app.register(apiRoutes, { prefix: '/api', store })`.
 *
 * - `GET /queries` → `{ queries: [{ name, description, params: {name: ClickHouse type}, columns: {name: ClickHouse type} }] }`
 *   (queries/registry.ts `NAMED_QUERIES`).
 * - `GET /queries/:name?param=value…` → `{ query, params, rows, warnings }`: the named query
 *   with bound parameters (repeat a key, or use commas, for an array parameter);
 *   times are UTC `YYYY-MM-DD hh:mm:ss.ffffff` strings, counts numbers; `warnings`
 *   (strings) says what makes the rows read less than the store holds: configured MCP
 *   paths that match no proxy line (queries/registry.ts `checkMcpPaths`).
 *   Unknown name → 404 `CONT_ERR_QUERY_UNKNOWN`; bad or unknown parameter → 400
 *   `CONT_ERR_QUERY_PARAM`.
 * - `GET /report?param=value…` → the continuity report (reports/continuity.ts
 *   `ContinuityReport`) over the given range and filters; unknown parameter → 400.
 * - `POST /canary` with `{ deploy, after?, baseline?, service?, environment?, format?, gates? }`
 *   (or `GET /canary?deploy=…`, without gates) → the canary report of `continuity
 *   canary` (reports/canary.ts) in `format` (`json` by default, `md`, `html`); `after`
 *   and `baseline` are durations (`15m`), `gates` a gates file's contents as JSON. 200
 *   whatever the verdict, which the headers `x-continuity-verdict` (pass, fail,
 *   cannot_evaluate) and `x-continuity-exit-code` (0, 1, 2) carry; a bad body, duration
 *   or gates object → 400 `CONT_ERR_BAD_REQUEST`.
 * - `POST /sql` with `{ sql, format?, max_rows?, timeout_s? }` → the output of one
 *   read-only statement (`store.readOnly`: `readonly=1`, row and time limits) in
 *   `format` (see {@link SQL_FORMATS}; default `json`; Arrow uncompressed). A
 *   write, or a table function reaching outside the store (file, url, s3, remote,
 *   …) → 403 `CONT_ERR_READONLY`; a statement with its own SETTINGS clause, the
 *   file() function, or SHOW/DESCRIBE/EXPLAIN → 403 `CONT_ERR_SQL_REFUSED`; a
 *   rejected statement → 400 `CONT_ERR_STORE_QUERY`; a bad body → 400
 *   `CONT_ERR_BAD_REQUEST`; a body that is not `application/json`, or is in a
 *   content coding other than gzip and deflate → 415 `CONT_ERR_UNSUPPORTED_MEDIA`
 *   (RFC 9110 §15.5.16); a body over the app's body limit once decoded → 413
 *   `CONT_ERR_BODY_TOO_LARGE` (RFC 9110 §15.5.14; `details.limitBytes`).
 *   Decoding is the app's: the ingest gateway registers it (api/server.ts).
 *
 * Every error body is the coded error's JSON `{ code, message, fix, details }`
 * with the registry's HTTP status (core/errors.ts); an unknown path under the
 * prefix gets the app's not-found answer (404 `CONT_ERR_NOT_FOUND` when the app
 * is the ingest gateway's, as in api/server.ts). With `bearerToken`, a request
 * without the token gets 401 `CONT_ERR_UNAUTHORIZED`.
 */
export const apiRoutes: FastifyPluginAsync<ApiOptions> = async (app: FastifyInstance, options: ApiOptions) => {
  const { store } = options;
  const bearerOk = options.bearerToken ? createBearerCheck(options.bearerToken) : undefined;

  // The same mapping as the ingest gateway's: a body over the limit is 413 here too, not 400.
  app.setErrorHandler((err: FastifyError | ContinuityError, req, reply) => {
    if (isContinuityError(err)) return sendError(reply, err);
    const coded = codedRequestError(err, req.routeOptions.bodyLimit);
    if (coded) return sendError(reply, coded);
    app.log.error(err);
    return reply.status(500).send({ code: 'INTERNAL', message: 'internal error' });
  });

  // every route's query string decoded strictly (the parser keeps a bad escape as text)
  app.addHook('preValidation', async (req) => strictQueryString(req.url));

  if (bearerOk) {
    app.addHook('onRequest', async (req) => {
      if (!bearerOk(req.headers.authorization)) throw unauthorized(req.headers.authorization);
    });
  }

  app.get('/queries', async () => ({ queries: describeQueries(options.queryDefaults ?? {}) }));

  app.get<{ Params: { name: string }; Querystring: Record<string, string | string[]> }>('/queries/:name', async (req) => {
    const q = getQuery(req.params.name);
    const given = withQueryDefaults(q.name, { ...req.query }, options.queryDefaults ?? {});
    // Bound here too only to echo the values used (defaults applied); runQuery binds again.
    const params = bindParams(q.name, given);
    const rows = await runQuery(store, q.name, given);
    // configured MCP paths that match no proxy line empty every proxy-derived row: said,
    // as `continuity query` says it on stderr (a newcomer pass: rows [] alone)
    const paths = readsProxyLines(q.name) ? await checkMcpPaths(store, given, undefined, 'mcp_paths' in req.query ? 'mcp_paths' : undefined) : null;
    return { query: q.name, params, rows, warnings: paths?.warning ? [paths.warning] : [] };
  });

  app.get<{ Querystring: Record<string, string | string[]> }>('/report', async (req) => {
    const params: Record<string, unknown> = { ...req.query };
    const unknown = Object.keys(params).filter((k) => !REPORT_PARAMS.has(k));
    if (unknown.length > 0) {
      throw new ContinuityError('CONT_ERR_QUERY_PARAM', `the report takes no parameter ${unknown.join(', ')}; it takes ${[...REPORT_PARAMS].join(', ')}`);
    }
    // (a request's own mcp_paths is named as such where it matches no proxy line)
    return buildContinuityReport(store, withQueryDefaults(undefined, params, options.queryDefaults ?? {}), undefined, 'mcp_paths' in params ? 'mcp_paths' : undefined);
  });

  // The canary report of `continuity canary`, for a pipeline while this process owns the
  // store (a newcomer pass: canary stopped with CONT_ERR_STORE_LOCKED and no route did it).
  const canary = async (input: unknown, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    // (a GET's gates were checked as a body's and refused as "request body": a newcomer pass)
    if (req.method === 'GET' && input !== null && typeof input === 'object' && 'gates' in input) {
      throw new ContinuityError('CONT_ERR_BAD_REQUEST', 'GET /api/canary takes no gates: POST /api/canary with { deploy, …, gates } in a JSON body');
    }
    const parsed = CanaryBody.safeParse(input);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`);
      throw new ContinuityError('CONT_ERR_BAD_REQUEST', `expected { deploy, after?, baseline?, service?, environment?, format?, gates? }: ${issues.join('; ')}`, { details: { issues } });
    }
    const b = parsed.data;
    let judged: Parameters<typeof buildCanaryReport>[1];
    try {
      judged = {
        deploy: b.deploy,
        afterS: b.after === undefined ? undefined : parseDuration(b.after, 'after'),
        baselineS: b.baseline === undefined ? undefined : parseDuration(b.baseline, 'baseline'),
        service: b.service,
        environment: b.environment,
        mcpPaths: options.queryDefaults?.mcpPaths,
        remintWindowS: options.queryDefaults?.remintWindowS,
        // (validated as data: the body is parsed JSON already)
        gates: b.gates === undefined ? undefined : gatesFromData(b.gates, 'gates', 'request body'),
        // next steps as requests to this API: this process owns the store, so a pasted
        // `continuity query` would meet its lock (a break-it pass)
        api: { base: selfBase(req), token: options.bearerToken !== undefined },
      };
    } catch (err) {
      // a bad duration or gates object is the request's fault: 400, not the configuration's 500
      if (isContinuityError(err) && err.code === 'CONT_ERR_CONFIG') throw new ContinuityError('CONT_ERR_BAD_REQUEST', err.detail ?? err.message, { cause: err, details: err.details });
      throw err;
    }
    const report = await buildCanaryReport(store, judged);
    reply.header('x-continuity-verdict', report.verdict).header('x-continuity-exit-code', String(report.exit_code));
    return reply.header('content-type', CANARY_TYPES[b.format]).send(renderCanary(report, b.format));
  };
  app.get<{ Querystring: Record<string, string | string[]> }>('/canary', async (req, reply) => canary({ ...req.query }, req, reply));
  app.post('/canary', { onRequest: async (req) => assertMediaType(req.headers, ['application/json']) }, async (req, reply) => canary(req.body, req, reply));

  app.post('/sql', { onRequest: async (req) => assertMediaType(req.headers, ['application/json']) }, async (req, reply) => {
    const parsed = SqlBody.safeParse(req.body);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`);
      throw new ContinuityError('CONT_ERR_BAD_REQUEST', `expected { sql, format?, max_rows?, timeout_s? }: ${issues.join('; ')}`, { details: { issues } });
    }
    const { sql, format, max_rows, timeout_s } = parsed.data;
    const out = SQL_FORMATS[format];
    let result: { rows: number | null; limited: boolean } = { rows: null, limited: false };
    const body = await store.readOnly(sql, { format: out.format, maxRows: max_rows, maxExecutionS: timeout_s, onResult: (r) => (result = r) });
    // the body is the result in the asked format alone: whether max_rows cut it goes in headers
    if (result.rows !== null) reply.header('x-continuity-rows', String(result.rows));
    if (result.limited) reply.header('x-continuity-row-limit', `reached: max_rows ${max_rows}; the result may have more`);
    if (format === 'table') return reply.header('content-type', out.contentType).send(tsvTable(body));
    return reply.header('content-type', out.contentType).send(body);
  });
};

function sendError(reply: FastifyReply, err: ContinuityError): FastifyReply {
  if (err.httpStatus === 503) reply.header('retry-after', '5');
  if (err.code === 'CONT_ERR_UNAUTHORIZED') reply.header('www-authenticate', bearerChallenge('continuity-api', err));
  return reply.status(err.httpStatus).send(err.toJSON());
}

/**
 * Refuses a query string whose percent-escapes do not decode to UTF-8 (`%ff%fe`, a
 * lone surrogate `%ED%A0%80`): the query-string parser keeps such an escape as its
 * literal text, so `service=%ff%fe` would silently match nothing (found by a break-it
 * pass). RFC 3986 §2.1, with the WHATWG URL standard's UTF-8 percent-decoding.
 * @throws ContinuityError CONT_ERR_QUERY_PARAM naming the first bad piece.
 */
function strictQueryString(url: string): void {
  const at = url.indexOf('?');
  if (at < 0) return;
  for (const piece of url.slice(at + 1).split('&')) {
    try {
      decodeURIComponent(piece.replace(/\+/g, ' '));
    } catch {
      throw new ContinuityError('CONT_ERR_QUERY_PARAM', `${JSON.stringify(piece.slice(0, 200))} is not percent-encoded UTF-8`);
    }
  }
}
