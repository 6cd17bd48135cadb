import fastifyCompress from '@fastify/compress';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { ContinuityError, isContinuityError, type ErrorCode } from '../../core/errors.ts';
import {
  answerClientError,
  answerRefusedRequests,
  missingHostError,
  badUrlError,
  assertMediaType,
  codedRequestError,
  bearerChallenge,
  createBearerCheck,
  unauthorized,
  decodeUtf8Body,
  parseJsonBody,
  REQUEST_CONTENT_CODINGS,
  REQUEST_TIMEOUT_MS,
  trackConnections,
  unsupportedContentCodingError,
} from '../../core/http.ts';
import { parseEvent, type ContinuityEvent, type EventIssue, type ParseResult } from '../../schema/index.ts';
import type { Retention } from '../../store/index.ts';
import { decodeOtlpJson, decodeOtlpProtobuf, encodeOtlpResponse, MAX_RECORDS_PER_REQUEST, OtlpShapeError, OtlpTooManyRecords, type OtlpLogRecord } from './otlp.ts';

/** Media types `POST /v1/logs` takes: OTLP/HTTP JSON or protobuf (both protobuf names have a parser). */
const OTLP_MEDIA_TYPES = ['application/json', 'application/x-protobuf', 'application/protobuf'] as const;
/** Media types `POST /v1/events` takes. */
const JSON_MEDIA_TYPES = ['application/json'] as const;

/**
 * An event a sink refused for good: sending it again cannot help, so the gateway
 * reports it at its index like an invalid event, and the request's other events stay
 * taken.
 */
export interface EventRefusal {
  /** Index in the array given to {@link EventSink.accept}. */
  readonly index: number;
  /**
   * Why, with path `''` and code `too_large` (more bytes than the transport carries:
   * the message names the size and the limit) or `kafka_refused` (the broker refused
   * the record itself; the message names its error).
   */
  readonly issue: EventIssue;
}

/** Where accepted events go: the batching writer (embedded) or a Kafka producer. */
export interface EventSink {
  /**
   * Takes validated events. Resolves once they are taken (queued for writing, or
   * acknowledged by Kafka; backpressure is applied by awaiting), with the events it
   * refused for good, if any: every other event was taken. Rejects with a retriable
   * ContinuityError when the pipeline cannot take them (the gateway answers 503
   * with Retry-After); some of them may have been taken all the same.
   */
  accept(events: readonly ContinuityEvent[]): Promise<readonly EventRefusal[] | void>;
  /** False while the sink cannot take events (readiness probe). */
  ready(): boolean;
  /** Why the sink is not ready, for the 503's message (e.g. the store's disk is full), when it knows. */
  unreadyReason?(): string | undefined;
  /**
   * The retention of the store the sink writes to, when the sink writes it itself (the
   * in-process transport of `serve`): events older than it are refused in the answer,
   * per index, with the issue `expired` (the TTL would drop them unseen). A Kafka
   * producer does not know the store; there the consumer dead-letters them as `expired`.
   */
  retention?(): Promise<Retention>;
}

/** Maps one OTLP log record onto a contract event input, or the several it carries (DESIGN §3 attribute mapping). */
export type OtlpRecordMapper = (record: OtlpLogRecord) => unknown | unknown[];

export interface GatewayOptions {
  sink: EventSink;
  mapOtlpRecord: OtlpRecordMapper;
  /** When set, POST routes require `Authorization: Bearer <token>` (scheme in any case, RFC 9110 §11.1). */
  bearerToken?: string | undefined;
  /** Largest accepted body after decompression, bytes (default 10 MiB). */
  maxBodyBytes?: number;
  /** Current time in µs (tests); events more than 1 h ahead are refused. */
  nowMicros?: () => number;
  logger?: boolean;
}

/** One refused record in a response: its index in the request and why. */
export interface RejectedRecord {
  index: number;
  issues: EventIssue[];
}

