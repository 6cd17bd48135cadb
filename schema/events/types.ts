import { z } from 'zod';
import { envelopeShape, KeyedHash, MicrosTimestamp } from './envelope.ts';

/**
 * The event types of contract v1 (DESIGN §3), one zod object each: the envelope
 * plus the type's own fields. Times are µs since the epoch (UTC); durations are ms.
 */

const u32 = z.number().int().min(0).max(4_294_967_295);
const ms = z.number().min(0).max(1e12);
const text = (max = 256) => z.string().max(max).default('');

/** Identifier joining an arrival to its settlement, refused miss, re-mint or challenge (UUIDv7 from collectors/mcp). */
export const ArrivalId = z.string().min(1).max(64);

function eventType<T extends string, S extends z.ZodRawShape>(type: T, shape: S) {
  return z.object({ ...envelopeShape, event_type: z.literal(type), ...shape });
}

/**
 * A process incarnation's `boot_id`, required on its `boot` and `shutdown` events: a
 * service's restarts are its boots in time order, each ending the one before (DESIGN
 * §4), and its shutdown is found by that id, so boots with no id were taken for one
 * incarnation and their restarts went uncounted.
 */
const RequiredBootId = z
  .string()
  .max(128)
  .regex(/\S/, 'required on a boot or shutdown: the process incarnation it starts or ends (not blank)');

/** A process started (a new `boot_id`). */
export const BootEvent = eventType('boot', {
  boot_id: RequiredBootId,
  pid: u32.default(0),
  /** µs since the epoch. */
  started_at: MicrosTimestamp.optional(),
});

export const ShutdownReason = z.enum(['signal', 'upgrade', 'crash', 'drain_timeout']);
/** A process is stopping; `in_flight` requests were still open when draining began. */
export const ShutdownEvent = eventType('shutdown', {
  boot_id: RequiredBootId,
  reason: ShutdownReason,
  in_flight: u32.default(0),
  drain_ms: ms.default(0),
});

/** A request reached the server (before any session lookup). */
export const ArrivalEvent = eventType('arrival', {
  arrival_id: ArrivalId,
  http_method: text(16),
  /** `mcp.method.name`, e.g. tools/call; '' for GET/DELETE. */
  mcp_method: text(128),
  /** `jsonrpc.request.id` as text; '' for notifications. */
  jsonrpc_id: text(128),
  /** `gen_ai.tool.name` for tools/call. */
  tool_name: text(),
  has_credential: z.boolean().default(false),
});

export const Outcome = z.enum([
  'ok',
  'jsonrpc_error',
  'tool_error',
  'refused',
  'auth_challenge',
  'cancelled',
  'disconnected',
  'unknown',
]);
export const SessionResolution = z.enum(['known', 'new', 'alias', 'rebuilt', 'refused', 'none']);

/** The response to an arrival was finished (or abandoned). Joined to its arrival by `arrival_id`. */
export const SettlementEvent = eventType('settlement', {
  arrival_id: ArrivalId,
  http_status: z.number().int().min(0).max(999).default(0),
  outcome: Outcome,
  /** `error.type`. */
  error_type: text(128),
  /** JSON-RPC error code as text (e.g. -32001), '' when none. */
  rpc_status_code: text(32),
  duration_ms: ms.default(0),
  session_resolution: SessionResolution.default('none'),
  /** Keyed hash of a session id minted while answering (initialize, re-mint). */
  minted_session_key: KeyedHash.default(''),
});

export const RefusedReason = z.enum([
  'unknown_after_boot',
  'idle_ttl',
  'evicted',
  'deleted',
  'principal_mismatch',
  'never_seen',
  'not_eligible',
]);
/** A refused miss: a request named a session the server does not know. */
export const SessionRefusedEvent = eventType('session_refused', {
  arrival_id: z.string().max(64).default(''),
  reason: RefusedReason,
  http_status: z.number().int().min(0).max(999).default(404),
  remint_eligible: z.boolean().default(false),
});

export const RemintMode = z.enum(['alias', 'same_id_rebuild', 'client_reinit_inferred']);
export const RemintOutcome = z.enum(['created', 'coalesced', 'failed']);
/** The server rebuilt a stale session: stale → replacement. */
export const RemintEvent = eventType('remint', {
  arrival_id: z.string().max(64).default(''),
  stale_session_key: KeyedHash,
  replacement_session_key: KeyedHash,
  mode: RemintMode,
  outcome: RemintOutcome,
});

