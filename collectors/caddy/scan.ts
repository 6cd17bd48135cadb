/**
 * A strict JSON scanner specialised for Caddy v2 log entries.
 *
 * Why not `JSON.parse`: a Caddy access line is ~800 bytes holding ~60 strings in
 * objects whose key order varies line by line (Go map order); `JSON.parse` builds all
 * of them and costs 7–12 µs per line here, more than the rest of the import together.
 * This scanner validates the whole line against the JSON grammar (RFC 8259 — the
 * grammar `JSON.parse` implements, ECMA-262 §25.5.1) without allocating, and records
 * only the spans of the fields the importer reads. A line is valid for the scanner
 * exactly when `JSON.parse` of its UTF-8 decoding succeeds (`scan.test.ts` checks this
 * differentially, including truncations and byte flips of real lines).
 *
 * Duplicate keys: the last one wins, as with `JSON.parse`. Header names under
 * `request.headers` and `resp_headers` match case-insensitively (RFC 9110 §5.1).
 */

/** Value types recorded per field. */
export const T_NONE = 0;
export const T_STRING = 1;
export const T_NUMBER = 2;
export const T_OBJECT = 3;
export const T_ARRAY = 4;
export const T_TRUE = 5;
export const T_FALSE = 6;
export const T_NULL = 7;

const TYPE_NAMES = ['absent', 'string', 'number', 'object', 'array', 'boolean', 'boolean', 'null'] as const;
/** Name of a recorded value type, for reject details. */
export function typeName(t: number): string {
  return TYPE_NAMES[t] ?? 'unknown';
}

// Field ids: top level.
export const F_TS = 0;
export const F_LOGGER = 1;
export const F_LEVEL = 2;
export const F_MSG = 3;
export const F_ERROR = 4;
export const F_STATUS = 5;
export const F_DURATION = 6;
export const F_SIZE = 7;
export const F_USER_ID = 8;
export const F_REQUEST = 9;
export const F_RESP_HEADERS = 10;
// request.*
export const F_R_REMOTE_IP = 11;
export const F_R_REMOTE_PORT = 12;
export const F_R_REMOTE_ADDR = 13;
export const F_R_METHOD = 14;
export const F_R_HOST = 15;
export const F_R_URI = 16;
export const F_R_HEADERS = 17;
// request.headers.* (case-insensitive)
export const F_H_UA = 18;
export const F_H_SID = 19;
export const F_H_PV = 20;
export const F_H_AUTH = 21;
export const F_H_ORIGIN = 22;
// resp_headers.* (case-insensitive)
export const F_RH_SID = 23;
export const F_RH_WWW_AUTH = 24;
export const F_RH_SERVER = 25;
const NF = 26;

/** Display names of the fields, for reject details. */
export const FIELD_NAMES: readonly string[] = [
  'ts',
  'logger',
  'level',
  'msg',
  'error',
  'status',
  'duration',
  'size',
  'user_id',
  'request',
  'resp_headers',
  'request.remote_ip',
  'request.remote_port',
  'request.remote_addr',
  'request.method',
  'request.host',
  'request.uri',
  'request.headers',
  'request.headers.User-Agent',
  'request.headers.Mcp-Session-Id',
  'request.headers.Mcp-Protocol-Version',
  'request.headers.Authorization',
  'request.headers.Origin',
  'resp_headers.Mcp-Session-Id',
  'resp_headers.Www-Authenticate',
  'resp_headers.Server',
];

const CTX_OTHER = 0;
const CTX_TOP = 1;
const CTX_REQUEST = 2;
const CTX_REQ_HEADERS = 3;
const CTX_RESP_HEADERS = 4;

const MAX_DEPTH = 512;

