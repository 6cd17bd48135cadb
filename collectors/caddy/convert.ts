import * as crypto from 'node:crypto';
import type { KeyedHasher } from '../../core/index.ts';
import { MAX_EVENT_MICROS, MIN_EVENT_MICROS } from '../../schema/index.ts';
import { classifyChallenge, isAuthChallenge } from '../challenge.ts';
import {
  CaddyLineScanner,
  F_DURATION,
  F_ERROR,
  F_H_AUTH,
  F_H_ORIGIN,
  F_H_PV,
  F_H_SID,
  F_H_UA,
  F_LEVEL,
  F_LOGGER,
  F_MSG,
  F_R_HEADERS,
  F_R_HOST,
  F_R_METHOD,
  F_R_REMOTE_ADDR,
  F_R_REMOTE_IP,
  F_R_REMOTE_PORT,
  F_R_URI,
  F_REQUEST,
  F_RESP_HEADERS,
  F_RH_SID,
  F_RH_WWW_AUTH,
  F_SIZE,
  F_STATUS,
  F_TS,
  F_USER_ID,
  FIELD_NAMES,
  T_ARRAY,
  T_NONE,
  T_NULL,
  T_NUMBER,
  T_OBJECT,
  T_STRING,
  typeName,
  utf8,
} from './scan.ts';
import { classifyUpstreamError, UpstreamJoin, type UpstreamErrorClass } from './upstream.ts';

/**
 * Why a line was rejected. `read_error` is not a line's fault: the input ended early
 * (e.g. a truncated gzip member) at that line number. `lone_surrogate`: a string field
 * the converter reads holds an unpaired UTF-16 surrogate escape (e.g. `"\ud800"`),
 * which has no UTF-8 form and which the store refuses (as `parseEvent` refuses it on
 * the ingest path). `ts_in_future`: the line's time is more than an hour past the
 * import's clock, as `parseEvent` refuses an event on the ingest path (no proxy logs
 * what has not happened; a line of 2105-12 was stored and expired at once, its TTL
 * past 2106, a break-it pass). `store_refused`: the store refused a row the line produced (the
 * import then reports the line as rejected; the converter never uses this reason).
 */
export type RejectReason = 'not_json' | 'line_too_long' | 'wrong_type' | 'missing_field' | 'lone_surrogate' | 'ts_in_future' | 'read_error' | 'store_refused';

/** Counters of one input file, kept by {@link CaddyConverter}. */
export interface FileCounters {
  /** Lines handed to the converter (blank lines are counted by the reader). */
  parsed: number;
  rejected: number;
  skipped: number;
  events: number;
}

/** Where the converter sends its output. */
export interface ConverterOutput {
  /** One JSONEachRow line of the `events` table. A returned promise is backpressure. */
  row(row: string): void | Promise<void>;
  /** One rejected line; `detail` never contains the line's content. */
  reject(line: number, reason: RejectReason, detail: string, bytes: number): void | Promise<void>;
}

/** Options of {@link CaddyConverter}. */
export interface ConverterOptions {
  /** Keyed hasher for session ids and principals (core/hash.ts). */
  hasher: KeyedHasher;
  /** `service` of every event (default ''). */
  service?: string;
  /** `environment` of every event (default ''). */
  environment?: string;
  /** Longest line, bytes (the hashing scratch buffer grows up to it). */
  maxLineBytes: number;
  /** Cap on error-log entries kept for the join (default 1,000,000). */
  maxErrorEntries?: number;
  /** The clock, ms since the epoch, for the future check (default Date.now() at construction). */
  nowMs?: number;
}

/** How far past the import's clock a line's time may be, s (as parseEvent's default skew). */
const MAX_FUTURE_S = 3600;

/** Totals of a {@link CaddyConverter}. */
export interface ConverterTotals {
  parsed: number;
  rejected: number;
  skipped: number;
  rejectsByReason: Record<string, number>;
  proxyAccess: number;
  authChallenges: number;
  /** Error-log entries read for the join (request-carrying and request-less). */
  errorEntries: number;
  /** Error-log entries not kept because the cap was reached. */
  errorEntriesDropped: number;
  /** Access entries that received an `upstream_error`. */
  joinedUpstreamErrors: number;
  /** Earliest and latest access entry, µs since the epoch (0 when none). */
  firstTs: number;
  lastTs: number;
}

// Field checks: which value types a field may have. T_NULL counts as absent for optional fields.
const M = (...types: number[]): number => types.reduce((m, t) => m | (1 << t), 0);
const OPT_STRING = M(T_NONE, T_NULL, T_STRING);
const OPT_NUMBER = M(T_NONE, T_NULL, T_NUMBER);
const OPT_OBJECT = M(T_NONE, T_NULL, T_OBJECT);
const OPT_ARRAY = M(T_NONE, T_NULL, T_ARRAY);
const OPT_PORT = M(T_NONE, T_NULL, T_STRING, T_NUMBER);

