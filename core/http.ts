/**
 * HTTP request rules the ingest gateway (ingest/gateway/app.ts) and the read API
 * (api/routes.ts) share, kept free of fastify so both apply them the same way.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { STATUS_CODES, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { parse as parseContentType } from 'content-type';
import { ContinuityError } from './errors.ts';

/**
 * The media type of a `Content-Type` value, `type/subtype` lowercased with its
 * parameters dropped (`Application/JSON; charset=UTF-8` → `application/json`);
 * RFC 9110 §8.3.1: type and subtype are case-insensitive. `''` when absent.
 */
export function mediaTypeOf(contentType: string | undefined): string {
  return contentTypeOf(contentType).type;
}

/**
 * A `Content-Type` value's media type (as {@link mediaTypeOf}) and `charset` parameter
 * (lowercased; undefined when absent), as the `content-type` package parses them (RFC
 * 9110 §8.3: quoted strings, case-insensitive names). Parameters that do not parse
 * (`application/json;`) leave the type read up to the first `;` and no charset.
 */
function contentTypeOf(contentType: string | undefined): { type: string; charset: string | undefined } {
  try {
    const parsed = parseContentType(contentType ?? '');
    return { type: parsed.type, charset: parsed.parameters.charset?.toLowerCase() };
  } catch {
    return { type: (contentType ?? '').split(';', 1)[0]!.trim().toLowerCase(), charset: undefined };
  }
}

/** Charsets a JSON body is read in: UTF-8, and US-ASCII, a subset of it. */
const UTF8_CHARSETS: ReadonlySet<string> = new Set(['utf-8', 'utf8', 'us-ascii']);

/**
 * Refuses a request whose body is of a media type the route does not take.
 * A request without a body passes (the route answers for the missing body); a
 * body without a `Content-Type` is refused like any other type, and a JSON body
 * declared in a charset other than UTF-8 too.
 * @param accepted lowercase media types the route parses, e.g. `['application/json']`.
 * @throws ContinuityError `CONT_ERR_UNSUPPORTED_MEDIA` (415, RFC 9110 §15.5.16)
 *   naming the accepted types in its message and in `details.accepted`, with the
 *   type sent in `details.contentType`.
 */
export function assertMediaType(headers: IncomingHttpHeaders, accepted: readonly string[]): void {
  const { type, charset } = contentTypeOf(headers['content-type']);
  // RFC 9112 §6.3: a request has a body when it has Transfer-Encoding or a non-zero Content-Length.
  const hasBody = headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0;
  // JSON is UTF-8 (RFC 8259 §8.1): a body declared in another charset would be read as
  // UTF-8 all the same, so it is refused (`charset=latin1` was taken: a break-it pass)
  if (charset !== undefined && !UTF8_CHARSETS.has(charset) && type.endsWith('json')) {
    throw new ContinuityError('CONT_ERR_UNSUPPORTED_MEDIA', `${type} in charset ${charset}; JSON is read as UTF-8 (RFC 8259 §8.1): send it in UTF-8, with charset=utf-8 or none`, {
      details: { contentType: headers['content-type'] ?? null, accepted: [...accepted] },
    });
  }
  if (accepted.includes(type) || (type === '' && !hasBody)) return;
  throw new ContinuityError('CONT_ERR_UNSUPPORTED_MEDIA', `${type || 'a body without Content-Type'}; this route accepts ${accepted.join(', ')}`, {
    details: { contentType: headers['content-type'] ?? null, accepted: [...accepted] },
  });
}

/**
 * Content codings a request body may be sent in (`Content-Encoding`); the body is
 * decoded before it is parsed (RFC 9110 §8.4). Any other coding is refused with
 * {@link unsupportedContentCodingError}.
 */
export const REQUEST_CONTENT_CODINGS = ['gzip', 'deflate'] as const;

/**
 * The answer to a body in a content coding the server does not decode: RFC 9110
 * §15.5.16 makes that a 415 as for an unsupported media type ("due to a content
 * coding that the origin server does not support"), so it shares that code, with the
 * coding named in the message and in `details`.
 * @param contentEncoding the `Content-Encoding` value sent, as sent.
 * @param accepted the codings the server decodes (default {@link REQUEST_CONTENT_CODINGS}).
 * @returns ContinuityError `CONT_ERR_UNSUPPORTED_MEDIA` (415) with
 *   `details: { contentEncoding, acceptedEncodings }`.
 */
