import type { z } from 'zod';
import { ENVELOPE_FIELDS } from './envelope.ts';
import { EVENT_SCHEMAS, type ContinuityEvent, type EventType } from './types.ts';

/** One problem with one input record: a JSON path and a rule it broke. */
export interface EventIssue {
  readonly path: string;
  readonly code: string;
  readonly message: string;
}

export type ParseResult = { ok: true; event: ContinuityEvent } | { ok: false; issues: EventIssue[] };

/** Options for {@link parseEvent}. */
export interface ParseOptions {
  /** Current time, µs since the epoch; events later than `now + maxFutureMicros` are refused. */
  nowMicros?: number;
  /** Allowed clock skew into the future, µs (default 1 h). */
  maxFutureMicros?: number;
}

const KNOWN = new Map<EventType, Set<string>>(
  (Object.entries(EVENT_SCHEMAS) as Array<[EventType, z.ZodObject]>).map(([type, schema]) => [type, new Set(Object.keys(schema.shape))]),
);

/**
 * Validates one input record against contract v1 (DESIGN §3). Fields the
 * contract does not name are kept in `attrs` (as strings; objects as JSON)
 * instead of being dropped. Never throws.
 *
 * Issue codes: `not_an_object`, `unknown_event_type`, `ts_in_future`, and zod's own
 * codes (`invalid_type`, `invalid_format`, `too_big`, …) prefixed with the field path.
 */
export function parseEvent(input: unknown, options: ParseOptions = {}): ParseResult {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return { ok: false, issues: [{ path: '', code: 'not_an_object', message: 'an event is a JSON object' }] };
  }
  const record = input as Record<string, unknown>;
  const type = record.event_type;
  const known = typeof type === 'string' ? KNOWN.get(type as EventType) : undefined;
  if (!known) {
    return {
      ok: false,
      issues: [{ path: 'event_type', code: 'unknown_event_type', message: `unknown event_type ${JSON.stringify(type)}; one of ${[...KNOWN.keys()].join(', ')}` }],
    };
  }
  let candidate: Record<string, unknown> = record;
  const extra = Object.keys(record).filter((k) => !known.has(k));
  if (extra.length > 0) {
    const attrs: Record<string, unknown> = { ...(isPlainObject(record.attrs) ? record.attrs : {}) };
    candidate = {};
    for (const [k, v] of Object.entries(record)) {
      if (known.has(k)) candidate[k] = v;
      else attrs[k] = typeof v === 'string' ? v : JSON.stringify(v);
    }
    candidate.attrs = attrs;
  }
  const parsed = EVENT_SCHEMAS[type as EventType].safeParse(candidate);
  if (!parsed.success) {
    return {
      ok: false,
      issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), code: i.code, message: i.message })),
    };
  }
  const event = parsed.data as ContinuityEvent;
  const now = options.nowMicros ?? Date.now() * 1000;
  const skew = options.maxFutureMicros ?? 3_600_000_000;
  if (event.ts > now + skew) {
    return { ok: false, issues: [{ path: 'ts', code: 'ts_in_future', message: `event time is more than ${skew / 1e6} s in the future` }] };
  }
  return { ok: true, event };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Every contract field name (envelope and all types), i.e. the expected event columns. */
export function contractFields(): Set<string> {
  const all = new Set<string>(ENVELOPE_FIELDS);
  all.add('event_type');
  for (const fields of KNOWN.values()) for (const f of fields) all.add(f);
  return all;
}