export const LifecycleAction = z.enum(['created', 'closed', 'expired', 'evicted']);
export const CapKind = z.enum(['live', 'durable', 'global', 'none']);
const capCounts = {
  live_count: u32.default(0),
  live_cap: u32.default(0),
  durable_count: u32.default(0),
  durable_cap: u32.default(0),
  global_count: u32.default(0),
  global_cap: u32.default(0),
};
/** A session was created, closed, expired or evicted, with the principal's counts after the change. */
export const SessionLifecycleEvent = eventType('session_lifecycle', {
  action: LifecycleAction,
  cap_kind: CapKind.default('none'),
  ...capCounts,
  /** How long the evicted session had been idle, ms. */
  victim_idle_ms: ms.default(0),
  victim_in_flight: u32.default(0),
});

/** Periodic per-principal counts against caps. */
export const CapSnapshotEvent = eventType('cap_snapshot', capCounts);

export const ChallengeClass = z.enum([
  'missing_credential',
  'invalid_token',
  'expired_token',
  'insufficient_scope',
  'invalid_request',
  'other',
]);
/** A 401/403 challenge, classified per RFC 6750 §3.1 (see `classifyChallenge`). */
export const AuthChallengeEvent = eventType('auth_challenge', {
  arrival_id: z.string().max(64).default(''),
  http_status: z.number().int().min(0).max(999),
  challenge_class: ChallengeClass,
  has_credential: z.boolean().default(false),
  scope: text(512),
  has_resource_metadata: z.boolean().default(false),
});

export const UpstreamError = z.enum(['connection_refused', 'timeout', 'reset', 'incomplete_response', 'other', '']);
/** One reverse-proxy access-log line. */
export const ProxyAccessEvent = eventType('proxy_access', {
  http_method: text(16),
  url_path: text(2048),
  http_status: z.number().int().min(0).max(999),
  duration_ms: ms.default(0),
  /** Response body bytes. */
  bytes: z.number().int().min(0).default(0),
  /** Keyed hash of `Mcp-Session-Id` sent by the client. */
  request_session_key: KeyedHash.default(''),
  /** Keyed hash of `Mcp-Session-Id` in the response (the session an initialize minted). */
  response_session_key: KeyedHash.default(''),
  has_credential: z.boolean().default(false),
  /** The proxy answered itself (e.g. 502 on a refused dial). */
  proxy_generated: z.boolean().default(false),
  upstream_error: UpstreamError.default(''),
  /** `client.address`: the peer address the proxy saw. */
  client_address: text(64),
  /** `client.port`. */
  client_port: z.number().int().min(0).max(65_535).default(0),
});

/** One step of a synthetic canary probe. */
export const CanaryEvent = eventType('canary', {
  canary_id: z.string().min(1).max(128),
  step: text(128),
  ok: z.boolean(),
  detail: text(4096),
});

/** Every event of contract v1, discriminated on `event_type`. */
export const ContinuityEvent = z.discriminatedUnion('event_type', [
  BootEvent,
  ShutdownEvent,
  ArrivalEvent,
  SettlementEvent,
  SessionRefusedEvent,
  RemintEvent,
  SessionLifecycleEvent,
  CapSnapshotEvent,
  AuthChallengeEvent,
  ProxyAccessEvent,
  CanaryEvent,
]);
export type ContinuityEvent = z.infer<typeof ContinuityEvent>;
/** Input shape (before defaults are applied). */
export type ContinuityEventInput = z.input<typeof ContinuityEvent>;
export type EventType = ContinuityEvent['event_type'];

export const EVENT_SCHEMAS = {
  boot: BootEvent,
  shutdown: ShutdownEvent,
  arrival: ArrivalEvent,
  settlement: SettlementEvent,
  session_refused: SessionRefusedEvent,
  remint: RemintEvent,
  session_lifecycle: SessionLifecycleEvent,
  cap_snapshot: CapSnapshotEvent,
  auth_challenge: AuthChallengeEvent,
  proxy_access: ProxyAccessEvent,
  canary: CanaryEvent,
} as const satisfies Record<EventType, z.ZodObject>;

export const EVENT_TYPES = Object.keys(EVENT_SCHEMAS) as EventType[];

export type ProxyAccessEvent = z.infer<typeof ProxyAccessEvent>;
export type AuthChallengeEvent = z.infer<typeof AuthChallengeEvent>;
export type ChallengeClass = z.infer<typeof ChallengeClass>;

// Re-exported for the column-contract test.
export { KeyedHash };
