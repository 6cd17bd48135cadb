import protobuf from 'protobufjs';
import { MAX_NESTING_DEPTH, type EventIssue } from '../../schema/index.ts';

/**
 * OTLP/HTTP logs decoding (OpenTelemetry Protocol specification, "OTLP/HTTP":
 * binary protobuf `application/x-protobuf` and JSON `application/json` encodings of
 * `ExportLogsServiceRequest`). Both decode to the same {@link OtlpLogRecord} list.
 *
 * The message definitions below are the subset of opentelemetry-proto (Apache-2.0;
 * collector/logs/v1, logs/v1, common/v1, resource/v1) the gateway reads; field
 * numbers are the spec's, so any conforming exporter's bytes decode.
 */

const PROTO_SOURCES = [
  `syntax = "proto3"; package opentelemetry.proto.common.v1;
   message AnyValue { oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4;
     ArrayValue array_value = 5; KeyValueList kvlist_value = 6; bytes bytes_value = 7; } }
   message ArrayValue { repeated AnyValue values = 1; }
   message KeyValueList { repeated KeyValue values = 1; }
   message KeyValue { string key = 1; AnyValue value = 2; }
   message InstrumentationScope { string name = 1; string version = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4; }`,
  `syntax = "proto3"; package opentelemetry.proto.resource.v1;
   message Resource { repeated opentelemetry.proto.common.v1.KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }`,
  `syntax = "proto3"; package opentelemetry.proto.logs.v1;
   message ResourceLogs { opentelemetry.proto.resource.v1.Resource resource = 1; repeated ScopeLogs scope_logs = 2; string schema_url = 3; }
   message ScopeLogs { opentelemetry.proto.common.v1.InstrumentationScope scope = 1; repeated LogRecord log_records = 2; string schema_url = 3; }
   message LogRecord { fixed64 time_unix_nano = 1; fixed64 observed_time_unix_nano = 11; int32 severity_number = 2; string severity_text = 3;
     opentelemetry.proto.common.v1.AnyValue body = 5; repeated opentelemetry.proto.common.v1.KeyValue attributes = 6;
     uint32 dropped_attributes_count = 7; fixed32 flags = 8; bytes trace_id = 9; bytes span_id = 10; string event_name = 12; }`,
  `syntax = "proto3"; package opentelemetry.proto.collector.logs.v1;
   message ExportLogsServiceRequest { repeated opentelemetry.proto.logs.v1.ResourceLogs resource_logs = 1; }
   message ExportLogsServiceResponse { ExportLogsPartialSuccess partial_success = 1; }
   message ExportLogsPartialSuccess { int64 rejected_log_records = 1; string error_message = 2; }`,
];

/**
 * The same request with each `Resource` and `LogRecord` left as bytes (a message and a
 * `bytes` field share wire type 2, so these read any conforming request). The request is
 * decoded in two layers: the outer one cannot recurse deeply, and each resource and record
 * is then decoded on its own, so one nested too deeply to decode is refused alone instead
 * of failing the whole request.
 */
const SHALLOW_SOURCE = `syntax = "proto3"; package continuity.otlp.shallow;
   message ExportLogsServiceRequest { repeated ResourceLogs resource_logs = 1; }
   message ResourceLogs { bytes resource = 1; repeated ScopeLogs scope_logs = 2; }
   message ScopeLogs { repeated bytes log_records = 2; }`;

const root = new protobuf.Root();
for (const source of [...PROTO_SOURCES, SHALLOW_SOURCE]) protobuf.parse(source, root, { keepCase: false });
const ExportLogsServiceRequest = root.lookupType('opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest');
const ExportLogsServiceResponse = root.lookupType('opentelemetry.proto.collector.logs.v1.ExportLogsServiceResponse');
const ShallowRequest = root.lookupType('continuity.otlp.shallow.ExportLogsServiceRequest');
const Resource = root.lookupType('opentelemetry.proto.resource.v1.Resource');
const LogRecord = root.lookupType('opentelemetry.proto.logs.v1.LogRecord');
const TO_OBJECT: protobuf.IConversionOptions = { longs: String, bytes: String, defaults: false, oneofs: false, arrays: true };

/** Encodes an ExportLogsServiceResponse (protobuf), with partial success when records were rejected. */
export function encodeOtlpResponse(partial?: { rejectedLogRecords: number; errorMessage: string }): Buffer {
  const message = ExportLogsServiceResponse.create(partial ? { partialSuccess: partial } : {});
  return Buffer.from(ExportLogsServiceResponse.encode(message).finish());
}

