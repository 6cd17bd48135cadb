import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { ContinuityError } from '../../core/index.ts';
import type { KeyedHasher } from '../../core/index.ts';
import { contentToken, createBatchWriter, createStoreSink, type BatchWriter } from '../../ingest/index.ts';
import { retentionChangesOf, retentionDaysOf, type Store } from '../../store/index.ts';
import { CaddyConverter, lineEventId, type FileCounters, type RejectReason } from './convert.ts';
import { DEFAULT_MAX_LINE_BYTES, readLines, type ReadProgress } from './line-reader.ts';
import { errnoText } from '../../core/fs.ts';

/** Options of {@link importCaddyLogs} and {@link convertCaddyLogs}. */
export interface CaddyImportOptions {
  /** Access logs (or combined access+error logs): paths, or `'-'` for standard input. Plain or gzip. */
  access: string[];
  /** Error logs, loaded first for the upstream-error join. Plain or gzip. */
  errors?: string[];
  /** Keyed hasher for session ids and principals: `hasherForConfig(config)` (core/hash.ts). */
  hasher: KeyedHasher;
  /** `service` of every event (default ''). */
  service?: string;
  /** `environment` of every event (default ''), as a server's `deployment.environment.name`. */
  environment?: string;
  /** Progress per chunk read, for a progress bar. */
  onProgress?: (progress: ImportProgress) => void;
  /** Longest line kept, bytes (default 1 MiB); longer lines are rejected as `line_too_long`. */
  maxLineBytes?: number;
  /** Cap on error-log entries held in memory for the join (default 1,000,000). */
  maxErrorEntries?: number;
  /**
   * Rows per insert (default 10,000). Larger inserts leave fewer parts to merge (1,000,000
   * lines: background merges 6.6 CPU-s at 10,000 rows, 3.5 at 30,000) but write costlier
   * parts, so the total CPU came out about the same (one insert at a time; with two in
   * flight, 20,000 rows saved ~10%), while peak RSS grew by ~200–250 MB
   * (bench/import.ts has the figures).
   */
  batchRows?: number;
  /**
   * Batches of events written at once (default 2): the store writes each on its own
   * engine thread while the next batch is converted. Batches, their tokens and the
   * report are the same whatever the value; only the order in which batches land differs.
   */
  insertConcurrency?: number;
  /**
   * Stops the import when aborted (a signal): the input being read ends at the chunk
   * it is in, the inputs after it are not read, and what was read is written and
   * recorded as usual (its `import_runs` row holds the content read so far, so
   * importing the whole input later counts its lines once: the earlier run's content
   * is a prefix of it). The report says `interrupted`.
   */
  signal?: AbortSignal;
  /** Stream read for `'-'` (default `process.stdin`). */
  stdin?: NodeJS.ReadableStream;
}

/** Progress of one input. */
export interface ImportProgress extends ReadProgress {
  kind: 'access' | 'error';
  /** 0-based index among all inputs (error logs first). */
  fileIndex: number;
  fileCount: number;
}

/** Line counts. `read = parsed + rejected + skipped + blank` (an input that ends in a read error counts one more, rejected, line). */
export interface LineCounts {
  /** Every line, blank ones included. */
  read: number;
  /** Access entries and error-log entries used. */
  parsed: number;
  rejected: number;
  /** Valid JSON entries of other kinds (Caddy runtime logs, access lines in an error log). */
  skipped: number;
  blank: number;
}

