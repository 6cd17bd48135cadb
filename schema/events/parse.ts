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
 * How deeply the value of a field may nest arrays and objects: a string or number is
 * depth 0, `[]` and `{}` are 1, `[[1]]` is 2. Deeper values are refused (`too_deep`)
 * rather than stored, because turning them into text recurses once per level and a
 * value nested a few thousand levels deep exhausts the stack (DESIGN §5: bad input
 * never crashes a component). Contract fields are scalars and `attrs` values strings,
 * so only the values of unknown fields (kept in `attrs` as JSON text) and, on the OTLP
 * route, `AnyValue`s are measured. 64 is far above any real attribute and far below
 * where recursion gets into trouble.
 */
export const MAX_NESTING_DEPTH = 64;

/**
 * Whether `value` nests arrays and objects more than `limit` levels deep (depth as in
 * {@link MAX_NESTING_DEPTH}). Iterative — an explicit stack, no recursion — so a value
 * of any depth is measured safely; it stops at the first level beyond the limit, and a
 * cyclic value (not JSON) counts as too deep. Only own enumerable properties count.
 */
export function nestingExceeds(value: unknown, limit: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const values: object[] = [value];
  const depths: number[] = [1];
  while (values.length > 0) {
    const v = values.pop()!;
    const depth = depths.pop()!;
    if (depth > limit) return true;
    if (Array.isArray(v)) {
      for (const child of v) {
        if (typeof child === 'object' && child !== null) {
          values.push(child);
          depths.push(depth + 1);
        }
      }
    } else {
      for (const key in v) {
        if (!Object.hasOwn(v, key)) continue;
        const child = (v as Record<string, unknown>)[key];
        if (typeof child === 'object' && child !== null) {
          values.push(child);
          depths.push(depth + 1);
        }
      }
    }
  }
  return false;
}

/**
 * Validates one input record against contract v1 (DESIGN §3). Never throws, for any
 * value `JSON.parse` can return (however deep or wide).
 *
 * Fields the contract does not name ("unknown fields") are kept in `attrs` instead of
 * being dropped: strings as they are, other values as JSON text. Rules around that:
 * - `attrs`, when present, must be an object of strings, with or without unknown
 *   fields beside it (`attrs` of another type is `invalid_type`, never dropped);
 * - an unknown field whose name is also an `attrs` key is kept once when both hold the
 *   same text, and refused (`attrs_conflict`) when they differ — neither value is
 *   dropped silently, and the producer is told which one to rename;
 * - an unknown field nested deeper than {@link MAX_NESTING_DEPTH} is `too_deep`;
 * - a `__proto__` key, as a field or in `attrs`, is `forbidden_key`: `JSON.parse`
 *   makes it an own property, and copying it onto an object would set that object's
 *   prototype instead of storing it (lost silently, or worse).
 *
 * Issue codes: `not_an_object`, `unknown_event_type`, `forbidden_key`, `too_deep`,
 * `attrs_conflict`, `ts_in_future`, `lone_surrogate`, and zod's own codes (`invalid_type`,
 * `invalid_format`, `too_big`, …), each with the field path (`attrs.<key>` inside attrs).
 *
 * `lone_surrogate`: a string (a field, an `attrs` key or value) holding a UTF-16
 * surrogate without its pair, e.g. from the JSON escape `"\ud800"`, which JSON.parse
 * takes (RFC 8259 §8.2 leaves such strings' behaviour unpredictable). It is not
 * Unicode text: it has no UTF-8 form (RFC 3629), and the store refuses the row ("missing
 * second part of surrogate pair"). Refused here, naming the field, rather than replaced
 * with U+FFFD: a replacement would store text the producer never sent, where DESIGN §3
 * has an event that fails the contract rejected with a coded reason. Checked on the validated event only,
 * one `isWellFormed` per string: about 0.2 µs for an arrival's 22 fields, against 4–5 µs
 * for the whole of parseEvent (Node 20, this machine, 2026-12-01).
 */