/** Encodes an ExportLogsServiceRequest from its OTLP/JSON-shaped object (tests, tools). */
export function encodeOtlpRequest(request: Record<string, unknown>): Buffer {
  return Buffer.from(ExportLogsServiceRequest.encode(ExportLogsServiceRequest.fromObject(request)).finish());
}

/** One log record with its resource, attributes flattened to plain JS values. */
export interface OtlpLogRecord {
  /** Event time, ns since the epoch as a decimal string (`time_unix_nano`, or `observed_time_unix_nano` when 0). */
  readonly timeUnixNano: string;
  /** `event_name` (or the `event.name` attribute of older SDKs), '' when absent. */
  readonly eventName: string;
  readonly attributes: Readonly<Record<string, unknown>>;
  readonly resource: Readonly<Record<string, unknown>>;
  readonly body: unknown;
  /**
   * Why the record cannot be taken as decoded, when it cannot: an `AnyValue` (attribute
   * value or body) nested more than `MAX_NESTING_DEPTH` arrays and kvlists deep, or too
   * deeply to decode at all (`too_deep`); an attribute named `__proto__`
   * (`forbidden_key`); `eventName` or a time that is not a string or number
   * (`invalid_type`). Paths are the record's (`attributes.<key>`,
   * `resource.attributes.<key>`, `body`, `eventName`). The gateway refuses such a record
   * with these issues and keeps the others of the request. Absent when there are none.
   */
  readonly issues?: readonly EventIssue[];
}

/** A structural problem with the request as a whole (not with one record). */
export class OtlpShapeError extends Error {
  override readonly name = 'OtlpShapeError';
}

/**
 * The most log records (OTLP) or events (`/v1/events`) one request may carry. A
 * body within the 10 MiB limit held 5,000,000 empty records (10 MB of protobuf,
 * 9.8 KB gzipped; 3.5M as JSON): decoding them ran `serve` out of heap, and it hung
 * holding the store (a break-it pass). Real batches are far smaller (the OpenTelemetry
 * SDKs' BatchLogRecordProcessor exports at most 512 by default), and a 10 MiB body of
 * real events holds about 35,000.
 */
export const MAX_RECORDS_PER_REQUEST = 50_000;

/** A request with more than {@link MAX_RECORDS_PER_REQUEST} records: `count` (at least that many + 1). */
export class OtlpTooManyRecords extends Error {
  override readonly name = 'OtlpTooManyRecords';
  constructor(readonly count: number) {
    super(`more than ${MAX_RECORDS_PER_REQUEST} log records in one request`);
  }
}

/**
 * Counts the log records of a protobuf ExportLogsServiceRequest from its wire format
 * alone (resource_logs = 1 > scope_logs = 2 > log_records = 2, the OTLP proto's field
 * numbers), decoding no record, and stops past `limit`. Bytes that are not a valid
 * message end the count where they go wrong: the decoder refuses them after.
 * @returns the records counted, at most `limit + 1`.
 */
export function countProtobufLogRecords(bytes: Uint8Array, limit: number = MAX_RECORDS_PER_REQUEST): number {
  let count = 0;
  // Each level reads the fields of its message with protobufjs's Reader (a view of the
  // same bytes, no copy), descends into the field it asks for and skips the others; at
  // the last level each field asked for is a record, only counted. A field is matched
  // by its number alone and read as length-delimited whatever its wire type, as the
  // decoders protobufjs generates read a message or bytes field (`switch (tag >>> 3)`):
  // records tagged with wire type 0 were not counted, and decoded (a break-it pass).
  const walk = (message: Uint8Array, levels: readonly number[]): void => {
    const reader = protobuf.Reader.create(message);
    while (reader.pos < reader.len && count <= limit) {
      const tag = reader.uint32();
      if (tag >>> 3 === levels[0]) {
        const len = reader.uint32();
        if (levels.length === 1) count++;
        else walk(message.subarray(reader.pos, reader.pos + len), levels.slice(1));
        reader.skip(len);
      } else reader.skipType(tag & 7);
    }
  };
  try {
    walk(bytes, [1, 2, 2]);
  } catch {
    // (bytes that are not a message: counted up to where they go wrong)
  }
  return Math.min(count, limit + 1);
}

