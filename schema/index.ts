/** The event contract v1 (DESIGN §3): zod schemas, types, parsing. Migrations live in ./migrations. */
export { EventSource, KeyedHash, MicrosTimestamp, MIN_EVENT_MICROS, MAX_EVENT_MICROS, ENVELOPE_FIELDS } from './events/envelope.ts';
export {
  ArrivalEvent,
  ArrivalId,
  AuthChallengeEvent,
  BootEvent,
  CanaryEvent,
  CapKind,
  CapSnapshotEvent,
  ChallengeClass,
  ContinuityEvent,
  EVENT_SCHEMAS,
  EVENT_TYPES,
  LifecycleAction,
  Outcome,
  ProxyAccessEvent,
  RefusedReason,
  RemintEvent,
  RemintMode,
  RemintOutcome,
  SessionLifecycleEvent,
  SessionRefusedEvent,
  SessionResolution,
  SettlementEvent,
  ShutdownEvent,
  ShutdownReason,
  UpstreamError,
} from './events/types.ts';
export type { ContinuityEventInput, EventType } from './events/types.ts';
export { contractFields, MAX_NESTING_DEPTH, nestingExceeds, parseEvent } from './events/parse.ts';
export type { EventIssue, ParseOptions, ParseResult } from './events/parse.ts';