export function parseEvent(input: unknown, options: ParseOptions = {}): ParseResult {
  if (!isPlainObject(input)) {
    return { ok: false, issues: [{ path: '', code: 'not_an_object', message: 'an event is a JSON object' }] };
  }
  const record = input;
  const type = record.event_type;
  const known = typeof type === 'string' ? KNOWN.get(type as EventType) : undefined;
  if (!known) {
    return {
      ok: false,
      issues: [{ path: 'event_type', code: 'unknown_event_type', message: `unknown event_type ${describe(type)}; one of ${[...KNOWN.keys()].join(', ')}` }],
    };
  }
  const attrsIn = record.attrs;
  if (Object.hasOwn(record, '__proto__') || (isPlainObject(attrsIn) && Object.hasOwn(attrsIn, '__proto__'))) {
    return {
      ok: false,
      issues: [
        {
          path: Object.hasOwn(record, '__proto__') ? '__proto__' : 'attrs.__proto__',
          code: 'forbidden_key',
          message: 'a key named __proto__ is refused (it would replace the prototype of the object it is copied to); rename it',
        },
      ],
    };
  }
  let candidate: Record<string, unknown> = record;
  const issues: EventIssue[] = [];
  const extra = Object.keys(record).filter((k) => !known.has(k));
  // With an `attrs` that is not an object there is nothing to merge into: zod refuses it below.
  if (extra.length > 0 && (attrsIn === undefined || isPlainObject(attrsIn))) {
    const attrs: Record<string, unknown> = { ...attrsIn };
    candidate = {};
    for (const [k, v] of Object.entries(record)) {
      if (known.has(k)) {
        candidate[k] = v;
        continue;
      }
      // Only objects and arrays are measured: a scalar cannot nest, and normal events have few object-valued extras.
      if (typeof v === 'object' && v !== null && nestingExceeds(v, MAX_NESTING_DEPTH)) {
        issues.push({ path: k, code: 'too_deep', message: `nested deeper than ${MAX_NESTING_DEPTH} levels of arrays and objects` });
        continue;
      }
      const text = typeof v === 'string' ? v : JSON.stringify(v);
      if (Object.hasOwn(attrs, k) && attrs[k] !== text) {
        issues.push({
          path: k,
          code: 'attrs_conflict',
          message: `${JSON.stringify(k)} is both an unknown field and a key of attrs, with different values; rename one`,
        });
        continue;
      }
      attrs[k] = text;
    }
    candidate.attrs = attrs;
  }
  const parsed = EVENT_SCHEMAS[type as EventType].safeParse(candidate);
  if (!parsed.success) {
    for (const i of parsed.error.issues) issues.push({ path: i.path.join('.'), code: i.code, message: i.message });
  }
  if (issues.length > 0 || !parsed.success) return { ok: false, issues };
  const event = parsed.data as ContinuityEvent;
  const unpaired = lonelySurrogates(event);
  if (unpaired.length > 0) return { ok: false, issues: unpaired };
  const now = options.nowMicros ?? Date.now() * 1000;
  const skew = options.maxFutureMicros ?? 3_600_000_000;
  if (event.ts > now + skew) {
    return { ok: false, issues: [{ path: 'ts', code: 'ts_in_future', message: `event time is more than ${skew / 1e6} s in the future` }] };
  }
  return { ok: true, event };
}

const LONE_SURROGATE = 'holds a lone UTF-16 surrogate (an unpaired \\ud800–\\udfff, e.g. a JSON escape): not Unicode text, and the store cannot keep it';

/** A `lone_surrogate` issue for each string of `event` that is not well-formed UTF-16 (ECMA-262 `String.prototype.isWellFormed`). */
function lonelySurrogates(event: ContinuityEvent): EventIssue[] {
  const issues: EventIssue[] = [];
  const fields = event as unknown as Record<string, unknown>;
  for (const key in fields) {
    const value = fields[key];
    if (typeof value === 'string') {
      if (!value.isWellFormed()) issues.push({ path: key, code: 'lone_surrogate', message: LONE_SURROGATE });
    } else if (key === 'attrs') {
      const attrs = value as Record<string, string>;
      for (const k in attrs) {
        // The path shows a bad key with U+FFFD in place of its lone surrogate, so the answer itself is well-formed.
        if (!k.isWellFormed() || !attrs[k]!.isWellFormed()) issues.push({ path: `attrs.${k.toWellFormed()}`, code: 'lone_surrogate', message: LONE_SURROGATE });
      }
    }
  }
  return issues;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A short description of a value for a message: scalars as JSON, objects and arrays by kind (never serialised: they may be deep). */
function describe(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v.length > 64 ? `${v.slice(0, 64)}…` : v);
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return String(v);
  if (v === undefined) return '(missing)';
  return Array.isArray(v) ? '(an array)' : `(${typeof v === 'object' ? 'an object' : typeof v})`;
}

/** Every contract field name (envelope and all types), i.e. the expected event columns. */
export function contractFields(): Set<string> {
  const all = new Set<string>(ENVELOPE_FIELDS);
  all.add('event_type');
  for (const fields of KNOWN.values()) for (const f of fields) all.add(f);
  return all;
}