const ACCESS_CHECKS: ReadonlyArray<readonly [number, number]> = [
  [F_DURATION, OPT_NUMBER],
  [F_SIZE, OPT_NUMBER],
  [F_USER_ID, OPT_STRING],
  [F_RESP_HEADERS, OPT_OBJECT],
  [F_R_REMOTE_IP, OPT_STRING],
  [F_R_REMOTE_PORT, OPT_PORT],
  [F_R_REMOTE_ADDR, OPT_STRING],
  [F_R_METHOD, OPT_STRING],
  [F_R_HOST, OPT_STRING],
  [F_R_URI, OPT_STRING],
  [F_R_HEADERS, OPT_OBJECT],
  [F_H_UA, OPT_ARRAY],
  [F_H_SID, OPT_ARRAY],
  [F_H_PV, OPT_ARRAY],
  [F_H_ORIGIN, OPT_ARRAY],
  [F_RH_SID, OPT_ARRAY],
  [F_RH_WWW_AUTH, OPT_ARRAY],
];
/** Header fields whose first element is read: it must be a string when present. */
const FIRST_STRING_FIELDS = [F_H_UA, F_H_SID, F_H_PV, F_H_ORIGIN, F_RH_SID];

/**
 * String fields of an access entry that reach its rows, directly or hashed (the
 * remote_* fields also decide the join): each is checked for a lone surrogate.
 * `logger` is checked too (it is copied to `attrs`).
 */
const ACCESS_STRING_FIELDS = [F_LOGGER, F_USER_ID, F_R_REMOTE_IP, F_R_REMOTE_PORT, F_R_REMOTE_ADDR, F_R_METHOD, F_R_HOST, F_R_URI];
/** Header arrays of an access entry: their first element is read (Www-Authenticate: every element). */
const ACCESS_HEADER_FIELDS = [F_H_UA, F_H_SID, F_H_PV, F_H_ORIGIN, F_RH_SID, F_RH_WWW_AUTH];
/** String fields of an error-log entry that are read (the message classifies the failure, the address keys the join). */
const ERROR_STRING_FIELDS = [F_LOGGER, F_LEVEL, F_MSG, F_ERROR, F_R_REMOTE_IP, F_R_REMOTE_PORT, F_R_REMOTE_ADDR];

const NO_FIELDS: readonly number[] = [];
const LONE_SURROGATE_DETAIL = 'holds a lone UTF-16 surrogate (an unpaired \\ud800–\\udfff escape): not Unicode text, and the store cannot keep it';

/**
 * Whether `b[s, e)` (a JSON text span) holds a `\uD800`–`\uDFFF` escape, in either
 * case: a cheap byte test, run only on spans the scanner saw an escape in. Escapes are
 * the only way a lone surrogate gets into a decoded string: raw bytes are decoded as
 * UTF-8, where a surrogate's encoding is invalid and becomes U+FFFD. A hit may be a
 * valid pair (or an escaped backslash followed by "ud8…"): the caller confirms by
 * decoding and `isWellFormed`.
 */
function hasSurrogateEscape(b: Buffer, s: number, e: number): boolean {
  for (let i = s, last = e - 6; i <= last; i++) {
    if (b[i] !== 0x5c || b[i + 1] !== 0x75 || (b[i + 2]! | 0x20) !== 0x64) continue;
    const c = b[i + 3]! | 0x20;
    if (c === 0x38 || c === 0x39 || (c >= 0x61 && c <= 0x66)) return true;
  }
  return false;
}

const ERROR_CHECKS: ReadonlyArray<readonly [number, number]> = [
  [F_LEVEL, OPT_STRING],
  [F_MSG, OPT_STRING],
  [F_ERROR, OPT_STRING],
  [F_DURATION, OPT_NUMBER],
  [F_STATUS, OPT_NUMBER],
  [F_R_REMOTE_IP, OPT_STRING],
  [F_R_REMOTE_PORT, OPT_PORT],
  [F_R_REMOTE_ADDR, OPT_STRING],
];

// The contract's event times, in seconds: [MIN_TS_S, MAX_TS_S), 2000-01-01 to 2106-02-07 06:28:16
const MIN_TS_S = MIN_EVENT_MICROS / 1e6;
const MAX_TS_S = (MAX_EVENT_MICROS + 1) / 1e6;