/** One input of an import. */
export interface ImportFileReport {
  /** The path as given (`'-'` is standard input). */
  path: string;
  kind: 'access' | 'error';
  gzip: boolean;
  /** Bytes read from the input (compressed bytes for gzip). */
  bytes_read: number;
  /** SHA-256 of the input's bytes as read, hex (FIPS 180-4). */
  content_hash: string;
  /** Decompressed bytes (`bytes_read` for plain input). */
  decoded_bytes: number;
  /** SHA-256 of the decompressed bytes, hex: a file and its gzip have the same. */
  decoded_hash: string;
  /**
   * `decoded_hash` of each input imported before (into the same store, as the same
   * kind, or earlier in this import) whose decompressed content is a proper prefix of
   * this one's: the same log, imported before it grew. The store's line counts leave
   * those runs out ({@link importCaddyLogs}). From {@link convertCaddyLogs}, only
   * inputs earlier in the same call are compared.
   */
  prefix_hashes: string[];
  lines: LineCounts;
  /** Rows this input produced (proxy_access + auth_challenge). */
  events_written: number;
  /**
   * The input ended early on this read or gzip error: every line decoded in full before
   * it was imported, a line it cut off is named in it (and rejected as \`read_error\`).
   * Also set, starting "trailing garbage ignored", when bytes after the last complete
   * gzip member were not gzip data (all members before them were imported).
   */
  read_error?: string;
  /**
   * The import was stopped ({@link CaddyImportOptions.signal}) while it read this input:
   * the lines read before the stop were imported (a line the stop cut off was not, and
   * is not counted); the inputs after it were not read.
   */
  interrupted?: true;
  started_at: string;
  finished_at: string;
}

/** A rejected line. `detail` never quotes the line (it may carry session ids or tokens). */
export interface RejectRecord {
  file: string;
  /** 1-based line number. */
  line: number;
  reason: RejectReason;
  detail: string;
}

/** What an import read, wrote and refused. */
export interface ImportReport {
  files: ImportFileReport[];
  lines: LineCounts;
  rejects_by_reason: Partial<Record<RejectReason, number>>;
  /** The first 100 rejected lines; all of them are in the `dead_letters` table. */
  rejects: RejectRecord[];
  /** Rows written to `events` (a re-imported batch is dropped by the store's deduplication). */
  events_written: number;
  proxy_access: number;
  auth_challenges: number;
  /** Error-log entries used for the join. */
  error_entries: number;
  /** Error-log entries beyond the in-memory cap (not joined). */
  error_entries_dropped: number;
  /** proxy_access events that received an `upstream_error`. */
  joined_upstream_errors: number;
  /** Rows written to `dead_letters`. */
  dead_letters_written: number;
  /**
   * No access entry was read (or every one the store refused): the caller decides whether that is an error
   * (CONT_ERR_NOTHING_IMPORTED, see {@link assertSomethingImported}).
   */
  nothing_read: boolean;
  /** Earliest and latest access entry read (ISO-8601 UTC), null when none. */
  time_range: { first: string; last: string } | null;
  /** Stopped before every input was read ({@link CaddyImportOptions.signal}); what was read is in the counts. */
  interrupted: boolean;
  /**
   * Access logs whose content (or the part an earlier import read, before the log grew)
   * was imported before under other labels: their lines now carry this import's
   * (readers see a line's last copy). Only {@link importCaddyLogs} fills it; runs
   * recorded before schema/migrations/0019 have no labels and are not compared.
   */
  relabelled: RelabelledInput[];
}

/** An input of an import whose lines were imported before under other labels ({@link ImportReport.relabelled}). */
export interface RelabelledInput {
  /** The path as given. */
  path: string;
  /** The labels of the latest earlier import of its content (of each part, for a log that grew), each once. */
  before: Array<{ service: string; environment: string }>;
  /** The labels its lines carry now: this import's `--service` and `--environment` ('' none). */
  now: { service: string; environment: string };
}

/** Output of the conversion core. */
interface ImportOutput {
  row(row: string): void | Promise<void>;
  reject(file: string, line: number, reason: RejectReason, detail: string, bytes: number): void | Promise<void>;
  /** Called after each chunk: throw here to stop (e.g. the store failed). */
  checkpoint(): void;
}

const MAX_REPORTED_REJECTS = 100;

type InputKind = 'access' | 'error';

