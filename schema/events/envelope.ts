import { z } from 'zod';

/**
 * The event envelope of contract v1 (DESIGN §3), carried by every event type.
 * Column names are snake_case and equal the ClickHouse column names.
 */

/** Where an event was observed. */
export const EventSource = z.enum(['server', 'proxy', 'client', 'canary', 'import']);
export type EventSource = z.infer<typeof EventSource>;

/**
 * A keyed hash (HMAC-SHA-256, hex, 16–64 chars) of a raw identifier, or '' when the
 * event has none. Raw session ids and principals never pass this check.
 */
export const KeyedHash = z
  .string()
  .regex(/^(?:[0-9a-f]{16,64})?$/, 'a keyed hash: 16–64 lowercase hex characters (raw ids are never accepted)');

/**
 * Event time: integer microseconds since the Unix epoch, UTC, from 2000-01-01 to
 * 2106-02-07 06:28:15.999999. The upper bound is the last second a ClickHouse
 * `DateTime` (UInt32 seconds) holds: the derived tables key their rows by the
 * minute, hour or day as a `DateTime` (schema/migrations/0008, 0014, 0016, 0017),
 * which wraps an event after it to a time decades earlier (found by a break-it
 * pass: a 2xx dated 2163 turned a challenge of 2026 from lost to unresolved).
 */
export const MicrosTimestamp = z
  .number()
  .int('integer microseconds')
  .min(946_684_800_000_000, 'microseconds since the epoch, after 2000-01-01')
  .max(4_294_967_295_999_999, 'microseconds since the epoch, before 2106-02-07 06:28:16 (the last second a DateTime holds)');

/** {@link MicrosTimestamp}'s bounds, both included: µs since the Unix epoch. */
export const MIN_EVENT_MICROS = MicrosTimestamp.minValue!;
export const MAX_EVENT_MICROS = MicrosTimestamp.maxValue!;

const text = (max = 256) => z.string().max(max).default('');

/** Envelope fields and their defaults. `event_type` is added by each type's schema. */
export const envelopeShape = {
  /** Producer-assigned UUID; the deduplication key. */
  event_id: z.uuid({ version: undefined }),
  ts: MicrosTimestamp,
  source: EventSource,
  /** `service.name` of the emitting component. */
  service: text(),
  /** `service.instance.id`. */
  instance: text(),
  /** Process incarnation; changes on every start (a boot). */
  boot_id: text(128),
  /** `service.version`: the deployed release. */
  release: text(),
  environment: text(),
  /** `mcp.protocol.version` the request negotiated or carried (e.g. 2025-11-25, 2026-07-28). */
  protocol_version: text(32),
  /** Keyed hash of `Mcp-Session-Id` (empty for sessionless protocol revisions). */
  session_key: KeyedHash.default(''),
  /** Keyed hash of the authenticated principal. */
  principal_key: KeyedHash.default(''),
  client_name: text(),
  client_version: text(),
  user_agent: text(1024),
  /** Everything else, as strings; unknown input fields land here instead of being dropped. */
  attrs: z.record(z.string(), z.string()).default({}),
} as const;

export const ENVELOPE_FIELDS = Object.keys(envelopeShape) as ReadonlyArray<keyof typeof envelopeShape>;
