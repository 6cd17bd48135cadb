import { EventEmitter } from 'node:events';
import { ServerResponse, type IncomingMessage } from 'node:http';
import { hostname } from 'node:os';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { LogRecordExporter } from '@opentelemetry/sdk-logs';
import type { FastifyPluginCallback } from 'fastify';
import { z } from 'zod';
import { ContinuityError, createKeyedHasher, type KeyedHasher } from '../../core/index.ts';
import { CapKind, LifecycleAction, RefusedReason, RemintMode, RemintOutcome, SessionResolution, ShutdownReason } from '../../schema/index.ts';
import { classifyChallenge, isAuthChallenge } from '../challenge.ts';
import { classifySettlement, knownRefusalMessage, type SessionResolutionValue } from './classify.ts';
import {
  emptyFindings,
  emptySummary,
  JsonBodyTap,
  noteResponseMessage,
  noteResponseText,
  responseBodyKind,
  SseBodyTap,
  summarizeRequest,
  type BodyKind,
  type RequestSummary,
  type ResponseFindings,
} from './inspect.ts';
import { eventAttributes, type AttributeValue } from './log-record.ts';
import {
  createExporterSink,
  createOtlpExporter,
  createOtlpJsonSink,
  createPipelineCounters,
  ExportQueue,
  type OtlpOptions,
  type OutRecord,
  type PipelineCounters,
  type RecordSink,
} from './pipeline.ts';
import {
  ATTR_CONTINUITY_BOOT_ID,
  ATTR_DEPLOYMENT_ENVIRONMENT_NAME,
  ATTR_SERVICE_INSTANCE_ID,
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
  ATTR_SETTLED_PROTOCOL_VERSION,
  attributeForField,
  EXCHANGE_EVENT_NAME,
  EXTRA_BATCH_SIZE,
  EXTRA_REQUEST_BODY_TRUNCATED,
  EXTRA_BODY_TRUNCATED,
  EXTRA_IN_FLIGHT_STREAMS,
  EXTRA_REASON_SOURCE,
  EXTRA_REQUESTED_REASON,
  EXTRA_RPC_MESSAGE,
} from './semconv.ts';
import { createUuidV7Generator } from './uuidv7.ts';

/** Instrumentation scope of the emitted log records. */
export const INSTRUMENTATION_SCOPE = 'mcp-continuity/collectors/mcp';
/** Version of the event contract the records follow (DESIGN §3 "Event contract v1"). */
export const CONTRACT_VERSION = '1';

export type RefusedReasonValue = z.infer<typeof RefusedReason>;
export type RemintModeValue = z.infer<typeof RemintMode>;
export type RemintOutcomeValue = z.infer<typeof RemintOutcome>;
export type LifecycleActionValue = z.infer<typeof LifecycleAction>;
export type CapKindValue = z.infer<typeof CapKind>;
export type ShutdownReasonValue = z.infer<typeof ShutdownReason>;
export type { SessionResolutionValue };

/** Options of {@link createMcpCollector}. Only `hashKey` (or `hasher`) and `service.name` are required. */
export interface McpCollectorOptions {
  /** `false` makes every hook and call a no-op: no provider, no exporter, no boot event (default true). */
  enabled?: boolean;
  /**
   * Deployment key for the keyed hash of session ids and principals (HMAC-SHA-256,
   * core/hash.ts): hex text or bytes, at least 16 bytes. The same key as the rest
   * of the deployment (`CONTINUITY_HASH_KEY`), so that `continuity hash` agrees.
   */
  hashKey?: string | Buffer;
  /** A ready hasher instead of `hashKey`. */
  hasher?: KeyedHasher;
  /** Resource identity: `service.name`, `service.instance.id` (default: host name), `service.version`, `deployment.environment.name`. */
  service: { name: string; instanceId?: string; version?: string; environment?: string };
  /** OTLP/HTTP exporter settings (ignored when `exporter` is given). */
  otlp?: OtlpOptions;
  /** Any OpenTelemetry log exporter instead of OTLP/HTTP (tests: InMemoryLogRecordExporter; embedded mode: an in-process sink). */
  exporter?: LogRecordExporter;
  /** BatchLogRecordProcessor settings; `maxQueueSize` bounds memory (records beyond it are dropped and counted). */
  batch?: { maxQueueSize?: number; maxExportBatchSize?: number; scheduledDelayMillis?: number; exportTimeoutMillis?: number };
  /** Bytes of each request and response body inspected (default 65 536). Longer bodies are classified from status and headers. */
  maxInspectBytes?: number;
  /** Session keys remembered this boot, for refused-miss reasons and client info (default 16 384; oldest forgotten first). */
  maxTrackedSessions?: number;
  /**
   * The principal of a request (raw; hashed before it leaves the process). Called
   * when each event is emitted, so it sees `req.auth` once auth middleware ran.
   * Default: `req.auth.clientId` as set by the SDK's `requireBearerAuth`.
   */
  principalOf?: (req: IncomingMessage) => string | undefined;
  /** Which requests are MCP traffic (default: all requests the hook sees). */
  include?: (req: IncomingMessage) => boolean;
  /**
   * Install SIGTERM/SIGINT handlers that run `shutdown({ reason: 'signal' })` and
   * then re-raise the signal when no other listener handles it. Never by default.
   */
  handleSignals?: boolean | { signals?: NodeJS.Signals[]; drainTimeoutMs?: number };
  /** Process-incarnation id (default: a fresh UUIDv7 per collector). */
  bootId?: string;
  /** Told about every internal error (already counted); must not throw (it is guarded anyway). */
  onInternalError?: (error: unknown) => void;
}

/** What the application knows better than the collector about one request. */
export interface RequestAnnotation {
  /** Overrides the inferred session resolution (e.g. `alias` or `rebuilt` after a re-mint). */
  sessionResolution?: SessionResolutionValue;
  /** Reason of a refused miss (e.g. `idle_ttl`, `evicted`, `principal_mismatch`). */
  refusedReason?: RefusedReasonValue;
  /** The refused session could have been re-minted. */
  remintEligible?: boolean;
  /** The raw principal (hashed here), when `principalOf` cannot see it. */
  principal?: string;
}

/** A re-mint: the server rebuilt stale session `staleSessionId` as `replacementSessionId`. Raw ids; hashed here. */
export interface RemintInput {
  staleSessionId: string;
  replacementSessionId: string;
  mode: RemintModeValue;
  outcome: RemintOutcomeValue;
  /** Arrival that triggered it (see `arrivalIdOf(req)`), or pass `req`. */
  arrivalId?: string;
  req?: IncomingMessage;
  principal?: string;
}

/** A session lifecycle change with the principal's counts after it (contract `session_lifecycle`). */
export interface SessionLifecycleInput {
  action: LifecycleActionValue;
  /** Raw session id; hashed here. */
  sessionId?: string;
  principal?: string;
  capKind?: CapKindValue;
  liveCount?: number;
  liveCap?: number;
  durableCount?: number;
  durableCap?: number;
  globalCount?: number;
  globalCap?: number;
  /** How long the evicted session had been idle, ms. */
  victimIdleMs?: number;
  victimInFlight?: number;
}