/** Counts the log records of an OTLP/JSON request's `resourceLogs` (either field naming), stopping past `limit`. */
function countJsonLogRecords(resourceLogs: readonly unknown[], limit: number): number {
  let count = 0;
  for (const r of resourceLogs) {
    const sls = field(r, 'scopeLogs', 'scope_logs');
    if (!Array.isArray(sls)) continue;
    for (const sl of sls) {
      const records = field(sl, 'logRecords', 'log_records');
      if (Array.isArray(records)) count += records.length;
      if (count > limit) return count;
    }
  }
  return count;
}

/**
 * Decodes a binary protobuf ExportLogsServiceRequest. A resource or log record that nests
 * protobuf messages deeper than the decoder allows (protobufjs `Reader.recursionLimit`,
 * 100 like protoc's default; an AnyValue costs 2 messages per array level and 3 per
 * kvlist level, so about 32 kvlists) is not an error of the request: its records carry a
 * `too_deep` issue ({@link OtlpLogRecord.issues}) and the others are kept.
 * @throws OtlpShapeError when the bytes are not a valid message; OtlpTooManyRecords over
 *   {@link MAX_RECORDS_PER_REQUEST} records (counted before anything is decoded).
 */
export function decodeOtlpProtobuf(bytes: Uint8Array): OtlpLogRecord[] {
  const n = countProtobufLogRecords(bytes);
  if (n > MAX_RECORDS_PER_REQUEST) throw new OtlpTooManyRecords(n);
  let shallow: { resourceLogs?: Array<{ resource?: Uint8Array; scopeLogs?: Array<{ logRecords?: Uint8Array[] }> }> };
  try {
    shallow = ShallowRequest.decode(bytes) as unknown as typeof shallow;
  } catch (err) {
    throw new OtlpShapeError(`not an OTLP ExportLogsServiceRequest: ${(err as Error).message}`);
  }
  const resourceLogs = (shallow.resourceLogs ?? []).map((rl) => ({
    resource: decodePart(Resource, rl.resource),
    scopeLogs: (rl.scopeLogs ?? []).map((sl) => ({ logRecords: (sl.logRecords ?? []).map((r) => decodePart(LogRecord, r)) })),
  }));
  return flatten({ resourceLogs });
}

/** A resource or log record the protobuf decoder refused for its nesting depth. */
class Undecodable {
  constructor(readonly issue: EventIssue) {}
}

function decodePart(type: protobuf.Type, bytes: Uint8Array | undefined): unknown {
  if (bytes === undefined || bytes.length === 0) return {};
  try {
    return type.toObject(type.decode(bytes), TO_OBJECT);
  } catch (err) {
    const message = (err as Error)?.message ?? '';
    // protobufjs's own limit, or (should it lack one) the stack running out.
    if (message === 'maximum nesting depth exceeded' || (err instanceof RangeError && /call stack/i.test(message))) {
      return new Undecodable({
        path: '',
        code: 'too_deep',
        message: `the ${type.name} nests protobuf messages more than ${protobuf.Reader.recursionLimit} deep, the decoder's limit (about 32 levels of kvlistValue)`,
      });
    }
    throw new OtlpShapeError(`not an OTLP ExportLogsServiceRequest: ${type.name}: ${message}`);
  }
}

/**
 * Reads an OTLP/JSON ExportLogsServiceRequest (lowerCamelCase field names; the spec
 * also allows the original snake_case names, accepted too). Records whose values are
 * too deep, or otherwise unusable, carry {@link OtlpLogRecord.issues}.
 * A missing (or null) `resourceLogs` is an empty request, as an omitted field is in
 * OTLP/JSON (the protobuf JSON mapping: a field left out has its default, an empty
 * list), and as an empty protobuf body is (a break-it pass found `{}` refused).
 * @throws OtlpShapeError when the body is not an object, or `resourceLogs` is not an array;
 *   OtlpTooManyRecords over {@link MAX_RECORDS_PER_REQUEST} records.
 */
export function decodeOtlpJson(body: unknown): OtlpLogRecord[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new OtlpShapeError('body is not a JSON object');
  const rl = field(body, 'resourceLogs', 'resource_logs') ?? [];
  if (!Array.isArray(rl)) throw new OtlpShapeError('resourceLogs must be an array');
  const n = countJsonLogRecords(rl, MAX_RECORDS_PER_REQUEST);
  if (n > MAX_RECORDS_PER_REQUEST) throw new OtlpTooManyRecords(n);
  return flatten({ resourceLogs: rl });
}

function field(obj: unknown, camel: string, snake: string): unknown {
  if (typeof obj !== 'object' || obj === null) return undefined;
  const o = obj as Record<string, unknown>;
  return o[camel] ?? o[snake];
}

