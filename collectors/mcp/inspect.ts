/**
 * Bounded inspection of MCP request and response bodies: what the collector
 * reads from JSON-RPC messages (JSON-RPC 2.0 §4–5; MCP Streamable HTTP
 * transport) without ever holding more than a fixed number of bytes per request.
 */

/** What the collector needs from a request body (one JSON-RPC message or a batch). */
export interface RequestSummary {
  /** `method` of the representative message ('' when none). */
  readonly method: string;
  /** JSON-RPC `id` as text ('' for notifications and responses). */
  readonly id: string;
  /** `params.name` when the method is `tools/call`. */
  readonly toolName: string;
  /** Number of messages (1 for a single message; the array length for a batch). */
  readonly batchSize: number;
  /** At least one message is a request (has `method` and `id`): the client awaits a response. */
  readonly expectsResponse: boolean;
  /** `params.clientInfo` of an `initialize` request. */
  readonly clientName: string;
  readonly clientVersion: string;
  /** `params.protocolVersion` of an `initialize` request. */
  readonly protocolVersion: string;
  /** `params.requestId` of a `notifications/cancelled` message, as text. */
  readonly cancelledRequestId: string;
}

/** What the collector learned from a response body (JSON or SSE). */
export interface ResponseFindings {
  /** JSON-RPC responses (`result` or `error` with an `id` member) seen. */
  responses: number;
  /** The first JSON-RPC error response seen. */
  firstError: { code: number | undefined; message: string } | undefined;
  /** A result with `isError: true` (a tool error, MCP `CallToolResult`). */
  toolError: boolean;
  /** `result.protocolVersion` (an `initialize` answer: the negotiated revision). */
  protocolVersion: string;
  /** More than the inspection limit was written; findings cover only the start. */
  truncated: boolean;
}

/** Body kinds the response tap understands. */
export type BodyKind = 'json' | 'sse' | 'skip';

const EMPTY_SUMMARY: RequestSummary = Object.freeze({
  method: '',
  id: '',
  toolName: '',
  batchSize: 0,
  expectsResponse: false,
  clientName: '',
  clientVersion: '',
  protocolVersion: '',
  cancelledRequestId: '',
});

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function idText(v: unknown): string {
  return typeof v === 'string' ? v.slice(0, 128) : typeof v === 'number' && Number.isFinite(v) ? String(v) : '';
}

function str(v: unknown, max = 256): string {
  return typeof v === 'string' ? v.slice(0, max) : '';
}

/**
 * Summarizes a parsed JSON-RPC request body. For a batch the representative
 * message is the first request (method and id), else the first message; the
 * collector records one arrival per HTTP request (see README "Batches").
 *
 * @returns undefined when `body` is not a JSON-RPC message or batch.
 */
export function summarizeRequest(body: unknown): RequestSummary | undefined {
  // Loops rather than find/some/filter with arrow functions: this runs per request.
  let messages: Record<string, unknown>[];
  if (Array.isArray(body)) {
    messages = [];
    for (const m of body) if (isRecord(m)) messages.push(m);
  } else if (isRecord(body)) messages = [body];
  else return undefined;
  if (messages.length === 0) return undefined;
  let main: Record<string, unknown> | undefined;
  let cancelled: Record<string, unknown> | undefined;
  for (const m of messages) {
    if (!main && isRequest(m)) main = m;
    if (!cancelled && m.method === 'notifications/cancelled') cancelled = m;
  }
  const expectsResponse = main !== undefined;
  main ??= messages[0]!;
  const method = str(main.method, 128);
  const params = isRecord(main.params) ? main.params : EMPTY_RECORD;
  const clientInfo = method === 'initialize' && isRecord(params.clientInfo) ? params.clientInfo : EMPTY_RECORD;
  const cancelledParams = cancelled && isRecord(cancelled.params) ? cancelled.params : EMPTY_RECORD;
  return {
    method,
    // a response the client sends (to the server's own request) has no method: its id
    // is the server's request's, not a request of the client's (a break-it pass)
    id: typeof main.method === 'string' ? idText(main.id) : '',
    toolName: method === 'tools/call' ? str(params.name) : '',
    batchSize: Array.isArray(body) ? body.length : 1,
    expectsResponse,
    clientName: str(clientInfo.name),
    clientVersion: str(clientInfo.version),
    protocolVersion: method === 'initialize' ? str(params.protocolVersion, 32) : '',
    cancelledRequestId: idText(cancelledParams.requestId),
  };
}