export function unsupportedContentCodingError(contentEncoding: string, accepted: readonly string[] = REQUEST_CONTENT_CODINGS): ContinuityError {
  return new ContinuityError(
    'CONT_ERR_UNSUPPORTED_MEDIA',
    `Content-Encoding ${contentEncoding} is not decoded here; send the body in ${accepted.join(', ')} or unencoded`,
    { details: { contentEncoding, acceptedEncodings: [...accepted] } },
  );
}

/** The fields of an error the HTTP framework or one of its plugins raises (fastify's `FST_ERR_*`). */
export interface FrameworkError {
  readonly code?: string;
  readonly statusCode?: number;
  readonly message: string;
  /** Passed on as the coded error's `details` ({@link JsonBodyError}). */
  readonly details?: Record<string, unknown>;
}

/**
 * Turns an error the HTTP framework raised while reading a request (before or
 * while parsing its body) into the coded error both servers answer with, so the
 * ingest routes and the read API give the same status and code for the same fault:
 * - a body over the limit (`FST_ERR_CTP_BODY_TOO_LARGE`, or any 413) →
 *   `CONT_ERR_BODY_TOO_LARGE`, 413 Content Too Large (RFC 9110 §15.5.14), with
 *   `details.limitBytes`; the limit counts decoded bytes, so a gzip bomb is refused too;
 * - any other 415 → `CONT_ERR_UNSUPPORTED_MEDIA` (RFC 9110 §15.5.16);
 * - any other 4xx (malformed JSON, a forbidden key ({@link parseJsonBody}), a bad
 *   Content-Length, a body that does not inflate) → `CONT_ERR_BAD_REQUEST`, 400, with
 *   the error's message and, when it has them, its `details`.
 * @param bodyLimitBytes the route's body limit (fastify `request.routeOptions.bodyLimit`), bytes.
 * @returns the coded error, or undefined for a server error (5xx or no status):
 *   the caller logs it and answers 500.
 */
export function codedRequestError(err: FrameworkError, bodyLimitBytes: number): ContinuityError | undefined {
  if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || err.statusCode === 413) {
    return new ContinuityError('CONT_ERR_BODY_TOO_LARGE', `limit ${bodyLimitBytes} bytes`, { details: { limitBytes: bodyLimitBytes } });
  }
  if (err.statusCode === 415) return new ContinuityError('CONT_ERR_UNSUPPORTED_MEDIA', err.message);
  if (err.statusCode !== undefined && err.statusCode < 500) {
    return new ContinuityError('CONT_ERR_BAD_REQUEST', err.message, err.details ? { details: err.details } : {});
  }
  return undefined;
}

/**
 * Answers a connection whose request Node's HTTP parser refused (fastify's
 * `clientErrorHandler`, Node's `clientError` event) with the coded JSON shape both
 * servers answer everything else with, instead of fastify's uncoded default body:
 * - a request head over Node's limit (`HPE_HEADER_OVERFLOW`, 16 KiB unless
 *   `--max-http-header-size`) → `CONT_ERR_HEADERS_TOO_LARGE`, 431 (RFC 6585 §5);
 * - a request not whole within {@link REQUEST_TIMEOUT_MS} (`ERR_HTTP_REQUEST_TIMEOUT`)
 *   → `CONT_ERR_REQUEST_TIMEOUT`, 408 (RFC 9110 §15.5.9);
 * - anything else the parser refused (a malformed request line, a bad header) →
 *   `CONT_ERR_BAD_REQUEST`, 400, with the parser's code in `details.parserCode`.
 * The connection is closed after the answer, as Node does (the parser cannot find
 * the next request's start); a socket already reset or destroyed gets nothing.
 * @param err the parser's error (`code`: Node's `HPE_*` or `ERR_HTTP_*`).
 * @param socket the client's connection.
 */
