import type { ReadableLogRecord } from '@opentelemetry/sdk-logs';
import { EVENT_SCHEMAS } from '../../schema/index.ts';
import {
  ATTR_EVENT_NAME_LEGACY,
  ATTR_MCP_REQUEST_ID_LEGACY,
  ATTR_SETTLED_PROTOCOL_VERSION,
  CONTINUITY_PREFIX,
  EXCHANGE_EVENT_NAME,
  EXTRA_BATCH_SIZE,
  EXTRA_BODY_TRUNCATED,
  EXTRA_REQUEST_BODY_TRUNCATED,
  FIELD_ATTRIBUTES,
  RESOURCE_FIELDS,
  attributeForField,
} from './semconv.ts';

/**
 * The two directions of the contract ↔ OpenTelemetry mapping (DESIGN §3): the
 * collector turns contract events into log-record attributes; the ingest gateway
 * turns OTLP log records back into contract events with {@link logRecordToEvent}.
 */

/** Attribute values the collector writes. */
export type AttributeValue = string | number | boolean;

/**
 * A time as the OpenTelemetry APIs and OTLP carry it: `[seconds, nanoseconds]`
 * (`HrTime`, as on `ReadableLogRecord.hrTime`), nanoseconds since the epoch as a
 * bigint, a decimal string or a number (OTLP `timeUnixNano`), or a `Date`.
 */
export type OtelTime = readonly [number, number] | bigint | string | number | Date;

/** One OTLP `KeyValue` (OTLP/JSON form). */
export interface OtlpKeyValue {
  readonly key: string;
  readonly value?: unknown;
}

/** Attributes either as a plain map (plain values, as the SDK gives them) or as an OTLP `KeyValue` list (values OTLP `AnyValue` objects). */
export type OtelAttributes = Readonly<Record<string, unknown>> | readonly OtlpKeyValue[];

/** A log record as the gateway sees it; see {@link logRecordToEvent}. */
export interface LogRecordInput {
  /** `LogRecord.eventName` (OTLP `eventName`): the contract `event_type`. */
  readonly eventName?: string | undefined;
  /** Event time; falls back to `observedTimestamp` when absent or zero. */
  readonly timestamp?: OtelTime | undefined;
  readonly observedTimestamp?: OtelTime | undefined;
  /** OTLP/JSON spelling of `timestamp` / `observedTimestamp`. */
  readonly timeUnixNano?: OtelTime | undefined;
  readonly observedTimeUnixNano?: OtelTime | undefined;
  readonly attributes?: OtelAttributes | undefined;
  /** The resource's attributes (`service.name`, `service.instance.id`, …). */
  readonly resourceAttributes?: OtelAttributes | undefined;
}

/** A contract event input: `event_type` plus fields by their snake_case names, not yet validated. */
export interface ContractEventInput {
  event_type: string;
  [field: string]: unknown;
}

type FieldKind = 'number' | 'boolean' | 'string' | 'record';

interface ZodNode {
  _zod: { def: { type: string; innerType?: ZodNode } };
}

const kindsByType = new Map<string, Map<string, FieldKind>>();

/** Field kinds of one event type, read from its zod schema so the mapping cannot drift from the contract. */
function fieldKinds(eventType: string): Map<string, FieldKind> | undefined {
  const cached = kindsByType.get(eventType);
  if (cached) return cached;
  const schema = (EVENT_SCHEMAS as Record<string, { shape: Record<string, unknown> } | undefined>)[eventType];
  if (!schema) return undefined;
  const kinds = new Map<string, FieldKind>();
  for (const [field, node] of Object.entries(schema.shape)) {
    let def = (node as ZodNode)._zod.def;
    while (def.innerType) def = def.innerType._zod.def;
    kinds.set(field, def.type === 'number' ? 'number' : def.type === 'boolean' ? 'boolean' : def.type === 'record' ? 'record' : 'string');
  }
  kindsByType.set(eventType, kinds);
  return kinds;
}