/** Per-principal counts against caps (contract `cap_snapshot`). */
export interface CapSnapshotInput {
  principal: string;
  liveCount?: number;
  liveCap?: number;
  durableCount?: number;
  durableCap?: number;
  globalCount?: number;
  globalCap?: number;
}

/** Options of {@link McpCollector.shutdown}. */
export interface ShutdownOptions {
  /** Why the process stops (default `signal`). Becomes `drain_timeout` when requests were still open at the deadline. */
  reason?: ShutdownReasonValue;
  /** Longest wait for open requests to settle, ms (default 10 000). Open GET (server-push SSE) streams are not waited for. */
  drainTimeoutMs?: number;
  /** Longest wait for the final export, ms (default 5 000). */
  flushTimeoutMs?: number;
}

/** Self-report (monotonic counts except `in_flight`, `queued`, `exporting`). */
export interface CollectorCounters extends PipelineCounters {
  /** Errors caught inside hooks and calls (never thrown into the host). */
  internal_errors: number;
  /** Application API calls refused because an argument broke the contract (e.g. an unknown mode). */
  rejected_calls: number;
  /** Requests observed and not yet settled. */
  in_flight: number;
}

/** Node request handler shape (node:http, Express). */
export type NodeHandler<R> = (req: IncomingMessage, res: ServerResponse) => R;

/** The collector. No method throws; all are no-ops when disabled or after shutdown. */
export interface McpCollector {
  readonly enabled: boolean;
  /** This process incarnation's `boot_id`. */
  readonly bootId: string;
  /** Connect/Express-style middleware: observes the request, then calls `next()`. */
  middleware(req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void): void;
  /** fastify plugin (not encapsulated): `await app.register(collector.fastifyPlugin)`. */
  readonly fastifyPlugin: FastifyPluginCallback;
  /** Wraps a node:http request handler. */
  wrapHandler<R>(handler: NodeHandler<R>): NodeHandler<R>;
  /** Starts observing one exchange (what the three adapters call). Idempotent per request. */
  observe(req: IncomingMessage, res: ServerResponse): void;
  /** Supplies an already parsed body (e.g. fastify's `request.body`) when the raw stream was read elsewhere. */
  supplyBody(req: IncomingMessage, body: unknown): void;
  /** The `arrival_id` of an observed request (UUIDv7), for joining application events. */
  arrivalIdOf(req: IncomingMessage): string | undefined;
  /** Adds what the application knows about a request (refused reason, resolution, principal). */
  annotate(req: IncomingMessage, annotation: RequestAnnotation): void;
  recordRemint(input: RemintInput): void;
  recordSessionLifecycle(input: SessionLifecycleInput): void;
  recordCapSnapshot(input: CapSnapshotInput): void;
  counters(): CollectorCounters;
  /** Exports everything queued; resolves (never rejects) when done or failed. */
  flush(): Promise<void>;
  /** Drains, emits `shutdown`, flushes and stops the exporter. Idempotent. Never rejects. */
  shutdown(options?: ShutdownOptions): Promise<void>;
}

interface SessionInfo {
  clientName: string;
  clientVersion: string;
  protocolVersion: string;
  /** Why the server dropped it, when known (lifecycle record or an observed DELETE). */
  cause?: RefusedReasonValue | undefined;
}

/** What a settled exchange's settlement says (computed when it settles; written at export). */
interface Settled {
  readonly status: number;
  readonly outcome: string;
  readonly errorType: string;
  readonly rpcStatusCode: string;
  readonly durationMs: number;
  readonly resolution: SessionResolutionValue;
  readonly mintedSessionKey: string;
  /** The settlement's session key: the request's, else the minted one. */
  readonly sessionKey: string;
  /** The settlement's protocol version (the negotiated one of an `initialize` answer first). */
  readonly protocolVersion: string;
  readonly truncated: boolean;
}

/**
 * Per-request state; it is also what waits in the export queue, so nothing is
 * built for the record until export time. Raw session ids are hashed on
 * arrival; principals when first needed. The arrival id (UUIDv7) is drawn when
 * first asked for: by the application (`arrivalIdOf`) or at export.
 */
class Exchange {
  arrivalId = '';
  req: IncomingMessage | undefined;
  res: ServerResponse | undefined;
  reqTap: JsonBodyTap | undefined = undefined;
  /** The request body was longer than the inspection limit. */
  requestTruncated = false;
  /** The request body was read to its end; it is summarized when first needed (the host may parse it for us). */
  bodyComplete = false;
  summary: RequestSummary = emptySummary();
  summarized = false;
  /** The arrival record went out on its own (the request was open at an export). */
  arrivalQueued = false;
  settled = false;
  headSeen = false;
  status = 0;
  responseSessionKey = '';
  wwwAuthenticate: unknown = undefined;
  bodyKind: BodyKind = 'skip';
  jsonTap: JsonBodyTap | undefined = undefined;
  sseTap: SseBodyTap | undefined = undefined;
  findings: ResponseFindings | undefined = undefined;
  annotation: RequestAnnotation | undefined = undefined;
  cancelled = false;
  principalKey = '';
  principalResolved = false;
  settlement: Settled | undefined = undefined;
  /** The methods the taps replaced (called through, unchanged). */
  originalEmit: IncomingMessage['emit'] | undefined = undefined;
  originalWriteHead: ServerResponse['writeHead'] | undefined = undefined;
  originalWrite: ServerResponse['write'] | undefined = undefined;
  originalEnd: ServerResponse['end'] | undefined = undefined;

  constructor(
    req: IncomingMessage,
    res: ServerResponse,
    /** `performance.now()` at arrival, ms. */
    readonly startMs: number,
    readonly httpMethod: string,
    readonly sessionKey: string,
    readonly hasCredential: boolean,
    /** Raw header values, cut to length at export. */
    readonly userAgent: string,
    readonly headerProtocol: string,
    readonly headerMethod: string,
    readonly headerName: string,
  ) {
    this.req = req;
    this.res = res;
  }

  get isStream(): boolean {
    return this.httpMethod === 'GET';
  }
}

/** A queued application event (boot, shutdown, session_refused, auth_challenge, remint, lifecycle, cap snapshot), kept as contract fields. */
interface QueuedEvent {
  readonly event: Record<string, unknown>;
  readonly tsUs: number;
}

/** An arrival record of a request that was still open at an export. */
interface QueuedArrival {
  readonly arrivalOf: Exchange;
}

type QueueItem = Exchange | QueuedEvent | QueuedArrival;

/** Insertion-ordered map that forgets its oldest entry when full. */
class BoundedMap<K, V> {
  private readonly map = new Map<K, V>();
  constructor(private readonly max: number) {}
  get(key: K): V | undefined {
    return this.map.get(key);
  }
  has(key: K): boolean {
    return this.map.has(key);
  }
  /** Sets and marks as most recent. */
  set(key: K, value: V): void {
    this.map.delete(key);
    if (this.map.size >= this.max) {
      const oldest = this.map.keys().next();
      if (!oldest.done) this.map.delete(oldest.value);
    }
    this.map.set(key, value);
  }
}

