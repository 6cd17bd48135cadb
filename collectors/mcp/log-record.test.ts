import { describe, expect, it } from 'vitest';
import { parseEvent } from '../../schema/index.ts';
import { eventAttributes, logRecordToEvent, logRecordToEvents, micros } from './log-record.ts';
import { attributeForField } from './semconv.ts';

const KEY = '0123456789abcdef0123456789abcdef';
const base = {
  eventName: 'settlement',
  timestamp: [1_767_225_600, 123_456_789] as const,
  resourceAttributes: { 'service.name': 'svc', 'service.instance.id': 'i-1', 'service.version': 'r9', 'deployment.environment.name': 'prod', 'continuity.boot_id': 'boot-1', 'telemetry.sdk.name': 'opentelemetry' },
};

describe('logRecordToEvent', () => {
  it('maps semantic-convention and continuity.* attributes onto contract fields', () => {
    const e = logRecordToEvent({
      ...base,
      attributes: {
        'log.record.uid': '01a22af1-ed89-76b3-b6d1-5835bf820912',
        'mcp.session.id': KEY,
        'mcp.protocol.version': '2025-11-25',
        'http.response.status_code': 200,
        'continuity.arrival_id': 'arr-1',
        'continuity.outcome': 'tool_error',
        'error.type': 'tool_error',
        'continuity.duration_ms': 12.5,
        'continuity.session_resolution': 'known',
        'continuity.batch_size': '2',
      },
    });
    expect(e).toEqual({
      event_type: 'settlement',
      ts: 1_767_225_600_123_456,
      service: 'svc',
      instance: 'i-1',
      release: 'r9',
      environment: 'prod',
      boot_id: 'boot-1',
      event_id: '01a22af1-ed89-76b3-b6d1-5835bf820912',
      session_key: KEY,
      protocol_version: '2025-11-25',
      http_status: 200,
      arrival_id: 'arr-1',
      outcome: 'tool_error',
      error_type: 'tool_error',
      duration_ms: 12.5,
      session_resolution: 'known',
      source: 'server',
      attrs: { 'continuity.batch_size': '2' },
    });
    expect(parseEvent(e).ok).toBe(true);
  });

  it('accepts the legacy mcp.request.id, OTLP/JSON KeyValue lists, AnyValue objects and string-encoded ints', () => {
    const e = logRecordToEvent({
      eventName: 'arrival',
      timeUnixNano: '1767225600123456789',
      attributes: [
        { key: 'log.record.uid', value: { stringValue: '01a22af1-ed89-76b3-b6d1-5835bf820912' } },
        { key: 'continuity.arrival_id', value: { stringValue: 'a-1' } },
        { key: 'mcp.request.id', value: { intValue: '42' } },
        { key: 'mcp.method.name', value: { stringValue: 'tools/call' } },
        { key: 'continuity.has_credential', value: { boolValue: true } },
        { key: 'custom.thing', value: { arrayValue: { values: [{ stringValue: 'x' }] } } },
      ],
      resourceAttributes: [{ key: 'service.name', value: { stringValue: 'svc' } }],
    });
    expect(e).toMatchObject({ ts: 1_767_225_600_123_456, jsonrpc_id: '42', mcp_method: 'tools/call', has_credential: true, service: 'svc', attrs: { 'custom.thing': '["x"]' } });
    expect(parseEvent(e).ok).toBe(true);
    // jsonrpc.request.id wins over the legacy name.
    const both = logRecordToEvent({ eventName: 'arrival', attributes: { 'jsonrpc.request.id': '7', 'mcp.request.id': '8' } });
    expect(both.jsonrpc_id).toBe('7');
  });

  it('falls back to the observed time, and leaves broken values for validation to report', () => {
    const e = logRecordToEvent({ eventName: 'boot', timestamp: 0, observedTimestamp: [1_767_225_600, 0], attributes: { 'log.record.uid': 'not-a-uuid', 'process.pid': 'many', 'continuity.boot_id': 'b1' } });
    expect(e.ts).toBe(1_767_225_600_000_000);
    const parsed = parseEvent(e);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.issues.map((i) => i.path).sort()).toEqual(['event_id', 'pid']);
    expect(logRecordToEvent({ attributes: { 'event.name': 'boot' } }).event_type).toBe('boot');
    expect(parseEvent(logRecordToEvent({ eventName: 'nope' })).ok).toBe(false);
  });

  it('inverts eventAttributes', () => {
    const event = { event_type: 'auth_challenge', event_id: '01a22af1-ed89-76b3-b6d1-5835bf820912', source: 'server', arrival_id: 'a', http_status: 401, challenge_class: 'expired_token', has_credential: true, scope: '', attrs: { 'continuity.x': 'y' } };
    const attributes = eventAttributes(event);
    expect(attributes).not.toHaveProperty(attributeForField('scope'));
    expect(attributes[attributeForField('http_status')]).toBe(401);
    const back = logRecordToEvent({ eventName: 'auth_challenge', timestamp: [1_767_225_600, 0], attributes });
    const { attrs, scope, ...rest } = event;
    expect(back).toMatchObject({ ...rest, attrs });
    expect(back.scope).toBeUndefined(); // empty strings are omitted; the contract defaults them back
    expect(scope).toBe('');
    expect(parseEvent(back).ok).toBe(true);
  });
});