/** Gateway counters, for /readyz and status. */
export interface GatewayStats {
  /** Ingest requests that reached their handler. */
  requests: number;
  /** Events the sink took (a request answered 503 adds none). */
  accepted: number;
  /** Events refused for good: invalid or expired (with an issue; `rejectedByCode` counts the issues by code), or refused by the sink (too large, refused by Kafka). */
  rejected: number;
  /** `rejected` by issue code (an invalid event counts once per issue). */
  rejectedByCode: Record<string, number>;
  /**
   * Ingest requests answered 503 with Retry-After, as their clients got them: the sink
   * was not ready or refused them, or the gateway was shutting down.
   */
  unavailable: number;
  /** Valid events in those requests; a request refused while shutting down is refused before its body is read and adds none. */
  unavailableEvents: number;
}

/** The routes whose 503s count in {@link GatewayStats.unavailable}. */
const INGEST_ROUTES: ReadonlySet<string> = new Set(['/v1/logs', '/v1/events']);

/**
 * Builds the ingest gateway (fastify):
 * - `POST /v1/logs` — OTLP/HTTP logs (protobuf or JSON, optionally gzip), each
 *   record mapped onto the event contract; per the OTLP spec, records that fail
 *   validation are reported as `partialSuccess.rejectedLogRecords` with 200, and the
 *   valid records of the same request are kept; a record that carries two events (an
 *   `exchange`: arrival and settlement) is stored whole or not at all. A body that is not an
 *   ExportLogsServiceRequest at all is a 400.
 *   A record with an attribute value or body nested more than `MAX_NESTING_DEPTH`
 *   (64) arrays and kvlists deep (protobuf: more than the decoder's 100 nested
 *   messages) is refused as `too_deep`, one with an attribute named `__proto__` as
 *   `forbidden_key` (otlp.ts); neither fails the request.
 * - `POST /v1/events` — a JSON array of contract events (or `{ "events": [...] }`);
 *   answers `{ accepted }` (and `duplicates`: copies of an event_id already in the
 *   request, counted in `accepted` and stored once); valid events are kept, and when any is invalid the answer is 400 listing each
 *   refused index with its coded issues (DESIGN §3; codes: schema `parseEvent`):
 *   `CONT_ERR_EVENT_INVALID`, or `CONT_ERR_EVENT_EXPIRED` when every refused event is
 *   only older than the store's retention (issue `expired`; checked when the sink has a
 *   retention, see {@link EventSink}).
 * - JSON bodies (both routes, and the read API under /api) are parsed by core/http.ts
 *   `parseJsonBody`: a `__proto__` key (or a `constructor` key holding `prototype`)
 *   anywhere refuses the whole body with 400 `CONT_ERR_BAD_REQUEST` naming the key
 *   and its place (`details.key`, `details.path`).
 * - Events the sink refuses for good ({@link EventRefusal}: more bytes than Kafka
 *   carries, or a record the broker refuses) are listed the same way, issue code
 *   `too_large` or `kafka_refused`: on `/v1/events` a 400 (`CONT_ERR_EVENT_TOO_LARGE`
 *   or `CONT_ERR_EVENT_REFUSED` when no event was invalid), or 413
 *   `CONT_ERR_EVENT_TOO_LARGE` when every event of the request was refused for its
 *   size; on `/v1/logs` partial success as for invalid records. Neither is retriable.
 * - Either route refuses a request of more than {@link MAX_RECORDS_PER_REQUEST} records or
 *   events whole, before decoding them: 413 `CONT_ERR_BODY_TOO_LARGE`
 *   (`details.limitRecords`). A `/v1/events` answer lists the first
 *   {@link REJECTED_LISTED} refused inputs (`rejected`) and counts them all (`rejected_count`).
 * - `GET /healthz` (process up) and `GET /readyz` (sink ready).
 * Errors are `{ code, message, fix, details }` with the registry's status: 400
 * malformed, 401 missing token, 404 unknown method and path (`CONT_ERR_NOT_FOUND`,
 * also for routes other plugins add under this app), 413 a body over
 * `maxBodyBytes` once decoded (`CONT_ERR_BODY_TOO_LARGE`, RFC 9110 §15.5.14;
 * `details.limitBytes`), 415 a body of a media type the route does not take or in
 * a content coding other than gzip and deflate (`CONT_ERR_UNSUPPORTED_MEDIA`, RFC
 * 9110 §15.5.16; the message and `details.accepted` or
 * `details.acceptedEncodings` name what it takes), 503 with Retry-After when the
 * pipeline cannot take events (`CONT_ERR_INGEST_UNAVAILABLE`) or the server is
 * closing (`CONT_ERR_SHUTDOWN`: a request that still arrives on an open keep-alive
 * connection while `close` drains; counted in {@link GatewayStats.unavailable}). The mapping
 * of the framework's own errors is core/http.ts `codedRequestError`, which the
 * read API under /api uses too.
 */