/** Contents imported before, per input kind: decompressed length → the `decoded_hash`es of that length. */
type EarlierContents = Map<InputKind, Map<number, Set<string>>>;

const RUN_KIND: Record<InputKind, string> = { access: 'caddy_access', error: 'caddy_error' };

/**
 * Checks that every input can be opened before anything is imported, so a typo in the
 * last path does not leave a partial import behind; the CLI calls it before it opens
 * the store too, so an import of nothing readable creates no store.
 * @param paths file paths, `-` for standard input (at most once).
 * @throws ContinuityError CONT_ERR_INPUT_UNREADABLE naming the path.
 */
export async function checkImportInputs(paths: string[]): Promise<void> {
  if (paths.filter((p) => p === '-').length > 1) {
    throw new ContinuityError('CONT_ERR_INPUT_UNREADABLE', "standard input ('-') can be read only once", { details: { path: '-' } });
  }
  for (const path of paths) {
    if (path === '-') continue;
    try {
      await access(path, constants.R_OK);
      if ((await stat(path)).isDirectory()) throw Object.assign(new Error('is a directory'), { code: 'EISDIR' });
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      throw new ContinuityError('CONT_ERR_INPUT_UNREADABLE', `${path}: ${errnoText(e)}`, { cause: err, details: { path, errno: e.code } });
    }
  }
}

/**
 * @param earlier contents imported before, to recognise an input that extends one of
 *   them (`prefix_hashes`); each input read here is added to it for the inputs after it.
 */
