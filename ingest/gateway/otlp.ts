import protobuf from 'protobufjs';

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

const root = new protobuf.Root();
for (const source of PROTO_SOURCES) protobuf.parse(source, root, { keepCase: false });
const ExportLogsServiceRequest = root.lookupType('opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest');
const ExportLogsServiceResponse = root.lookupType('opentelemetry.proto.collector.logs.v1.ExportLogsServiceResponse');

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
}

/** A structural problem with the request as a whole (not with one record). */
export class OtlpShapeError extends Error {
  override readonly name = 'OtlpShapeError';
}

/**
 * Decodes a binary protobuf ExportLogsServiceRequest.
 * @throws OtlpShapeError when the bytes are not a valid message.
 */
export function decodeOtlpProtobuf(bytes: Uint8Array): OtlpLogRecord[] {
  let message: protobuf.Message;
  try {
    message = ExportLogsServiceRequest.decode(bytes);
  } catch (err) {
    throw new OtlpShapeError(`not an OTLP ExportLogsServiceRequest: ${(err as Error).message}`);
  }
  const obj = ExportLogsServiceRequest.toObject(message, { longs: String, bytes: String, defaults: false, oneofs: false, arrays: true });
  return flatten(obj);
}

/**
 * Reads an OTLP/JSON ExportLogsServiceRequest (lowerCamelCase field names; the spec
 * also allows the original snake_case names, accepted too).
 * @throws OtlpShapeError when `resourceLogs` is missing or not an array.
 */
export function decodeOtlpJson(body: unknown): OtlpLogRecord[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new OtlpShapeError('body is not a JSON object');
  const rl = field(body, 'resourceLogs', 'resource_logs');
  if (!Array.isArray(rl)) throw new OtlpShapeError('resourceLogs must be an array');
  return flatten({ resourceLogs: rl });
}

function field(obj: unknown, camel: string, snake: string): unknown {
  if (typeof obj !== 'object' || obj === null) return undefined;
  const o = obj as Record<string, unknown>;
  return o[camel] ?? o[snake];
}

function flatten(req: unknown): OtlpLogRecord[] {
  const out: OtlpLogRecord[] = [];
  const resourceLogs = (field(req, 'resourceLogs', 'resource_logs') ?? []) as unknown[];
  for (const rl of resourceLogs) {
    const resource = kvList(field(field(rl, 'resource', 'resource'), 'attributes', 'attributes'));
    const scopeLogs = field(rl, 'scopeLogs', 'scope_logs');
    if (!Array.isArray(scopeLogs)) continue;
    for (const sl of scopeLogs) {
      const records = field(sl, 'logRecords', 'log_records');
      if (!Array.isArray(records)) continue;
      for (const rec of records) {
        const attributes = kvList(field(rec, 'attributes', 'attributes'));
        const time = String(field(rec, 'timeUnixNano', 'time_unix_nano') ?? '0');
        const observed = String(field(rec, 'observedTimeUnixNano', 'observed_time_unix_nano') ?? '0');
        const eventName = String(field(rec, 'eventName', 'event_name') ?? attributes['event.name'] ?? '');
        out.push({
          timeUnixNano: time !== '0' && time !== '' ? time : observed,
          eventName,
          attributes,
          resource,
          body: anyValue(field(rec, 'body', 'body')),
        });
      }
    }
  }
  return out;
}

function kvList(list: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!Array.isArray(list)) return out;
  for (const kv of list) {
    const key = field(kv, 'key', 'key');
    if (typeof key === 'string') out[key] = anyValue(field(kv, 'value', 'value'));
  }
  return out;
}

/** Converts an OTLP AnyValue (JSON or decoded protobuf) to a plain value; int64 as a number when safe. */
function anyValue(v: unknown): unknown {
  if (typeof v !== 'object' || v === null) return undefined;
  const o = v as Record<string, unknown>;
  if ('stringValue' in o || 'string_value' in o) return String(o.stringValue ?? o.string_value);
  if ('boolValue' in o || 'bool_value' in o) return Boolean(o.boolValue ?? o.bool_value);
  if ('intValue' in o || 'int_value' in o) {
    const n = Number(o.intValue ?? o.int_value);
    return Number.isSafeInteger(n) ? n : String(o.intValue ?? o.int_value);
  }
  if ('doubleValue' in o || 'double_value' in o) return Number(o.doubleValue ?? o.double_value);
  const arr = field(o, 'arrayValue', 'array_value');
  if (arr !== undefined) return ((field(arr, 'values', 'values') ?? []) as unknown[]).map(anyValue);
  const kvl = field(o, 'kvlistValue', 'kvlist_value');
  if (kvl !== undefined) return kvList(field(kvl, 'values', 'values'));
  const bytes = field(o, 'bytesValue', 'bytes_value');
  if (bytes !== undefined) return String(bytes);
  return undefined;
}

/** ns (decimal string) → µs (number), truncating. Returns NaN for non-numeric input. */
export function nanosToMicros(nanos: string): number {
  if (!/^\d{1,20}$/.test(nanos)) return Number.NaN;
  return Number(BigInt(nanos) / 1000n);
}