// Contract limits (schema/events): longer values are cut so every event validates.
const MAX_METHOD = 16;
const MAX_PATH = 2048;
const MAX_PV = 32;
const MAX_UA = 1024;
const MAX_NAME = 256;
const MAX_ADDRESS = 64;
const MAX_SCOPE = 512;
/** Attribute values are capped too (the contract sets no limit; a proxy log line is no place for a novel). */
const MAX_ATTR = 1024;

const KIND_LOGGER_ACCESS = Buffer.from('http.log.access');
const KIND_LOGGER_ERROR = Buffer.from('http.log.error');
const KIND_LOGGER_PROXY = Buffer.from('http.handlers.reverse_proxy');

const HASH_PREFIX_ACCESS = Buffer.from('proxy_access\n');
const HASH_PREFIX_CHALLENGE = Buffer.from('auth_challenge\n');

const UA_PREFIX = /^([A-Za-z0-9][A-Za-z0-9._+-]*)\/([A-Za-z0-9][A-Za-z0-9._+-]*)/;
const VARIANT = '89ab89ab89ab89ab';

const hashHex: (data: Buffer) => string =
  typeof (crypto as { hash?: unknown }).hash === 'function'
    ? (data) => (crypto as unknown as { hash(alg: string, data: Buffer, enc: 'hex'): string }).hash('sha256', data, 'hex')
    : (data) => crypto.createHash('sha256').update(data).digest('hex');

/**
 * Lays out a SHA-256 digest (64 hex characters; here of the event kind and the raw
 * line) as an RFC 9562 §5.8 version 8 UUID: its first 128 bits, with the version
 * nibble set to 8 and the variant bits to 10. Deterministic: the same line always
 * gives the same event id.
 */
export function eventIdFromHex(h: string): string {
  return (
    h.slice(0, 8) +
    '-' +
    h.slice(8, 12) +
    '-8' +
    h.slice(13, 16) +
    '-' +
    VARIANT[parseInt(h[16]!, 16)]! +
    h.slice(17, 20) +
    '-' +
    h.slice(20, 32)
  );
}

/**
 * The `event_id` the converter gives the `kind` event of the line `buf[start, end)`
 * (the line's bytes as the reader delivers them, without the terminator): for finding
 * a line again from one of its rows. Slower than the converter's own (it copies).
 */
export function lineEventId(kind: 'proxy_access' | 'auth_challenge', buf: Buffer, start: number, end: number): string {
  const prefix = kind === 'proxy_access' ? HASH_PREFIX_ACCESS : HASH_PREFIX_CHALLENGE;
  return eventIdFromHex(hashHex(Buffer.concat([prefix, buf.subarray(start, end)])));
}

/** Cuts `s` to at most `max` UTF-16 units without splitting a surrogate pair. */
function cut(s: string, max: number): string {
  if (s.length <= max) return s;
  let end = max;
  const c = s.charCodeAt(end - 1);
  if (c >= 0xd800 && c <= 0xdbff) end--;
  return s.slice(0, end);
}

/** An access entry held back by a stream cut until its join window closes. */
interface HeldRow {
  prefix: string;
  proxyGenerated: boolean;
  file: FileCounters;
}

/**
 * Converts Caddy v2 JSON log lines into `events` rows (DESIGN §3 `proxy_access`,
 * `auth_challenge`) and feeds the upstream-error join. One instance per import; not
 * reentrant. See `importCaddyLogs` for the rules it implements.
 */
export class CaddyConverter {
  readonly totals: ConverterTotals = {
    parsed: 0,
    rejected: 0,
    skipped: 0,
    rejectsByReason: {},
    proxyAccess: 0,
    authChallenges: 0,
    errorEntries: 0,
    errorEntriesDropped: 0,
    joinedUpstreamErrors: 0,
    firstTs: 0,
    lastTs: 0,
  };
  readonly join: UpstreamJoin<HeldRow>;

  private readonly sc = new CaddyLineScanner();
  private readonly hasher: KeyedHasher;
  /** The latest line time taken, s ({@link MAX_FUTURE_S} past the clock). */
  private readonly latestTsS: number;
  /** The `service` and `environment` members of every event's JSON ('' for none). */
  private readonly serviceJson: string;
  private scratch: Buffer;
  private readonly uaCache = new Map<string, string>();
  private file: FileCounters = { parsed: 0, rejected: 0, skipped: 0, events: 0 };
  private out: ConverterOutput;
  private wait: Promise<void> | undefined;
  /** The buffer of the line being converted. */
  private bufRef: Buffer | undefined;
  private readonly releaseHeld = (held: HeldRow, cls: UpstreamErrorClass | undefined): void => this.emitHeld(held, cls);