const u32 = z.number().int().min(0).max(4_294_967_295).optional();
const CountsSchema = {
  liveCount: u32,
  liveCap: u32,
  durableCount: u32,
  durableCap: u32,
  globalCount: u32,
  globalCap: u32,
};
const RemintSchema = z.object({
  staleSessionId: z.string().min(1),
  replacementSessionId: z.string().min(1),
  mode: RemintMode,
  outcome: RemintOutcome,
  arrivalId: z.string().max(64).optional(),
  principal: z.string().optional(),
});
const LifecycleSchema = z.object({
  action: LifecycleAction,
  sessionId: z.string().optional(),
  principal: z.string().optional(),
  capKind: CapKind.optional(),
  ...CountsSchema,
  victimIdleMs: z.number().min(0).max(1e12).optional(),
  victimInFlight: u32,
});
const CapSnapshotSchema = z.object({ principal: z.string(), ...CountsSchema });
const AnnotationSchema = z.object({
  sessionResolution: SessionResolution.optional(),
  refusedReason: RefusedReason.optional(),
  remintEligible: z.boolean().optional(),
  principal: z.string().optional(),
});

const OptionsSchema = z.object({
  enabled: z.boolean().optional(),
  service: z.object({
    name: z.string().min(1).max(256),
    instanceId: z.string().max(256).optional(),
    version: z.string().max(256).optional(),
    environment: z.string().max(256).optional(),
  }),
  otlp: z
    .object({
      url: z.url().optional(),
      encoding: z.enum(['json', 'protobuf']).optional(),
      headers: z.record(z.string(), z.string()).optional(),
      timeoutMillis: z.number().int().positive().optional(),
      compression: z.enum(['gzip', 'none']).optional(),
    })
    .optional(),
  batch: z
    .object({
      maxQueueSize: z.number().int().min(1).max(1_000_000).optional(),
      maxExportBatchSize: z.number().int().min(1).max(1_000_000).optional(),
      scheduledDelayMillis: z.number().int().min(0).optional(),
      exportTimeoutMillis: z.number().int().positive().optional(),
    })
    .optional(),
  maxInspectBytes: z.number().int().min(1024).max(16 * 1024 * 1024).optional(),
  maxTrackedSessions: z.number().int().min(1).max(10_000_000).optional(),
  bootId: z.string().min(1).max(128).optional(),
});

const LIFECYCLE_CAUSE: Partial<Record<LifecycleActionValue, RefusedReasonValue>> = {
  closed: 'deleted',
  expired: 'idle_ttl',
  evicted: 'evicted',
};

const NO_BODY_METHODS = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS']);


const TIME_ORIGIN_MS = performance.timeOrigin;

/** µs since the Unix epoch of a `performance.now()` reading. */
function epochMicros(perfMs: number): number {
  return Math.round((TIME_ORIGIN_MS + perfMs) * 1000);
}

function nowMicros(): number {
  return epochMicros(performance.now());
}

function header(value: unknown): string {
  if (Array.isArray(value)) return value.length > 0 ? String(value[0]) : '';
  return value === undefined || value === null ? '' : String(value);
}

function headerList(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String);
  return value === undefined || value === null ? [] : [String(value)];
}

/** The response headers the collector reads: those passed to writeHead win over those set with setHeader. */
interface HeadFacts {
  sessionId: unknown;
  wwwAuthenticate: unknown;
  contentType: unknown;
  contentEncoding: unknown;
}

function noteHeader(facts: HeadFacts, name: string, value: unknown): void {
  // Only four names matter: compare lengths before lower-casing.
  const n = name.length;
  if (n !== 14 && n !== 16 && n !== 12) return;
  const lower = name.toLowerCase();
  if (lower === 'mcp-session-id') facts.sessionId = value;
  else if (lower === 'www-authenticate') facts.wwwAuthenticate = value;
  else if (lower === 'content-type') facts.contentType = value;
  else if (lower === 'content-encoding') facts.contentEncoding = value;
}

/** Reads the headers of a `writeHead(status, [message], headers)` call (object, `[name, value]` pairs or a flat raw list) over those already set. */
function headFacts(res: ServerResponse, passed: unknown): HeadFacts {
  const facts: HeadFacts = {
    sessionId: res.getHeader('mcp-session-id'),
    wwwAuthenticate: res.getHeader('www-authenticate'),
    contentType: res.getHeader('content-type'),
    contentEncoding: res.getHeader('content-encoding'),
  };
  if (Array.isArray(passed)) {
    if (passed.length > 0 && Array.isArray(passed[0])) {
      for (const pair of passed as unknown[][]) if (typeof pair[0] === 'string') noteHeader(facts, pair[0], pair[1]);
    } else {
      for (let i = 0; i + 1 < passed.length; i += 2) if (typeof passed[i] === 'string') noteHeader(facts, passed[i] as string, passed[i + 1]);
    }
  } else if (typeof passed === 'object' && passed !== null) {
    for (const k in passed) noteHeader(facts, k, (passed as Record<string, unknown>)[k]);
  }
  return facts;
}

function defaultPrincipalOf(req: IncomingMessage): string | undefined {
  const auth = (req as IncomingMessage & { auth?: { clientId?: unknown } }).auth;
  return typeof auth?.clientId === 'string' ? auth.clientId : undefined;
}

function configError(detail: string, issues?: unknown): ContinuityError {
  return new ContinuityError('CONT_ERR_CONFIG', `collectors/mcp: ${detail}`, issues === undefined ? {} : { details: { issues } });
}

/** Sets `name` unless the value is empty (the contract defaults empty strings back). */
function put(attributes: Record<string, AttributeValue>, name: string, value: string | number | boolean | undefined): void {
  if (value !== undefined && value !== '') attributes[name] = value;
}

/** Record attribute names of the contract fields the collector writes per request (DESIGN §3 mapping, semconv.ts). */
const A = {
  eventId: attributeForField('event_id'),
  source: attributeForField('source'),
  protocolVersion: attributeForField('protocol_version'),
  sessionKey: attributeForField('session_key'),
  principalKey: attributeForField('principal_key'),
  clientName: attributeForField('client_name'),
  clientVersion: attributeForField('client_version'),
  userAgent: attributeForField('user_agent'),
  arrivalId: attributeForField('arrival_id'),
  httpMethod: attributeForField('http_method'),
  mcpMethod: attributeForField('mcp_method'),
  jsonrpcId: attributeForField('jsonrpc_id'),
  toolName: attributeForField('tool_name'),
  hasCredential: attributeForField('has_credential'),
  httpStatus: attributeForField('http_status'),
  outcome: attributeForField('outcome'),
  errorType: attributeForField('error_type'),
  rpcStatusCode: attributeForField('rpc_status_code'),
  durationMs: attributeForField('duration_ms'),
  sessionResolution: attributeForField('session_resolution'),
  mintedSessionKey: attributeForField('minted_session_key'),
} as const;