async function runImport(options: CaddyImportOptions, out: ImportOutput, earlier: EarlierContents = new Map()): Promise<ImportReport> {
  const maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  const errors = options.errors ?? [];
  const inputs: Array<{ path: string; kind: InputKind }> = [
    ...errors.map((path) => ({ path, kind: 'error' as const })),
    ...options.access.map((path) => ({ path, kind: 'access' as const })),
  ];
  await checkImportInputs(inputs.map((i) => i.path));
  const report: ImportReport = {
    files: [],
    lines: { read: 0, parsed: 0, rejected: 0, skipped: 0, blank: 0 },
    rejects_by_reason: {},
    rejects: [],
    events_written: 0,
    proxy_access: 0,
    auth_challenges: 0,
    error_entries: 0,
    error_entries_dropped: 0,
    joined_upstream_errors: 0,
    dead_letters_written: 0,
    nothing_read: true,
    time_range: null,
    interrupted: false,
    relabelled: [],
  };
  let currentPath = '';
  const converter = new CaddyConverter(
    { hasher: options.hasher, service: options.service ?? '', environment: options.environment ?? '', maxLineBytes, maxErrorEntries: options.maxErrorEntries ?? 1_000_000 },
    {
      row: (row) => out.row(row),
      reject: (line, reason, detail, bytes) => {
        if (report.rejects.length < MAX_REPORTED_REJECTS) report.rejects.push({ file: currentPath, line, reason, detail });
        return out.reject(currentPath, line, reason, detail, bytes);
      },
    },
  );
  const counters: FileCounters[] = [];
  for (let i = 0; i < inputs.length; i++) {
    const { path, kind } = inputs[i]!;
    currentPath = path;
    const file: FileCounters = { parsed: 0, rejected: 0, skipped: 0, events: 0 };
    counters.push(file);
    converter.setFile(file);
    const started = new Date();
    const access = kind === 'access';
    const before = earlier.get(kind) ?? new Map<number, Set<string>>();
    earlier.set(kind, before);
    const res = await readLines(
      path,
      {
        line: access ? (b, s, e, n) => converter.accessLine(b, s, e, n) : (b, s, e, n) => converter.errorLine(b, s, e, n),
        tooLong: (n, bytes) => converter.rejectLine(n, 'line_too_long', `line of ${bytes} bytes exceeds ${maxLineBytes}`, bytes),
        chunkDone: () => out.checkpoint(),
      },
      {
        maxLineBytes,
        stdin: options.stdin,
        ...(options.signal ? { signal: options.signal } : {}),
        contentHash: true,
        prefixLengths: [...before.keys()],
        onProgress: options.onProgress
          ? (p) => options.onProgress!({ ...p, kind, fileIndex: i, fileCount: inputs.length })
          : undefined,
      },
    );
    if (res.readError !== undefined) {
      // Its line number is that of a line the error cut off (not counted by the reader), if any.
      const w = converter.rejectLine(res.lines + 1, 'read_error', res.readError, res.cutLineBytes);
      if (w) await w;
    }
    const decodedHash = res.decodedHash ?? '';
    const prefixHashes = [...(res.prefixHashes ?? [])].filter(([length, hash]) => before.get(length)?.has(hash)).map(([, hash]) => hash);
    if (res.bytesDecoded > 0) before.set(res.bytesDecoded, (before.get(res.bytesDecoded) ?? new Set()).add(decodedHash));
    report.files.push({
      path,
      kind,
      gzip: res.gzip,
      bytes_read: res.bytesRead,
      content_hash: res.contentHash ?? '',
      decoded_bytes: res.bytesDecoded,
      decoded_hash: decodedHash,
      prefix_hashes: prefixHashes,
      // Filled in below, once held rows are released. A read error counts as one (rejected) line.
      lines: { read: res.lines + (res.readError !== undefined ? 1 : 0), parsed: 0, rejected: 0, skipped: 0, blank: res.blank },
      events_written: 0,
      ...(res.readError !== undefined ? { read_error: res.readError } : {}),
      ...(res.interrupted ? { interrupted: true as const } : {}),
      started_at: started.toISOString(),
      finished_at: new Date().toISOString(),
    });
    if (res.interrupted) {
      report.interrupted = true;
      break;
    }
  }
  const done = converter.finish();
  if (done) await done;

  const t = converter.totals;
  for (let i = 0; i < report.files.length; i++) {
    const f = report.files[i]!;
    const c = counters[i]!;
    f.lines.parsed = c.parsed;
    f.lines.rejected = c.rejected;
    f.lines.skipped = c.skipped;
    f.events_written = c.events;
    report.lines.read += f.lines.read;
    report.lines.blank += f.lines.blank;
    report.events_written += c.events;
  }
  report.lines.parsed = t.parsed;
  report.lines.rejected = t.rejected;
  report.lines.skipped = t.skipped;
  report.rejects_by_reason = { ...t.rejectsByReason } as Partial<Record<RejectReason, number>>;
  report.proxy_access = t.proxyAccess;
  report.auth_challenges = t.authChallenges;
  report.error_entries = t.errorEntries;
  report.error_entries_dropped = t.errorEntriesDropped;
  report.joined_upstream_errors = t.joinedUpstreamErrors;
  report.time_range = t.firstTs === 0 ? null : { first: new Date(t.firstTs / 1000).toISOString(), last: new Date(t.lastTs / 1000).toISOString() };
  report.nothing_read = t.proxyAccess === 0;
  return report;
}

/**
 * Converts Caddy logs to event rows without a store: `onRow` receives each
 * JSONEachRow line of the `events` table (a returned promise pauses reading). The
 * rules are those of {@link importCaddyLogs}; nothing is written anywhere.
 * @throws ContinuityError CONT_ERR_INPUT_UNREADABLE for an input that cannot be opened.
 */
export async function convertCaddyLogs(options: CaddyImportOptions, onRow: (row: string) => void | Promise<void>): Promise<ImportReport> {
  return runImport(options, { row: onRow, reject: () => undefined, checkpoint: () => undefined });
}