const EMPTY_RECORD: Readonly<Record<string, unknown>> = Object.freeze({});

/** A JSON-RPC request: has a `method` and a non-null `id` (the client awaits a response). */
function isRequest(m: Record<string, unknown>): boolean {
  return typeof m.method === 'string' && 'id' in m && m.id !== null;
}

/** An empty summary (no body, or a body that is not JSON-RPC). */
export function emptySummary(): RequestSummary {
  return EMPTY_SUMMARY;
}

/** Fresh, empty findings. */
export function emptyFindings(): ResponseFindings {
  return { responses: 0, firstError: undefined, toolError: false, protocolVersion: '', truncated: false };
}

/** Records what one parsed JSON-RPC message (or batch) says into `findings`. */
export function noteResponseMessage(findings: ResponseFindings, message: unknown): void {
  if (Array.isArray(message)) {
    for (const m of message) noteResponseMessage(findings, m);
    return;
  }
  if (!isRecord(message) || !('id' in message)) return;
  if ('error' in message && isRecord(message.error)) {
    findings.responses += 1;
    if (!findings.firstError) {
      const code = message.error.code;
      findings.firstError = {
        code: typeof code === 'number' && Number.isInteger(code) ? code : undefined,
        message: str(message.error.message),
      };
    }
  } else if ('result' in message) {
    findings.responses += 1;
    const result = message.result;
    if (isRecord(result)) {
      if (result.isError === true) findings.toolError = true;
      if (typeof result.protocolVersion === 'string' && !findings.protocolVersion) {
        findings.protocolVersion = result.protocolVersion.slice(0, 32);
      }
    }
  }
}

/**
 * Records what the text of one JSON-RPC message (or batch) says into `findings`,
 * like `noteResponseMessage(findings, JSON.parse(text))`, without parsing the
 * common case: a text with no `"method"`, `"error"`, `"isError"` or
 * `"protocolVersion"` anywhere — so none of them is a key at any depth — that is
 * an object with a `"result"` and an `"id"` is a successful response and needs
 * nothing else. (Inside a JSON string a quote is escaped, so the raw text only
 * holds `"name"` where `name` is a key or a whole string value; a string value
 * equal to one of those names only sends the text the slow way.) Tool results can be
 * large, so this saves parsing most answers. Returns false when `text` is not JSON.
 */
const NEEDS_PARSE = /"(?:error|method|isError|protocolVersion)"/;

export function noteResponseText(findings: ResponseFindings, text: string): boolean {
  if (
    text.charCodeAt(0) === 123 /* '{' */ &&
    text.includes('"result"') &&
    text.includes('"id"') &&
    !NEEDS_PARSE.test(text)
  ) {
    findings.responses += 1;
    return true;
  }
  let message: unknown;
  try {
    message = JSON.parse(text) as unknown;
  } catch {
    return false;
  }
  noteResponseMessage(findings, message);
  return true;
}

/** Decodes chunks handed to `write`/`end` (or emitted as `data`) as UTF-8 text, within a byte budget. */
class BoundedDecoder {
  private decoder: InstanceType<typeof TextDecoder> | undefined;
  /** The last chunk ended inside a multi-byte sequence: the rest is in the decoder. */
  private streaming = false;
  private remaining: number;
  truncated = false;

  constructor(limitBytes: number) {
    this.remaining = limitBytes;
  }