const lit = (s: string): Uint8Array => Uint8Array.from(Buffer.from(s, 'latin1'));
const K_TS = lit('ts');
const K_LOGGER = lit('logger');
const K_LEVEL = lit('level');
const K_MSG = lit('msg');
const K_ERROR = lit('error');
const K_STATUS = lit('status');
const K_DURATION = lit('duration');
const K_SIZE = lit('size');
const K_USER_ID = lit('user_id');
const K_REQUEST = lit('request');
const K_RESP_HEADERS = lit('resp_headers');
const K_REMOTE_IP = lit('remote_ip');
const K_REMOTE_PORT = lit('remote_port');
const K_REMOTE_ADDR = lit('remote_addr');
const K_METHOD = lit('method');
const K_HOST = lit('host');
const K_URI = lit('uri');
const K_HEADERS = lit('headers');
// Header names, lowercase.
const H_UA = lit('user-agent');
const H_SID = lit('mcp-session-id');
const H_PV = lit('mcp-protocol-version');
const H_AUTH = lit('authorization');
const H_ORIGIN = lit('origin');
const H_WWW_AUTH = lit('www-authenticate');
const H_SERVER = lit('server');

const TOP_KEYS = new Map<string, number>([
  ['ts', F_TS],
  ['logger', F_LOGGER],
  ['level', F_LEVEL],
  ['msg', F_MSG],
  ['error', F_ERROR],
  ['status', F_STATUS],
  ['duration', F_DURATION],
  ['size', F_SIZE],
  ['user_id', F_USER_ID],
  ['request', F_REQUEST],
  ['resp_headers', F_RESP_HEADERS],
]);
const REQUEST_KEYS = new Map<string, number>([
  ['remote_ip', F_R_REMOTE_IP],
  ['remote_port', F_R_REMOTE_PORT],
  ['remote_addr', F_R_REMOTE_ADDR],
  ['method', F_R_METHOD],
  ['host', F_R_HOST],
  ['uri', F_R_URI],
  ['headers', F_R_HEADERS],
]);
const REQ_HEADER_KEYS = new Map<string, number>([
  ['user-agent', F_H_UA],
  ['mcp-session-id', F_H_SID],
  ['mcp-protocol-version', F_H_PV],
  ['authorization', F_H_AUTH],
  ['origin', F_H_ORIGIN],
]);
const RESP_HEADER_KEYS = new Map<string, number>([
  ['mcp-session-id', F_RH_SID],
  ['www-authenticate', F_RH_WWW_AUTH],
  ['server', F_RH_SERVER],
]);

/** Buffer's own slice decoders (what `toString` calls after checking its arguments). */
interface SliceDecoders {
  utf8Slice(start: number, end: number): string;
  latin1Slice(start: number, end: number): string;
}
const HAS_SLICES = typeof (Buffer.prototype as unknown as Partial<SliceDecoders>).utf8Slice === 'function';

/** UTF-8 decode of `b[s, e)`; skips `toString`'s argument handling on the hot path. */
export function utf8(b: Buffer, s: number, e: number): string {
  return HAS_SLICES ? (b as unknown as SliceDecoders).utf8Slice(s, e) : b.toString('utf8', s, e);
}

/** Latin-1 decode of `b[s, e)` (for ASCII-only spans such as numbers). */
export function latin1(b: Buffer, s: number, e: number): string {
  return HAS_SLICES ? (b as unknown as SliceDecoders).latin1Slice(s, e) : b.toString('latin1', s, e);
}

function eq(b: Uint8Array, s: number, k: Uint8Array): boolean {
  for (let i = 0; i < k.length; i++) if (b[s + i] !== k[i]) return false;
  return true;
}