export async function createGateway(options: GatewayOptions): Promise<{ app: FastifyInstance; stats: Readonly<GatewayStats> }> {
  const maxBodyBytes = options.maxBodyBytes ?? 10 * 1024 * 1024;
  const stats: GatewayStats = { requests: 0, accepted: 0, rejected: 0, rejectedByCode: {}, unavailable: 0, unavailableEvents: 0 };
  // fastify's own 503 while closing has no code, no Retry-After and no count: the
  // onRequest hook below answers instead.
  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: maxBodyBytes,
    return503OnClosing: false,
    requestTimeout: REQUEST_TIMEOUT_MS,
    // (Node's refusal of a request without Host is a bare 400: registerConnectionRules answers it)
    http: { requireHostHeader: false },
    clientErrorHandler: answerClientError,
    frameworkErrors: (err, _req, reply) => {
      const coded = badUrlError(err);
      void (reply as unknown as FastifyReply).status(coded.httpStatus).send(coded.toJSON());
    },
  });
  registerConnectionRules(app);
  const now = options.nowMicros ?? (() => Date.now() * 1000);
  const bearerOk = options.bearerToken ? createBearerCheck(options.bearerToken) : undefined;

  await registerRequestBodies(app);
  app.addContentTypeParser(['application/x-protobuf', 'application/protobuf'], { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  const notFound = (req: FastifyRequest, reply: FastifyReply): FastifyReply =>
    sendError(reply, new ContinuityError('CONT_ERR_NOT_FOUND', `${req.method} ${req.url}`, { details: { method: req.method, url: req.url } }));

  app.setErrorHandler((err: FastifyError | ContinuityError, req, reply) => {
    if (isContinuityError(err)) {
      if (err.httpStatus === 503 && INGEST_ROUTES.has(req.routeOptions.url ?? '')) stats.unavailable++;
      return sendError(reply, err);
    }
    // fastify parses the body before it finds there is no route: a bad body there is still a 404.
    if (req.is404) return notFound(req, reply);
    const coded = codedRequestError(err, req.routeOptions.bodyLimit);
    if (coded) return sendError(reply, coded);
    app.log.error(err);
    return reply.status(500).send({ code: 'INTERNAL', message: 'internal error' });
  });

  // Unknown routes answer in the coded error shape too, not fastify's default 404 body;
  // plugins registered on this app (the read API under /api) inherit the handler.
  app.setNotFoundHandler(notFound);

  // While `close` waits for open requests, a keep-alive connection may still bring a
  // new one (fastify answers it with `Connection: close`): refuse it as a coded,
  // counted 503, on every route (the read API under /api inherits the hook).
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', async () => {
    if (closing) throw new ContinuityError('CONT_ERR_SHUTDOWN', 'the server is closing');
  });

  const authorize = async (req: FastifyRequest): Promise<void> => {
    if (bearerOk && !bearerOk(req.headers.authorization)) throw unauthorized(req.headers.authorization);
  };

  // After authorize, so a caller without the token learns nothing about the route.
  const accepts = (types: readonly string[]) => async (req: FastifyRequest): Promise<void> => assertMediaType(req.headers, types);

  const countRejected = (issues: readonly EventIssue[]): void => {
    for (const i of issues) stats.rejectedByCode[i.code] = (stats.rejectedByCode[i.code] ?? 0) + 1;
  };

  /** The valid events, the invalid inputs, and where each valid event sits in `inputs`. */
  const validate = async (inputs: readonly unknown[]): Promise<{ events: ContinuityEvent[]; rejected: RejectedRecord[]; inputIndex: number[] }> => {
    const events: ContinuityEvent[] = [];
    const inputIndex: number[] = [];
    const rejected: RejectedRecord[] = [];
    const nowMicros = now();
    const retention = inputs.length > 0 ? await options.sink.retention?.() : undefined;
    const cutoff = retention ? retention.cutoffMicros(nowMicros / 1000) : Number.NEGATIVE_INFINITY;
    inputs.forEach((input, index) => {
      let r: ParseResult;
      try {
        r = parseEvent(input, { nowMicros });
      } catch (err) {
        // parseEvent does not throw for any JSON value; should it anyway, this event is
        // refused, not the request with the valid events in it (DESIGN §5).
        app.log.error(err);
        r = { ok: false, issues: [{ path: '', code: 'validation_failed', message: `validation failed: ${(err as Error)?.name}: ${(err as Error)?.message}` }] };
      }
      if (r.ok && r.event.ts < cutoff) r = { ok: false, issues: [{ path: 'ts', code: 'expired', message: retention!.explain(r.event.ts, cutoff) }] };
      if (r.ok) {
        events.push(r.event);
        inputIndex.push(index);
      } else {
        rejected.push({ index, issues: r.issues });
        countRejected(r.issues);
      }
    });
    stats.rejected += rejected.length;
    return { events, rejected, inputIndex };
  };

  /** Hands `events` to the sink; @returns the ones it refused for good, at their index in the inputs. */
  const deliver = async (events: ContinuityEvent[], inputIndex: readonly number[]): Promise<RejectedRecord[]> => {
    if (events.length === 0) return [];
    let refusals: readonly EventRefusal[] | void;
    try {
      if (!options.sink.ready()) throw new ContinuityError('CONT_ERR_INGEST_UNAVAILABLE', options.sink.unreadyReason?.() ?? 'the sink is not ready');
      refusals = await options.sink.accept(events);
    } catch (err) {
      if (isContinuityError(err) && err.httpStatus === 503) stats.unavailableEvents += events.length;
      throw err;
    }
    const refused = (refusals ?? []).map((r) => ({ index: inputIndex[r.index]!, issues: [r.issue] }));
    for (const r of refused) countRejected(r.issues);
    stats.accepted += events.length - refused.length;
    stats.rejected += refused.length;
    return refused;
  };

  app.get('/healthz', async () => ({ status: 'ok' }));
  // The probes answer without the token (a load balancer's or an orchestrator's
  // probe may not carry it); /readyz's counters only to a request that has it.
  app.get('/readyz', async (req, reply) => {
    const ready = options.sink.ready();
    const reason = ready ? undefined : options.sink.unreadyReason?.();
    const counters = !bearerOk || bearerOk(req.headers.authorization) ? stats : {};
    return reply.status(ready ? 200 : 503).send({ status: ready ? 'ready' : 'unavailable', ...(reason ? { reason } : {}), ...counters });
  });

  app.post('/v1/logs', { onRequest: [authorize, accepts(OTLP_MEDIA_TYPES)] }, async (req, reply) => {
    stats.requests++;
    const protobufRequest = Buffer.isBuffer(req.body);
    let records: OtlpLogRecord[];
    try {
      records = protobufRequest ? decodeOtlpProtobuf(req.body as Buffer) : decodeOtlpJson(req.body);
    } catch (err) {
      if (err instanceof OtlpShapeError) throw new ContinuityError('CONT_ERR_BAD_REQUEST', err.message);
      if (err instanceof OtlpTooManyRecords) throw tooManyRecords('log records', err.count);
      throw err;
    }
    // A record may carry several events (the collector's `exchange` record: arrival +
    // settlement); a record is rejected when any of its events is, and then none of its
    // events is stored (an exchange's arrival stored without its refused settlement was
    // an arrival never settled, counted unsettled at its boot's shutdown: a break-it pass).
    // Not for a sink that refuses one event and takes the other (the Kafka producer's
    // too_large, a sink's expired): such a refusal comes after the other was handed over.
    // A record the decoder already found unusable (too deep, a __proto__ key) is not mapped.
    const mapped: unknown[] = [];
    const recordOf: number[] = [];
    const refused = new Map<number, EventIssue[]>();
    records.forEach((r, index) => {
      if (r.issues) {
        refused.set(index, [...r.issues]);
        stats.rejected++;
        countRejected(r.issues);
        return;
      }
      let out: unknown;
      try {
        out = options.mapOtlpRecord(r);
      } catch {
        out = undefined;
      }
      for (const e of Array.isArray(out) ? (out.length > 0 ? out : [undefined]) : [out]) {
        mapped.push(e);
        recordOf.push(index);
      }
    });
    const { events, rejected: invalid, inputIndex } = await validate(mapped);
    const invalidRecords = new Set(invalid.map((r) => recordOf[r.index]!));
    const whole = events.map((_, k) => !invalidRecords.has(recordOf[inputIndex[k]!]!));
    const delivered = await deliver(events.filter((_, k) => whole[k]), inputIndex.filter((_, k) => whole[k]));
    const pairs = new Set(recordOf.filter((index, k) => recordOf[k - 1] === index));
    for (const r of byIndex(invalid.map((r) => (pairs.has(recordOf[r.index]!) ? exchangeIssues(mapped, r) : r)), delivered)) {
      const index = recordOf[r.index]!;
      const issues = refused.get(index) ?? [];
      refused.set(index, issues);
      // (both events of a record may miss one field: each issue once)
      for (const i of r.issues) if (!issues.some((j) => j.path === i.path && j.code === i.code && j.message === i.message)) issues.push(i);
    }
    const rejected: RejectedRecord[] = [...refused].sort((a, b) => a[0] - b[0]).map(([index, issues]) => ({ index, issues }));
    const partial = rejected.length
      ? {
          rejectedLogRecords: rejected.length,
          errorMessage: rejected
            .slice(0, 20)
            .map((r) => `record ${r.index}: ${r.issues.map((i) => `${i.path || '(record)'} ${i.code}: ${i.message}`).join('; ')}`)
            .join(' | '),
        }
      : undefined;
    if (protobufRequest) {
      return reply.status(200).header('content-type', 'application/x-protobuf').send(encodeOtlpResponse(partial));
    }
    return reply.status(200).send(partial ? { partialSuccess: partial } : {});
  });

  app.post('/v1/events', { onRequest: [authorize, accepts(JSON_MEDIA_TYPES)] }, async (req, reply) => {
    stats.requests++;
    const body = req.body as unknown;
    const list = Array.isArray(body) ? body : (body as { events?: unknown } | null)?.events;
    if (!Array.isArray(list)) throw new ContinuityError('CONT_ERR_BAD_REQUEST', 'expected a JSON array of events or { "events": [...] }');
    if (list.length > MAX_RECORDS_PER_REQUEST) throw tooManyRecords('events', list.length);
    const { events, rejected: invalid, inputIndex } = await validate(list);
    const refused = await deliver(events, inputIndex);
    const accepted = events.length - refused.length;
    if (invalid.length > 0 || refused.length > 0) {
      const rejected = byIndex(invalid, refused);
      const code = refusalCode(invalid, refused);
      const err = new ContinuityError(code, `${rejected.length} of ${list.length} event(s) refused${accepted > 0 ? '; the others were accepted' : ''}`);
      // A request refused whole for its events' size is a 413 (RFC 9110 §15.5.14); a
      // partial one keeps the 400 that lists what to fix and tells not to resend.
      const status = code === 'CONT_ERR_EVENT_TOO_LARGE' && accepted === 0 ? 413 : 400;
      // (the first REJECTED_LISTED refused inputs: a 5 MB body of empty objects was
      // answered with 453 MB listing every one; a break-it pass)
      return reply.status(status).send({ ...err.toJSON(), accepted, rejected_count: rejected.length, rejected: rejected.slice(0, REJECTED_LISTED) });
    }
    // Copies of an event_id already in this request: counted in `accepted`, stored once
    // (event_id is the deduplication key, DESIGN §3), and said so (a break-it pass: two
    // different events under one id answered `accepted` for both, one of them dropped)
    const seen = new Set<string>();
    let duplicates = 0;
    for (const e of events) {
      if (seen.has(e.event_id)) duplicates++;
      else seen.add(e.event_id);
    }
    return reply.status(200).send(duplicates > 0 ? { accepted, duplicates } : { accepted });
  });

  return { app, stats };
}