const ATTRIBUTE_FIELDS = new Map<string, string>([
  ...Object.entries(FIELD_ATTRIBUTES).map(([field, attr]) => [attr, field] as [string, string]),
  [ATTR_MCP_REQUEST_ID_LEGACY, 'jsonrpc_id'],
]);
const RESOURCE_ATTRIBUTE_FIELDS = new Map<string, string>(Object.entries(RESOURCE_FIELDS).map(([field, attr]) => [attr, field]));
/** Fields never written as record attributes: the type is the event name, the time is the record's. */
const NOT_ATTRIBUTES = new Set(['event_type', 'ts', 'attrs', ...Object.keys(RESOURCE_FIELDS)]);

/**
 * Log-record attributes for a contract event (the collector's direction).
 * Contract fields become their semantic-convention or `continuity.*` names
 * ({@link attributeForField}); `attrs` entries are copied under their own keys;
 * `event_type`, `ts` and the resource fields (service, instance, release,
 * environment, boot_id) are left out — they travel as the record's event name,
 * timestamp and resource. Empty strings and undefined values are omitted (the
 * contract defaults them back).
 */
export function eventAttributes(event: Readonly<Record<string, unknown>>): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  // for…in and a memoized name: this runs for every record on the request path.
  for (const field in event) {
    const value = event[field];
    if (value === undefined || value === '' || NOT_ATTRIBUTES.has(field)) continue;
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') out[attributeName(field)] = value;
  }
  const attrs = event.attrs;
  if (typeof attrs === 'object' && attrs !== null) {
    for (const k in attrs) {
      const v = (attrs as Record<string, unknown>)[k];
      if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') out[k] = v;
    }
  }
  return out;
}

const attributeNames = new Map<string, string>();

/** {@link attributeForField}, memoized (contract field names are a small fixed set). */
function attributeName(field: string): string {
  let name = attributeNames.get(field);
  if (name === undefined) {
    name = attributeForField(field);
    if (attributeNames.size < 1024) attributeNames.set(field, name);
  }
  return name;
}

/**
 * Maps an OpenTelemetry log record back to a contract event input (the ingest
 * gateway's direction; the result is then validated with `parseEvent` from
 * `schema/`). Pure; never throws.
 *
 * - `event_type` ← `eventName` (or the legacy `event.name` attribute).
 * - `ts` (µs since the epoch, UTC) ← `timestamp`, or `observedTimestamp` when the
 *   event time is absent or 0 (OTLP: unset). HrTime, bigint/decimal-string/number
 *   nanoseconds and `Date` are accepted.
 * - Semantic-convention attributes map to their fields (`mcp.method.name` →
 *   `mcp_method`, `mcp.session.id` → `session_key`, `jsonrpc.request.id` and the
 *   legacy `mcp.request.id` → `jsonrpc_id`, `gen_ai.tool.name` → `tool_name`, …,
 *   see `FIELD_ATTRIBUTES`); `continuity.<field>` maps to `<field>` for any
 *   contract field of this event type.
 * - Resource `service.name`, `service.instance.id`, `service.version`,
 *   `deployment.environment.name`, `continuity.boot_id` → `service`, `instance`,
 *   `release`, `environment`, `boot_id` (record attributes of the same name win).
 * - `source` defaults to `server` (the MCP collector is the OTLP producer).
 * - Every other record attribute is kept in `attrs` as text under its own name;
 *   other resource attributes (telemetry.sdk.*, host.*) are not kept, except
 *   `continuity.*` ones.
 * - Values are coerced to the field's contract type where lossless (OTLP/JSON
 *   sends 64-bit integers as strings; `'true'`/`'false'` to booleans); anything
 *   else is passed through unchanged so that validation reports it.
 */
