/**
 * The coded error registry. Every error this project raises on purpose is a
 * {@link ContinuityError} with a stable `code` from {@link ERROR_CODES}; codes are
 * never reused or renamed (fastify's `FST_ERR_*` registry is the model), and
 * `docs/errors.md` lists each one with its fix (a test keeps the two in sync).
 */

/** One registry entry: the message prefix, whether a retry can help, HTTP status, and the fix. */
export interface ErrorSpec {
  readonly message: string;
  /** True when the same call may succeed later (transient I/O); programming and input errors are false. */
  readonly retriable: boolean;
  /** Status an HTTP API answers with when this error reaches it. */
  readonly httpStatus: number;
  /** What the operator should do. */
  readonly fix: string;
}

export const ERROR_CODES = {
  CONT_ERR_CONFIG: {
    message: 'invalid configuration',
    retriable: false,
    httpStatus: 500,
    fix: 'Correct the named environment variable or flag; `continuity --help` and `continuity <command> --help` list them.',
  },
  CONT_ERR_STORE_LOCKED: {
    message: 'the embedded data directory is in use by another process',
    retriable: true,
    httpStatus: 503,
    fix: 'Stop the other process (often `continuity serve`), reach the store through its HTTP API, or pass a different --data-dir.',
  },
  CONT_ERR_API_UNAVAILABLE: {
    message: 'the continuity read API named by --url cannot be reached or gave no answer of its own',
    retriable: true,
    httpStatus: 502,
    fix: 'Check that `continuity serve` (or `consumer --port`) is running and listening at the --url given (serve prints it as "listening on"), with the scheme, host and port it prints. An answer that is not the canary report (another server on that port, a proxy\'s error page, an answer cut off or over 32 MiB) is this error too: point --url at the continuity process itself. Node\'s fetch refuses some ports outright (e.g. 6000, 6665-6669): listen on another.',
  },
  CONT_ERR_STORE_UNAVAILABLE: {
    message: 'the ClickHouse store cannot be reached or cannot write',
    retriable: true,
    httpStatus: 503,
    fix: 'With CLICKHOUSE_URL set (a ClickHouse server): check the URL, the credentials and that the server is up. Without it (the embedded store): check the data directory the message names (--data-dir, CONTINUITY_DATA_DIR) is a writable directory on a file system with free space. A full disk (the message says so and names the directory or server; `details.reason` is `disk_full`) is this error too: free space there; meanwhile the consumer pauses and resumes by itself, `serve` answers 503 and keeps the events it accepted, and an import can be run again (what it wrote is not written twice). So is a data directory that cannot be written (a read-only mount, lost permissions: `details.reason` is `not_writable`; writing resumes once it is writable again), and one removed or replaced while the process had it open (`details.reason` `data_dir_gone`: nothing more is committed or counted written; restart the process). Schema changes (a new version\'s migrations, a CONTINUITY_RETENTION_DAYS change) are refused with less than 16 MiB free: the embedded engine left empty table definitions behind when it ran them on a full disk.',
  },
  CONT_ERR_STORE_QUERY: {
    message: 'the store rejected a statement',
    retriable: false,
    httpStatus: 400,
    fix: "The engine's own error follows the message; for ad hoc SQL fix the statement (a table's columns: SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = 'proxy_access', naming the table the statement reads).",
  },
  CONT_ERR_STORE_STDIN: {
    message: 'the embedded engine found data waiting on standard input and refused to write',
    retriable: false,
    httpStatus: 500,
    fix: "The embedded engine reads its process's standard input as INSERT data. The `continuity` command gives every command that does not read `-` /dev/null as its stdin, so this comes from a program that opens the store itself: run it with stdin from /dev/null (`< /dev/null`), or hand it its input another way (`continuity import caddy -` reads stdin on a descriptor of its own).",
  },
  CONT_ERR_MIGRATION: {
    message: 'a schema migration failed or was edited after it was applied',
    retriable: false,
    httpStatus: 500,
    fix: 'Migrations are append-only: restore the edited file and add a new numbered migration instead.',
  },
  CONT_ERR_READONLY: {
    message: 'ad hoc SQL is read-only; the store refused a write or a read outside the store',
    retriable: false,
    httpStatus: 403,
    fix: 'Use one SELECT (WITH, subqueries and UNION are fine) on the store\'s tables; table functions that reach outside the store (file, url, s3, remote, …) are refused too. Writes go through `continuity import` or the ingest gateway.',
  },
  CONT_ERR_QUERY_UNKNOWN: {
    message: 'no named query has this name',
    retriable: false,
    httpStatus: 404,
    fix: 'The named queries are listed by `continuity query --list` and `GET /api/queries`.',
  },
  CONT_ERR_QUERY_PARAM: {
    message: 'a query parameter is missing or has the wrong type',
    retriable: false,
    httpStatus: 400,
    fix: 'Pass each parameter with the type the query declares: `--param name=value` to `continuity query`, a query-string parameter to `GET /api/queries/:name`; `continuity query --list` and `GET /api/queries` list each query\'s parameters and types.',
  },
  CONT_ERR_INPUT_UNREADABLE: {
    message: 'an input file cannot be read',
    retriable: false,
    httpStatus: 400,
    fix: 'Check the path and permissions; gzip files must end in .gz or start with the gzip magic bytes.',
  },
  CONT_ERR_NOTHING_IMPORTED: {
    message: 'no line of the input could be read as a proxy log entry',
    retriable: false,
    httpStatus: 400,
    fix: 'Check that the file is a Caddy v2 JSON access log (`log { format json }`); the rejected-line report says why each line failed.',
  },
  CONT_ERR_EVENT_INVALID: {
    message: 'an event does not satisfy the event contract',
    retriable: false,
    httpStatus: 400,
    fix: 'Fix the producer; the issue list names each field and rule of event contract v1 (schema/events/).',
  },
  CONT_ERR_EVENT_EXPIRED: {
    message: 'an event is older than the store keeps it',
    retriable: false,
    httpStatus: 400,
    fix: "The store drops events older than its retention (the TTL of `events`: 90 days unless CONTINUITY_RETENTION_DAYS set another; each refused index has the issue `expired` with the cutoff). To keep older events (a backfill), start the process that owns the store with CONTINUITY_RETENTION_DAYS large enough, or 0 (for ever), then send them again; otherwise check the producer's clock.",
  },
  CONT_ERR_SHUTDOWN: {
    message: 'the component is shutting down',
    retriable: true,
    httpStatus: 503,
    fix: 'Retry against another instance or after restart (a request still in flight 10 s after `serve`, `gateway` or `consumer --port` was told to stop is answered with this).',
  },
  CONT_ERR_BAD_REQUEST: {
    message: 'the request is malformed',
    retriable: false,
    httpStatus: 400,
    fix: 'The message (and the issues, for a body) names what is wrong: send a well-formed HTTP/1.1 request whose path decodes as UTF-8, with a body of JSON (application/json) or OTLP protobuf (application/x-protobuf) of the documented shape.',
  },
  CONT_ERR_HEADERS_TOO_LARGE: {
    message: 'the request head (request line and headers) is larger than the server reads',
    retriable: false,
    httpStatus: 431,
    fix: 'Send fewer or shorter headers: Node reads at most 16 KiB of request head unless the process runs with --max-http-header-size (NODE_OPTIONS). Usually a client or proxy is adding a large cookie or a repeated header; the connection is closed after this answer.',
  },
  CONT_ERR_REQUEST_TIMEOUT: {
    message: 'the request did not arrive in time',
    retriable: true,
    httpStatus: 408,
    fix: 'Send the whole request (head and body) within 60 s of opening it (RFC 9110 §15.5.9); a slow or stalled client, or a proxy buffering the body, causes this. The connection is closed after this answer: open a new one and send again.',
  },
  CONT_ERR_BODY_TOO_LARGE: {
    message: 'the request body is larger than the server accepts',
    retriable: false,
    httpStatus: 413,
    fix: 'Send a smaller body: the limit (`details.limitBytes`; 10 MiB unless createGateway was given maxBodyBytes) counts the bytes after Content-Encoding is decoded, on the ingest routes and the read API alike; an ingest request also carries at most 50,000 log records or events (`details.limitRecords`). For ingest, send smaller batches (the OTLP exporters batch by count: lower maxExportBatchSize).',
  },
  CONT_ERR_UNAUTHORIZED: {
    message: 'the request lacks a valid bearer token',
    retriable: false,
    httpStatus: 401,
    fix: 'Send `Authorization: Bearer <token>` with the token the server was started with (--token, CONTINUITY_INGEST_TOKEN); the message says whether the header was missing, not a Bearer credential, or carried another token.',
  },
  CONT_ERR_UNSUPPORTED_MEDIA: {
    message: 'the content type or content coding is not accepted here',
    retriable: false,
    httpStatus: 415,
    fix: 'Send a Content-Type the route accepts (the message and `details.accepted` name them): application/json, or application/x-protobuf for OTLP on /v1/logs; send the body unencoded or with Content-Encoding gzip or deflate (`details.acceptedEncodings`), not br, zstd or another coding.',
  },
  CONT_ERR_INGEST_UNAVAILABLE: {
    message: 'the ingest pipeline cannot take events right now',
    retriable: true,
    httpStatus: 503,
    fix: 'Retry after the Retry-After delay; check the store (embedded) or Kafka (production) is up.',
  },
  CONT_ERR_DRILL_SETUP: {
    message: 'the restart drill could not run one of its programs',
    retriable: false,
    httpStatus: 500,
    fix: 'Install Caddy (`apt-get install -y caddy`), check that `node --import tsx drill/mcp-server.ts` starts, and read the program output quoted in the message.',
  },
  CONT_ERR_KAFKA_UNAVAILABLE: {
    message: 'the Kafka cluster cannot be reached',
    retriable: true,
    httpStatus: 503,
    fix: 'Check KAFKA_BROKERS and that the brokers are up (`continuity dev kafka status` for the local one); the consumer and gateway retry on their own.',
  },
  CONT_ERR_SQL_REFUSED: {
    message: 'ad hoc SQL uses a statement, clause or function the read-only path refuses',
    retriable: false,
    httpStatus: 403,
    fix: 'Send one statement per call (the message says when the text held more than one); drop the statement\'s own SETTINGS clause (the store sets readonly and the limits itself), the file() function, system.models and system.jemalloc_profile_text, APPLY transformers, the merge(), loop(), sqlite() and eval() table functions, structureToProtobufSchema(), structureToCapnProtoSchema() and hasColumnInTable(), a table named by a path, and expressions in the column list of values() or generateRandom() (give it as one literal of names and types); name columns and aliases with printable characters (no escapes in quoted names); instead of SHOW/DESCRIBE/EXPLAIN, SELECT from system.tables or system.columns.',
  },
  CONT_ERR_SQL_TIMEOUT: {
    message: 'ad hoc SQL ran out of its time (timeout_s, including the wait behind other ad hoc statements)',
    retriable: false,
    httpStatus: 504,
    fix: 'Narrow the statement (a time range in WHERE, fewer columns, a LIMIT inside) or raise timeout_s (at most 600); ad hoc statements run one at a time, so a long one delays the next.',
  },
  CONT_ERR_SQL_TABLE_TOO_LARGE: {
    message: 'the result is too large to draw as a table',
    retriable: false,
    httpStatus: 422,
    fix: 'Ask for another format, which carries any size up to the store\'s result limit (`--format csv`, `json` or `arrow` on the command line; csv, tsv, jsonl, json or arrow over HTTP), or narrow the statement (fewer rows or columns, a LIMIT, shorter values): the table format is for reading, and draws at most 4 MiB of result text, 10,000 cells (rows × columns) and about 8 million characters drawn.',
  },
  CONT_ERR_SQL_OUTPUT_TOO_LARGE: {
    message: 'the output of the ad hoc statement is larger than it may return',
    retriable: false,
    httpStatus: 422,
    fix: 'Ask for fewer rows (--max-rows, max_rows, or page with WHERE or LIMIT … OFFSET) or fewer or narrower columns: an output carries at most 512 MiB; in the JSON formats, which write every column name on every row, at most 256 MiB of names (shorten them with AS, or use csv, tsv or arrow, which write them once; the message gives the rows that fit).',
  },
  CONT_ERR_EXPECTATION_FAILED: {
    message: "the server cannot meet the request's Expect header",
    retriable: false,
    httpStatus: 417,
    fix: 'Send no Expect header, or `Expect: 100-continue`, the only expectation HTTP defines (RFC 9110 §10.1.1).',
  },
  CONT_ERR_NOT_FOUND: {
    message: 'no route answers this method and path',
    retriable: false,
    httpStatus: 404,
    fix: 'Check the method and path: the gateway takes POST /v1/logs (OTLP/HTTP) and POST /v1/events, GET /healthz and GET /readyz; `continuity serve` adds the read API: GET /api/queries, GET /api/queries/<name>, GET /api/report, POST /api/canary and POST /api/sql.',
  },
  CONT_ERR_EVENT_TOO_LARGE: {
    message: 'an event is larger than the ingest pipeline carries',
    retriable: false,
    httpStatus: 413,
    fix: 'Make the event smaller (usually a long value in attrs): in front of Kafka an event may be at most KAFKA_MAX_MESSAGE_BYTES (1 MiB by default) as JSON, the limit the consumer applies, and its record must fit the topic\'s max.message.bytes; each refused event\'s issue names its size and the limit. Raising the limit means raising both (docs/ingest-kafka.md). The other events of the request were kept: do not resend them.',
  },
  CONT_ERR_EVENT_REFUSED: {
    message: 'Kafka refused an event for good',
    retriable: false,
    httpStatus: 400,
    fix: 'The broker refused the record itself (INVALID_RECORD or CORRUPT_MESSAGE, named in the event\'s issue) and sending it again would meet the same answer. Check the topic\'s configuration (cleanup.policy, message.timestamp.*) and the broker log. The other events of the request were kept: do not resend them.',
  },
  CONT_ERR_HOST_REFUSED: {
    message: "the request's Host is not this server's loopback address",
    retriable: false,
    httpStatus: 421,
    fix: 'A server on a loopback address with no bearer token answers only requests addressed to loopback (Host localhost, 127.0.0.1 or [::1]), so that a web page cannot reach it by a DNS name that resolves to 127.0.0.1 (DNS rebinding). Send the request to http://127.0.0.1:<port>, or start the server with --token (CONTINUITY_INGEST_TOKEN) and send the token.',
  },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERROR_CODES;

/**
 * A coded error. `code` is stable across releases; `retriable` tells the shared
 * retry helper whether to try again; `httpStatus` is what an HTTP API answers.
 */
export class ContinuityError extends Error {
  readonly code: ErrorCode;
  readonly retriable: boolean;
  readonly httpStatus: number;
  /** Structured context (paths, names, issue lists) for logs and API bodies. */
  readonly details: Readonly<Record<string, unknown>>;
  /** The detail given after the registry's message (the message is `<registry message>: <detail>`), if any. */
  readonly detail: string | undefined;

  constructor(code: ErrorCode, detail?: string, options: { cause?: unknown; details?: Record<string, unknown> } = {}) {
    const spec = ERROR_CODES[code];
    super(detail ? `${spec.message}: ${detail}` : spec.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ContinuityError';
    this.code = code;
    this.detail = detail || undefined;
    this.retriable = spec.retriable;
    this.httpStatus = spec.httpStatus;
    this.details = Object.freeze({ ...(options.details ?? {}) });
  }

  /** The fix text from the registry. */
  get fix(): string {
    return ERROR_CODES[this.code].fix;
  }

  /** A JSON body for HTTP APIs: `{ code, message, fix, details }`. */
  toJSON(): { code: ErrorCode; message: string; fix: string; details: Readonly<Record<string, unknown>> } {
    return { code: this.code, message: this.message, fix: this.fix, details: this.details };
  }
}

/** True when `err` is a {@link ContinuityError}, optionally with the given code. */
export function isContinuityError(err: unknown, code?: ErrorCode): err is ContinuityError {
  return err instanceof ContinuityError && (code === undefined || err.code === code);
}

/** Renders the registry as the Markdown table in `docs/errors.md`. */
export function renderErrorDocs(): string {
  const rows = Object.entries(ERROR_CODES).map(
    ([code, spec]) => `| \`${code}\` | ${spec.message} | ${spec.retriable ? 'yes' : 'no'} | ${spec.httpStatus} | ${spec.fix} |`,
  );
  return [
    '# Error codes',
    '',
    'Generated from `core/errors.ts` (`npm run docs:errors`); a test fails when this file is stale.',
    '',
    '| code | meaning | retriable | HTTP | fix |',
    '| --- | --- | --- | --- | --- |',
    ...rows,
    '',
  ].join('\n');
}