/** The most refused inputs a `POST /v1/events` answer lists (`rejected`; `rejected_count` counts them all). */
export const REJECTED_LISTED = 1_000;

/**
 * A request with more `what` than {@link MAX_RECORDS_PER_REQUEST}: 413 CONT_ERR_BODY_TOO_LARGE,
 * the whole request refused before any is decoded or stored (`count`: how many it holds,
 * or at least how many were counted).
 */
function tooManyRecords(what: string, count: number): ContinuityError {
  return new ContinuityError('CONT_ERR_BODY_TOO_LARGE', `over ${MAX_RECORDS_PER_REQUEST} ${what} in one request (${count} or more); send them in smaller requests`, {
    details: { limitRecords: MAX_RECORDS_PER_REQUEST, records: count },
  });
}

/**
 * The issues of a refused event of a record that carried two (an `exchange`) as the
 * producer sent them: the record's arrival takes its `event_id` from `arrival_id`
 * (collectors/mcp/log-record.ts logRecordToEvents), so an `event_id` issue there is
 * about the `arrival_id` the record carried (a break-it pass: an exchange with
 * arrival_id "req-1" was refused for an `event_id` it never sent). Other issues are
 * returned as they are.
 * @param mapped the mapped events, at the indexes the refusals name.
 * @param r a refusal of one of them.
 */