function flatten(req: unknown): OtlpLogRecord[] {
  const out: OtlpLogRecord[] = [];
  const resourceLogs = field(req, 'resourceLogs', 'resource_logs');
  if (!Array.isArray(resourceLogs)) return out;
  for (const rl of resourceLogs) {
    const resourceIssues: EventIssue[] = [];
    const res = field(rl, 'resource', 'resource');
    if (res instanceof Undecodable) resourceIssues.push({ ...res.issue, path: 'resource' });
    const resource = attributeMap(field(res, 'attributes', 'attributes'), 'resource.attributes', resourceIssues);
    const scopeLogs = field(rl, 'scopeLogs', 'scope_logs');
    if (!Array.isArray(scopeLogs)) continue;
    for (const sl of scopeLogs) {
      const records = field(sl, 'logRecords', 'log_records');
      if (!Array.isArray(records)) continue;
      for (const rec of records) {
        const issues = [...resourceIssues];
        if (rec instanceof Undecodable) {
          issues.push(rec.issue);
          out.push({ timeUnixNano: '0', eventName: '', attributes: Object.create(null) as Record<string, unknown>, resource, body: undefined, issues });
          continue;
        }
        const attributes = attributeMap(field(rec, 'attributes', 'attributes'), 'attributes', issues);
        const time = nanosText(scalarText(field(rec, 'timeUnixNano', 'time_unix_nano'), 'timeUnixNano', issues), 'timeUnixNano', issues);
        const observed = nanosText(scalarText(field(rec, 'observedTimeUnixNano', 'observed_time_unix_nano'), 'observedTimeUnixNano', issues), 'observedTimeUnixNano', issues);
        const eventName =
          scalarText(field(rec, 'eventName', 'event_name'), 'eventName', issues) ?? scalarText(attributes['event.name'], 'attributes.event.name', issues) ?? '';
        let body: unknown;
        try {
          body = anyValue(field(rec, 'body', 'body'), 0);
        } catch (err) {
          if (!(err instanceof AnyValueIssue)) throw err;
          issues.push({ path: 'body', code: err.code, message: err.message });
        }
        out.push({
          timeUnixNano: time !== '0' && time !== '' ? time : observed,
          eventName,
          attributes,
          resource,
          body,
          ...(issues.length > 0 ? { issues } : {}),
        });
      }
    }
  }
  return out;
}

/** Thrown by {@link anyValue} for a value it cannot take; caught per attribute (or body), so it never leaves this module. */
class AnyValueIssue extends Error {
  constructor(
    readonly code: 'too_deep' | 'invalid_type',
    message: string,
  ) {
    super(message);
  }
}

/**
 * A record's or resource's attributes as a map without a prototype, so that no key can
 * reach one. A key named `__proto__` is refused all the same (`forbidden_key`):
 * downstream code copies attributes onto ordinary objects, where it would be lost or
 * replace their prototype. A value nested too deeply is refused by its key (`too_deep`).
 */
function attributeMap(list: unknown, path: string, issues: EventIssue[]): Record<string, unknown> {
  const out = Object.create(null) as Record<string, unknown>;
  if (list === undefined || list === null) return out;
  if (!Array.isArray(list)) {
    // (an object of attributes was read as none, silently: a break-it pass; OTLP/JSON
    // writes them as a list of { key, value })
    issues.push({ path, code: 'invalid_type', message: `expected a list of { "key", "value" } (OTLP KeyValue), received ${typeof list}` });
    return out;
  }
  for (const kv of list) {
    const key = field(kv, 'key', 'key');
    if (typeof key !== 'string') continue;
    if (key === '__proto__') {
      issues.push({ path: `${path}.__proto__`, code: 'forbidden_key', message: 'an attribute named __proto__ is refused (it would replace the prototype of the map it is copied to); rename it' });
      continue;
    }
    try {
      out[key] = anyValue(field(kv, 'value', 'value'), 0);
    } catch (err) {
      if (!(err instanceof AnyValueIssue)) throw err;
      issues.push({ path: `${path}.${key}`, code: err.code, message: err.message });
    }
  }
  return out;
}

/** A nested kvlist as a map without a prototype (any key, `__proto__` too, is an ordinary one there). */
function kvList(list: unknown, depth: number): Record<string, unknown> {
  const out = Object.create(null) as Record<string, unknown>;
  if (!Array.isArray(list)) return out;
  for (const kv of list) {
    const key = field(kv, 'key', 'key');
    if (typeof key === 'string') out[key] = anyValue(field(kv, 'value', 'value'), depth);
  }
  return out;
}