export function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const coded =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? new ContinuityError('CONT_ERR_HEADERS_TOO_LARGE', 'the request line and headers exceed what the server reads', { details: { parserCode: err.code } })
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new ContinuityError('CONT_ERR_REQUEST_TIMEOUT', `the request was not whole within ${REQUEST_TIMEOUT_MS / 1000} s`, { details: { timeoutMs: REQUEST_TIMEOUT_MS } })
        : new ContinuityError('CONT_ERR_BAD_REQUEST', `not a well-formed HTTP/1.1 request (${err.code ?? err.message})`, { details: { parserCode: err.code ?? null } });
  answerOnSocket(socket, coded);
}

/** Writes `err` as a whole coded answer on a raw socket and closes it (no response object exists for it). */
function answerOnSocket(socket: Socket, err: ContinuityError): void {
  const body = JSON.stringify(err.toJSON());
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${err.httpStatus} ${STATUS_CODES[err.httpStatus] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/**
 * Writes `err` as a whole coded answer on a response no framework answers (its head not
 * yet sent), `Connection: close`, plus `headers`; `written` runs once it is out.
 */
function answerOnResponse(res: ServerResponse, err: ContinuityError, headers: Record<string, string> = {}, written?: () => void): void {
  const body = JSON.stringify(err.toJSON());
  res.writeHead(err.httpStatus, { ...headers, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close' });
  res.end(body, written);
}

/**
 * Answers, in the coded JSON shape, the requests Node's HTTP server refuses before
 * the framework sees them (a bare status with no body, or a closed connection; found
 * by a break-it pass). Call once on the server both apps listen with:
 * - an `Expect` other than `100-continue` → `CONT_ERR_EXPECTATION_FAILED`, 417
 *   (RFC 9110 §10.1.1: the server cannot meet it);
 * - a CONNECT request (RFC 9110 §9.3.6: a tunnel) → `CONT_ERR_NOT_FOUND`, 404, as any
 *   method no route takes; the connection is closed.
 * A request without `Host` is refused by {@link missingHostError}, with the server
 * created with `requireHostHeader: false` (Node's own refusal is a bare 400).
 */
export function answerRefusedRequests(server: Server): void {
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const err = new ContinuityError('CONT_ERR_EXPECTATION_FAILED', `Expect: ${JSON.stringify(req.headers.expect ?? '')}`, {
      details: { expect: req.headers.expect ?? '' },
    });
    answerOnResponse(res, err);
  });
  server.on('connect', (req: IncomingMessage, socket: Socket) => {
    answerOnSocket(socket, new ContinuityError('CONT_ERR_NOT_FOUND', `CONNECT ${req.url ?? ''}`, { details: { method: 'CONNECT', url: req.url ?? '' } }));
  });
}

/**
 * The refusal of an HTTP/1.1 request without a `Host` header (RFC 9112 §3.2: a server
 * must answer 400): `CONT_ERR_BAD_REQUEST`, coded, for an onRequest hook; undefined
 * when the request has one or is HTTP/1.0 (which may omit it).
 */
export function missingHostError(req: IncomingMessage): ContinuityError | undefined {
  if (req.headers.host !== undefined || !(req.httpVersionMajor === 1 && req.httpVersionMinor >= 1)) return undefined;
  return new ContinuityError('CONT_ERR_BAD_REQUEST', 'an HTTP/1.1 request must carry a Host header (RFC 9112 §3.2)', { details: { header: 'host' } });
}

/**
 * The answer to a request the framework refuses before routing it (fastify's
 * `frameworkErrors`: a path whose percent-escapes do not decode as UTF-8, such as
 * `/api/queries/%ff`, `FST_ERR_BAD_URL`): `CONT_ERR_BAD_REQUEST`, 400, in the coded
 * shape (fastify's own body had no code; a break-it pass).
 * @param err the framework's error (its message names the path).
 */
export function badUrlError(err: FrameworkError): ContinuityError {
  return new ContinuityError('CONT_ERR_BAD_REQUEST', `the request's path does not decode (percent-escapes must spell UTF-8, RFC 3986 §2.1): ${err.message}`, {
    details: { frameworkCode: err.code ?? null },
  });
}

/** An error while reading a JSON request body, in the framework-error shape {@link codedRequestError} maps (400). */
export class JsonBodyError extends Error {
  override readonly name = 'JsonBodyError';
  readonly statusCode = 400;
  constructor(
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

// The spellings secure-json-parse (fastify's default JSON parser) looks for: a quoted key,
// possibly with \u escapes. Only a body that matches is scanned, so the common body costs one regex test.
const SUSPECT_PROTO = /"(?:_|\\u005[Ff])(?:_|\\u005[Ff])(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])(?:t|\\u0074)(?:o|\\u006[Ff])(?:_|\\u005[Ff])(?:_|\\u005[Ff])"\s*:/;
const SUSPECT_CONSTRUCTOR = /"(?:c|\\u0063)(?:o|\\u006[Ff])(?:n|\\u006[Ee])(?:s|\\u0073)(?:t|\\u0074)(?:r|\\u0072)(?:u|\\u0075)(?:c|\\u0063)(?:t|\\u0074)(?:o|\\u006[Ff])(?:r|\\u0072)"\s*:/;

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Decodes a request body as UTF-8 (RFC 8259 §8.1: JSON text exchanged between systems
 * is UTF-8), refusing invalid bytes: decoded with replacement, a byte such as 0xFF in
 * a user agent was stored as U+FFFD under a 200 (found by a break-it pass).
 * @throws JsonBodyError (400, `CONT_ERR_BAD_REQUEST`) when the bytes are not UTF-8
 */
export function decodeUtf8Body(body: Buffer): string {
  try {
    return STRICT_UTF8.decode(body);
  } catch {
    throw new JsonBodyError('the body is not valid UTF-8 (RFC 8259 §8.1: JSON is exchanged as UTF-8); send its text encoded as UTF-8');
  }
}

/**
 * Parses a JSON request body (RFC 8259; a leading byte-order mark is skipped) with the
 * prototype-poisoning protection of fastify's default parser, but saying what is wrong
 * instead of "Body is not valid JSON": a key named `__proto__`, or a `constructor` key
 * whose value is an object with a `prototype` key, anywhere in the body, refuses the
 * body, and the message names the key and where it is (`$[0].attrs`). Such keys could
 * reach an object's prototype in code that copies the body's fields. The scan runs only
 * on bodies that contain such a key as text, and is iterative (no depth limit).
 * @throws JsonBodyError (400; `codedRequestError` makes it `CONT_ERR_BAD_REQUEST`) for an
 *   empty body, text that is not JSON (the parser's message), or a forbidden key
 *   (`details: { key, path }`).
 */
export function parseJsonBody(text: string): unknown {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  if (body.length === 0) throw new JsonBodyError('the body is empty; send a JSON value');
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (err) {
    throw new JsonBodyError(`the body is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null) return value;
  const proto = SUSPECT_PROTO.test(body);
  const ctor = SUSPECT_CONSTRUCTOR.test(body);
  if (!proto && !ctor) return value;
  const nodes: object[] = [value];
  const paths: string[] = ['$'];
  while (nodes.length > 0) {
    const node = nodes.pop()! as Record<string, unknown>;
    const path = paths.pop()!;
    if (proto && Object.hasOwn(node, '__proto__')) throw forbiddenKey('__proto__', path);
    if (ctor && Object.hasOwn(node, 'constructor')) {
      const c = node.constructor;
      if (typeof c === 'object' && c !== null && Object.hasOwn(c, 'prototype')) throw forbiddenKey('constructor', path);
    }
    const isArray = Array.isArray(node);
    for (const key of Object.keys(node)) {
      const child = node[key];
      if (typeof child === 'object' && child !== null) {
        nodes.push(child);
        paths.push(isArray ? `${path}[${key}]` : `${path}.${key}`);
      }
    }
  }
  return value;
}

function forbiddenKey(key: '__proto__' | 'constructor', path: string): JsonBodyError {
  const what = key === '__proto__' ? 'a "__proto__" key' : 'a "constructor" key holding a "prototype" key';
  return new JsonBodyError(
    `the body has ${what} at ${path}; keys named __proto__, and constructor keys holding a prototype key, are refused (prototype-poisoning protection): rename the key`,
    { key, path },
  );
}

/**
 * Builds the check of an `Authorization` value against the one accepted bearer
 * token: credentials = auth-scheme 1*SP token (RFC 9110 §11.6.2), the scheme
 * `Bearer` in any case (RFC 9110 §11.1: auth schemes are case-insensitive; RFC
 * 6750 §2.1), the token byte for byte (it is case-sensitive).
 * The token is compared in constant time over SHA-256 digests, so the time taken
 * tells neither how much of it matched nor its length.
 * @returns a function that is true when the header (the raw value, or undefined when absent) carries the token.
 */
export function createBearerCheck(token: string): (authorization: string | undefined) => boolean {
  const expected = sha256(token);
  return (authorization) => {
    const c = credentials(authorization);
    // Compared even when the scheme is wrong, so the scheme alone does not shorten the time.
    const tokenOk = timingSafeEqual(sha256(c?.token ?? ''), expected);
    return c?.bearer === true && tokenOk;
  };
}

/**
 * An `Authorization` value split as credentials = auth-scheme 1*SP token (RFC 9110
 * §11.6.2); `bearer`: the scheme is `Bearer`, in any case (RFC 9110 §11.1). Undefined
 * when absent or not of that form.
 */
function credentials(authorization: string | undefined): { bearer: boolean; token: string } | undefined {
  const m = /^(\S+) +(.*)$/s.exec(authorization ?? '');
  return m === null ? undefined : { bearer: m[1]!.toLowerCase() === 'bearer', token: m[2]! };
}

/**
 * The 401 for a request {@link createBearerCheck} refused, saying which way it
 * failed: no `Authorization` header, a credential of another scheme, or another
 * token. `details.error` is RFC 6750 §3.1's code for the last (`invalid_token`);
 * a request without credentials gets none (RFC 6750 §3.1: "SHOULD NOT include an
 * error code").
 * @returns ContinuityError CONT_ERR_UNAUTHORIZED (401)
 */
export function unauthorized(authorization: string | undefined): ContinuityError {
  if (authorization === undefined || authorization.trim() === '') return new ContinuityError('CONT_ERR_UNAUTHORIZED', 'no Authorization header');
  const c = credentials(authorization);
  if (!c?.bearer || c.token === '') {
    return new ContinuityError('CONT_ERR_UNAUTHORIZED', 'the Authorization header is not a Bearer credential (`Bearer <token>`)');
  }
  return new ContinuityError('CONT_ERR_UNAUTHORIZED', 'the bearer token does not match the one this server was started with', { details: { error: 'invalid_token' } });
}

/** The WWW-Authenticate value for a 401 (RFC 6750 §3): the realm, and the error code when the request carried a token. */
export function bearerChallenge(realm: string, err: ContinuityError): string {
  return err.details.error === 'invalid_token' ? `Bearer realm="${realm}", error="invalid_token"` : `Bearer realm="${realm}"`;
}

function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/**
 * The HTTP servers' request timeout, ms: a request whose head and body have not
 * arrived within it is answered 408 and its connection closed (Node's
 * `server.requestTimeout`; fastify's default 0 turns Node's 300 s off). Without it a
 * client sending its body a byte at a time held a connection, and the shutdown that
 * waits for it, for as long as it liked (found by a break-it pass).
 */
export const REQUEST_TIMEOUT_MS = 60_000;

/** How long a shutdown waits for requests in flight before it closes their connections, ms. */
export const CLOSE_GRACE_MS = 10_000;

/** The open sockets, and the responses not yet finished, of each server {@link trackConnections} was given. */
const OPEN = new WeakMap<object, { sockets: Set<Socket>; responses: Set<ServerResponse> }>();

/**
 * Starts counting a server's open connections and unfinished responses, for
 * {@link closeWithin}: call it on a fastify app's `server` before it listens.
 */
export function trackConnections(server: Server): void {
  const open = { sockets: new Set<Socket>(), responses: new Set<ServerResponse>() };
  OPEN.set(server, open);
  server.on('connection', (socket: Socket) => {
    open.sockets.add(socket);
    socket.once('close', () => open.sockets.delete(socket));
  });
  server.on('request', (_req: IncomingMessage, res: ServerResponse) => {
    open.responses.add(res);
    res.once('close', () => open.responses.delete(res));
  });
  // Node's closeIdleConnections (server.close() calls it, and fastify's close) takes a
  // response whose end() was called as done, and destroyed its connection while the body
  // was still being written to a slow reader: a 20 MB answer was cut at 5 MB under its
  // Content-Length, 0.3 s after SIGTERM (a break-it pass). Such a connection is ended
  // once its body is out instead (the grace's deadline still bounds it).
  const closeIdle = server.closeIdleConnections;
  server.closeIdleConnections = function (this: Server): void {
    const restore: Array<() => void> = [];
    for (const res of open.responses) {
      const socket = res.socket;
      if (!res.writableEnded || res.writableFinished || !socket || socket.destroyed) continue;
      const destroy = socket.destroy;
      socket.destroy = function (this: Socket) {
        res.once('finish', () => socket.end());
        return this;
      } as Socket['destroy'];
      restore.push(() => (socket.destroy = destroy));
    }
    try {
      closeIdle.call(this);
    } finally {
      for (const undo of restore) undo();
    }
  };
}

/**
 * Closes a fastify app: stops listening and waits for the connections still open
 * (requests in flight) to end, for at most `graceMs`; then answers each request still
 * without a response 503 `CONT_ERR_SHUTDOWN` (retriable, `Connection: close`) and
 * destroys the connections still open. fastify's `close()` waits for a request still
 * arriving, and a client that sent its body a byte at a time held the shutdown for as
 * long as it kept sending (found by a break-it pass); a statement or canary report
 * still running at the deadline was cut off with no answer at all (another). The
 * connections are counted by {@link trackConnections} (without it, only `close()` is
 * awaited). An ingest request answered 503 was not acknowledged, so its client sends
 * it again.
 * @param app the app (fastify 5)
 * @param graceMs the wait, ms (default {@link CLOSE_GRACE_MS})
 * @throws whatever `app.close()` rejects with
 */
export async function closeWithin(app: { close(): PromiseLike<unknown>; server: object }, graceMs = CLOSE_GRACE_MS): Promise<void> {
  const open = OPEN.get(app.server) ?? { sockets: new Set<Socket>(), responses: new Set<ServerResponse>() };
  const deadline = setTimeout(() => {
    const err = new ContinuityError('CONT_ERR_SHUTDOWN', `the server stopped before this request finished (it waited ${graceMs / 1000} s for it)`, { details: { graceMs } });
    // the connections with a response still going: the others go now
    const answering = new Set<Socket>();
    for (const res of open.responses) {
      const socket = res.socket;
      if (socket) answering.add(socket);
      if (res.headersSent || res.writableEnded) continue;
      // (the socket goes once the answer is written: a destroy now could cut it off)
      answerOnResponse(res, err, { 'retry-after': '1' }, () => socket?.destroy());
    }
    for (const s of open.sockets) if (!answering.has(s)) s.destroy();
    // whatever did not take its answer within a second goes too
    setTimeout(() => {
      for (const s of open.sockets) s.destroy();
    }, 1000).unref();
  }, graceMs);
  deadline.unref();
  try {
    await app.close();
    // close() may also resolve with a connection still open: wait for it as well
    await Promise.all([...open.sockets].map((s) => (s.destroyed ? undefined : new Promise<void>((resolve) => s.once('close', () => resolve())))));
  } finally {
    clearTimeout(deadline);
  }
}

/** True for a host name or address that only this machine reaches: localhost (and *.localhost), 127.0.0.0/8, ::1; brackets allowed. */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h.endsWith('.localhost') || /^127(\.\d{1,3}){3}$/.test(h) || h === '::1' || h === '0:0:0:0:0:0:0:1';
}

/**
 * For a server on a loopback address with no bearer token: the error for a request
 * whose `Host` header names anything but loopback, a page's DNS name resolved to
 * 127.0.0.1 (DNS rebinding; the MCP transport spec asks local servers to guard against
 * it the same way). No Host (HTTP/1.0) is let through: a browser always sends one.
 * @returns CONT_ERR_HOST_REFUSED (421, RFC 9110 §15.5.20), or undefined when the Host is loopback or absent.
 */
export function foreignHostError(hostHeader: string | undefined): ContinuityError | undefined {
  if (hostHeader === undefined || hostHeader === '') return undefined;
  const name = hostHeader.startsWith('[') ? hostHeader.slice(0, hostHeader.indexOf(']') + 1) : hostHeader.replace(/:\d*$/, '');
  if (isLoopbackHost(name)) return undefined;
  return new ContinuityError('CONT_ERR_HOST_REFUSED', `Host ${JSON.stringify(hostHeader.slice(0, 200))}`, { details: { host: hostHeader.slice(0, 200) } });
}