  constructor(options: ConverterOptions, out: ConverterOutput) {
    this.hasher = options.hasher;
    const service = cut(options.service ?? '', 256);
    const environment = cut(options.environment ?? '', 256);
    this.serviceJson =
      (service === '' ? '' : `,"service":${JSON.stringify(service)}`) + (environment === '' ? '' : `,"environment":${JSON.stringify(environment)}`);
    this.scratch = Buffer.allocUnsafe(Math.min(options.maxLineBytes, 1 << 16) + 32);
    this.join = new UpstreamJoin<HeldRow>(options.maxErrorEntries ?? 1_000_000);
    this.latestTsS = (options.nowMs ?? Date.now()) / 1000 + MAX_FUTURE_S;
    this.out = out;
  }

  /** Starts counting into `file` (one per input file). */
  setFile(file: FileCounters): void {
    this.file = file;
  }

  /**
   * Handles one line of an access (or combined) log: access entries become events,
   * error entries feed the join, anything else is skipped. Returns a promise when the
   * output pushes back.
   */
  accessLine(buf: Buffer, start: number, end: number, lineNo: number): void | Promise<void> {
    this.line(buf, start, end, lineNo, true);
    return this.takeWait();
  }

  /** Handles one line of an error log: only error entries are used; the rest is skipped. */
  errorLine(buf: Buffer, start: number, end: number, lineNo: number): void | Promise<void> {
    this.line(buf, start, end, lineNo, false);
    return this.takeWait();
  }

  /** Records a line the reader refused (too long, or a read error). */
  rejectLine(lineNo: number, reason: RejectReason, detail: string, bytes: number): void | Promise<void> {
    this.reject(lineNo, reason, detail, bytes);
    return this.takeWait();
  }

  /** Releases every access entry still held for the join (call once, after the last access file). */
  finish(): void | Promise<void> {
    this.join.finish(this.releaseHeld);
    this.totals.errorEntriesDropped = this.join.stats.dropped;
    return this.takeWait();
  }

  private takeWait(): void | Promise<void> {
    const w = this.wait;
    if (w === undefined) return undefined;
    this.wait = undefined;
    return w;
  }

  private line(buf: Buffer, start: number, end: number, lineNo: number, accessFile: boolean): void {
    const sc = this.sc;
    const bytes = end - start;
    this.bufRef = buf;
    if (!sc.scan(buf, start, end)) {
      this.reject(lineNo, 'not_json', `${sc.errorMessage} at byte ${sc.errorOffset}`, bytes);
      return;
    }
    if (sc.topType !== T_OBJECT) {
      this.reject(lineNo, 'wrong_type', `entry: expected an object, got ${typeName(sc.topType)}`, bytes);
      return;
    }
    const lt = sc.type[F_LOGGER]!;
    let kind: 'access' | 'error' | 'proxy' | 'skip';
    if (lt === T_STRING) {
      if (this.loggerStarts(KIND_LOGGER_ACCESS)) kind = 'access';
      else if (this.loggerStarts(KIND_LOGGER_ERROR)) kind = sc.type[F_REQUEST] === T_NONE ? 'skip' : 'error';
      else if (this.loggerIs(KIND_LOGGER_PROXY)) kind = 'proxy';
      else kind = 'skip';
    } else if (lt === T_NONE || lt === T_NULL) {
      kind = sc.type[F_REQUEST] !== T_NONE && sc.type[F_STATUS] !== T_NONE ? 'access' : 'skip';
    } else {
      this.reject(lineNo, 'wrong_type', `logger: expected a string, got ${typeName(lt)}`, bytes);
      return;
    }
    if (kind === 'access' && !accessFile) kind = 'skip';
    switch (kind) {
      case 'access':
        this.access(buf, start, end, lineNo);
        return;
      case 'error':
        this.errorEntry(lineNo, bytes, true);
        return;
      case 'proxy':
        this.errorEntry(lineNo, bytes, false);
        return;
      default:
        this.totals.skipped++;
        this.file.skipped++;
    }
  }

  private loggerStarts(prefix: Buffer): boolean {
    const sc = this.sc;
    const s = sc.start[F_LOGGER]!;
    const e = sc.end[F_LOGGER]!;
    if (sc.esc[F_LOGGER]) return sc.str(F_LOGGER).startsWith(prefix.toString('latin1'));
    if (e - s < prefix.length) return false;
    const b = this.bufRef!;
    for (let i = 0; i < prefix.length; i++) if (b[s + i] !== prefix[i]) return false;
    return true;
  }

  private loggerIs(name: Buffer): boolean {
    const sc = this.sc;
    if (sc.esc[F_LOGGER]) return sc.str(F_LOGGER) === name.toString('latin1');
    return sc.end[F_LOGGER]! - sc.start[F_LOGGER]! === name.length && this.loggerStarts(name);
  }