/**
 * Imports Caddy v2 JSON logs into the store: access logs (`http.log.access*`) become
 * `proxy_access` events (plus an `auth_challenge` for each 401/403), joined with the
 * error logs' upstream failures; every rejected line goes to `dead_letters` (reason,
 * line number, length — never its content); one `import_runs` row per input.
 *
 * Each run records the SHA-256 of the input's decompressed content and its length, and
 * the content hashes of inputs imported before whose content this input's begins with
 * (`prefix_hashes`: the same log imported before it grew; found by hashing this
 * input's first L bytes, in the same pass, for each length L imported before). The
 * store's line counts (`continuity report`) count each content once and leave out
 * contents a later import extends.
 *
 * Rules (DESIGN §3, `proxy_access`):
 * - ts = round(Caddy `ts` s × 10⁶) µs; duration_ms = `duration` s × 1000; bytes = `size`.
 * - Session ids (`Mcp-Session-Id` request/response header), principals (`user_id`)
 *   are stored only as keyed hashes; url_path drops the query string.
 * - has_credential: an `Authorization` request header is present, whatever its value
 *   (Caddy redacts it to `[]` or `["REDACTED"]`).
 * - proxy_generated: a 5xx whose response headers hold nothing but `Server`, or a
 *   request joined to an error-log entry (e.g. a refused dial).
 * - event_id: an RFC 9562 v8 UUID from SHA-256 of the event kind and the line's bytes;
 *   batches are cut by size only and carry a content-hash deduplication token (with the
 *   store's retention in days and how many times it changed), so importing the same
 *   files again stores nothing twice.
 * - Lines are never fatal: rejects are `not_json`, `line_too_long`, `wrong_type`,
 *   `missing_field`, `lone_surrogate` (a string the converter reads holds an unpaired
 *   UTF-16 surrogate escape such as `"\ud800"`, which the store cannot keep), and
 *   `read_error` when an input ends early, e.g. truncated gzip; a line whose row the
 *   store still refuses is rejected as `store_refused` (found again by its event id,
 *   see foldRefusedRows), so the counts and `import_runs` match what `events` holds;
 *   valid entries of other kinds (Caddy runtime logs) are counted as skipped.
 *
 * @returns the report; `nothing_read` is true when no access entry was read.
 * @throws ContinuityError CONT_ERR_INPUT_UNREADABLE for an input that cannot be
 *   opened; the store's coded error (CONT_ERR_STORE_*) when a write fails.
 */