function exchangeIssues(mapped: readonly unknown[], r: RejectedRecord): RejectedRecord {
  const e = mapped[r.index] as { event_type?: unknown; event_id?: unknown; arrival_id?: unknown } | null | undefined;
  if (!e || e.event_type !== 'arrival' || e.event_id === undefined || e.event_id !== e.arrival_id) return r;
  return {
    index: r.index,
    issues: r.issues.map((i) =>
      i.path === 'event_id' ? { ...i, path: 'arrival_id', message: `${i.message} (an exchange record's arrival_id is its arrival's event_id, a UUID)` } : i,
    ),
  };
}

/** Two lists of refused inputs, each in input order, as one in input order. */
function byIndex(a: readonly RejectedRecord[], b: readonly RejectedRecord[]): RejectedRecord[] {
  return b.length === 0 ? [...a] : [...a, ...b].sort((x, y) => x.index - y.index);
}

function sendError(reply: FastifyReply, err: ContinuityError): FastifyReply {
  if (err.httpStatus === 503) reply.header('retry-after', '5');
  if (err.code === 'CONT_ERR_UNAUTHORIZED') reply.header('www-authenticate', bearerChallenge('continuity-ingest', err));
  return reply.status(err.httpStatus).send(err.toJSON());
}

/**
 * What every HTTP app of the project (the gateway's, `serve`'s and the consumer's read
 * API, api/server.ts) does before a request reaches a route: tracks its connections for
 * a bounded close (core/http.ts `trackConnections`), answers in the coded shape what
 * Node's server refuses itself (`answerRefusedRequests`: an unknown Expect, CONNECT),
 * and refuses an HTTP/1.1 request without Host (`missingHostError`). The app must be
 * created with `http: { requireHostHeader: false }`, or Node answers that one with a
 * bare 400 first.
 */