  /**
   * Whether a line's time (`tsSec`, s) is one the contract holds and not in the future
   * ({@link MAX_FUTURE_S} past the clock); else the line is rejected, `wrong_type` or
   * `ts_in_future`.
   */
  private timeTaken(lineNo: number, tsSec: number, bytes: number): boolean {
    if (!(tsSec >= MIN_TS_S && tsSec < MAX_TS_S)) this.reject(lineNo, 'wrong_type', 'ts: out of range', bytes);
    else if (tsSec > this.latestTsS) this.reject(lineNo, 'ts_in_future', `ts: ${new Date(tsSec * 1000).toISOString()} is more than ${MAX_FUTURE_S} s past this machine's clock`, bytes);
    else return true;
    return false;
  }

  private reject(lineNo: number, reason: RejectReason, detail: string, bytes: number): void {
    const t = this.totals;
    t.rejected++;
    t.rejectsByReason[reason] = (t.rejectsByReason[reason] ?? 0) + 1;
    this.file.rejected++;
    const r = this.out.reject(lineNo, reason, detail, bytes);
    if (r) this.addWait(r);
  }

  /** Remembers backpressure from the output; two pushes in one line wait for both. */
  private addWait(p: Promise<void>): void {
    const prev = this.wait;
    this.wait = prev === undefined || prev === p ? p : Promise.all([prev, p]).then(() => undefined);
  }