/**
 * Creates the MCP server-side collector (DESIGN §2–3): it observes Streamable
 * HTTP exchanges of an MCP server built on @modelcontextprotocol/sdk (node:http,
 * Express or fastify host) and emits contract events as OpenTelemetry log records
 * (event name = `event_type`) in batches to OTLP/HTTP (or any `LogRecordExporter`).
 *
 * Emits `boot` immediately. Per request: `arrival` and `settlement` — as one
 * `exchange` record when the request settled before the next export, else an
 * `arrival` record at the export that found it open and a `settlement` record
 * later (README "Records on the wire") — plus `session_refused` for a refused
 * miss and `auth_challenge` for 401/403.
 *
 * Guarantees: hooks never throw into the host and never block (errors are
 * counted in `internal_errors`); the export queue is bounded by
 * `batch.maxQueueSize` with counted drops; session ids and principals are keyed
 * hashes before any record is created; records are built at export time, off
 * the request path.
 *
 * @throws ContinuityError `CONT_ERR_CONFIG` at creation when options are invalid
 *   (missing/short hash key, missing service name, bad numbers or URL). Nothing
 *   throws after creation.
 */
export function createMcpCollector(options: McpCollectorOptions): McpCollector {
  if (options.enabled === false) return createDisabledCollector();
  const parsed = OptionsSchema.safeParse(options);
  if (!parsed.success) throw configError('invalid options', parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`));
  let hash: KeyedHasher;
  if (options.hasher) hash = options.hasher;
  else {
    // (trimmed: <data-dir>/hash.key ends with a newline, and its contents are what the docs say to give)
    const text = typeof options.hashKey === 'string' ? options.hashKey.trim() : options.hashKey;
    if (typeof text === 'string' && !/^(?:[0-9a-fA-F]{2})+$/.test(text)) throw configError('hashKey text must be hex (like CONTINUITY_HASH_KEY)');
    const key = typeof text === 'string' ? Buffer.from(text, 'hex') : text;
    if (!key || key.length < 16) throw configError('hashKey (at least 16 bytes: 32+ hex characters or a Buffer) or hasher is required');
    hash = createKeyedHasher(key);
  }
  for (const name of ['principalOf', 'include', 'onInternalError'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function') throw configError(`${name} must be a function`);
  }

  const o = parsed.data;
  const maxInspectBytes = o.maxInspectBytes ?? 65_536;
  const maxQueueSize = o.batch?.maxQueueSize ?? 2048;
  const principalOf = options.principalOf ?? defaultPrincipalOf;
  const include = options.include;
  const bootId = o.bootId ?? createUuidV7Generator()();
  const newId = createUuidV7Generator();

  const pipeline = createPipelineCounters();
  let internalErrors = 0;
  let rejectedCalls = 0;

  const internal = (err: unknown) => {
    internalErrors += 1;
    try {
      options.onInternalError?.(err);
    } catch {
      // the diagnostic hook itself failed: already counted
    }
  };
  const guard = (fn: () => void) => {
    try {
      fn();
    } catch (err) {
      internal(err);
    }
  };

  const resourceAttributes: Record<string, string> = {
    [ATTR_SERVICE_NAME]: o.service.name,
    [ATTR_SERVICE_INSTANCE_ID]: o.service.instanceId ?? hostname(),
    [ATTR_CONTINUITY_BOOT_ID]: bootId,
  };
  if (o.service.version) resourceAttributes[ATTR_SERVICE_VERSION] = o.service.version;
  if (o.service.environment) resourceAttributes[ATTR_DEPLOYMENT_ENVIRONMENT_NAME] = o.service.environment;
  const origin = { resource: resourceFromAttributes(resourceAttributes), scope: { name: INSTRUMENTATION_SCOPE, version: CONTRACT_VERSION } };
  // The default OTLP/JSON path writes records straight into the request body; any
  // other exporter (tests, embedded mode, protobuf) gets OpenTelemetry ReadableLogRecords.
  const sink: RecordSink = options.exporter
    ? createExporterSink(options.exporter, origin)
    : o.otlp?.encoding === 'protobuf'
      ? createExporterSink(createOtlpExporter(o.otlp), origin)
      : createOtlpJsonSink(o.otlp ?? {}, origin);

  let state: 'running' | 'draining' | 'closed' = 'running';
  // Each observed request and response carries its exchange under a symbol of
  // this collector (cheaper than a WeakMap, whose entries the GC must visit).
  const EXCHANGE: unique symbol = Symbol('mcp-continuity exchange');
  type Tapped = { [EXCHANGE]?: Exchange };
  const exchangeOf = (req: IncomingMessage): Exchange | undefined => (req as Tapped)[EXCHANGE];
  const open = new Set<Exchange>();
  const byArrival = new Map<string, Exchange>();
  const sessions = new BoundedMap<string, SessionInfo>(o.maxTrackedSessions ?? 16_384);
  let drainWaiter: (() => void) | undefined;

  const arrivalIdOf = (ex: Exchange): string => {
    if (!ex.arrivalId) {
      ex.arrivalId = newId();
      if (!ex.settled) byArrival.set(ex.arrivalId, ex);
    }
    return ex.arrivalId;
  };

  const principalKeyOf = (ex: Exchange): string => {
    if (ex.principalKey || !ex.req) return ex.principalKey;
    let raw: string | undefined;
    try {
      raw = ex.annotation?.principal ?? principalOf(ex.req);
    } catch (err) {
      internal(err);
    }
    if (typeof raw === 'string' && raw !== '') ex.principalKey = hash(raw);
    return ex.principalKey;
  };

  /** The arrival's protocol version: the request header, the `initialize` request's, else the session's. */
  const arrivalProtocol = (ex: Exchange, info: SessionInfo | undefined): string =>
    (ex.headerProtocol || ex.summary.protocolVersion || info?.protocolVersion || '').slice(0, 32);

  /** The record of one request: `arrival` (still open), `exchange` (arrival + settlement) or `settlement` (its arrival went out before). */
  const renderExchange = (ex: Exchange, kind: 'arrival' | 'exchange' | 'settlement'): OutRecord => {
    const st = ex.settlement;
    const s = ex.summary;
    const session = kind === 'settlement' && st ? st.sessionKey : ex.sessionKey;
    const info = session ? sessions.get(session) : undefined;
    const arrivalId = arrivalIdOf(ex);
    const a: Record<string, AttributeValue> = {};
    // `continuity.source` is left out: `server` is what the gateway assumes for OTLP records.
    a[A.eventId] = kind === 'arrival' ? arrivalId : newId();
    const protocol = kind === 'settlement' && st ? st.protocolVersion : arrivalProtocol(ex, info);
    put(a, A.protocolVersion, protocol);
    put(a, A.sessionKey, session);
    put(a, A.principalKey, principalKeyOf(ex));
    put(a, A.clientName, s.clientName || info?.clientName);
    put(a, A.clientVersion, s.clientVersion || info?.clientVersion);
    put(a, A.userAgent, ex.userAgent.length > 1024 ? ex.userAgent.slice(0, 1024) : ex.userAgent);
    a[A.arrivalId] = arrivalId;
    if (kind !== 'settlement') {
      const method = s.method || ex.headerMethod;
      put(a, A.httpMethod, ex.httpMethod);
      put(a, A.mcpMethod, method);
      put(a, A.jsonrpcId, s.id);
      put(a, A.toolName, s.toolName || (method === 'tools/call' ? ex.headerName : ''));
      a[A.hasCredential] = ex.hasCredential;
      if (s.batchSize > 1) a[EXTRA_BATCH_SIZE] = String(s.batchSize);
      if (ex.requestTruncated) a[kind === 'arrival' ? EXTRA_BODY_TRUNCATED : EXTRA_REQUEST_BODY_TRUNCATED] = 'true';
    }
    if (kind !== 'arrival' && st) {
      a[A.httpStatus] = st.status;
      a[A.outcome] = st.outcome;
      put(a, A.errorType, st.errorType);
      put(a, A.rpcStatusCode, st.rpcStatusCode);
      a[A.durationMs] = st.durationMs;
      a[A.sessionResolution] = st.resolution;
      put(a, A.mintedSessionKey, st.mintedSessionKey);
      if (st.truncated) a[EXTRA_BODY_TRUNCATED] = 'true';
      if (kind === 'exchange' && st.protocolVersion !== protocol) a[ATTR_SETTLED_PROTOCOL_VERSION] = st.protocolVersion;
    }
    const startUs = epochMicros(ex.startMs);
    const tsUs = kind === 'settlement' && st ? startUs + Math.max(0, Math.round(st.durationMs * 1000)) : startUs;
    return { eventName: kind === 'exchange' ? EXCHANGE_EVENT_NAME : kind, tsUs, attributes: a };
  };

  const render = (item: QueueItem): OutRecord | undefined => {
    if (item instanceof Exchange) return renderExchange(item, item.arrivalQueued ? 'settlement' : 'exchange');
    if ('arrivalOf' in item) return renderExchange(item.arrivalOf, 'arrival');
    return { eventName: String(item.event.event_type), tsUs: item.tsUs, attributes: eventAttributes(item.event) };
  };

  /** Queues the arrival records of requests still open (their body read), so an arrival leaves the process even if it never settles. */
  const queueOpenArrivals = () => {
    if (state === 'closed') return;
    for (const ex of open) {
      if (ex.arrivalQueued || ex.settled) continue;
      if (!ex.summarized) {
        if (!ex.bodyComplete) continue;
        finishRequestBody(ex);
      }
      if (!queue.hasRoom()) return;
      ex.arrivalQueued = queue.push({ arrivalOf: ex });
    }
  };

  const queue = new ExportQueue<QueueItem>({
    sink,
    counters: pipeline,
    maxQueueSize,
    maxExportBatchSize: Math.min(o.batch?.maxExportBatchSize ?? 512, maxQueueSize),
    scheduledDelayMillis: o.batch?.scheduledDelayMillis ?? 1000,
    exportTimeoutMillis: o.batch?.exportTimeoutMillis ?? 30_000,
    render,
    beforeExport: queueOpenArrivals,
    onError: internal,
  });

  const emitEvent = (event: Record<string, unknown>, tsUs: number) => {
    if (state === 'closed') return;
    queue.push({ event, tsUs });
  };

  /** Envelope fields of an application or refusal event about `ex`. */
  const envelope = (ex: Exchange, sessionKey: string) => {
    const info = sessionKey ? sessions.get(sessionKey) : undefined;
    return {
      event_id: newId(),
      source: 'server',
      protocol_version: arrivalProtocol(ex, info),
      session_key: sessionKey,
      principal_key: principalKeyOf(ex),
      client_name: ex.summary.clientName || info?.clientName || '',
      client_version: ex.summary.clientVersion || info?.clientVersion || '',
      user_agent: ex.userAgent.slice(0, 1024),
    };
  };

  const useSummary = (ex: Exchange, body: unknown) => {
    if (ex.summarized) return;
    ex.summarized = true;
    ex.summary = summarizeRequest(body) ?? emptySummary();
    const s = ex.summary;
    // notifications/cancelled (MCP "Cancellation"): mark the named in-flight request
    // (the latest open one with that id on the session). Cancellations are rare, so the
    // open requests are searched then, instead of indexing every request by its id.
    if (ex.sessionKey && s.cancelledRequestId) {
      summarizePending(ex.sessionKey);
      let target: Exchange | undefined;
      for (const other of open) {
        if (other !== ex && !other.settled && other.sessionKey === ex.sessionKey && other.summary.expectsResponse && other.summary.id === s.cancelledRequestId) target = other;
      }
      if (target) {
        // Settled now: the SDK server keeps a cancelled request's SSE stream open until
        // the session closes, so waiting for its end left it unsettled, and at a
        // shutdown it counted as in flight (a break-it pass). Whatever the response
        // still writes is the cancelled request's and changes nothing.
        target.cancelled = true;
        settle(target, false);
      }
    }
  };

  /**
   * Summarizes the request from its body: the one the host parsed (`req.body`, as
   * `express.json()` sets it, or passed to `supplyBody`) when there is one by
   * now — parsing a body twice is most of what reading it costs — else the
   * tapped bytes, parsed here. Called when the summary is first needed (an
   * export finds the request open, it settles, a cancellation names a request).
   */
  const finishRequestBody = (ex: Exchange) => {
    if (ex.summarized) return;
    const tap = ex.reqTap;
    ex.reqTap = undefined;
    const hostBody = (ex.req as (IncomingMessage & { body?: unknown }) | undefined)?.body;
    if (typeof hostBody === 'object' && hostBody !== null) return useSummary(ex, hostBody);
    if (tap?.truncated) ex.requestTruncated = true;
    useSummary(ex, tap && !tap.truncated ? tap.parse() : undefined);
  };

  /** Summarizes the complete bodies of a session's open requests, so a cancellation and its target find each other. */
  const summarizePending = (sessionKey: string) => {
    for (const other of open) if (other.bodyComplete && !other.summarized && other.sessionKey === sessionKey) finishRequestBody(other);
  };

  const onHead = (ex: Exchange, res: ServerResponse, statusArg: unknown, passed: unknown) => {
    const status = Number(statusArg);
    ex.status = Number.isInteger(status) && status > 0 ? status : res.statusCode;
    const h = headFacts(res, passed);
    const sid = header(h.sessionId);
    if (sid) ex.responseSessionKey = hash(sid);
    ex.wwwAuthenticate = h.wwwAuthenticate;
    if (!ex.headSeen) {
      ex.headSeen = true;
      ex.bodyKind = responseBodyKind(header(h.contentType), header(h.contentEncoding));
      if (ex.bodyKind === 'json') ex.jsonTap = new JsonBodyTap(maxInspectBytes);
      else if (ex.bodyKind === 'sse') {
        ex.findings = emptyFindings();
        ex.sseTap = new SseBodyTap(maxInspectBytes, undefined, ex.findings);
      }
    }
  };

  const onBody = (ex: Exchange, res: ServerResponse, chunk: unknown, encoding: unknown) => {
    if (ex.settled) return;
    if (!ex.headSeen) onHead(ex, res, res.statusCode, undefined);
    if (chunk === undefined || chunk === null || typeof chunk === 'function') return;
    const enc = typeof encoding === 'string' ? encoding : undefined;
    if (ex.jsonTap) ex.jsonTap.write(chunk, enc);
    else if (ex.sseTap) ex.sseTap.write(chunk, enc);
  };

  const checkDrain = () => {
    if (!drainWaiter) return;
    for (const ex of open) if (!ex.isStream) return;
    const resolve = drainWaiter;
    drainWaiter = undefined;
    resolve();
  };

  const settle = (ex: Exchange, finished: boolean) => {
    if (ex.settled) return;
    ex.settled = true;
    const atMs = performance.now();
    if (!ex.summarized && ex.req && !ex.req.readableEnded) {
      // The handler answered without reading the body (a session check or an
      // auth guard in front of the transport). Node dumps an unread body once the
      // response finishes; one event-loop turn lets the tap see it, so the arrival
      // still names the method of a refused miss. Without a body, headers decide.
      setImmediate(() => completeSettlement(ex, finished, atMs));
    } else completeSettlement(ex, finished, atMs);
  };

  const completeSettlement = (ex: Exchange, finished: boolean, atMs: number) => {
    open.delete(ex);
    if (ex.arrivalId) byArrival.delete(ex.arrivalId);
    try {
      if (!ex.summarized) finishRequestBody(ex);
      // A cancellation of this request may still sit unsummarized in an open exchange.
      if (ex.sessionKey && ex.summary.expectsResponse && !ex.cancelled) summarizePending(ex.sessionKey);
      const findings = ex.findings ?? (ex.findings = emptyFindings());
      const responseText = finished && ex.jsonTap ? ex.jsonTap.text() : undefined;
      if (responseText !== undefined) noteResponseText(findings, responseText);
      if (finished && ex.sseTap) ex.sseTap.end();
      findings.truncated = Boolean(ex.jsonTap?.truncated || ex.sseTap?.truncated);
      const status = ex.headSeen ? ex.status : 0;
      // (the header is read only where it can matter: this runs for every request)
      const wwwAuthenticate = status === 401 || status === 403 ? headerList(ex.wwwAuthenticate) : [];
      const challenged = isAuthChallenge(status, wwwAuthenticate);
      const v = classifySettlement({
        challenged,
        finished,
        status,
        requestSessionKey: ex.sessionKey,
        responseSessionKey: ex.responseSessionKey,
        expectsResponse: ex.summary.expectsResponse,
        sse: ex.bodyKind === 'sse',
        findings,
        cancelled: ex.cancelled,
      });
      const annotation = ex.annotation;
      const resolution: SessionResolutionValue = v.refused ? 'refused' : (annotation?.sessionResolution ?? v.resolution);
      const settledSession = ex.sessionKey || v.mintedSessionKey;
      // Remember sessions this boot served, for refused-miss reasons and client info.
      if (v.mintedSessionKey) {
        sessions.set(v.mintedSessionKey, {
          clientName: ex.summary.clientName,
          clientVersion: ex.summary.clientVersion,
          protocolVersion: findings.protocolVersion || ex.summary.protocolVersion,
        });
      }
      if (ex.sessionKey && status >= 200 && status < 300) {
        const info = sessions.get(ex.sessionKey) ?? { clientName: '', clientVersion: '', protocolVersion: ex.headerProtocol };
        // An observed DELETE explains a later refusal; any other success means the session is alive.
        info.cause = ex.httpMethod === 'DELETE' ? 'deleted' : undefined;
        sessions.set(ex.sessionKey, info);
      }
      const settledInfo = settledSession ? sessions.get(settledSession) : undefined;
      principalKeyOf(ex);
      ex.settlement = {
        status,
        outcome: v.outcome,
        errorType: v.errorType,
        rpcStatusCode: v.rpcStatusCode,
        durationMs: Math.max(0, Math.round((atMs - ex.startMs) * 1000) / 1000),
        resolution,
        mintedSessionKey: v.mintedSessionKey,
        sessionKey: settledSession,
        protocolVersion: (findings.protocolVersion || ex.headerProtocol || ex.summary.protocolVersion || settledInfo?.protocolVersion || '').slice(0, 32),
        truncated: findings.truncated,
      };
      if (state !== 'closed') queue.push(ex, ex.arrivalQueued ? 1 : 2);
      const atUs = epochMicros(atMs);
      if (v.refused) {
        let reason: RefusedReasonValue;
        let source: string;
        const info = ex.sessionKey ? sessions.get(ex.sessionKey) : undefined;
        if (annotation?.refusedReason) [reason, source] = [annotation.refusedReason, 'app'];
        else if (!ex.sessionKey) [reason, source] = ['never_seen', 'inferred'];
        else if (!info) [reason, source] = ['unknown_after_boot', 'inferred'];
        else if (info.cause) [reason, source] = [info.cause, 'lifecycle'];
        else [reason, source] = ['evicted', 'inferred'];
        const refusedAttrs: Record<string, string> = { [EXTRA_REASON_SOURCE]: source };
        const phrase = knownRefusalMessage(findings.firstError?.message ?? '');
        if (phrase) refusedAttrs[EXTRA_RPC_MESSAGE] = phrase;
        emitEvent(
          {
            event_type: 'session_refused',
            ...envelope(ex, ex.sessionKey),
            arrival_id: arrivalIdOf(ex),
            reason,
            http_status: status,
            remint_eligible: annotation?.remintEligible ?? false,
            attrs: refusedAttrs,
          },
          atUs,
        );
      }
      if (finished && challenged) {
        const c = classifyChallenge(status, wwwAuthenticate, ex.hasCredential);
        emitEvent(
          {
            event_type: 'auth_challenge',
            ...envelope(ex, ex.sessionKey),
            arrival_id: arrivalIdOf(ex),
            http_status: status,
            challenge_class: c.challenge_class,
            has_credential: ex.hasCredential,
            scope: c.scope.slice(0, 512),
            has_resource_metadata: c.has_resource_metadata,
          },
          atUs,
        );
      }
    } catch (err) {
      internal(err);
    }
    // The record needs neither the request nor the response any more.
    ex.req = undefined;
    ex.res = undefined;
    ex.jsonTap = undefined;
    ex.sseTap = undefined;
    checkDrain();
  };

  // The taps are shared functions (one per collector, not per request): each
  // finds its exchange on the object it is called on, so observing a request
  // allocates no closures. They pass every argument through unchanged.
  const tappedEmit = function (this: IncomingMessage, event: string | symbol, chunk?: unknown): boolean {
    const ex = (this as Tapped)[EXCHANGE];
    if (ex && !ex.summarized && ex.reqTap && !ex.bodyComplete) {
      // Observing 'data' through emit sees every chunk whoever reads the stream
      // (listeners, read(), Readable.toWeb) without changing its flowing mode.
      try {
        if (event === 'data') {
          ex.reqTap.write(chunk, this.readableEncoding ?? undefined);
          if (ex.reqTap.truncated) finishRequestBody(ex);
        } else if (event === 'end') {
          ex.bodyComplete = true;
          queue.schedule();
        }
      } catch (err) {
        internal(err);
      }
    }
    return ((ex?.originalEmit ?? EventEmitter.prototype.emit) as (...a: unknown[]) => boolean).apply(this, arguments as unknown as unknown[]);
  };
  const tappedWriteHead = function (this: ServerResponse, status?: unknown, reason?: unknown, headers?: unknown): ServerResponse {
    const ex = (this as Tapped)[EXCHANGE];
    if (ex && !ex.settled) {
      try {
        onHead(ex, this, status, typeof reason === 'string' ? headers : reason);
      } catch (err) {
        internal(err);
      }
    }
    return ((ex?.originalWriteHead ?? ServerResponse.prototype.writeHead) as (...a: unknown[]) => ServerResponse).apply(this, arguments as unknown as unknown[]);
  };
  // write and end: record the body chunk, then call the original (made once here, not per request).
  const tapBody = <R>(original: 'originalWrite' | 'originalEnd', fallback: (...a: unknown[]) => R) =>
    function (this: ServerResponse, chunk?: unknown, encoding?: unknown): R {
      const ex = (this as Tapped)[EXCHANGE];
      if (ex) {
        try {
          onBody(ex, this, chunk, encoding);
        } catch (err) {
          internal(err);
        }
      }
      return ((ex?.[original] ?? fallback) as (...a: unknown[]) => R).apply(this, arguments as unknown as unknown[]);
    };
  const tappedWrite = tapBody<boolean>('originalWrite', ServerResponse.prototype.write as (...a: unknown[]) => boolean);
  const tappedEnd = tapBody<ServerResponse>('originalEnd', ServerResponse.prototype.end as (...a: unknown[]) => ServerResponse);
  // One plain `on('close')` listener (not `once`, which wraps each in a new closure):
  // a ServerResponse emits 'close' after 'finish' too (Node ≥ 16), and
  // `writableFinished` tells a finished response from a connection closed first.
  function onClose(this: ServerResponse): void {
    const ex = (this as Tapped)[EXCHANGE];
    if (ex) settle(ex, this.writableFinished);
  }

  const observe = (req: IncomingMessage, res: ServerResponse) => {
    // try/catch rather than guard(() => …): no closure per request.
    try {
      if (state === 'closed' || exchangeOf(req) !== undefined || res.headersSent) return;
      if (include && !include(req)) return;
      const h = req.headers;
      const rawSession = h['mcp-session-id'];
      const method = (req.method ?? '').toUpperCase();
      const ex = new Exchange(
        req,
        res,
        performance.now(),
        method.length <= 16 ? method : method.slice(0, 16),
        rawSession === undefined ? '' : hash(header(rawSession)),
        h.authorization !== undefined,
        h['user-agent'] ?? '',
        header(h['mcp-protocol-version']).slice(0, 32),
        header(h['mcp-method']).slice(0, 128),
        header(h['mcp-name']).slice(0, 256),
      );
      (req as Tapped)[EXCHANGE] = ex;
      open.add(ex);
      ex.originalWriteHead = res.writeHead;
      ex.originalWrite = res.write;
      ex.originalEnd = res.end;
      (res as Tapped)[EXCHANGE] = ex;
      res.writeHead = tappedWriteHead as unknown as ServerResponse['writeHead'];
      res.write = tappedWrite as unknown as ServerResponse['write'];
      res.end = tappedEnd as unknown as ServerResponse['end'];
      res.on('close', onClose);
      const parsedBody = (req as IncomingMessage & { body?: unknown }).body;
      if (typeof parsedBody === 'object' && parsedBody !== null) useSummary(ex, parsedBody);
      else {
        const length = h['content-length'];
        const noBody = req.readableEnded || (h['transfer-encoding'] === undefined && (length !== undefined ? Number(length) === 0 : NO_BODY_METHODS.has(ex.httpMethod)));
        if (noBody) useSummary(ex, undefined);
        else {
          ex.reqTap = new JsonBodyTap(maxInspectBytes);
          ex.originalEmit = req.emit;
          req.emit = tappedEmit as IncomingMessage['emit'];
        }
      }
      // The arrival must leave the process even if the request never settles.
      queue.schedule();
    } catch (err) {
      internal(err);
    }
  };

  const supplyBody = (req: IncomingMessage, body: unknown) => {
    guard(() => {
      const ex = exchangeOf(req);
      if (!ex || ex.summarized) return;
      useSummary(ex, body);
    });
  };

  const annotate = (req: IncomingMessage, annotation: RequestAnnotation) => {
    guard(() => {
      const ex = exchangeOf(req);
      const a = AnnotationSchema.safeParse(annotation);
      if (!a.success) {
        rejectedCalls += 1;
        return;
      }
      if (!ex) return;
      ex.annotation = Object.assign(ex.annotation ?? {}, a.data);
      if (a.data.principal) ex.principalKey = hash(a.data.principal);
    });
  };

  /** Envelope for application-API events that are not tied to an observed exchange. */
  const appEnvelope = (sessionKey: string, principal: string | undefined, ex?: Exchange) => {
    if (ex) {
      const env = envelope(ex, sessionKey);
      if (principal) env.principal_key = hash(principal);
      return env;
    }
    const info = sessionKey ? sessions.get(sessionKey) : undefined;
    return {
      event_id: newId(),
      source: 'server',
      protocol_version: info?.protocolVersion ?? '',
      session_key: sessionKey,
      principal_key: principal ? hash(principal) : '',
      client_name: info?.clientName ?? '',
      client_version: info?.clientVersion ?? '',
    };
  };

  const recordRemint = (input: RemintInput) => {
    guard(() => {
      if (state === 'closed') return;
      const p = RemintSchema.safeParse(input);
      if (!p.success) {
        rejectedCalls += 1;
        return;
      }
      const i = p.data;
      const ex = i.arrivalId ? byArrival.get(i.arrivalId) : input.req ? exchangeOf(input.req) : undefined;
      const stale = hash(i.staleSessionId);
      const replacement = hash(i.replacementSessionId);
      if (ex && i.outcome !== 'failed' && !ex.annotation?.sessionResolution) {
        if (i.mode === 'alias') (ex.annotation ??= {}).sessionResolution = 'alias';
        else if (i.mode === 'same_id_rebuild') (ex.annotation ??= {}).sessionResolution = 'rebuilt';
      }
      if (i.outcome !== 'failed') {
        const info = sessions.get(stale);
        sessions.set(replacement, { clientName: info?.clientName ?? '', clientVersion: info?.clientVersion ?? '', protocolVersion: info?.protocolVersion ?? '' });
      }
      emitEvent(
        {
          event_type: 'remint',
          ...appEnvelope(stale, i.principal, ex),
          arrival_id: i.arrivalId ?? (ex ? arrivalIdOf(ex) : ''),
          stale_session_key: stale,
          replacement_session_key: replacement,
          mode: i.mode,
          outcome: i.outcome,
        },
        nowMicros(),
      );
    });
  };

  const recordSessionLifecycle = (input: SessionLifecycleInput) => {
    guard(() => {
      if (state === 'closed') return;
      const p = LifecycleSchema.safeParse(input);
      if (!p.success) {
        rejectedCalls += 1;
        return;
      }
      const i = p.data;
      const key = i.sessionId ? hash(i.sessionId) : '';
      if (key) {
        const info = sessions.get(key) ?? { clientName: '', clientVersion: '', protocolVersion: '' };
        const cause = LIFECYCLE_CAUSE[i.action];
        if (cause) info.cause = cause;
        else delete info.cause;
        sessions.set(key, info);
      }
      emitEvent(
        {
          event_type: 'session_lifecycle',
          ...appEnvelope(key, i.principal),
          action: i.action,
          cap_kind: i.capKind ?? 'none',
          live_count: i.liveCount,
          live_cap: i.liveCap,
          durable_count: i.durableCount,
          durable_cap: i.durableCap,
          global_count: i.globalCount,
          global_cap: i.globalCap,
          victim_idle_ms: i.victimIdleMs,
          victim_in_flight: i.victimInFlight,
        },
        nowMicros(),
      );
    });
  };

  const recordCapSnapshot = (input: CapSnapshotInput) => {
    guard(() => {
      if (state === 'closed') return;
      const p = CapSnapshotSchema.safeParse(input);
      if (!p.success) {
        rejectedCalls += 1;
        return;
      }
      const i = p.data;
      emitEvent(
        {
          event_type: 'cap_snapshot',
          ...appEnvelope('', i.principal),
          live_count: i.liveCount,
          live_cap: i.liveCap,
          durable_count: i.durableCount,
          durable_cap: i.durableCap,
          global_count: i.globalCount,
          global_cap: i.globalCap,
        },
        nowMicros(),
      );
    });
  };

  const withTimeout = async (p: Promise<unknown>, ms: number) => {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([p, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
    } catch (err) {
      internal(err);
    } finally {
      if (timer) clearTimeout(timer);
    }
  };

  const flush = async () => {
    if (state === 'closed') return;
    await queue.flush();
  };

  const signalHandlers: Array<[NodeJS.Signals, () => void]> = [];
  let shutdownPromise: Promise<void> | undefined;

  const shutdown = (opts: ShutdownOptions = {}): Promise<void> => {
    if (shutdownPromise) return shutdownPromise;
    shutdownPromise = (async () => {
      const requested = ShutdownReason.safeParse(opts.reason ?? 'signal');
      if (!requested.success) rejectedCalls += 1;
      const reason: ShutdownReasonValue = requested.success ? requested.data : 'signal';
      const drainTimeoutMs = Math.max(0, opts.drainTimeoutMs ?? 10_000);
      state = 'draining';
      const started = performance.now();
      const inFlight = open.size;
      let streams = 0;
      for (const ex of open) if (ex.isStream) streams += 1;
      let timedOut = false;
      if (inFlight - streams > 0) {
        let timer: NodeJS.Timeout | undefined;
        timedOut = await new Promise<boolean>((resolve) => {
          drainWaiter = () => resolve(false);
          timer = setTimeout(() => resolve(true), drainTimeoutMs);
          checkDrain();
        });
        drainWaiter = undefined;
        if (timer) clearTimeout(timer);
      }
      const drainMs = performance.now() - started;
      guard(() => {
        // Arrivals whose body never completed are still worth recording before the process ends.
        for (const ex of open) finishRequestBody(ex);
        queueOpenArrivals();
        const attrs: Record<string, string> = { [EXTRA_IN_FLIGHT_STREAMS]: String(streams) };
        if (timedOut) attrs[EXTRA_REQUESTED_REASON] = reason;
        emitEvent(
          {
            event_type: 'shutdown',
            event_id: newId(),
            source: 'server',
            reason: timedOut ? 'drain_timeout' : reason,
            in_flight: inFlight,
            drain_ms: Math.round(drainMs * 1000) / 1000,
            attrs,
          },
          nowMicros(),
        );
      });
      state = 'closed';
      for (const [signal, handler] of signalHandlers) process.removeListener(signal, handler);
      signalHandlers.length = 0;
      await withTimeout(queue.shutdown(), Math.max(0, opts.flushTimeoutMs ?? 5000));
    })();
    return shutdownPromise;
  };

  if (options.handleSignals) {
    const cfg = typeof options.handleSignals === 'object' ? options.handleSignals : {};
    for (const signal of cfg.signals ?? (['SIGTERM', 'SIGINT'] as NodeJS.Signals[])) {
      const handler = () => {
        void shutdown({ reason: 'signal', ...(cfg.drainTimeoutMs !== undefined ? { drainTimeoutMs: cfg.drainTimeoutMs } : {}) }).then(() => {
          // Our once-listener is gone: with no other listener, restore the default action.
          if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
        });
      };
      process.once(signal, handler);
      signalHandlers.push([signal, handler]);
    }
  }

  const fastifyPlugin = createFastifyPlugin(observe, supplyBody);

  emitEvent(
    {
      event_type: 'boot',
      event_id: newId(),
      source: 'server',
      pid: process.pid,
      started_at: Math.round(performance.timeOrigin * 1000),
    },
    nowMicros(),
  );

  return {
    enabled: true,
    bootId,
    middleware(req, res, next) {
      observe(req, res);
      next?.();
    },
    fastifyPlugin,
    wrapHandler<R>(handler: NodeHandler<R>): NodeHandler<R> {
      return function (this: unknown, req: IncomingMessage, res: ServerResponse): R {
        observe(req, res);
        return handler.call(this, req, res);
      };
    },
    observe,
    supplyBody,
    arrivalIdOf(req) {
      const ex = exchangeOf(req);
      return ex ? arrivalIdOf(ex) : undefined;
    },
    annotate,
    recordRemint,
    recordSessionLifecycle,
    recordCapSnapshot,
    counters() {
      return { ...pipeline, internal_errors: internalErrors, rejected_calls: rejectedCalls, in_flight: open.size };
    },
    flush,
    shutdown,
  };
}

/**
 * The fastify adapter: `onRequest` observes the raw request/response (so it also
 * sees handlers that `reply.hijack()` and hand `reply.raw` to the SDK transport);
 * `preHandler` supplies fastify's parsed body. Marked with `skip-override` (as
 * fastify-plugin does) so the hooks apply to the whole application, not only to
 * an encapsulated child context.
 */
function createFastifyPlugin(
  observe: (req: IncomingMessage, res: ServerResponse) => void,
  supplyBody: (req: IncomingMessage, body: unknown) => void,
): FastifyPluginCallback {
  const plugin: FastifyPluginCallback = (instance, _opts, done) => {
    instance.addHook('onRequest', (request, reply, next) => {
      observe(request.raw, reply.raw);
      next();
    });
    instance.addHook('preHandler', (request, _reply, next) => {
      if (request.body !== undefined) supplyBody(request.raw, request.body);
      next();
    });
    done();
  };
  Object.assign(plugin, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'mcp-continuity-collector' });
  return plugin;
}

function createDisabledCollector(): McpCollector {
  const zero: CollectorCounters = { ...createPipelineCounters(), internal_errors: 0, rejected_calls: 0, in_flight: 0 };
  const noop = () => {};
  const plugin: FastifyPluginCallback = (_instance, _opts, done) => done();
  Object.assign(plugin, { [Symbol.for('skip-override')]: true });
  return {
    enabled: false,
    bootId: '',
    middleware(_req, _res, next) {
      next?.();
    },
    fastifyPlugin: plugin,
    wrapHandler: (handler) => handler,
    observe: noop,
    supplyBody: noop,
    arrivalIdOf: () => undefined,
    annotate: noop,
    recordRemint: noop,
    recordSessionLifecycle: noop,
    recordCapSnapshot: noop,
    counters: () => ({ ...zero }),
    flush: async () => {},
    shutdown: async () => {},
  };
}