export function registerConnectionRules(app: FastifyInstance): void {
  trackConnections(app.server);
  answerRefusedRequests(app.server);
  app.addHook('onRequest', async (req) => {
    const err = missingHostError(req.raw);
    if (err) throw err;
  });
}

/**
 * How every HTTP app of the project reads request bodies (the gateway's, `serve`'s
 * and the consumer's read API, api/server.ts): bodies in gzip or deflate are decoded
 * on every route registered after this, and the app's body limit applies to the
 * decoded size, so a zip bomb is refused with 413; another content coding is 415
 * `CONT_ERR_UNSUPPORTED_MEDIA` (RFC 9110 §15.5.16). JSON bodies are parsed by
 * core/http.ts `parseJsonBody`: fastify's prototype-poisoning protection, with a
 * refusal that names the key instead of "Body is not valid JSON".
 */
export async function registerRequestBodies(app: FastifyInstance): Promise<void> {
  // Content codings are case-insensitive (RFC 9110 §8.4.1); @fastify/compress compares
  // them as sent, so 'GZIP' was a 415. The header is lowercased before it looks,
  // 'identity' (no coding) dropped, and 'x-gzip' read as 'gzip' (RFC 9110 §8.4.1.3: a
  // recipient SHOULD consider it equivalent; it was a 415, a break-it pass).
  app.addHook('onRequest', async (req) => {
    const coding = req.headers['content-encoding'];
    if (typeof coding !== 'string') return;
    const lower = coding.trim().toLowerCase();
    const normal = lower === 'x-gzip' ? 'gzip' : lower;
    if (normal === 'identity' || normal === '') delete req.headers['content-encoding'];
    else req.headers['content-encoding'] = normal;
  });
  await app.register(fastifyCompress, {
    globalCompression: false,
    globalDecompression: true,
    requestEncodings: [...REQUEST_CONTENT_CODINGS],
    onUnsupportedRequestEncoding: (encoding) => unsupportedContentCodingError(encoding),
  });
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => {
    try {
      done(null, parseJsonBody(decodeUtf8Body(body as Buffer)));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}

/**
 * The error code of a partly or wholly refused `POST /v1/events`: invalid events win
 * (CONT_ERR_EVENT_EXPIRED when each was refused only for being older than the
 * retention and the sink refused none), then events the sink refused
 * (CONT_ERR_EVENT_TOO_LARGE when each was too large, else CONT_ERR_EVENT_REFUSED).
 */
function refusalCode(invalid: readonly RejectedRecord[], refused: readonly RejectedRecord[]): ErrorCode {
  if (invalid.length > 0) {
    const onlyExpired = refused.length === 0 && invalid.every((r) => r.issues.every((i) => i.code === 'expired'));
    return onlyExpired ? 'CONT_ERR_EVENT_EXPIRED' : 'CONT_ERR_EVENT_INVALID';
  }
  return refused.every((r) => r.issues[0]?.code === 'too_large') ? 'CONT_ERR_EVENT_TOO_LARGE' : 'CONT_ERR_EVENT_REFUSED';
}