/**
 * Converts an OTLP AnyValue (JSON or decoded protobuf) to a plain value; int64 as a
 * number when safe. `outer` counts the arrays and kvlists around the value: recursion
 * stops at {@link MAX_NESTING_DEPTH}, so no input can exhaust the stack here.
 * @throws AnyValueIssue `too_deep` for an array or kvlist that would be nested deeper
 *   than that; `invalid_type` for a string, int, double or bytes value that is an
 *   object or array in the JSON (converting it would walk it, recursively).
 */
function anyValue(v: unknown, outer: number): unknown {
  if (typeof v !== 'object' || v === null) return undefined;
  const o = v as Record<string, unknown>;
  if ('stringValue' in o || 'string_value' in o) return String(scalar(o.stringValue ?? o.string_value));
  if ('boolValue' in o || 'bool_value' in o) return boolScalar(o.boolValue ?? o.bool_value);
  if ('intValue' in o || 'int_value' in o) {
    const raw = scalar(o.intValue ?? o.int_value);
    const n = Number(raw);
    return Number.isSafeInteger(n) ? n : String(raw);
  }
  if ('doubleValue' in o || 'double_value' in o) return Number(scalar(o.doubleValue ?? o.double_value));
  const arr = field(o, 'arrayValue', 'array_value');
  if (arr !== undefined) {
    if (outer >= MAX_NESTING_DEPTH) throw tooDeep();
    const values = field(arr, 'values', 'values');
    return Array.isArray(values) ? values.map((x) => anyValue(x, outer + 1)) : [];
  }
  const kvl = field(o, 'kvlistValue', 'kvlist_value');
  if (kvl !== undefined) {
    if (outer >= MAX_NESTING_DEPTH) throw tooDeep();
    return kvList(field(kvl, 'values', 'values'), outer + 1);
  }
  const bytes = field(o, 'bytesValue', 'bytes_value');
  if (bytes !== undefined) return String(scalar(bytes));
  return undefined;
}

function tooDeep(): AnyValueIssue {
  return new AnyValueIssue('too_deep', `nested deeper than ${MAX_NESTING_DEPTH} levels of arrayValue and kvlistValue`);
}

/**
 * An OTLP/JSON boolValue: JSON true or false, or the strings "true" and "false" (what
 * protobuf's JSON parsers also take). `Boolean("false")` stored true (a break-it pass).
 * @throws AnyValueIssue `invalid_type` for anything else.
 */
function boolScalar(v: unknown): boolean {
  if (typeof v === 'boolean') return v;
  if (v === 'true' || v === 'false') return v === 'true';
  throw new AnyValueIssue('invalid_type', `expected a boolValue of true or false, received ${JSON.stringify(v) ?? String(v)}`);
}

/** A JSON scalar as it is. */
function scalar(v: unknown): unknown {
  if (typeof v === 'object' && v !== null) throw new AnyValueIssue('invalid_type', `expected a scalar value, received ${Array.isArray(v) ? 'an array' : 'an object'}`);
  return v;
}

/** A string or number field as text; undefined when absent; an issue when it is anything else. */
function scalarText(v: unknown, path: string, issues: EventIssue[]): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean') return String(v);
  issues.push({ path, code: 'invalid_type', message: `expected a string or number, received ${Array.isArray(v) ? 'an array' : typeof v}` });
  return undefined;
}

/**
 * A fixed64 time's text as OTLP/JSON writes it (decimal digits, a string or a number;
 * '0' when absent), with an issue for any other text: "1e18" was reported as "ts:
 * expected number, received undefined" (a break-it pass).
 */
function nanosText(text: string | undefined, path: string, issues: EventIssue[]): string {
  if (text === undefined || text === '') return '0';
  if (NANOS.test(text)) return text;
  issues.push({ path, code: 'invalid_type', message: `expected nanoseconds since the epoch as decimal digits (OTLP fixed64), received ${JSON.stringify(text.slice(0, 40))}` });
  return '0';
}

/** A fixed64 count of nanoseconds as decimal text (at most 20 digits: 2^64 has 20). */
const NANOS = /^\d{1,20}$/;

/** ns (decimal string) → µs (number), truncating. Returns NaN for non-numeric input. */
export function nanosToMicros(nanos: string): number {
  if (!NANOS.test(nanos)) return Number.NaN;
  return Number(BigInt(nanos) / 1000n);
}