export function logRecordToEvent(record: LogRecordInput): ContractEventInput {
  const attributes = toMap(record.attributes);
  const resource = toMap(record.resourceAttributes);
  const legacyName = attributes.get(ATTR_EVENT_NAME_LEGACY);
  const eventType = record.eventName || (typeof legacyName === 'string' ? legacyName : '');
  if (!record.eventName && legacyName !== undefined) attributes.delete(ATTR_EVENT_NAME_LEGACY);
  const kinds = fieldKinds(eventType);
  const out: ContractEventInput = { event_type: eventType };
  const attrs: Record<string, string> = {};

  const ts = micros(record.timestamp ?? record.timeUnixNano) || micros(record.observedTimestamp ?? record.observedTimeUnixNano);
  if (ts) out.ts = ts;

  const assign = (field: string, value: unknown) => {
    const kind = kinds?.get(field);
    if (kind === undefined || kind === 'record') return false;
    out[field] = coerce(kind, value);
    return true;
  };
  for (const [name, value] of resource) {
    const field = RESOURCE_ATTRIBUTE_FIELDS.get(name);
    if (field && assign(field, value)) continue;
    if (name.startsWith(CONTINUITY_PREFIX)) attrs[name] = text(value);
  }
  for (const [name, value] of attributes) {
    let field = ATTRIBUTE_FIELDS.get(name) ?? RESOURCE_ATTRIBUTE_FIELDS.get(name);
    if (!field && name.startsWith(CONTINUITY_PREFIX)) field = name.slice(CONTINUITY_PREFIX.length);
    // The legacy id name never overrides the current one.
    if (name === ATTR_MCP_REQUEST_ID_LEGACY && attributes.has(FIELD_ATTRIBUTES.jsonrpc_id!)) continue;
    if (field && field !== 'event_type' && field !== 'ts' && assign(field, value)) continue;
    attrs[name] = text(value);
  }
  if (out.source === undefined && kinds?.has('source')) out.source = 'server';
  if (Object.keys(attrs).length > 0) out.attrs = attrs;
  return out;
}

/**
 * Maps one log record to the contract events it carries: one, or two for an
 * `exchange` record (the collector's encoding of a request that settled before
 * its arrival was exported — README "Records on the wire"):
 *
 * - `arrival`: the record's envelope and arrival fields; `event_id` = `arrival_id`
 *   (one arrival per arrival id; the collector writes separate arrival records
 *   with that id too); `ts` = the record's time; attrs `continuity.batch_size`,
 *   and `continuity.request_body_truncated` as `continuity.body_truncated`.
 * - `settlement`: `event_id` = the record's `log.record.uid`; `ts` = the record's
 *   time + `duration_ms`; `session_key` = the request's, else the minted one;
 *   `protocol_version` = `continuity.settled_protocol_version` when present; attrs
 *   `continuity.body_truncated` (the response's).
 *
 * Other attributes that neither contract type knows go to both events' attrs. Pure; never throws.
 */
export function logRecordToEvents(record: LogRecordInput): ContractEventInput[] {
  if (record.eventName !== EXCHANGE_EVENT_NAME) return [logRecordToEvent(record)];
  const arrival = logRecordToEvent({ ...record, eventName: 'arrival' });
  const settlement = logRecordToEvent({ ...record, eventName: 'settlement' });
  const arrivalKinds = fieldKinds('arrival')!;
  const settlementKinds = fieldKinds('settlement')!;
  if (arrival.arrival_id !== undefined) arrival.event_id = arrival.arrival_id;
  const duration = typeof settlement.duration_ms === 'number' ? settlement.duration_ms : 0;
  if (typeof settlement.ts === 'number' && Number.isFinite(duration)) settlement.ts = settlement.ts + Math.max(0, Math.round(duration * 1000));
  if (settlement.session_key === undefined && settlement.minted_session_key !== undefined) settlement.session_key = settlement.minted_session_key;
  const attrs = (arrival.attrs ?? {}) as Record<string, string>;
  const settled = attrs[ATTR_SETTLED_PROTOCOL_VERSION];
  if (settled !== undefined) settlement.protocol_version = settled;
  const arrivalAttrs: Record<string, string> = {};
  const settlementAttrs: Record<string, string> = {};
  for (const [key, value] of Object.entries(attrs)) {
    if (key === ATTR_SETTLED_PROTOCOL_VERSION) continue;
    if (key === EXTRA_REQUEST_BODY_TRUNCATED) arrivalAttrs[EXTRA_BODY_TRUNCATED] = value;
    else if (key === EXTRA_BATCH_SIZE) arrivalAttrs[key] = value;
    else if (key !== EXTRA_BODY_TRUNCATED) {
      // Attributes of settlement fields are not the arrival's.
      const field = fieldOfAttribute(key);
      if (!(field && settlementKinds.has(field))) arrivalAttrs[key] = value;
    }
  }
  const sAttrs = (settlement.attrs ?? {}) as Record<string, string>;
  for (const [key, value] of Object.entries(sAttrs)) {
    const field = fieldOfAttribute(key);
    if (field && arrivalKinds.has(field)) continue;
    if (key === ATTR_SETTLED_PROTOCOL_VERSION || key === EXTRA_REQUEST_BODY_TRUNCATED || key === EXTRA_BATCH_SIZE) continue;
    settlementAttrs[key] = value;
  }
  if (Object.keys(arrivalAttrs).length > 0) arrival.attrs = arrivalAttrs;
  else delete arrival.attrs;
  if (Object.keys(settlementAttrs).length > 0) settlement.attrs = settlementAttrs;
  else delete settlement.attrs;
  return [arrival, settlement];
}

