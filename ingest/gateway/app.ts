import fastifyCompress from '@fastify/compress';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { ContinuityError, isContinuityError } from '../../core/errors.ts';
import {
  assertMediaType,
  codedRequestError,
  createBearerCheck,
  parseJsonBody,
  REQUEST_CONTENT_CODINGS,
  unsupportedContentCodingError,
} from '../../core/http.ts';
import { parseEvent, type ContinuityEvent, type EventIssue, type ParseResult } from '../../schema/index.ts';
import { decodeOtlpJson, decodeOtlpProtobuf, encodeOtlpResponse, OtlpShapeError, type OtlpLogRecord } from './otlp.ts';

/** Media types `POST /v1/logs` takes: OTLP/HTTP JSON or protobuf (both protobuf names have a parser). */
const OTLP_MEDIA_TYPES = ['application/json', 'application/x-protobuf', 'application/protobuf'] as const;
/** Media types `POST /v1/events` takes. */
const JSON_MEDIA_TYPES = ['application/json'] as const;

/** Where accepted events go: the batching writer (embedded) or a Kafka producer. */
export interface EventSink {
  /**
   * Takes validated events. Resolves once they are queued for writing (backpressure
   * is applied by awaiting). Rejects with a retriable ContinuityError when the
   * pipeline cannot take them (the gateway answers 503 with Retry-After).
   */
  accept(events: readonly ContinuityEvent[]): Promise<void>;
  /** False while the sink cannot take events (readiness probe). */
  ready(): boolean;
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
  requests: number;
  accepted: number;
  rejected: number;
  rejectedByCode: Record<string, number>;
}

/**
 * Builds the ingest gateway (fastify):
 * - `POST /v1/logs` — OTLP/HTTP logs (protobuf or JSON, optionally gzip), each
 *   record mapped onto the event contract; per the OTLP spec, records that fail
 *   validation are reported as `partialSuccess.rejectedLogRecords` with 200, and the
 *   valid records of the same request are kept. A body that is not an
 *   ExportLogsServiceRequest at all is a 400.
 *   A record with an attribute value or body nested more than `MAX_NESTING_DEPTH`
 *   (64) arrays and kvlists deep (protobuf: more than the decoder's 100 nested
 *   messages) is refused as `too_deep`, one with an attribute named `__proto__` as
 *   `forbidden_key` (otlp.ts); neither fails the request.
 * - `POST /v1/events` — a JSON array of contract events (or `{ "events": [...] }`);
 *   valid events are kept, and when any is invalid the answer is 400 listing each
 *   refused index with its coded issues (DESIGN §3; codes: schema `parseEvent`).
 * - JSON bodies (both routes, and the read API under /api) are parsed by core/http.ts
 *   `parseJsonBody`: a `__proto__` key (or a `constructor` key holding `prototype`)
 *   anywhere refuses the whole body with 400 `CONT_ERR_BAD_REQUEST` naming the key
 *   and its place (`details.key`, `details.path`).
 * - `GET /healthz` (process up) and `GET /readyz` (sink ready).
 * Errors are `{ code, message, fix, details }` with the registry's status: 400
 * malformed, 401 missing token, 404 unknown method and path (`CONT_ERR_NOT_FOUND`,
 * also for routes other plugins add under this app), 413 a body over
 * `maxBodyBytes` once decoded (`CONT_ERR_BODY_TOO_LARGE`, RFC 9110 §15.5.14;
 * `details.limitBytes`), 415 a body of a media type the route does not take or in
 * a content coding other than gzip and deflate (`CONT_ERR_UNSUPPORTED_MEDIA`, RFC
 * 9110 §15.5.16; the message and `details.accepted` or
 * `details.acceptedEncodings` name what it takes), 503 pipeline down. The mapping
 * of the framework's own errors is core/http.ts `codedRequestError`, which the
 * read API under /api uses too.
 */