  /** Text of `chunk` within the budget; '' once exhausted. `encoding` as in `res.write(chunk, encoding)`. */
  decode(chunk: unknown, encoding?: unknown): string {
    if (this.remaining <= 0) {
      if (chunkLength(chunk) > 0) this.truncated = true;
      return '';
    }
    let bytes: Uint8Array;
    if (typeof chunk === 'string') {
      const enc = typeof encoding === 'string' && Buffer.isEncoding(encoding) ? encoding : 'utf8';
      if ((enc === 'utf8' || enc === 'utf-8') && chunk.length * 3 <= this.remaining) {
        // Fast path: a UTF-8 string that surely fits needs no copy.
        this.remaining -= Buffer.byteLength(chunk, 'utf8');
        return chunk;
      }
      bytes = Buffer.from(chunk, enc);
    } else if (chunk instanceof Uint8Array) {
      bytes = chunk;
    } else {
      return '';
    }
    if (bytes.byteLength > this.remaining) {
      bytes = bytes.subarray(0, this.remaining);
      this.truncated = true;
    }
    this.remaining -= bytes.byteLength;
    const n = bytes.byteLength;
    if (n === 0) return '';
    // Fast path: nothing held back and the chunk ends on an ASCII byte, so it ends
    // on a character boundary (the common case: one whole SSE event or JSON body).
    if (!this.streaming && bytes[n - 1]! < 0x80) return Buffer.from(bytes.buffer, bytes.byteOffset, n).toString('utf8');
    this.decoder ??= new TextDecoder('utf-8');
    this.streaming = bytes[n - 1]! >= 0x80;
    return this.decoder.decode(bytes, { stream: true });
  }
}

function chunkLength(chunk: unknown): number {
  return typeof chunk === 'string' ? chunk.length : chunk instanceof Uint8Array ? chunk.byteLength : 0;
}

/**
 * Accumulates a JSON body up to `limitBytes` and parses it once complete. A
 * body over the limit is never parsed (`truncated` is set instead).
 */
export class JsonBodyTap {
  /** Chunks as written (strings in UTF-8 or Buffers): decoded only when the text is asked for, which it often is not (the host parsed the body). */
  private parts: Array<string | Uint8Array> = [];
  private bytes = 0;
  private over = false;

  constructor(private readonly limitBytes: number) {}

  /** More than the limit was written: the body was not parsed. */
  get truncated(): boolean {
    return this.over;
  }

  /** Feeds one chunk (string with optional encoding, Buffer or Uint8Array). */
  write(chunk: unknown, encoding?: unknown): void {
    if (this.over) return;
    let part: string | Uint8Array;
    let size: number;
    if (typeof chunk === 'string') {
      const enc = typeof encoding === 'string' && Buffer.isEncoding(encoding) ? encoding : 'utf8';
      if (enc === 'utf8' || enc === 'utf-8') {
        part = chunk;
        // A UTF-8 string takes at most 3 bytes per UTF-16 unit: count exactly only near the limit.
        size = this.bytes + chunk.length * 3 <= this.limitBytes ? chunk.length : Buffer.byteLength(chunk, 'utf8');
      } else {
        part = Buffer.from(chunk, enc);
        size = part.byteLength;
      }
    } else if (chunk instanceof Uint8Array) {
      part = chunk;
      size = chunk.byteLength;
    } else return;
    if (size === 0) return;
    if (this.bytes + size > this.limitBytes) {
      this.over = true;
      this.parts = [];
      return;
    }
    this.bytes += size;
    this.parts.push(part);
  }

  /** The body text (UTF-8); undefined when empty or truncated. Consumes what was written. */
  text(): string | undefined {
    const parts = this.parts;
    if (this.over || parts.length === 0) return undefined;
    this.parts = [];
    if (parts.length === 1) {
      const only = parts[0]!;
      return typeof only === 'string' ? only : Buffer.from(only.buffer, only.byteOffset, only.byteLength).toString('utf8');
    }
    // Bytes are joined before decoding, so a character split across chunks survives.
    return Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : p))).toString('utf8');
  }

  /** The parsed body; undefined when empty, truncated or not JSON. */
  parse(): unknown {
    const text = this.text();
    if (text === undefined) return undefined;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return undefined;
    }
  }
}