/** The contract field an attribute name stands for, if any. */
function fieldOfAttribute(name: string): string | undefined {
  return ATTRIBUTE_FIELDS.get(name) ?? (name.startsWith(CONTINUITY_PREFIX) ? name.slice(CONTINUITY_PREFIX.length) : undefined);
}

/**
 * The {@link LogRecordInput} of an SDK `ReadableLogRecord` (what an in-process
 * exporter receives), for feeding {@link logRecordToEvent} without OTLP.
 */
export function fromReadableLogRecord(record: ReadableLogRecord): LogRecordInput {
  return {
    eventName: record.eventName,
    timestamp: record.hrTime,
    observedTimestamp: record.hrTimeObserved,
    attributes: record.attributes,
    resourceAttributes: record.resource.attributes,
  };
}

/** Converts a time to integer µs since the epoch; 0 when absent, zero or unreadable. */
export function micros(t: OtelTime | undefined): number {
  try {
    if (t === undefined || t === null) return 0;
    if (Array.isArray(t)) {
      const [s, ns] = t as readonly [number, number];
      return Number.isFinite(s) && Number.isFinite(ns) ? s * 1_000_000 + Math.floor(ns / 1000) : 0;
    }
    if (t instanceof Date) return t.getTime() * 1000;
    if (typeof t === 'bigint') return Number(t / 1000n);
    if (typeof t === 'string') return /^\d+$/.test(t) ? Number(BigInt(t) / 1000n) : 0;
    if (typeof t === 'number') return Number.isFinite(t) && t > 0 ? Math.floor(t / 1000) : 0;
  } catch {
    return 0;
  }
  return 0;
}

/** Unwraps an OTLP/JSON `AnyValue` (`{stringValue}`, `{intValue}`, …); other values pass through. */
function anyValue(v: unknown): unknown {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return v;
  const o = v as Record<string, unknown>;
  if ('stringValue' in o) return o.stringValue;
  if ('boolValue' in o) return o.boolValue;
  if ('intValue' in o) return o.intValue;
  if ('doubleValue' in o) return o.doubleValue;
  if ('arrayValue' in o && typeof o.arrayValue === 'object' && o.arrayValue !== null) {
    const values = (o.arrayValue as { values?: unknown }).values;
    return Array.isArray(values) ? values.map(anyValue) : [];
  }
  return v;
}

function toMap(attributes: OtelAttributes | undefined): Map<string, unknown> {
  const map = new Map<string, unknown>();
  if (!attributes) return map;
  if (Array.isArray(attributes)) {
    for (const kv of attributes as readonly OtlpKeyValue[]) {
      if (kv && typeof kv.key === 'string') map.set(kv.key, anyValue(kv.value));
    }
  } else {
    // A map's values are plain already (the SDK's, or the gateway's decoded OTLP):
    // unwrapped again, a kvlist holding the key stringValue was read as that string.
    for (const [k, v] of Object.entries(attributes)) map.set(k, v);
  }
  return map;
}

function coerce(kind: FieldKind, value: unknown): unknown {
  if (kind === 'number') {
    if (typeof value === 'bigint') return Number(value);
    if (typeof value === 'string' && /^-?\d+(?:\.\d+)?$/.test(value)) return Number(value);
    return value;
  }
  if (kind === 'boolean') {
    if (value === 'true') return true;
    if (value === 'false') return false;
    return value;
  }
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  return value;
}

function text(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  try {
    return JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)) ?? '';
  } catch {
    return String(value);
  }
}