export async function importCaddyLogs(store: Store, options: CaddyImportOptions): Promise<ImportReport> {
  /** Rows of `events` the store refused (the sink wrote each to `dead_letters`, source `store`). */
  const refused: string[] = [];
  // The token names the store's retention and how often it changed: a batch the engine
  // dropped at once for its age (a log older than the TTL) left its token behind, and a
  // re-import of the same lines after CONTINUITY_RETENTION_DAYS was raised, the
  // warning's advice, was then dropped as its duplicate while the report said it was
  // written (a newcomer pass); so were lines imported again after a retention set and
  // removed had dropped them (a break-it pass; schema/migrations/0018). With no change
  // in between the same lines still store nothing twice.
  const retentionDays = await retentionDaysOf(store);
  const retentionChanges = await retentionChangesOf(store);
  const scope = `caddy-import:r${retentionDays}${retentionChanges > 0 ? `:c${retentionChanges}` : ''}`;
  const events = createBatchWriter({
    sink: createStoreSink(store, 'events', { token: contentToken(scope), onRefused: (row) => refused.push(row) }),
    maxRows: options.batchRows ?? 10_000,
    maxBytes: 32 << 20,
    flushIntervalMs: 0,
    // Two batches written at once (the store writes them on two engine threads) while
    // the next one is converted; batch boundaries and tokens do not depend on it.
    maxPendingBatches: Math.max(2, options.insertConcurrency ?? 2),
    concurrency: options.insertConcurrency ?? 2,
    // The rows' bytes go to the store as encoded (no decode to a string and re-encode).
    body: 'bytes',
  });
  const deadLetters = createBatchWriter({
    // (a content token: the same rejected lines imported again are stored once,
    // schema/migrations/0015; the rows name the input by its path, so a log given again
    // under another path or on stdin adds its letters under that name)
    sink: createStoreSink(store, 'dead_letters', { token: contentToken('caddy-import-rejects') }),
    maxRows: 10_000,
    flushIntervalMs: 0,
    maxPendingBatches: 1,
  });
  const failed = (w: BatchWriter): void => {
    if (w.error) throw w.error;
  };
  const earlier = await earlierContents(store);
  let report: ImportReport;
  try {
    report = await runImport(
      options,
      {
        row: (row) => events.write(row),
        reject: (file, line, reason, detail, bytes) =>
          deadLetters.write(
            JSON.stringify({ source: 'import', origin: file, position: line, reason, detail, payload: '', payload_bytes: bytes }),
          ),
        checkpoint: () => {
          failed(events);
          failed(deadLetters);
        },
      },
      earlier,
    );
  } finally {
    await Promise.all([events.shutdown(), deadLetters.shutdown()]);
  }
  failed(events);
  failed(deadLetters);
  report.dead_letters_written = deadLetters.stats.rows;
  if (refused.length > 0) {
    const letters = await foldRefusedRows(report, refused, maxLineBytesOf(options));
    if (letters.length > 0) await store.insertJsonEachRow('dead_letters', letters.join('\n'));
    report.dead_letters_written += letters.length;
  }
  report.relabelled = await relabelledInputs(store, report.files, { service: options.service ?? '', environment: options.environment ?? '' });
  const runs = report.files.map((f) =>
    JSON.stringify({
      run_id: randomUUID(),
      service: options.service ?? '',
      environment: options.environment ?? '',
      kind: RUN_KIND[f.kind],
      origin: f.path,
      content_hash: f.content_hash,
      decoded_bytes: f.decoded_bytes,
      decoded_hash: f.decoded_hash,
      prefix_hashes: f.prefix_hashes,
      started_at: clickhouseTime(f.started_at),
      finished_at: clickhouseTime(f.finished_at),
      lines_read: f.lines.read,
      lines_parsed: f.lines.parsed,
      lines_rejected: f.lines.rejected,
      events_written: f.events_written,
    }),
  );
  // An import that read no access entry and ran to its end is the caller's error
  // (CONT_ERR_NOTHING_IMPORTED): recorded, its lines counted in every later report for
  // good, and twice beside the right file imported after it (two passes: a README.md
  // given by mistake, an error log given as the access log). Its rejected lines stay in
  // dead_letters. An interrupted one is recorded: what it read counts.
  if (runs.length > 0 && !(report.nothing_read && !report.interrupted)) await store.insertJsonEachRow('import_runs', runs.join('\n'));
  return report;
}

function maxLineBytesOf(options: CaddyImportOptions): number {
  return options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
}

/**
 * Takes rows the store refused out of the counts of `report`, which the converter
 * counted as written: each refused row is one fewer in `events_written` (of the
 * report and of its input) and in `proxy_access` / `auth_challenges` /
 * `joined_upstream_errors`; a line whose `proxy_access` row was refused is rejected
 * (`store_refused`) instead of parsed, so `lines.parsed` and `import_runs` count what
 * `events` holds. Every refused row is listed in `rejects`.
 *
 * The line is found again by its event id (a hash of the line: rows carry no file or
 * line number): the access inputs that wrote events are read once more, which costs
 * only when the store refused something. Standard input cannot be read again: a row
 * not found is put on `'-'` (line 0) when it was an input, else on the first input
 * that wrote events.
 *
 * @returns the `dead_letters` rows (JSONEachRow) naming each refused line's input and line number.
 */