export async function createGateway(options: GatewayOptions): Promise<{ app: FastifyInstance; stats: Readonly<GatewayStats> }> {
  const maxBodyBytes = options.maxBodyBytes ?? 10 * 1024 * 1024;
  const stats: GatewayStats = { requests: 0, accepted: 0, rejected: 0, rejectedByCode: {} };
  const app = Fastify({ logger: options.logger ?? false, bodyLimit: maxBodyBytes });
  const now = options.nowMicros ?? (() => Date.now() * 1000);
  const bearerOk = options.bearerToken ? createBearerCheck(options.bearerToken) : undefined;

  // Request bodies may be gzip/deflate encoded (OTLP exporters compress); the body
  // limit applies to the decompressed size, so a zip bomb is refused with 413. The
  // plugin decodes on every route registered after it, the read API's under /api too;
  // another coding is the same coded 415 there as here (RFC 9110 §15.5.16).
  await app.register(fastifyCompress, {
    globalCompression: false,
    globalDecompression: true,
    requestEncodings: [...REQUEST_CONTENT_CODINGS],
    onUnsupportedRequestEncoding: (encoding) => unsupportedContentCodingError(encoding),
  });
  app.addContentTypeParser(['application/x-protobuf', 'application/protobuf'], { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  // JSON with fastify's prototype-poisoning protection, but a refusal that names the key
  // (core/http.ts parseJsonBody) instead of "Body is not valid JSON". The read API under /api inherits it.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });

  const notFound = (req: FastifyRequest, reply: FastifyReply): FastifyReply =>
    sendError(reply, new ContinuityError('CONT_ERR_NOT_FOUND', `${req.method} ${req.url}`, { details: { method: req.method, url: req.url } }));

  app.setErrorHandler((err: FastifyError | ContinuityError, req, reply) => {
    if (isContinuityError(err)) return sendError(reply, err);
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

  const authorize = async (req: FastifyRequest): Promise<void> => {
    if (bearerOk && !bearerOk(req.headers.authorization)) throw new ContinuityError('CONT_ERR_UNAUTHORIZED');
  };

  // After authorize, so a caller without the token learns nothing about the route.
  const accepts = (types: readonly string[]) => async (req: FastifyRequest): Promise<void> => assertMediaType(req.headers, types);

  const validate = (inputs: readonly unknown[]): { events: ContinuityEvent[]; rejected: RejectedRecord[] } => {
    const events: ContinuityEvent[] = [];
    const rejected: RejectedRecord[] = [];
    const nowMicros = now();
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
      if (r.ok) events.push(r.event);
      else {
        rejected.push({ index, issues: r.issues });
        for (const i of r.issues) stats.rejectedByCode[i.code] = (stats.rejectedByCode[i.code] ?? 0) + 1;
      }
    });
    stats.accepted += events.length;
    stats.rejected += rejected.length;
    return { events, rejected };
  };

  const deliver = async (events: ContinuityEvent[]): Promise<void> => {
    if (events.length === 0) return;
    if (!options.sink.ready()) throw new ContinuityError('CONT_ERR_INGEST_UNAVAILABLE', 'the sink is not ready');
    await options.sink.accept(events);
  };

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    const ready = options.sink.ready();
    return reply.status(ready ? 200 : 503).send({ status: ready ? 'ready' : 'unavailable', ...stats });
  });

  app.post('/v1/logs', { onRequest: [authorize, accepts(OTLP_MEDIA_TYPES)] }, async (req, reply) => {
    stats.requests++;
    const protobufRequest = Buffer.isBuffer(req.body);
    let records: OtlpLogRecord[];
    try {
      records = protobufRequest ? decodeOtlpProtobuf(req.body as Buffer) : decodeOtlpJson(req.body);
    } catch (err) {
      if (err instanceof OtlpShapeError) throw new ContinuityError('CONT_ERR_BAD_REQUEST', err.message);
      throw err;
    }
    // A record may carry several events (the collector's `exchange` record: arrival +
    // settlement); a record is rejected when any of its events is, and its valid events are kept.
    // A record the decoder already found unusable (too deep, a __proto__ key) is not mapped.
    const mapped: unknown[] = [];
    const recordOf: number[] = [];
    const refused = new Map<number, EventIssue[]>();
    records.forEach((r, index) => {
      if (r.issues) {
        refused.set(index, [...r.issues]);
        stats.rejected++;
        for (const i of r.issues) stats.rejectedByCode[i.code] = (stats.rejectedByCode[i.code] ?? 0) + 1;
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
    const validated = validate(mapped);
    const { events } = validated;
    for (const r of validated.rejected) {
      const index = recordOf[r.index]!;
      const issues = refused.get(index);
      if (issues) issues.push(...r.issues);
      else refused.set(index, [...r.issues]);
    }
    const rejected: RejectedRecord[] = [...refused].sort((a, b) => a[0] - b[0]).map(([index, issues]) => ({ index, issues }));
    await deliver(events);
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
    const { events, rejected } = validate(list);
    await deliver(events);
    if (rejected.length > 0) {
      const err = new ContinuityError('CONT_ERR_EVENT_INVALID', `${rejected.length} of ${list.length} event(s) refused; the others were accepted`);
      return reply.status(400).send({ ...err.toJSON(), accepted: events.length, rejected });
    }
    return reply.status(200).send({ accepted: events.length });
  });

  return { app, stats };
}

function sendError(reply: FastifyReply, err: ContinuityError): FastifyReply {
  if (err.httpStatus === 503) reply.header('retry-after', '5');
  if (err.code === 'CONT_ERR_UNAUTHORIZED') reply.header('www-authenticate', 'Bearer realm="continuity-ingest"');
  return reply.status(err.httpStatus).send(err.toJSON());
}