/** Case-insensitive compare against a lowercase literal of letters, digits and '-'. */
function eqi(b: Uint8Array, s: number, k: Uint8Array): boolean {
  for (let i = 0; i < k.length; i++) if ((b[s + i]! | 0x20) !== k[i]) return false;
  return true;
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

/**
 * Scans one line. Reuse one instance for many lines (it allocates nothing per line).
 *
 * After {@link CaddyLineScanner.scan} returns true, for each field id `f`:
 * `type[f]` is its value type (T_NONE when absent), `start[f]`/`end[f]` the value's
 * byte span in the buffer (strings: the contents without the quotes; `esc[f]` = 1 when
 * they contain a backslash escape). For header fields whose value is an array,
 * `first*[f]` describe the array's first element (`firstType` T_NONE for `[]`).
 * `respOther` counts `resp_headers` names other than `Server`.
 */
export class CaddyLineScanner {
  readonly type = new Uint8Array(NF);
  readonly start = new Int32Array(NF);
  readonly end = new Int32Array(NF);
  readonly esc = new Uint8Array(NF);
  readonly firstType = new Uint8Array(NF);
  readonly firstStart = new Int32Array(NF);
  readonly firstEnd = new Int32Array(NF);
  readonly firstEsc = new Uint8Array(NF);
  /** Type of the whole line's value (T_OBJECT for a log entry). */
  topType = T_NONE;
  respOther = 0;
  /** When scan() returned false: byte offset (from the line start) and reason. */
  errorOffset = 0;
  errorMessage = '';

  private b: Buffer = Buffer.alloc(0);
  private lineStart = 0;
  private lim = 0;
  /** Escape flag of the last string scanned. */
  private sEsc = 0;

  /** Validates `buf[start, end)` as one JSON text and records the known fields. */
  scan(buf: Buffer, start: number, end: number): boolean {
    this.b = buf;
    this.lineStart = start;
    this.lim = end;
    this.type.fill(0);
    this.respOther = 0;
    this.topType = T_NONE;
    let p = this.ws(start);
    if (p >= end) return this.fail(p, 'unexpected end of input');
    p = this.value(p, buf[p] === 0x7b ? CTX_TOP : CTX_OTHER, -1, 0);
    if (p < 0) return false;
    this.topType = this.lastType;
    p = this.ws(p);
    if (p < end) return this.fail(p, 'unexpected data after the JSON value');
    return true;
  }

  /** Decodes a recorded string field ('' when absent or not a string). */
  str(f: number): string {
    if (this.type[f] !== T_STRING) return '';
    return this.decode(this.start[f]!, this.end[f]!, this.esc[f]!);
  }

  /** Decodes the first element of a recorded header array ('' when absent, empty or not a string). */
  firstStr(f: number): string {
    if (this.type[f] !== T_ARRAY || this.firstType[f] !== T_STRING) return '';
    return this.decode(this.firstStart[f]!, this.firstEnd[f]!, this.firstEsc[f]!);
  }

  /** A recorded number field as a JS number (NaN when absent or not a number). */
  num(f: number): number {
    if (this.type[f] !== T_NUMBER) return NaN;
    const b = this.b;
    const s = this.start[f]!;
    const e = this.end[f]!;
    // Fast path for plain non-negative integers up to 9 digits (status, size, ports).
    if (e - s <= 9) {
      let n = 0;
      for (let i = s; i < e; i++) {
        const c = b[i]!;
        if (c < 0x30 || c > 0x39) return Number(latin1(b, s, e));
        n = n * 10 + (c - 0x30);
      }
      return n;
    }
    return Number(latin1(b, s, e));
  }

  /** All string elements of a recorded array field (e.g. Www-Authenticate); non-strings are skipped. */
  strings(f: number): string[] {
    if (this.type[f] !== T_ARRAY) return [];
    const raw = utf8(this.b, this.start[f]!, this.end[f]!);
    const arr = JSON.parse(raw) as unknown[];
    return arr.filter((v): v is string => typeof v === 'string');
  }

  /**
   * The JSON literal of a string field exactly as written in the line (with quotes), or
   * '' when it is not a string. Valid JSON output for a row, with no decode/re-encode.
   */
  rawJson(f: number): string {
    if (this.type[f] !== T_STRING) return '';
    return utf8(this.b, this.start[f]! - 1, this.end[f]! + 1);
  }

  /** Byte index of the first `ch` inside a string field's span, or -1. */
  indexInField(f: number, ch: number): number {
    const b = this.b;
    for (let i = this.start[f]!, e = this.end[f]!; i < e; i++) if (b[i] === ch) return i;
    return -1;
  }

  /** Decodes `b[s, e)`: the contents of a string literal. */
  decode(s: number, e: number, esc: number): string {
    if (esc === 0) return utf8(this.b, s, e);
    return JSON.parse(utf8(this.b, s - 1, e + 1)) as string;
  }

  private lastType = T_NONE;

  private fail(p: number, message: string): false {
    this.errorOffset = p - this.lineStart;
    this.errorMessage = message;
    return false;
  }

  private ws(p: number): number {
    const b = this.b;
    const lim = this.lim;
    while (p < lim) {
      const c = b[p]!;
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      p++;
    }
    return p;
  }

  /**
   * Scans a value at `p` (no leading whitespace). Records it into `field` when >= 0.
   * `ctx` is the key table for an object value. Returns the position after the value or -1.
   */
  private value(p: number, ctx: number, field: number, depth: number): number {
    const b = this.b;
    const c = b[p]!;
    let q: number;
    let t: number;
    if (c === 0x22) {
      q = this.string(p);
      if (q < 0) return -1;
      t = T_STRING;
      if (field >= 0) {
        this.type[field] = T_STRING;
        this.start[field] = p + 1;
        this.end[field] = q - 1;
        this.esc[field] = this.sEsc;
      }
      this.lastType = t;
      return q;
    }
    if (c === 0x7b) {
      if (depth >= MAX_DEPTH) return this.failAt(p, 'nesting deeper than 512');
      if (field === F_REQUEST) this.resetRequest();
      else if (field === F_R_HEADERS) this.resetReqHeaders();
      else if (field === F_RESP_HEADERS) this.resetRespHeaders();
      q = this.object(p, ctx, depth + 1);
      t = T_OBJECT;
    } else if (c === 0x5b) {
      if (depth >= MAX_DEPTH) return this.failAt(p, 'nesting deeper than 512');
      q = this.array(p, field, depth + 1);
      t = T_ARRAY;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      q = this.number(p);
      t = T_NUMBER;
    } else if (c === 0x74) {
      q = this.literal(p, 0x74, 0x72, 0x75, 0x65);
      t = T_TRUE;
    } else if (c === 0x66) {
      q = p + 5 <= this.lim && b[p + 1] === 0x61 && b[p + 2] === 0x6c && b[p + 3] === 0x73 && b[p + 4] === 0x65 ? p + 5 : this.failAt(p, 'invalid literal');
      t = T_FALSE;
    } else if (c === 0x6e) {
      q = this.literal(p, 0x6e, 0x75, 0x6c, 0x6c);
      t = T_NULL;
    } else {
      return this.failAt(p, p >= this.lim ? 'unexpected end of input' : 'unexpected character');
    }
    if (q < 0) return -1;
    if (field >= 0) {
      this.type[field] = t;
      this.start[field] = p;
      this.end[field] = q;
    }
    this.lastType = t;
    return q;
  }

  private failAt(p: number, message: string): number {
    this.fail(p, message);
    return -1;
  }

  private literal(p: number, c0: number, c1: number, c2: number, c3: number): number {
    const b = this.b;
    if (p + 4 <= this.lim && b[p] === c0 && b[p + 1] === c1 && b[p + 2] === c2 && b[p + 3] === c3) return p + 4;
    return this.failAt(p, p + 4 > this.lim ? 'unexpected end of input' : 'invalid literal');
  }

  private resetRequest(): void {
    for (let f = F_R_REMOTE_IP; f <= F_H_ORIGIN; f++) this.type[f] = T_NONE;
  }

  private resetReqHeaders(): void {
    for (let f = F_H_UA; f <= F_H_ORIGIN; f++) this.type[f] = T_NONE;
  }

  private resetRespHeaders(): void {
    for (let f = F_RH_SID; f <= F_RH_SERVER; f++) this.type[f] = T_NONE;
    this.respOther = 0;
  }

  /** Scans a string at `p` (the opening quote). Sets `sEsc`. Returns the position after the closing quote. */
  private string(p: number): number {
    const b = this.b;
    const lim = this.lim;
    let q = p + 1;
    let esc = 0;
    for (;;) {
      if (q >= lim) return this.failAt(q, 'unexpected end of input in a string');
      const c = b[q]!;
      if (c === 0x22) break;
      if (c === 0x5c) {
        esc = 1;
        if (q + 1 >= lim) return this.failAt(q, 'unexpected end of input in a string');
        const e = b[q + 1]!;
        if (e === 0x75) {
          if (q + 6 > lim) return this.failAt(q, 'unexpected end of input in a string');
          if (!isHex(b[q + 2]!) || !isHex(b[q + 3]!) || !isHex(b[q + 4]!) || !isHex(b[q + 5]!)) return this.failAt(q, 'bad \\u escape');
          q += 6;
          continue;
        }
        if (e === 0x22 || e === 0x5c || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) {
          q += 2;
          continue;
        }
        return this.failAt(q, 'bad escape');
      }
      if (c < 0x20) return this.failAt(q, 'control character in a string');
      q++;
    }
    this.sEsc = esc;
    return q + 1;
  }

  private number(p: number): number {
    const b = this.b;
    const lim = this.lim;
    let q = p;
    if (b[q] === 0x2d) q++;
    if (q >= lim) return this.failAt(q, 'unexpected end of input in a number');
    let c = b[q]!;
    if (c === 0x30) q++;
    else if (c >= 0x31 && c <= 0x39) {
      q++;
      while (q < lim && (c = b[q]!) >= 0x30 && c <= 0x39) q++;
    } else return this.failAt(q, 'bad number');
    if (q < lim && b[q] === 0x2e) {
      q++;
      const d = q;
      while (q < lim && (c = b[q]!) >= 0x30 && c <= 0x39) q++;
      if (q === d) return this.failAt(q, q >= lim ? 'unexpected end of input in a number' : 'bad number');
    }
    if (q < lim && (b[q] === 0x65 || b[q] === 0x45)) {
      q++;
      if (q < lim && (b[q] === 0x2b || b[q] === 0x2d)) q++;
      const d = q;
      while (q < lim && (c = b[q]!) >= 0x30 && c <= 0x39) q++;
      if (q === d) return this.failAt(q, q >= lim ? 'unexpected end of input in a number' : 'bad number');
    }
    return q;
  }

  private array(p: number, field: number, depth: number): number {
    const b = this.b;
    let q = this.ws(p + 1);
    if (field >= 0) this.firstType[field] = T_NONE;
    if (q < this.lim && b[q] === 0x5d) return q + 1;
    let first = true;
    for (;;) {
      if (q >= this.lim) return this.failAt(q, 'unexpected end of input in an array');
      const v = q;
      q = this.value(q, CTX_OTHER, -1, depth);
      if (q < 0) return -1;
      if (first && field >= 0) {
        first = false;
        const t = this.lastType;
        this.firstType[field] = t;
        if (t === T_STRING) {
          this.firstStart[field] = v + 1;
          this.firstEnd[field] = q - 1;
          this.firstEsc[field] = this.sEsc;
        }
      }
      q = this.ws(q);
      if (q >= this.lim) return this.failAt(q, 'unexpected end of input in an array');
      const c = b[q];
      if (c === 0x2c) {
        q = this.ws(q + 1);
        continue;
      }
      if (c === 0x5d) return q + 1;
      return this.failAt(q, 'expected , or ] in an array');
    }
  }

  private object(p: number, ctx: number, depth: number): number {
    const b = this.b;
    let q = this.ws(p + 1);
    if (q < this.lim && b[q] === 0x7d) return q + 1;
    for (;;) {
      if (q >= this.lim) return this.failAt(q, 'unexpected end of input in an object');
      if (b[q] !== 0x22) return this.failAt(q, 'expected a string key');
      const ks = q + 1;
      q = this.string(q);
      if (q < 0) return -1;
      const ke = q - 1;
      let field = -1;
      let childCtx = CTX_OTHER;
      if (ctx !== CTX_OTHER) {
        field = this.sEsc ? this.keyBySlowPath(ctx, ks, ke) : this.key(ctx, ks, ke - ks);
        if (ctx === CTX_TOP) childCtx = field === F_REQUEST ? CTX_REQUEST : field === F_RESP_HEADERS ? CTX_RESP_HEADERS : CTX_OTHER;
        else if (ctx === CTX_REQUEST && field === F_R_HEADERS) childCtx = CTX_REQ_HEADERS;
        else if (ctx === CTX_RESP_HEADERS && field !== F_RH_SERVER) this.respOther++;
      }
      q = this.ws(q);
      if (q >= this.lim) return this.failAt(q, 'unexpected end of input in an object');
      if (b[q] !== 0x3a) return this.failAt(q, 'expected :');
      q = this.ws(q + 1);
      if (q >= this.lim) return this.failAt(q, 'unexpected end of input in an object');
      q = this.value(q, childCtx, field, depth);
      if (q < 0) return -1;
      q = this.ws(q);
      if (q >= this.lim) return this.failAt(q, 'unexpected end of input in an object');
      const c = b[q];
      if (c === 0x2c) {
        q = this.ws(q + 1);
        continue;
      }
      if (c === 0x7d) return q + 1;
      return this.failAt(q, 'expected , or } in an object');
    }
  }

  /** Field id of key `b[s, s+len)` in `ctx`, or -1. */
  private key(ctx: number, s: number, len: number): number {
    const b = this.b;
    switch (ctx) {
      case CTX_TOP:
        switch (len) {
          case 2:
            return eq(b, s, K_TS) ? F_TS : -1;
          case 3:
            return eq(b, s, K_MSG) ? F_MSG : -1;
          case 4:
            return eq(b, s, K_SIZE) ? F_SIZE : -1;
          case 5:
            return eq(b, s, K_LEVEL) ? F_LEVEL : eq(b, s, K_ERROR) ? F_ERROR : -1;
          case 6:
            return eq(b, s, K_LOGGER) ? F_LOGGER : eq(b, s, K_STATUS) ? F_STATUS : -1;
          case 7:
            return eq(b, s, K_REQUEST) ? F_REQUEST : eq(b, s, K_USER_ID) ? F_USER_ID : -1;
          case 8:
            return eq(b, s, K_DURATION) ? F_DURATION : -1;
          case 12:
            return eq(b, s, K_RESP_HEADERS) ? F_RESP_HEADERS : -1;
          default:
            return -1;
        }
      case CTX_REQUEST:
        switch (len) {
          case 3:
            return eq(b, s, K_URI) ? F_R_URI : -1;
          case 4:
            return eq(b, s, K_HOST) ? F_R_HOST : -1;
          case 6:
            return eq(b, s, K_METHOD) ? F_R_METHOD : -1;
          case 7:
            return eq(b, s, K_HEADERS) ? F_R_HEADERS : -1;
          case 9:
            return eq(b, s, K_REMOTE_IP) ? F_R_REMOTE_IP : -1;
          case 11:
            return eq(b, s, K_REMOTE_PORT) ? F_R_REMOTE_PORT : eq(b, s, K_REMOTE_ADDR) ? F_R_REMOTE_ADDR : -1;
          default:
            return -1;
        }
      case CTX_REQ_HEADERS:
        switch (len) {
          case 6:
            return eqi(b, s, H_ORIGIN) ? F_H_ORIGIN : -1;
          case 10:
            return eqi(b, s, H_UA) ? F_H_UA : -1;
          case 13:
            return eqi(b, s, H_AUTH) ? F_H_AUTH : -1;
          case 14:
            return eqi(b, s, H_SID) ? F_H_SID : -1;
          case 20:
            return eqi(b, s, H_PV) ? F_H_PV : -1;
          default:
            return -1;
        }
      case CTX_RESP_HEADERS:
        switch (len) {
          case 6:
            return eqi(b, s, H_SERVER) ? F_RH_SERVER : -1;
          case 14:
            return eqi(b, s, H_SID) ? F_RH_SID : -1;
          case 16:
            return eqi(b, s, H_WWW_AUTH) ? F_RH_WWW_AUTH : -1;
          default:
            return -1;
        }
      default:
        return -1;
    }
  }

  /** A key written with escapes (e.g. "\u0074s"): decode and look it up. Rare. */
  private keyBySlowPath(ctx: number, s: number, e: number): number {
    const name = this.decode(s, e, 1);
    switch (ctx) {
      case CTX_TOP:
        return TOP_KEYS.get(name) ?? -1;
      case CTX_REQUEST:
        return REQUEST_KEYS.get(name) ?? -1;
      case CTX_REQ_HEADERS:
        return REQ_HEADER_KEYS.get(name.toLowerCase()) ?? -1;
      case CTX_RESP_HEADERS:
        return RESP_HEADER_KEYS.get(name.toLowerCase()) ?? -1;
      default:
        return -1;
    }
  }
}