async function foldRefusedRows(report: ImportReport, refused: string[], maxLineBytes: number): Promise<string[]> {
  const rows = refused.map((row) => {
    let parsed: { event_id?: unknown; event_type?: unknown; upstream_error?: unknown } = {};
    try {
      parsed = JSON.parse(row) as typeof parsed;
    } catch {
      // Not JSON: the converter never writes such a row; it counts as a proxy_access row of an unknown line.
    }
    return {
      id: typeof parsed.event_id === 'string' ? parsed.event_id : '',
      challenge: parsed.event_type === 'auth_challenge',
      joined: parsed.upstream_error !== undefined,
    };
  });
  const wanted = new Set(rows.map((r) => r.id).filter((id) => id !== ''));
  const where = new Map<string, { file: number; line: number; bytes: number }>();
  for (let i = 0; i < report.files.length && where.size < wanted.size; i++) {
    const f = report.files[i]!;
    if (f.kind !== 'access' || f.path === '-' || f.events_written === 0) continue;
    try {
      await readLines(
        f.path,
        {
          line: (b, s, e, n) => {
            for (const kind of ['proxy_access', 'auth_challenge'] as const) {
              const id = lineEventId(kind, b, s, e);
              if (wanted.has(id) && !where.has(id)) where.set(id, { file: i, line: n, bytes: e - s });
            }
          },
          tooLong: () => undefined,
        },
        { maxLineBytes },
      );
    } catch {
      // The input is gone since: its rows are put on the fallback input below.
    }
  }
  const stdinIndex = report.files.findIndex((f) => f.path === '-' && f.kind === 'access');
  const fallbackIndex = stdinIndex >= 0 ? stdinIndex : Math.max(0, report.files.findIndex((f) => f.events_written > 0));
  const letters: string[] = [];
  for (const r of rows) {
    const loc = where.get(r.id) ?? { file: fallbackIndex, line: 0, bytes: 0 };
    const f = report.files[loc.file];
    const path = f?.path ?? '';
    report.events_written--;
    if (f) f.events_written--;
    if (r.joined) report.joined_upstream_errors--;
    // The engine's message may quote the row: it stays in the store's own dead letter, as the row does.
    const detail = `${r.challenge ? 'auth_challenge' : 'proxy_access'} row ${r.id} refused by the store (the row and the engine's message: dead_letters source 'store', origin 'events')`;
    if (report.rejects.length < MAX_REPORTED_REJECTS) report.rejects.push({ file: path, line: loc.line, reason: 'store_refused', detail });
    if (r.challenge) {
      report.auth_challenges--;
      continue;
    }
    report.proxy_access--;
    report.lines.parsed--;
    report.lines.rejected++;
    report.rejects_by_reason.store_refused = (report.rejects_by_reason.store_refused ?? 0) + 1;
    if (f) {
      f.lines.parsed--;
      f.lines.rejected++;
    }
    letters.push(JSON.stringify({ source: 'import', origin: path, position: loc.line, reason: 'store_refused', detail, payload: '', payload_bytes: loc.bytes }));
  }
  report.nothing_read = report.proxy_access === 0;
  return letters;
}

/**
 * The access logs of this import whose content was imported before under other labels:
 * the latest earlier run that read this content or one of its `prefix_hashes` (itself,
 * or a longer log it is the start of) had another service or environment. Not seen: a
 * copy shorter than a log imported before (its content is no earlier run's prefix
 * hash), and runs recorded before schema/migrations/0019, which carry no labels. Read
 * before this import's own runs are recorded.
 */