/**
 * Incremental Server-Sent Events parser (WHATWG HTML "Server-sent events",
 * §9.2.6 interpretation): lines end with CRLF, LF or CR; `data:` lines of one
 * event are joined with LF; a blank line dispatches the event; `:` lines are
 * comments. Each dispatched `data` is parsed as one JSON-RPC message. Only the
 * first `limitBytes` of the stream are read, so a long-lived stream costs at most
 * that much memory; an event cut off by the limit is discarded.
 */
export class SseBodyTap {
  private readonly decoder: BoundedDecoder;
  private pending = '';
  private data: string[] = [];

  /**
   * @param onMessage gets each event's `data` parsed as JSON (events whose data is not JSON are skipped).
   * @param findings when given, each event's `data` goes to {@link noteResponseText} with
   *   these findings instead (mostly without parsing; no callback per response).
   */
  constructor(
    limitBytes: number,
    private readonly onMessage: ((message: unknown) => void) | undefined,
    private readonly findings?: ResponseFindings,
  ) {
    this.decoder = new BoundedDecoder(limitBytes);
  }

  /** The stream went past the limit: later events were not read. */
  get truncated(): boolean {
    return this.decoder.truncated;
  }

  /** Feeds one chunk as written to the response (string with optional encoding, Buffer or Uint8Array); dispatches complete events. */
  write(chunk: unknown, encoding?: unknown): void {
    const text = this.decoder.decode(chunk, encoding);
    if (!text) return;
    const buf = this.pending ? this.pending + text : text;
    let start = 0;
    if (buf.indexOf('\r') === -1) {
      // LF-only text (what the SDK writes): find the line ends natively instead of testing each character.
      for (let i = buf.indexOf('\n'); i !== -1; i = buf.indexOf('\n', start)) {
        this.line(buf.slice(start, i));
        start = i + 1;
      }
      this.pending = start === 0 ? buf : buf.slice(start);
      return;
    }
    for (let i = 0; i < buf.length; i++) {
      const c = buf.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      // A CR at the very end may be the first half of CRLF: wait for the next chunk.
      if (c === 13 && i === buf.length - 1) break;
      this.line(buf.slice(start, i));
      if (c === 13 && buf.charCodeAt(i + 1) === 10) i++;
      start = i + 1;
    }
    this.pending = buf.slice(start);
  }

  /** The stream ended: a final CR-terminated line still counts (a trailing CR was held back for a possible LF). */
  end(): void {
    if (this.pending.endsWith('\r')) {
      this.line(this.pending.slice(0, -1));
      this.pending = '';
    }
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length > 0) {
        const payload = this.data.length === 1 ? this.data[0]! : this.data.join('\n');
        this.data.length = 0;
        if (payload.trim() === '') return; // priming events carry empty data
        if (this.findings) {
          noteResponseText(this.findings, payload);
          return;
        }
        try {
          this.onMessage?.(JSON.parse(payload) as unknown);
        } catch {
          // not JSON: not a JSON-RPC message
        }
      }
      return;
    }
    if (line.charCodeAt(0) === 58 /* ':' */) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    if (field !== 'data') return;
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    this.data.push(value);
  }
}

/** The response body kind from `Content-Type` and `Content-Encoding` (encoded bodies are not inspected). */
export function responseBodyKind(contentType: string, contentEncoding: string): BodyKind {
  if (contentEncoding && contentEncoding.toLowerCase() !== 'identity') return 'skip';
  const ct = contentType.toLowerCase();
  if (ct.startsWith('text/event-stream')) return 'sse';
  // A missing Content-Type is tried as JSON: plain node:http handlers often omit it.
  if (ct === '' || ct.includes('json')) return 'json';
  return 'skip';
}