describe('micros', () => {
  it('converts every OpenTelemetry time form to integer µs', () => {
    expect(micros([1, 999_999_999])).toBe(1_999_999);
    expect(micros(1_500_000_000_123_456_789n)).toBe(1_500_000_000_123_456);
    expect(micros('1500000000123456789')).toBe(1_500_000_000_123_456);
    expect(micros(new Date(1_500_000_000_123))).toBe(1_500_000_000_123_000);
    expect(micros(undefined)).toBe(0);
    expect(micros('soon')).toBe(0);
  });
});

describe('logRecordToEvents', () => {
  it('splits an exchange record into its arrival and settlement, both valid', () => {
    const arrivalId = '0190a0b0-1234-7abc-8def-0123456789ac';
    const [arrival, settlement, ...rest] = logRecordToEvents({
      eventName: 'exchange',
      timestamp: [1_767_225_600, 5_000],
      attributes: {
        'log.record.uid': '0190a0b0-1234-7abc-8def-0123456789ad',
        'continuity.source': 'server',
        'mcp.protocol.version': '2025-06-18',
        'continuity.arrival_id': arrivalId,
        'http.request.method': 'POST',
        'mcp.method.name': 'initialize',
        'jsonrpc.request.id': '0',
        'continuity.has_credential': false,
        'continuity.batch_size': '2',
        'continuity.request_body_truncated': 'true',
        'http.response.status_code': 200,
        'continuity.outcome': 'ok',
        'continuity.duration_ms': 1.5,
        'continuity.session_resolution': 'new',
        'continuity.minted_session_key': KEY,
        'continuity.settled_protocol_version': '2025-11-25',
        'continuity.body_truncated': 'true',
        'x.other': 'kept',
      },
      resourceAttributes: { 'service.name': 'svc', 'continuity.boot_id': 'b1' },
    });
    expect(rest).toEqual([]);
    expect(arrival).toMatchObject({ event_type: 'arrival', event_id: arrivalId, arrival_id: arrivalId, ts: 1_767_225_600_000_005, mcp_method: 'initialize', protocol_version: '2025-06-18', service: 'svc', boot_id: 'b1' });
    expect(arrival!.attrs).toEqual({ 'continuity.batch_size': '2', 'continuity.body_truncated': 'true', 'x.other': 'kept' });
    expect(arrival!.session_key).toBeUndefined();
    expect(settlement).toMatchObject({
      event_type: 'settlement',
      event_id: '0190a0b0-1234-7abc-8def-0123456789ad',
      arrival_id: arrivalId,
      ts: 1_767_225_600_001_505,
      http_status: 200,
      session_key: KEY,
      minted_session_key: KEY,
      protocol_version: '2025-11-25',
    });
    expect(settlement!.attrs).toEqual({ 'continuity.body_truncated': 'true', 'x.other': 'kept' });
    expect(settlement!.mcp_method).toBeUndefined();
    for (const e of [arrival, settlement]) expect(parseEvent(e).ok).toBe(true);
  });

  it('maps any other record to one event', () => {
    expect(logRecordToEvents({ eventName: 'boot', attributes: { 'process.pid': 1 } })).toHaveLength(1);
  });
});