async function relabelledInputs(store: Store, files: ImportFileReport[], now: { service: string; environment: string }): Promise<RelabelledInput[]> {
  const access = files.filter((f) => f.kind === 'access' && f.decoded_hash !== '');
  if (access.length === 0) return [];
  const hashes = [...new Set(access.flatMap((f) => [f.decoded_hash, ...f.prefix_hashes]))];
  // each content's latest labelled run, the content itself or a log that grew from it
  // (its prefix_hashes): the labels its lines carry before this import (a run of the
  // grown log relabels the lines of its first part too; read by decoded_hash alone, the
  // first part's own old labels were named again at every later import: a break-it pass)
  const rows = await store.query<{ hash: string; service: string; environment: string }>(
    `SELECT hash, labels.1 AS service, labels.2 AS environment
     FROM
     (
         SELECT h AS hash, argMax((assumeNotNull(service), assumeNotNull(environment)), (finished_at, started_at)) AS labels
         FROM import_runs
         ARRAY JOIN arrayConcat([decoded_hash], prefix_hashes) AS h
         WHERE kind = {kind:String} AND h IN {hashes:Array(String)} AND service IS NOT NULL AND environment IS NOT NULL
         GROUP BY h
     )
     WHERE labels != ({service:String}, {environment:String})
     ORDER BY service, environment`,
    { kind: RUN_KIND.access, hashes, service: now.service, environment: now.environment },
  );
  const out: RelabelledInput[] = [];
  for (const f of access) {
    const mine = new Set([f.decoded_hash, ...f.prefix_hashes]);
    const before = new Map<string, { service: string; environment: string }>();
    for (const r of rows) if (mine.has(r.hash)) before.set(JSON.stringify([r.service, r.environment]), { service: r.service, environment: r.environment });
    if (before.size > 0) out.push({ path: f.path, before: [...before.values()], now });
  }
  return out;
}

/** The decompressed contents of earlier imports (length and hash), by kind; runs recorded before migration 0009 have none. */
async function earlierContents(store: Store): Promise<EarlierContents> {
  const rows = await store.query<{ kind: string; bytes: number | string; hash: string }>(
    `SELECT kind, decoded_bytes AS bytes, decoded_hash AS hash
     FROM import_runs
     WHERE decoded_bytes > 0 AND decoded_hash != ''
     GROUP BY kind, decoded_bytes, decoded_hash`,
  );
  const earlier: EarlierContents = new Map();
  for (const r of rows) {
    const kind = (Object.keys(RUN_KIND) as InputKind[]).find((k) => RUN_KIND[k] === r.kind);
    if (kind === undefined) continue;
    const byLength = earlier.get(kind) ?? new Map<number, Set<string>>();
    earlier.set(kind, byLength);
    const length = Number(r.bytes);
    byLength.set(length, (byLength.get(length) ?? new Set()).add(r.hash));
  }
  return earlier;
}

/**
 * Throws when an import read no access entry at all (wrong file, wrong format).
 * @throws ContinuityError CONT_ERR_NOTHING_IMPORTED with the reject counts in `details`.
 */
export function assertSomethingImported(report: ImportReport): void {
  if (!report.nothing_read) return;
  const reasons = Object.entries(report.rejects_by_reason)
    .map(([r, n]) => `${n} ${r}`)
    .join(', ');
  throw new ContinuityError(
    'CONT_ERR_NOTHING_IMPORTED',
    // (blank lines named too, so that the counts add up to the lines read: a newcomer pass)
    `${report.lines.read} lines read, ${report.lines.skipped} skipped, ${report.lines.blank} blank${reasons ? `, rejected: ${reasons}` : ''}` +
      // (an error log given as the access log: a newcomer pass got the counts alone)
      (report.error_entries > 0
        ? `; the input holds ${report.error_entries} Caddy error-log entr${report.error_entries === 1 ? 'y' : 'ies'} about upstream requests and no access entry: an error log is given with --errors, beside its access log`
        : ''),
    { details: { lines: report.lines, rejects_by_reason: report.rejects_by_reason, rejects: report.rejects.slice(0, 10) } },
  );
}

/** ISO-8601 → ClickHouse DateTime64 text ('YYYY-MM-DD hh:mm:ss.sss', UTC). */
function clickhouseTime(iso: string): string {
  return iso.replace('T', ' ').replace('Z', '');
}