  /** Checks field types; returns a reject detail or undefined. */
  private checkTypes(checks: ReadonlyArray<readonly [number, number]>): string | undefined {
    const type = this.sc.type;
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!;
      const t = type[c[0]]!;
      if (((1 << t) & c[1]) === 0) return `${FIELD_NAMES[c[0]]}: wrong type ${typeName(t)}`;
    }
    return undefined;
  }

  /**
   * The display name of the first of `fields` (string fields) or `headers` (header
   * arrays) whose decoded value is not well-formed UTF-16, or undefined. Only spans
   * the scanner saw a backslash escape in are looked at, so a line without escapes
   * costs a few flag reads.
   */
  private loneSurrogateField(fields: readonly number[], headers: readonly number[]): string | undefined {
    const sc = this.sc;
    const b = this.bufRef!;
    for (let i = 0; i < fields.length; i++) {
      const f = fields[i]!;
      if (sc.type[f] !== T_STRING || sc.esc[f] === 0 || !hasSurrogateEscape(b, sc.start[f]!, sc.end[f]!)) continue;
      if (!sc.str(f).isWellFormed()) return FIELD_NAMES[f];
    }
    for (let i = 0; i < headers.length; i++) {
      const f = headers[i]!;
      if (sc.type[f] !== T_ARRAY) continue;
      if (f === F_RH_WWW_AUTH) {
        if (hasSurrogateEscape(b, sc.start[f]!, sc.end[f]!) && !sc.strings(f).every((v) => v.isWellFormed())) return FIELD_NAMES[f];
      } else if (sc.firstType[f] === T_STRING && sc.firstEsc[f] !== 0 && hasSurrogateEscape(b, sc.firstStart[f]!, sc.firstEnd[f]!)) {
        if (!sc.firstStr(f).isWellFormed()) return FIELD_NAMES[f];
      }
    }
    return undefined;
  }

  /** The client address and port from remote_ip/remote_port, or the older remote_addr "host:port" / "[v6]:port". */
  private clientAddress(): { ip: string; port: number } | string {
    const sc = this.sc;
    let ip = '';
    let port = 0;
    if (sc.type[F_R_REMOTE_IP] === T_STRING) {
      ip = sc.str(F_R_REMOTE_IP);
      const pt = sc.type[F_R_REMOTE_PORT];
      if (pt === T_NUMBER) port = sc.num(F_R_REMOTE_PORT);
      else if (pt === T_STRING) {
        const ps = sc.str(F_R_REMOTE_PORT);
        port = /^\d{1,5}$/.test(ps) ? Number(ps) : ps === '' ? 0 : NaN;
      }
    } else if (sc.type[F_R_REMOTE_ADDR] === T_STRING) {
      const addr = sc.str(F_R_REMOTE_ADDR);
      const m = /^\[([^\]]*)\](?::(\d{1,5}))?$/.exec(addr) ?? /^([^:]*)(?::(\d{1,5}))?$/.exec(addr);
      if (m) {
        ip = m[1]!;
        port = m[2] === undefined ? 0 : Number(m[2]);
      } else ip = addr; // a bare IPv6 address without brackets or port
    }
    if (!(Number.isInteger(port) && port >= 0 && port <= 65_535)) return 'request.remote_port: not a port number';
    return { ip, port };
  }

  private errorEntry(lineNo: number, bytes: number, withRequest: boolean): void {
    const sc = this.sc;
    const tt = sc.type[F_TS]!;
    if (tt !== T_NUMBER) {
      this.reject(lineNo, tt === T_NONE ? 'missing_field' : 'wrong_type', tt === T_NONE ? 'ts: missing' : `ts: wrong type ${typeName(tt)}`, bytes);
      return;
    }
    const rt = sc.type[F_REQUEST]!;
    if (withRequest && rt !== T_OBJECT) {
      this.reject(lineNo, 'wrong_type', `request: wrong type ${typeName(rt)}`, bytes);
      return;
    }
    const bad = this.checkTypes(ERROR_CHECKS);
    if (bad) {
      this.reject(lineNo, 'wrong_type', bad, bytes);
      return;
    }
    const tsSec = sc.num(F_TS);
    if (!this.timeTaken(lineNo, tsSec, bytes)) return;
    const ts = Math.round(tsSec * 1e6);
    const addr = this.clientAddress();
    if (typeof addr === 'string') {
      this.reject(lineNo, 'wrong_type', addr, bytes);
      return;
    }
    const text = `${sc.str(F_MSG)} ${sc.str(F_ERROR)}`;
    // reverse_proxy lines: only errors count; "context canceled" is the client leaving, not the upstream failing.
    if (!withRequest && (sc.str(F_LEVEL) !== 'error' || /context canceled/i.test(text))) {
      this.totals.skipped++;
      this.file.skipped++;
      return;
    }
    const lone = this.loneSurrogateField(ERROR_STRING_FIELDS, NO_FIELDS);
    if (lone !== undefined) {
      this.reject(lineNo, 'lone_surrogate', `${lone}: ${LONE_SURROGATE_DETAIL}`, bytes);
      return;
    }
    this.totals.parsed++;
    this.file.parsed++;
    if (!withRequest) {
      this.totals.errorEntries++;
      this.join.addStreamCut(ts, classifyUpstreamError(text), rt === T_OBJECT ? addr.ip : '', rt === T_OBJECT ? addr.port : 0);
      return;
    }
    this.totals.errorEntries++;
    const status = sc.type[F_STATUS] === T_NUMBER ? sc.num(F_STATUS) : 0;
    // Caddy's error log also carries handler errors that are not upstream failures (e.g. a 404 from file_server).
    if (status !== 0 && status < 500) return;
    if (sc.type[F_DURATION] === T_NUMBER) this.join.addKeyed(addr.ip, addr.port, sc.num(F_DURATION), ts, classifyUpstreamError(text));
    else this.join.addStreamCut(ts, classifyUpstreamError(text), addr.ip, addr.port);
  }

  private access(buf: Buffer, start: number, end: number, lineNo: number): void {
    const sc = this.sc;
    const bytes = end - start;
    const type = sc.type;
    // Required fields.
    const tt = type[F_TS]!;
    if (tt !== T_NUMBER) {
      this.reject(lineNo, tt === T_NONE ? 'missing_field' : 'wrong_type', tt === T_NONE ? 'ts: missing' : `ts: wrong type ${typeName(tt)}`, bytes);
      return;
    }
    const rt = type[F_REQUEST]!;
    if (rt !== T_OBJECT) {
      this.reject(lineNo, rt === T_NONE ? 'missing_field' : 'wrong_type', rt === T_NONE ? 'request: missing' : `request: wrong type ${typeName(rt)}`, bytes);
      return;
    }
    const st = type[F_STATUS]!;
    if (st !== T_NUMBER) {
      this.reject(lineNo, st === T_NONE ? 'missing_field' : 'wrong_type', st === T_NONE ? 'status: missing' : `status: wrong type ${typeName(st)}`, bytes);
      return;
    }
    const bad = this.checkTypes(ACCESS_CHECKS);
    if (bad) {
      this.reject(lineNo, 'wrong_type', bad, bytes);
      return;
    }
    for (let i = 0; i < FIRST_STRING_FIELDS.length; i++) {
      const f = FIRST_STRING_FIELDS[i]!;
      if (type[f] === T_ARRAY) {
        const ft = sc.firstType[f]!;
        if (ft !== T_STRING && ft !== T_NONE) {
          this.reject(lineNo, 'wrong_type', `${FIELD_NAMES[f]}: wrong type array of ${typeName(ft)}`, bytes);
          return;
        }
      }
    }
    // Values.
    const tsSec = sc.num(F_TS);
    if (!this.timeTaken(lineNo, tsSec, bytes)) return;
    const status = sc.num(F_STATUS);
    if (!(Number.isInteger(status) && status >= 0 && status <= 999)) {
      this.reject(lineNo, 'wrong_type', 'status: not an HTTP status', bytes);
      return;
    }
    const duration = type[F_DURATION] === T_NUMBER ? sc.num(F_DURATION) : 0;
    if (!(duration >= 0 && duration <= 1e9)) {
      this.reject(lineNo, 'wrong_type', 'duration: out of range', bytes);
      return;
    }
    const size = type[F_SIZE] === T_NUMBER ? sc.num(F_SIZE) : 0;
    if (!(Number.isSafeInteger(size) && size >= 0)) {
      this.reject(lineNo, 'wrong_type', 'size: not a byte count', bytes);
      return;
    }
    const addr = this.clientAddress();
    if (typeof addr === 'string') {
      this.reject(lineNo, 'wrong_type', addr, bytes);
      return;
    }
    const lone = this.loneSurrogateField(ACCESS_STRING_FIELDS, ACCESS_HEADER_FIELDS);
    if (lone !== undefined) {
      this.reject(lineNo, 'lone_surrogate', `${lone}: ${LONE_SURROGATE_DETAIL}`, bytes);
      return;
    }

    const ts = Math.round(tsSec * 1e6);
    const totals = this.totals;
    if (totals.firstTs === 0 || ts < totals.firstTs) totals.firstTs = ts;
    if (ts > totals.lastTs) totals.lastTs = ts;
    const hasCredential = type[F_H_AUTH] !== T_NONE;
    const hasher = this.hasher;
    const reqSid = sc.firstStr(F_H_SID);
    const respSid = sc.firstStr(F_RH_SID);
    const reqKey = reqSid === '' ? '' : hasher(reqSid);
    const respKey = respSid === '' ? '' : respSid === reqSid ? reqKey : hasher(respSid);
    const sessionKey = reqKey !== '' ? reqKey : respKey;
    const userId = sc.str(F_USER_ID);
    const principalKey = userId === '' ? '' : hasher(userId);

    // Envelope shared by proxy_access and auth_challenge (after event_id and event_type).
    let env = `,"ts":${ts},"source":"proxy"${this.serviceJson}`;
    if (type[F_H_PV] === T_ARRAY && sc.firstType[F_H_PV] === T_STRING) env += `,"protocol_version":${this.stringJson(F_H_PV, true, MAX_PV)}`;
    if (sessionKey !== '') env += `,"session_key":"${sessionKey}"`;
    if (principalKey !== '') env += `,"principal_key":"${principalKey}"`;
    if (type[F_H_UA] === T_ARRAY && sc.firstType[F_H_UA] === T_STRING) env += this.userAgentJson();
    env += `,"attrs":{"http.host":${this.stringJson(F_R_HOST, false, MAX_ATTR)}`;
    if (type[F_H_ORIGIN] === T_ARRAY && sc.firstType[F_H_ORIGIN] === T_STRING) env += `,"http.origin":${this.stringJson(F_H_ORIGIN, true, MAX_ATTR)}`;
    env += `,"caddy.logger":${this.stringJson(F_LOGGER, false, MAX_ATTR)}}`;

    const id = this.eventId(HASH_PREFIX_ACCESS, buf, start, end);
    let row = `{"event_id":"${id}","event_type":"proxy_access"${env}`;
    row += `,"http_method":${this.stringJson(F_R_METHOD, false, MAX_METHOD)},"url_path":${this.pathJson()},"http_status":${status}`;
    if (duration !== 0) row += `,"duration_ms":${Math.round(duration * 1e9) / 1e6}`;
    if (size !== 0) row += `,"bytes":${size}`;
    if (reqKey !== '') row += `,"request_session_key":"${reqKey}"`;
    if (respKey !== '') row += `,"response_session_key":"${respKey}"`;
    if (hasCredential) row += ',"has_credential":true';
    if (addr.ip !== '') row += `,"client_address":${JSON.stringify(cut(addr.ip, MAX_ADDRESS))}`;
    if (addr.port !== 0) row += `,"client_port":${addr.port}`;

    // A 5xx whose response headers are nothing but Server: Caddy answered itself.
    let proxyGenerated = status >= 500 && sc.respOther === 0;
    let upstream: UpstreamErrorClass | undefined;
    const join = this.join;
    this.totals.parsed++;
    this.file.parsed++;
    this.totals.proxyAccess++;
    if (!join.empty) {
      upstream = join.takeKeyed(addr.ip, addr.port, duration, ts);
      if (upstream !== undefined) proxyGenerated = true;
      join.advance(ts, this.releaseHeld);
    }
    if (upstream === undefined && join.hasOpenCuts) {
      const held: HeldRow = { prefix: row, proxyGenerated, file: this.file };
      if (join.offer(held, ts, addr.ip, addr.port, this.releaseHeld) !== undefined) {
        row = '';
      }
    }
    if (row !== '') this.emit(finishRow(row, proxyGenerated, upstream), this.file, upstream !== undefined);

    const wwwAuthenticate = status === 401 || status === 403 ? sc.strings(F_RH_WWW_AUTH) : [];
    if (isAuthChallenge(status, wwwAuthenticate)) {
      const challenge = classifyChallenge(status, wwwAuthenticate, hasCredential);
      const cid = this.eventId(HASH_PREFIX_CHALLENGE, buf, start, end);
      let c = `{"event_id":"${cid}","event_type":"auth_challenge"${env},"http_status":${status},"challenge_class":"${challenge.challenge_class}"`;
      if (hasCredential) c += ',"has_credential":true';
      if (challenge.scope !== '') c += `,"scope":${JSON.stringify(cut(challenge.scope, MAX_SCOPE))}`;
      if (challenge.has_resource_metadata) c += ',"has_resource_metadata":true';
      this.totals.authChallenges++;
      this.emit(c + '}', this.file, false);
    }
  }

  private emitHeld(held: HeldRow, cls: UpstreamErrorClass | undefined): void {
    this.emit(finishRow(held.prefix, held.proxyGenerated, cls), held.file, cls !== undefined);
  }

  private emit(row: string, file: FileCounters, joined: boolean): void {
    file.events++;
    if (joined) this.totals.joinedUpstreamErrors++;
    const r = this.out.row(row);
    if (r) this.addWait(r);
  }

  private eventId(prefix: Buffer, buf: Buffer, start: number, end: number): string {
    const need = prefix.length + end - start;
    if (need > this.scratch.length) this.scratch = Buffer.allocUnsafe(Math.max(need, this.scratch.length * 2));
    const scratch = this.scratch;
    prefix.copy(scratch, 0);
    buf.copy(scratch, prefix.length, start, end);
    return eventIdFromHex(hashHex(scratch.subarray(0, prefix.length + end - start)));
  }

  /**
   * JSON for a string field (or a header's first element when `first`), cut to `max`.
   * Without escapes the literal is copied from the line as is; '""' when absent.
   */
  private stringJson(f: number, first: boolean, max: number): string {
    const sc = this.sc;
    const s = first ? sc.firstStart[f]! : sc.start[f]!;
    const e = first ? sc.firstEnd[f]! : sc.end[f]!;
    const esc = first ? sc.firstEsc[f]! : sc.esc[f]!;
    if (!first && sc.type[f] !== T_STRING) return '""';
    if (esc === 0 && e - s <= max) return utf8(this.bufRef!, s - 1, e + 1);
    return JSON.stringify(cut(sc.decode(s, e, esc), max));
  }

  /** `url_path`: the request URI without its query string or fragment (a query may carry tokens). */
  private pathJson(): string {
    const sc = this.sc;
    if (sc.type[F_R_URI] !== T_STRING) return '""';
    const s = sc.start[F_R_URI]!;
    const e = sc.end[F_R_URI]!;
    if (sc.esc[F_R_URI] === 0) {
      const b = this.bufRef!;
      let q = s;
      while (q < e && b[q] !== 0x3f && b[q] !== 0x23) q++;
      if (q - s <= MAX_PATH) return utf8(b, s - 1, q) + '"';
      return JSON.stringify(cut(utf8(b, s, q), MAX_PATH));
    }
    const uri = sc.decode(s, e, 1);
    const q = uri.search(/[?#]/);
    return JSON.stringify(cut(q < 0 ? uri : uri.slice(0, q), MAX_PATH));
  }

  /** `,"client_name":…,"client_version":…,"user_agent":…` for the request's User-Agent, cached per value. */
  private userAgentJson(): string {
    const ua = this.sc.firstStr(F_H_UA);
    let out = this.uaCache.get(ua);
    if (out !== undefined) return out;
    const m = UA_PREFIX.exec(ua);
    out = '';
    if (m) out += `,"client_name":${JSON.stringify(cut(m[1]!, MAX_NAME))},"client_version":${JSON.stringify(cut(m[2]!, MAX_NAME))}`;
    if (ua !== '') out += `,"user_agent":${JSON.stringify(cut(ua, MAX_UA))}`;
    if (this.uaCache.size >= 10_000) this.uaCache.clear();
    this.uaCache.set(ua, out);
    return out;
  }
}

function finishRow(prefix: string, proxyGenerated: boolean, upstream: UpstreamErrorClass | undefined): string {
  let row = prefix;
  if (proxyGenerated) row += ',"proxy_generated":true';
  if (upstream !== undefined) row += `,"upstream_error":"${upstream}"`;
  return row + '}';
}
