import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import { deflateSync, gzipSync } from 'node:zlib';
import { logs } from '@opentelemetry/api-logs';
import { OTLPLogExporter as OTLPJsonExporter } from '@opentelemetry/exporter-logs-otlp-http';
import { OTLPLogExporter as OTLPProtoExporter } from '@opentelemetry/exporter-logs-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchLogRecordProcessor, LoggerProvider } from '@opentelemetry/sdk-logs';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ContinuityError } from '../../core/errors.ts';
import { openTestStore, type TestStore } from '../../test/helpers/store.ts';
import { createInProcessTransport, type InProcessTransport } from '../transport/in-process.ts';
import { createGateway, type EventSink } from './app.ts';
import { countProtobufLogRecords, encodeOtlpRequest, MAX_RECORDS_PER_REQUEST } from './otlp.ts';
import { mapOtlpRecord } from './otlp-map.ts';

let t: TestStore;
let transport: InProcessTransport;
let app: FastifyInstance;
let url: string;
const TOKEN = 'test-ingest-token';
const auth = { authorization: `Bearer ${TOKEN}` };

beforeAll(async () => {
  t = await openTestStore('gateway', { CONTINUITY_RETENTION_DAYS: undefined }) /* the store's own default retention (90 days) */;
  transport = createInProcessTransport(t.store, { flushIntervalMs: 50 });
  ({ app } = await createGateway({ sink: transport, mapOtlpRecord, bearerToken: TOKEN, maxBodyBytes: 10 * 1024 * 1024 }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
afterAll(async () => {
  await app?.close();
  await transport?.shutdown();
  await t?.close();
});

const nowMicros = () => Date.now() * 1000;
const boot = (extra: Record<string, unknown> = {}) => ({ event_id: randomUUID(), event_type: 'boot', ts: nowMicros(), source: 'server', service: 'gw-test', boot_id: 'boot-gw', pid: 42, ...extra });
async function stored(where: string): Promise<number> {
  await transport.flush();
  const [row] = await t.store.query<{ n: number }>(`SELECT count() AS n FROM events WHERE ${where}`);
  return row!.n;
}

/** `{"kvlistValue":{"values":[{"key":"k","value":` × n around a string value: an OTLP/JSON AnyValue n kvlists deep. */
const deepKvlistJson = (n: number): string => '{"kvlistValue":{"values":[{"key":"k","value":'.repeat(n) + '{"stringValue":"x"}' + '}]}}'.repeat(n);

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}
const lengthDelimited = (field: number, body: Buffer): Buffer => Buffer.concat([Buffer.from([(field << 3) | 2, ...varint(body.length)]), body]);
/** An ExportLogsServiceRequest of one resource with two empty log records. */
const protobufOfTwo = (): Buffer => lengthDelimited(1, lengthDelimited(2, Buffer.from('12001200', 'hex')));

/**
 * A protobuf ExportLogsServiceRequest with one `boot` log record (service `service`)
 * whose attribute `deep` is an AnyValue `n` kvlists deep, written by hand (protobufjs
 * would recurse to encode it). Each level is a prefix of what it wraps, so the prefixes
 * are written outside in once their inner sizes are known.
 */
function deepProtobufRequest(service: string, n: number): Buffer {
  const center = Buffer.from([0x0a, 0x01, 0x78]); // AnyValue { string_value: "x" }
  // Inner to outer: the size of the AnyValue at each level, then its prefix.
  const prefixes: Buffer[] = [];
  let size = center.length;
  for (let i = 0; i < n; i++) {
    const kv = [0x0a, 0x01, 0x6b, 0x12, ...varint(size)]; // KeyValue { key: "k", value: <AnyValue> }
    const kvSize = kv.length + size;
    const kvl = [0x0a, ...varint(kvSize)]; // KeyValueList { values: [<KeyValue>] }
    const kvlSize = kvl.length + kvSize;
    const any = [0x32, ...varint(kvlSize)]; // AnyValue { kvlist_value: <KeyValueList> }
    prefixes.push(Buffer.from([...any, ...kvl, ...kv]));
    size = any.length + kvlSize;
  }
  const deep = Buffer.concat([...prefixes.reverse(), center]);
  const time = Buffer.alloc(9);
  time[0] = 0x09; // time_unix_nano, fixed64
  time.writeBigUInt64LE(BigInt(Date.now()) * 1_000_000n, 1);
  const attribute = lengthDelimited(6, Buffer.concat([lengthDelimited(1, Buffer.from('deep')), lengthDelimited(2, deep)]));
  const record = Buffer.concat([time, lengthDelimited(12, Buffer.from('boot')), attribute]);
  const serviceName = lengthDelimited(1, Buffer.concat([lengthDelimited(1, Buffer.from('service.name')), lengthDelimited(2, lengthDelimited(1, Buffer.from(service)))]));
  const bootId = lengthDelimited(1, Buffer.concat([lengthDelimited(1, Buffer.from('continuity.boot_id')), lengthDelimited(2, lengthDelimited(1, Buffer.from(`boot-${service}`)))]));
  const resourceLogs = Buffer.concat([lengthDelimited(1, Buffer.concat([serviceName, bootId])), lengthDelimited(2, lengthDelimited(2, record))]);
  return lengthDelimited(1, resourceLogs);
}

async function exportWith(kind: 'json' | 'proto', service: string): Promise<void> {
  const exporter =
    kind === 'json'
      ? new OTLPJsonExporter({ url: `${url}/v1/logs`, headers: auth })
      : new OTLPProtoExporter({ url: `${url}/v1/logs`, headers: auth });
  const provider = new LoggerProvider({
    resource: resourceFromAttributes({ 'service.name': service, 'service.version': '1.2.3', 'continuity.boot_id': 'boot-1' }),
    processors: [new BatchLogRecordProcessor({ exporter })],
  });
  const logger = provider.getLogger('test');
  const arrivalId = randomUUID();
  logger.emit({
    eventName: 'arrival',
    attributes: {
      'continuity.arrival_id': arrivalId,
      'http.request.method': 'POST',
      'mcp.method.name': 'tools/call',
      'jsonrpc.request.id': '7',
      'gen_ai.tool.name': 'echo',
      'mcp.session.id': 'aa'.repeat(16),
      'mcp.protocol.version': '2025-11-25',
    },
  });
  logger.emit({
    eventName: 'settlement',
    attributes: {
      'continuity.arrival_id': arrivalId,
      'http.response.status_code': 200,
      'continuity.outcome': 'ok',
      'continuity.duration_ms': 3.5,
      'mcp.session.id': 'aa'.repeat(16),
    },
  });
  await provider.forceFlush();
  await provider.shutdown();
  logs.disable();
}

describe('POST /v1/logs (OTLP/HTTP)', () => {
  it.each(['json', 'proto'] as const)('stores records sent by the official %s exporter as contract events', async (kind) => {
    const service = `otlp-${kind}`;
    await exportWith(kind, service);
    await transport.flush();
    const rows = await t.store.query<Record<string, unknown>>(
      'SELECT event_type, mcp_method, jsonrpc_id, tool_name, session_key, release, boot_id, http_status, outcome, duration_ms FROM events WHERE service = {s:String} ORDER BY event_type',
      { s: service },
    );
    expect(rows).toEqual([
      expect.objectContaining({ event_type: 'arrival', mcp_method: 'tools/call', jsonrpc_id: '7', tool_name: 'echo', session_key: 'aa'.repeat(16), release: '1.2.3', boot_id: 'boot-1' }),
      expect.objectContaining({ event_type: 'settlement', http_status: 200, outcome: 'ok', duration_ms: 3.5 }),
    ]);
  });

  it('keeps the valid records of a request and reports the others as partial success', async () => {
    const ts = String(Date.now() * 1_000_000);
    const body = {
      resourceLogs: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'partial' } }, { key: 'continuity.boot_id', value: { stringValue: 'boot-partial' } }] },
          scopeLogs: [
            {
              logRecords: [
                { timeUnixNano: ts, eventName: 'boot', attributes: [{ key: 'continuity.pid', value: { intValue: '9' } }] },
                { timeUnixNano: ts, eventName: 'heartbeat', attributes: [] },
                { timeUnixNano: ts, eventName: 'settlement', attributes: [{ key: 'continuity.outcome', value: { stringValue: 'ok' } }] },
                { timeUnixNano: String((Date.now() + 365 * 86_400_000) * 1_000_000), eventName: 'boot', attributes: [] },
              ],
            },
          ],
        },
      ],
    };
    const res = await app.inject({ method: 'POST', url: '/v1/logs', headers: auth, payload: body });
    expect(res.statusCode).toBe(200);
    const partial = res.json().partialSuccess;
    expect(partial.rejectedLogRecords).toBe(3);
    expect(partial.errorMessage).toMatch(/unknown_event_type/);
    expect(partial.errorMessage).toMatch(/arrival_id/);
    expect(partial.errorMessage).toMatch(/ts_in_future/);
    expect(await stored("service = 'partial'")).toBe(1);
  });

  it('stores an exchange record whole or not at all, and names the arrival_id an exchange carried when it is not a UUID', async () => {
    // (a break-it pass: an exchange whose settlement was refused kept its arrival, an
    // arrival never settled; one with arrival_id "req-1" was refused for an event_id)
    const ts = String((Date.now() - 60_000) * 1_000_000);
    const exchange = (arrivalId: string, outcome: string) => ({
      timeUnixNano: ts,
      eventName: 'exchange',
      attributes: [
        { key: 'continuity.arrival_id', value: { stringValue: arrivalId } },
        { key: 'http.request.method', value: { stringValue: 'POST' } },
        { key: 'http.response.status_code', value: { intValue: '200' } },
        { key: 'continuity.outcome', value: { stringValue: outcome } },
      ],
    });
    const body = {
      resourceLogs: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'otlp-exchange' } }, { key: 'continuity.boot_id', value: { stringValue: 'boot-exchange' } }] },
          scopeLogs: [
            {
              logRecords: [
                exchange(randomUUID(), 'weird'),
                exchange('req-1', 'ok'),
                exchange(randomUUID(), 'ok'),
                // no arrival_id: both events miss it, named once
                { ...exchange('', 'ok'), attributes: exchange('', 'ok').attributes.slice(1) },
                // a plain arrival whose uid is not a UUID: its event_id, not an exchange's arrival_id
                {
                  timeUnixNano: ts,
                  eventName: 'arrival',
                  attributes: [
                    { key: 'log.record.uid', value: { stringValue: 'req-7' } },
                    { key: 'continuity.arrival_id', value: { stringValue: 'req-7' } },
                    { key: 'http.request.method', value: { stringValue: 'POST' } },
                  ],
                },
              ],
            },
          ],
        },
      ],
    };
    const res = await app.inject({ method: 'POST', url: '/v1/logs', headers: auth, payload: body });
    expect(res.statusCode).toBe(200);
    const partial = res.json().partialSuccess;
    expect(partial.rejectedLogRecords).toBe(4);
    const byRecord = (partial.errorMessage as string).split(' | ');
    expect(byRecord[0]).toMatch(/^record 0: outcome invalid_value: /);
    expect(byRecord[1]).toMatch(/^record 1: arrival_id invalid_format: .*\(an exchange record's arrival_id is its arrival's event_id, a UUID\)$/);
    expect(byRecord[2]).toMatch(/^record 3: arrival_id [a-z_]+: [^;]*$/);
    expect(byRecord[3]).toMatch(/^record 4: event_id invalid_format: (?!.*exchange)/);
    // the third record's arrival and settlement, nothing of the other two
    expect(await stored("service = 'otlp-exchange' AND event_type = 'arrival'")).toBe(1);
    expect(await stored("service = 'otlp-exchange' AND event_type = 'settlement'")).toBe(1);
  });

  it('names attributes that are not a KeyValue list, and a time that is not decimal digits, instead of reading them as absent', async () => {
    // (an object of attributes was read as none; timeUnixNano "1e18" was reported as
    // "expected number, received undefined": a break-it pass)
    const ts = String(Date.now() * 1_000_000);
    const body = {
      resourceLogs: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'shapes' } }] },
          scopeLogs: [{ logRecords: [{ timeUnixNano: ts, eventName: 'boot', attributes: { 'continuity.pid': 9 } }, { timeUnixNano: '1e18', eventName: 'boot', attributes: [] }] }],
        },
      ],
    };
    const res = await app.inject({ method: 'POST', url: '/v1/logs', headers: auth, payload: body });
    expect(res.statusCode).toBe(200);
    const partial = res.json().partialSuccess;
    expect(partial.rejectedLogRecords).toBe(2);
    expect(partial.errorMessage).toContain('record 0: attributes invalid_type: expected a list of { "key", "value" } (OTLP KeyValue), received object');
    expect(partial.errorMessage).toContain('record 1: timeUnixNano invalid_type: expected nanoseconds since the epoch as decimal digits (OTLP fixed64), received "1e18"');
    expect(await stored("service = 'shapes'")).toBe(0);
  });

  it('reports records older than the store\'s retention as rejected (partial success), naming the cutoff', async () => {
    const record = (timeUnixNano: string) => ({ timeUnixNano, eventName: 'boot', attributes: [] });
    const body = {
      resourceLogs: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'otlp-old' } }, { key: 'continuity.boot_id', value: { stringValue: 'boot-otlp-old' } }] },
          scopeLogs: [{ logRecords: [record(String(Date.now() * 1_000_000)), record('1700000000000000000')] }],
        },
      ],
    };
    const res = await app.inject({ method: 'POST', url: '/v1/logs', headers: auth, payload: body });
    expect(res.statusCode).toBe(200);
    expect(res.json().partialSuccess).toEqual({
      rejectedLogRecords: 1,
      errorMessage: expect.stringMatching(/^record 1: ts expired: event time 2023-11-14T22:13:20\.000000Z is older than the store's 90-day retention/),
    });
    expect(await stored("service = 'otlp-old'")).toBe(1);
  });

  it('answers protobuf partial success in protobuf', async () => {
    const body = encodeOtlpRequest({
      resourceLogs: [{ scopeLogs: [{ logRecords: [{ timeUnixNano: String(Date.now() * 1_000_000), eventName: 'nope' }] }] }],
    });
    const res = await app.inject({ method: 'POST', url: '/v1/logs', headers: { ...auth, 'content-type': 'application/x-protobuf' }, payload: body });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('application/x-protobuf');
    expect(res.rawPayload.length).toBeGreaterThan(0);
  });

  it('refuses a record with a value nested deeper than MAX_NESTING_DEPTH as too_deep and keeps the others (JSON)', async () => {
    const ts = String(Date.now() * 1_000_000);
    const record = (attributes: string, extra = '') => `{"timeUnixNano":"${ts}","eventName":"boot","attributes":[${attributes}]${extra}}`;
    const pid = '{"key":"continuity.pid","value":{"intValue":"7"}}';
    const body = `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"otlp-deep"}},{"key":"continuity.boot_id","value":{"stringValue":"boot-otlp-deep"}}]},"scopeLogs":[{"logRecords":[${[
      record(pid),
      record(`{"key":"deep","value":${deepKvlistJson(20_000)}}`),
      record(`{"key":"nearly","value":${deepKvlistJson(64)}}`),
      record(`{"key":"list","value":${'{"arrayValue":{"values":['.repeat(65)}${']}}'.repeat(65)}}`),
      record(pid, `,"body":${deepKvlistJson(65)}`),
      record(pid, `,"eventName":${'['.repeat(50_000)}${']'.repeat(50_000)}`),
      record('{"key":"continuity.pid","value":{"intValue":"8"}}'),
    ].join(',')}]}]}]}`;
    const res = await app.inject({ method: 'POST', url: '/v1/logs', headers: { ...auth, 'content-type': 'application/json' }, payload: body });
    expect(res.statusCode).toBe(200);
    const partial = res.json().partialSuccess;
    expect(partial.rejectedLogRecords).toBe(4);
    expect(partial.errorMessage).toContain('record 1: attributes.deep too_deep: nested deeper than 64 levels');
    expect(partial.errorMessage).toContain('record 3: attributes.list too_deep');
    expect(partial.errorMessage).toContain('record 4: body too_deep');
    expect(partial.errorMessage).toMatch(/record 5: eventName invalid_type/);
    expect(partial.errorMessage).not.toMatch(/record [026]:/);
    expect(await stored("service = 'otlp-deep'")).toBe(3);
  });

  it('reads a boolValue as JSON true/false or the strings "true"/"false", and refuses the record for anything else (a break-it pass: "false" stored true)', async () => {
    const ts = String(Date.now() * 1_000_000);
    const record = (id: string, value: string) =>
      `{"timeUnixNano":"${ts}","eventName":"arrival","attributes":[{"key":"continuity.arrival_id","value":{"stringValue":"${id}"}},{"key":"continuity.has_credential","value":{"boolValue":${value}}}]}`;
    const body = `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"otlp-bool"}}]},"scopeLogs":[{"logRecords":[${[
      record('b-true', 'true'),
      record('b-false', 'false'),
      record('b-str-false', '"false"'),
      record('b-str-true', '"true"'),
      record('b-yes', '"yes"'),
      record('b-one', '1'),
    ].join(',')}]}]}]}`;
    const res = await app.inject({ method: 'POST', url: '/v1/logs', headers: { ...auth, 'content-type': 'application/json' }, payload: body });
    expect(res.statusCode).toBe(200);
    const partial = res.json().partialSuccess;
    expect(partial.rejectedLogRecords).toBe(2);
    expect(partial.errorMessage).toContain('record 4: attributes.continuity.has_credential invalid_type: expected a boolValue of true or false, received "yes"');
    expect(partial.errorMessage).toContain('record 5: attributes.continuity.has_credential invalid_type: expected a boolValue of true or false, received 1');
    expect(await stored("service = 'otlp-bool'")).toBe(4);
    expect(await stored("service = 'otlp-bool' AND has_credential")).toBe(2);
    expect(await stored("service = 'otlp-bool' AND has_credential AND arrival_id IN ('b-true', 'b-str-true')")).toBe(2);
  });

  it('refuses a record with a value nested too deeply, and keeps the others, in protobuf too', async () => {
    const ok = (pid: string) =>
      encodeOtlpRequest({
        resourceLogs: [
          {
            resource: { attributes: [{ key: 'service.name', value: { stringValue: 'otlp-deep-pb' } }, { key: 'continuity.boot_id', value: { stringValue: 'boot-otlp-deep-pb' } }] },
            scopeLogs: [
              { logRecords: [{ timeUnixNano: String(Date.now() * 1_000_000), eventName: 'boot', attributes: [{ key: 'continuity.pid', value: { intValue: pid } }] }] },
            ],
          },
        ],
      });
    // Repeated fields concatenate: one request with five resourceLogs. 10 kvlists decode;
    // 65 and 20,000 are beyond the decoder's limit of 100 nested messages.
    const body = Buffer.concat([ok('1'), deepProtobufRequest('otlp-deep-pb', 10), deepProtobufRequest('otlp-deep-pb', 65), deepProtobufRequest('otlp-deep-pb', 20_000), ok('2')]);
    const res = await app.inject({ method: 'POST', url: '/v1/logs', headers: { ...auth, 'content-type': 'application/x-protobuf' }, payload: body });
    expect(res.statusCode).toBe(200);
    const answer = res.rawPayload.toString('latin1');
    expect(answer).toContain('record 2: (record) too_deep: the LogRecord nests protobuf messages more than 100 deep');
    expect(answer).toContain('record 3: (record) too_deep');
    expect(answer).not.toMatch(/record [014]:/);
    expect(await stored("service = 'otlp-deep-pb'")).toBe(3);
    const [ten] = await t.store.query<{ deep: string }>("SELECT attrs['deep'] AS deep FROM events WHERE service = 'otlp-deep-pb' AND attrs['deep'] != ''");
    expect(ten!.deep).toBe('{"k":'.repeat(10) + '"x"' + '}'.repeat(10));
  });

  it('refuses an attribute named __proto__ instead of letting it become the map\'s prototype', async () => {
    const ts = String(Date.now() * 1_000_000);
    const res = await app.inject({
      method: 'POST',
      url: '/v1/logs',
      headers: auth,
      payload: {
        resourceLogs: [
          {
            resource: { attributes: [{ key: 'service.name', value: { stringValue: 'otlp-protokey' } }, { key: 'continuity.boot_id', value: { stringValue: 'boot-otlp-protokey' } }] },
            scopeLogs: [
              {
                logRecords: [
                  // No eventName: with a prototype from the attribute, event.name would read 'shutdown'.
                  { timeUnixNano: ts, attributes: [{ key: '__proto__', value: { kvlistValue: { values: [{ key: 'event.name', value: { stringValue: 'shutdown' } }] } } }] },
                  { timeUnixNano: ts, eventName: 'boot', attributes: [{ key: 'constructor', value: { stringValue: 'an ordinary name' } }] },
                ],
              },
            ],
          },
        ],
      },
    });
    expect(res.statusCode).toBe(200);
    const partial = res.json().partialSuccess;
    expect(partial.rejectedLogRecords).toBe(1);
    expect(partial.errorMessage).toMatch(/^record 0: attributes.__proto__ forbidden_key/);
    await transport.flush();
    const rows = await t.store.query<{ event_type: string; attrs: Record<string, string> }>("SELECT event_type, attrs FROM events WHERE service = 'otlp-protokey'");
    expect(rows).toEqual([{ event_type: 'boot', attrs: { constructor: 'an ordinary name' } }]);
  });

  it('refuses a kvlist where a string is expected, also one whose key is stringValue (it was read as the string)', async () => {
    const ts = String(Date.now() * 1_000_000);
    const kvlist = (key: string) => ({ kvlistValue: { values: [{ key, value: { stringValue: 'initialize' } }] } });
    const records = [
      { timeUnixNano: ts, eventName: 'arrival', attributes: [{ key: 'continuity.arrival_id', value: { stringValue: 'kv-1' } }, { key: 'mcp.method.name', value: kvlist('stringValue') }] },
      { timeUnixNano: ts, eventName: 'arrival', attributes: [{ key: 'continuity.arrival_id', value: { stringValue: 'kv-2' } }, { key: 'mcp.method.name', value: kvlist('other') }] },
    ];
    const payload = { resourceLogs: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'otlp-kvlist-string' } }] }, scopeLogs: [{ logRecords: records }] }] };
    const res = await app.inject({ method: 'POST', url: '/v1/logs', headers: auth, payload });
    expect(res.statusCode).toBe(200);
    expect(res.json().partialSuccess.rejectedLogRecords).toBe(2);
    expect(res.json().partialSuccess.errorMessage).toMatch(/^record 0: .*method/);
    await transport.flush();
    const [row] = await t.store.query<{ n: string }>("SELECT count() AS n FROM events WHERE service = 'otlp-kvlist-string'");
    expect(Number(row!.n)).toBe(0);
  });

  it('refuses malformed JSON and a wrong OTLP shape with 400 and a code', async () => {
    const bad = await app.inject({ method: 'POST', url: '/v1/logs', headers: { ...auth, 'content-type': 'application/json' }, payload: '{"resourceLogs": [' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().code).toBe('CONT_ERR_BAD_REQUEST');
    const shape = await app.inject({ method: 'POST', url: '/v1/logs', headers: auth, payload: { resourceLogs: 'nope' } });
    expect(shape.statusCode).toBe(400);
    expect(shape.json()).toMatchObject({ code: 'CONT_ERR_BAD_REQUEST', message: expect.stringMatching(/resourceLogs/) });
    const garbage = await app.inject({ method: 'POST', url: '/v1/logs', headers: { ...auth, 'content-type': 'application/x-protobuf' }, payload: Buffer.from([0xff, 0xff, 0xff, 0x07]) });
    expect(garbage.statusCode).toBe(400);
  });

  it('takes an OTLP/JSON request with resourceLogs left out as empty, as an empty protobuf body is (the JSON mapping\'s default)', async () => {
    for (const [type, payload] of [
      ['application/json', '{}'],
      ['application/json', '{"resourceLogs":null}'],
      ['application/x-protobuf', Buffer.alloc(0)],
    ] as const) {
      const res = await app.inject({ method: 'POST', url: '/v1/logs', headers: { ...auth, 'content-type': type }, payload });
      expect(res.statusCode, `${type} ${String(payload)}`).toBe(200);
    }
    const list = await app.inject({ method: 'POST', url: '/v1/logs', headers: { ...auth, 'content-type': 'application/json' }, payload: '{"resourceLogs":{}}' });
    expect(list.statusCode).toBe(400);
  });
});

describe('POST /v1/events', () => {
  it('says how many events were copies of an event_id already in the request: stored once (a break-it pass: both answered accepted)', async () => {
    const first = boot({ service: 'events-dup' });
    const other = boot({ service: 'events-dup' });
    const payload = [first, { ...first, pid: 7 }, other, first];
    const res = await app.inject({ method: 'POST', url: '/v1/events', headers: auth, payload });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ accepted: 4, duplicates: 2 });
    await transport.flush();
    const [row] = await t.store.query<{ n: number }>("SELECT count() AS n FROM events FINAL WHERE service = 'events-dup'");
    expect(Number(row!.n)).toBe(2);
  });

  it('stores a JSON batch, gzip-encoded too', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/events', headers: auth, payload: [boot({ service: 'events-plain' })] });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ accepted: 1 });
    const gz = await app.inject({
      method: 'POST',
      url: '/v1/events',
      headers: { ...auth, 'content-type': 'application/json', 'content-encoding': 'gzip' },
      payload: gzipSync(JSON.stringify({ events: [boot({ service: 'events-gzip' })] })),
    });
    expect(gz.statusCode).toBe(200);
    expect(await stored("service IN ('events-plain', 'events-gzip')")).toBe(2);
  });

  it('takes a content coding in any case, identity as none and x-gzip as gzip (RFC 9110 §8.4.1, §8.4.1.3)', async () => {
    for (const [coding, body] of [
      ['GZIP', gzipSync(JSON.stringify([boot({ service: 'events-coding-upper' })]))],
      ['x-gzip', gzipSync(JSON.stringify([boot({ service: 'events-coding-upper' })]))],
      [' Deflate ', deflateSync(JSON.stringify([boot({ service: 'events-coding-upper' })]))],
      ['identity', Buffer.from(JSON.stringify([boot({ service: 'events-coding-upper' })]))],
    ] as const) {
      const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { ...auth, 'content-type': 'application/json', 'content-encoding': coding }, payload: body });
      expect(res.statusCode, coding).toBe(200);
      expect(res.json(), coding).toEqual({ accepted: 1 });
    }
  });

  it('refuses a body that is not UTF-8 with 400 CONT_ERR_BAD_REQUEST, storing none of it (RFC 8259 §8.1)', async () => {
    const text = JSON.stringify([boot({ service: 'events-not-utf8', release: 'r-MARK' })]);
    const bytes = Buffer.from(text, 'utf8');
    const at = bytes.indexOf('MARK');
    bytes[at] = 0xff; // a lone 0xFF is never UTF-8
    const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { ...auth, 'content-type': 'application/json' }, payload: bytes });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'CONT_ERR_BAD_REQUEST', message: expect.stringContaining('not valid UTF-8') });
    // the same event as UTF-8 (U+00FF) is taken
    const ok = await app.inject({ method: 'POST', url: '/v1/events', headers: { ...auth, 'content-type': 'application/json' }, payload: Buffer.from(text.replace('MARK', '\u00ffARK'), 'utf8') });
    expect(ok.json()).toEqual({ accepted: 1 });
  });

  it('answers 400 listing each refused event with its code, and keeps the valid ones', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/events',
      headers: auth,
      payload: [
        boot({ service: 'mixed' }),
        { ...boot(), event_type: 'heartbeat' },
        { event_id: randomUUID(), event_type: 'settlement', ts: nowMicros(), source: 'server', outcome: 'ok' },
        boot({ ts: nowMicros() + 365 * 86_400e6 }),
        boot({ service: 'mixed', pid: 'not a number' }),
      ],
    });
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body).toMatchObject({ code: 'CONT_ERR_EVENT_INVALID', accepted: 1 });
    expect(body.rejected.map((r: { index: number }) => r.index)).toEqual([1, 2, 3, 4]);
    expect(body.rejected[0].issues[0].code).toBe('unknown_event_type');
    expect(body.rejected[1].issues.map((i: { path: string }) => i.path)).toContain('arrival_id');
    expect(body.rejected[2].issues[0].code).toBe('ts_in_future');
    expect(body.rejected[3].issues[0]).toMatchObject({ path: 'pid', code: 'invalid_type' });
    expect(await stored("service = 'mixed'")).toBe(1);
  });

  it('refuses an event with a field nested 100,000 deep as too_deep by its index, and keeps the others of the batch', async () => {
    const n = 100_000;
    const deep = `${JSON.stringify(boot({ service: 'deep-batch' })).slice(0, -1)},"deep":${'['.repeat(n)}${']'.repeat(n)}}`;
    const payload = `[${JSON.stringify(boot({ service: 'deep-batch' }))},${deep},${JSON.stringify(boot({ service: 'deep-batch' }))}]`;
    const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { ...auth, 'content-type': 'application/json' }, payload });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      code: 'CONT_ERR_EVENT_INVALID',
      accepted: 2,
      rejected: [{ index: 1, issues: [{ path: 'deep', code: 'too_deep', message: expect.stringContaining('deeper than 64 levels') }] }],
    });
    expect(await stored("service = 'deep-batch'")).toBe(2);
  });

  it('refuses a body with a __proto__ key, or a constructor holding a prototype, naming the key and where', async () => {
    const event = JSON.stringify(boot({ service: 'proto-body' }));
    for (const [payload, key, path] of [
      [`[${event.slice(0, -1)},"attrs":{"__proto__":{"polluted":"yes"}}}]`, '__proto__', '$[0].attrs'],
      [`{"events":[${event.slice(0, -1)},"\\u005f_proto__":"x"}]}`, '__proto__', '$.events[0]'],
      [`[${event.slice(0, -1)},"constructor":{"prototype":{"polluted":"yes"}}}]`, 'constructor', '$[0]'],
    ] as const) {
      const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { ...auth, 'content-type': 'application/json' }, payload });
      expect(res.statusCode, payload).toBe(400);
      expect(res.json(), payload).toEqual({
        code: 'CONT_ERR_BAD_REQUEST',
        message: expect.stringMatching(new RegExp(`"${key}" key.* at \\${path.replace(/[[\].]/g, '\\$&')}; .*prototype-poisoning`)),
        fix: expect.any(String),
        details: { key, path },
      });
    }
    // A constructor field that holds no prototype is an ordinary unknown field, kept in attrs.
    const ok = await app.inject({ method: 'POST', url: '/v1/events', headers: auth, payload: [boot({ service: 'proto-body', constructor: 'c' })] });
    expect(ok.statusCode).toBe(200);
    expect(await stored("service = 'proto-body' AND attrs['constructor'] = 'c'")).toBe(1);
    const malformed = await app.inject({ method: 'POST', url: '/v1/events', headers: { ...auth, 'content-type': 'application/json' }, payload: '[{"a":' });
    expect(malformed.json()).toMatchObject({ code: 'CONT_ERR_BAD_REQUEST', message: expect.stringContaining('the body is not valid JSON: ') });
  });

  it('refuses events older than the store\'s retention per index (expired), instead of accepting what the TTL drops unseen', async () => {
    const day = 86_400e6;
    const res = await app.inject({
      method: 'POST',
      url: '/v1/events',
      headers: auth,
      payload: [
        boot({ service: 'retention' }),
        boot({ service: 'retention', ts: 978_307_200_001_000 }), // 2001-01-01
        boot({ service: 'retention', ts: nowMicros() - 100 * day }),
        boot({ service: 'retention', ts: nowMicros() - 89 * day }),
      ],
    });
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body).toMatchObject({ code: 'CONT_ERR_EVENT_EXPIRED', accepted: 2 });
    expect(body.rejected.map((r: { index: number }) => r.index)).toEqual([1, 2]);
    for (const r of body.rejected) {
      expect(r.issues).toEqual([{ path: 'ts', code: 'expired', message: expect.stringMatching(/older than the store's 90-day retention/) }]);
    }
    expect(await stored("service = 'retention'")).toBe(2);
    // With invalid events among them the answer keeps the contract's code; each index keeps its own.
    const mixed = await app.inject({ method: 'POST', url: '/v1/events', headers: auth, payload: [boot({ ts: 978_307_200_001_000 }), { ...boot(), event_type: 'nope' }] });
    expect(mixed.json()).toMatchObject({ code: 'CONT_ERR_EVENT_INVALID', accepted: 0 });
    expect(mixed.json().rejected.map((r: { issues: Array<{ code: string }> }) => r.issues[0]!.code)).toEqual(['expired', 'unknown_event_type']);
  });

  it('refuses a lone UTF-16 surrogate with 400 naming the field, and keeps the other events', async () => {
    const good = boot({ service: 'surrogate-ok' });
    const bad = boot({ service: 'PLACEHOLDER' });
    const payload = JSON.stringify([good, bad]).replace('"PLACEHOLDER"', '"lone\\ud800surrogate"');
    const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { ...auth, 'content-type': 'application/json' }, payload });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'CONT_ERR_EVENT_INVALID', accepted: 1, rejected: [{ index: 1, issues: [{ path: 'service', code: 'lone_surrogate' }] }] });
    expect(await stored("service = 'surrogate-ok'")).toBe(1);
    const [letters] = await t.store.query<{ n: number }>(`SELECT count() AS n FROM dead_letters WHERE payload LIKE '%lone%surrogate%'`);
    expect(letters!.n).toBe(0);
  });

  it('reports an OTLP record whose attribute holds a lone surrogate as rejected (partial success), naming the attribute', async () => {
    const record = (value: string) => ({ timeUnixNano: String(Date.now() * 1_000_000), eventName: 'boot', attributes: [{ key: 'x.note', value: { stringValue: value } }] });
    const body = { resourceLogs: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'otlp-surrogate' } }, { key: 'continuity.boot_id', value: { stringValue: 'boot-otlp-surrogate' } }] }, scopeLogs: [{ logRecords: [record('plain'), record('PLACEHOLDER')] }] }] };
    const payload = JSON.stringify(body).replace('"PLACEHOLDER"', '"x\\ud800y"');
    const res = await app.inject({ method: 'POST', url: '/v1/logs', headers: { ...auth, 'content-type': 'application/json' }, payload });
    expect(res.statusCode).toBe(200);
    expect(res.json().partialSuccess).toMatchObject({ rejectedLogRecords: 1, errorMessage: expect.stringMatching(/^record 1: attrs\.x\.note lone_surrogate: /) });
    expect(await stored("service = 'otlp-surrogate'")).toBe(1);
  });

  it('refuses a body that is not a list of events', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/events', headers: auth, payload: { hello: 1 } });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('CONT_ERR_BAD_REQUEST');
  });

  it('answers a body of another media type with 415 naming the accepted types (RFC 9110 §15.5.16)', async () => {
    const cases = [
      ['/v1/events', 'text/plain', JSON.stringify([boot({ service: 'media-text' })]), ['application/json']],
      ['/v1/events', 'application/xml', '<events/>', ['application/json']],
      ['/v1/events', 'application/x-protobuf', 'x', ['application/json']],
      ['/v1/logs', 'text/plain', '{"resourceLogs":[]}', ['application/json', 'application/x-protobuf', 'application/protobuf']],
      ['/v1/logs', 'application/xml', '<logs/>', ['application/json', 'application/x-protobuf', 'application/protobuf']],
    ] as const;
    for (const [path, type, payload, accepted] of cases) {
      const res = await app.inject({ method: 'POST', url: path, headers: { ...auth, 'content-type': type }, payload });
      expect(res.statusCode, `${path} ${type}`).toBe(415);
      expect(res.json()).toEqual({
        code: 'CONT_ERR_UNSUPPORTED_MEDIA',
        message: expect.stringContaining(accepted.join(', ')),
        fix: expect.any(String),
        details: { contentType: type, accepted },
      });
    }
    expect(await stored("service = 'media-text'")).toBe(0);
  });

  it('refuses JSON declared in a charset other than UTF-8 (415), and takes utf-8 in any case or quoted (RFC 8259 §8.1)', async () => {
    // (charset=latin1 was taken, and the body read as UTF-8 all the same: a break-it pass)
    const body = JSON.stringify([boot({ service: 'media-charset' })]);
    for (const type of ['application/json; charset=latin1', 'application/json; charset="ISO-8859-1"', 'application/json;charset=utf-16']) {
      const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { ...auth, 'content-type': type }, payload: body });
      expect(res.statusCode, type).toBe(415);
      expect(res.json()).toMatchObject({ code: 'CONT_ERR_UNSUPPORTED_MEDIA', message: expect.stringContaining('JSON is read as UTF-8') });
    }
    expect(await stored("service = 'media-charset'")).toBe(0);
    // (a later break-it pass: us-ascii, a subset of UTF-8, was refused; "charset=latin1" inside another
    // parameter's quoted value was taken for the charset)
    for (const type of ['application/json; charset=UTF-8', 'application/json; charset="utf-8"', 'application/json;charset=utf8', 'application/json; charset=us-ascii', 'application/json; foo="x;charset=latin1"']) {
      const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { ...auth, 'content-type': type }, payload: JSON.stringify([boot({ service: 'media-charset' })]) });
      expect(res.statusCode, type).toBe(200);
    }
  });

  it('checks the token before the media type', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { 'content-type': 'text/plain' }, payload: 'x' });
    expect(res.statusCode).toBe(401);
  });

  it('refuses a 20 MB body with 413 and stores nothing of it', async () => {
    const big = JSON.stringify([boot({ service: 'too-big', attrs: { blob: 'x'.repeat(20 * 1024 * 1024) } })]);
    const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { ...auth, 'content-type': 'application/json' }, payload: big });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toMatchObject({ code: 'CONT_ERR_BODY_TOO_LARGE', details: { limitBytes: 10 * 1024 * 1024 } });
    expect(await stored("service = 'too-big'")).toBe(0);
  });

  it('refuses an OTLP protobuf body over the limit with the same 413 CONT_ERR_BODY_TOO_LARGE (RFC 9110 §15.5.14)', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/logs', headers: { ...auth, 'content-type': 'application/x-protobuf' }, payload: Buffer.alloc(11 * 1024 * 1024) });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toEqual({
      code: 'CONT_ERR_BODY_TOO_LARGE',
      message: expect.stringContaining(`${10 * 1024 * 1024} bytes`),
      fix: expect.any(String),
      details: { limitBytes: 10 * 1024 * 1024 },
    });
  });

  it('answers a content coding it does not decode with 415 naming it (RFC 9110 §15.5.16), on both POST routes', async () => {
    for (const [path, type] of [['/v1/events', 'application/json'], ['/v1/logs', 'application/json'], ['/v1/logs', 'application/x-protobuf']] as const) {
      const res = await app.inject({ method: 'POST', url: path, headers: { ...auth, 'content-type': type, 'content-encoding': 'br' }, payload: 'x' });
      expect(res.statusCode, `${path} ${type}`).toBe(415);
      expect(res.json()).toEqual({
        code: 'CONT_ERR_UNSUPPORTED_MEDIA',
        message: expect.stringMatching(/content coding.*Content-Encoding br\b.*gzip, deflate/),
        fix: expect.stringContaining('Content-Encoding'),
        details: { contentEncoding: 'br', acceptedEncodings: ['gzip', 'deflate'] },
      });
    }
  });

  it('refuses a request of more than 50,000 records or events whole (413, coded) before decoding them; 50,000 are read', async () => {
    // (5,000,000 empty protobuf records, 9.8 KB gzipped, ran serve out of heap and left it hung; 3.5M `{}`
    // events answered an uncoded 500 after 12 s; a break-it pass)
    const protobufOf = (n: number) => lengthDelimited(1, lengthDelimited(2, Buffer.from('1200'.repeat(n), 'hex'))); // n empty LogRecords
    const gz = { ...auth, 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' };
    const over = await app.inject({ method: 'POST', url: '/v1/logs', headers: gz, payload: gzipSync(protobufOf(5_000_000)) });
    expect(over.statusCode).toBe(413);
    expect(over.json()).toMatchObject({ code: 'CONT_ERR_BODY_TOO_LARGE', details: { limitRecords: MAX_RECORDS_PER_REQUEST, records: MAX_RECORDS_PER_REQUEST + 1 } });
    expect((await app.inject({ method: 'POST', url: '/v1/logs', headers: gz, payload: gzipSync(protobufOf(MAX_RECORDS_PER_REQUEST + 1)) })).statusCode).toBe(413);
    // records (and resource_logs) tagged with wire type 0: the decoder reads them by field number alone, as
    // empty messages, so they count (a second break-it pass got 5,000,000 of them past the count)
    const tagged = (tag: number, body: Buffer): Buffer => Buffer.concat([Buffer.from([tag, ...varint(body.length)]), body]);
    const wt0Records = (n: number) => lengthDelimited(2, Buffer.from('1000'.repeat(n), 'hex')); // a scope of n records tagged 0x10
    for (const body of [lengthDelimited(1, wt0Records(MAX_RECORDS_PER_REQUEST + 1)), tagged(0x08, wt0Records(MAX_RECORDS_PER_REQUEST + 1))]) {
      const sneaked = await app.inject({ method: 'POST', url: '/v1/logs', headers: gz, payload: gzipSync(body) });
      expect(sneaked.statusCode).toBe(413);
    }
    expect(countProtobufLogRecords(tagged(0x08, wt0Records(2)))).toBe(2);
    const at = await app.inject({ method: 'POST', url: '/v1/logs', headers: gz, payload: gzipSync(protobufOf(MAX_RECORDS_PER_REQUEST)) });
    expect(at.statusCode).toBe(200); // every record refused as partial success: empty records are no events
    const json = (n: number) => JSON.stringify({ resourceLogs: [{ scopeLogs: [{ logRecords: Array.from({ length: n }, () => ({})) }] }] });
    const overJson = await app.inject({ method: 'POST', url: '/v1/logs', headers: { ...auth, 'content-type': 'application/json' }, payload: json(MAX_RECORDS_PER_REQUEST + 1) });
    expect(overJson.statusCode).toBe(413);
    expect(overJson.json()).toMatchObject({ code: 'CONT_ERR_BODY_TOO_LARGE', details: { limitRecords: MAX_RECORDS_PER_REQUEST } });
    const events = (n: number) => JSON.stringify(Array.from({ length: n }, () => ({})));
    const overEvents = await app.inject({ method: 'POST', url: '/v1/events', headers: { ...auth, 'content-type': 'application/json' }, payload: events(MAX_RECORDS_PER_REQUEST + 1) });
    expect(overEvents.statusCode).toBe(413);
    expect(overEvents.json()).toMatchObject({ code: 'CONT_ERR_BODY_TOO_LARGE', details: { limitRecords: MAX_RECORDS_PER_REQUEST, records: MAX_RECORDS_PER_REQUEST + 1 } });
  });

  it('lists the first 1,000 refused events and counts them all (a 5 MB body of {} was answered with 453 MB)', async () => {
    const payload = JSON.stringify([boot({ service: 'listed' }), ...Array.from({ length: 3_000 }, () => ({}))]);
    const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { ...auth, 'content-type': 'application/json' }, payload });
    expect(res.statusCode).toBe(400);
    const body = res.json() as { accepted: number; rejected_count: number; rejected: Array<{ index: number }> };
    expect(body).toMatchObject({ code: 'CONT_ERR_EVENT_INVALID', accepted: 1, rejected_count: 3_000 });
    expect(body.rejected.map((r) => r.index)).toEqual(Array.from({ length: 1_000 }, (_, i) => i + 1));
    expect(await stored("service = 'listed'")).toBe(1);
  });

  it('counts the log records of a protobuf request from its wire format as the decoder reads them', async () => {
    const req = encodeOtlpRequest({
      resourceLogs: [
        { resource: { attributes: [{ key: 'service.name', value: { stringValue: 's' } }] }, scopeLogs: [{ scope: { name: 'x' }, logRecords: [{ eventName: 'a', timeUnixNano: 1 }, {}, { body: { stringValue: 'y' } }] }, { logRecords: [{}] }] },
        { scopeLogs: [{ logRecords: [{ severityNumber: 9 }] }] },
      ],
    });
    expect(countProtobufLogRecords(req)).toBe(5);
    expect(countProtobufLogRecords(new Uint8Array([0x0a, 0x05, 0x12]))).toBe(0); // cut short: the decoder refuses it
    expect(countProtobufLogRecords(Buffer.concat([protobufOfTwo(), protobufOfTwo()]), 3)).toBe(4);
  });

  it('refuses a gzip bomb by its decompressed size', async () => {
    const bomb = gzipSync(Buffer.from(JSON.stringify([boot({ attrs: { blob: 'y'.repeat(30 * 1024 * 1024) } })])));
    const res = await app.inject({
      method: 'POST',
      url: '/v1/events',
      headers: { ...auth, 'content-type': 'application/json', 'content-encoding': 'gzip' },
      payload: bomb,
    });
    expect(res.statusCode).toBe(413);
  });
});

describe('access and health', () => {
  it('requires the bearer token on ingest routes', async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/events', payload: [boot()] });
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(res.json().code).toBe('CONT_ERR_UNAUTHORIZED');
    const wrong = await app.inject({ method: 'POST', url: '/v1/events', headers: { authorization: 'Bearer nope' }, payload: [boot()] });
    expect(wrong.statusCode).toBe(401);
  });
  it('accepts the Bearer scheme in any case (RFC 9110 §11.1), and the token only exactly', async () => {
    for (const scheme of ['bearer', 'BEARER', 'Bearer']) {
      const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { authorization: `${scheme} ${TOKEN}` }, payload: [] });
      expect(res.statusCode, scheme).toBe(200);
    }
    for (const header of [`bearer ${TOKEN.toUpperCase()}`, `bearer${TOKEN}`, `Basic ${TOKEN}`, `bearer ${TOKEN} extra`]) {
      const res = await app.inject({ method: 'POST', url: '/v1/events', headers: { authorization: header }, payload: [] });
      expect(res.statusCode, header).toBe(401);
    }
  });
  it('answers an unknown route with 404 CONT_ERR_NOT_FOUND in the coded error shape', async () => {
    for (const [method, path] of [['POST', '/v2/whatever'], ['GET', '/v1/events'], ['GET', '/nope?x=1']] as const) {
      const res = await app.inject({ method, url: path, headers: auth, payload: method === 'POST' ? [] : undefined });
      expect(res.statusCode, path).toBe(404);
      const malformed = await app.inject({ method, url: path, headers: { ...auth, 'content-type': 'application/json' }, payload: '{"oops' });
      expect(malformed.statusCode, `${path} with a malformed body`).toBe(404);
      expect(res.json()).toEqual({
        code: 'CONT_ERR_NOT_FOUND',
        message: expect.stringContaining(`${method} ${path}`),
        fix: expect.any(String),
        details: { method, url: path },
      });
    }
  });
  it('answers a request the HTTP parser or the router refuses in the coded error shape (the parser closes the connection)', async () => {
    const { port } = app.server.address() as AddressInfo;
    // A request head over Node's 16 KiB: 431 (RFC 6585 §5), before any route or token check.
    const big = await rawExchange(port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(big.status).toBe(431);
    expect(big.headers['content-type']).toMatch(/^application\/json/);
    expect(JSON.parse(big.body)).toEqual({ code: 'CONT_ERR_HEADERS_TOO_LARGE', message: expect.stringContaining('exceed'), fix: expect.stringContaining('max-http-header-size'), details: { parserCode: 'HPE_HEADER_OVERFLOW' } });
    // Not HTTP at all: 400 with the parser's code.
    const junk = await rawExchange(port, 'HELLO THERE\r\n\r\n');
    expect(junk.status).toBe(400);
    expect(JSON.parse(junk.body)).toMatchObject({ code: 'CONT_ERR_BAD_REQUEST', details: { parserCode: expect.stringMatching(/^HPE_/) } });
    // A path whose percent-escapes are not UTF-8: fastify refuses it before routing.
    for (const path of ['/v1/events%ff', '/%ff', '/healthz%zz']) {
      const res = await app.inject({ method: 'GET', url: path });
      expect(res.statusCode, path).toBe(400);
      expect(res.json(), path).toMatchObject({ code: 'CONT_ERR_BAD_REQUEST', details: { frameworkCode: 'FST_ERR_BAD_URL' } });
    }
    // What Node's server refused before the framework saw it, a bare status or a closed
    // connection before (a break-it pass): no Host (RFC 9112 §3.2), an Expect other than
    // 100-continue (RFC 9110 §10.1.1), CONNECT.
    const noHost = await rawExchange(port, 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(noHost.status).toBe(400);
    expect(JSON.parse(noHost.body)).toMatchObject({ code: 'CONT_ERR_BAD_REQUEST', message: expect.stringContaining('Host header'), details: { header: 'host' } });
    const http10 = await rawExchange(port, 'GET /healthz HTTP/1.0\r\n\r\n');
    expect(http10.status).toBe(200);
    const expectation = await rawExchange(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: foo\r\n\r\n');
    expect(expectation.status).toBe(417);
    expect(JSON.parse(expectation.body)).toMatchObject({ code: 'CONT_ERR_EXPECTATION_FAILED', details: { expect: 'foo' } });
    const tunnel = await rawExchange(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    expect(tunnel.status).toBe(404);
    expect(JSON.parse(tunnel.body)).toMatchObject({ code: 'CONT_ERR_NOT_FOUND', details: { method: 'CONNECT', url: 'example.com:443' } });
    // The gateway still answers on a new connection.
    expect((await app.inject({ url: '/healthz' })).statusCode).toBe(200);
  });
  it('answers /healthz and /readyz without the token, and shows /readyz counters only with it', async () => {
    expect((await app.inject({ url: '/healthz' })).statusCode).toBe(200);
    const ready = await app.inject({ url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ status: 'ready' });
    const counted = await app.inject({ url: '/readyz', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(counted.json()).toMatchObject({ status: 'ready', requests: expect.any(Number), accepted: expect.any(Number), rejected: expect.any(Number) });
  });
});

describe('events a sink refuses for good, and the 503s the gateway answers', () => {
  /** A sink that takes everything except boot events with pid 13 (too large) or 14 (refused by the broker). */
  const refusing: EventSink = {
    ready: () => true,
    accept: async (events) =>
      events.flatMap((e, index) =>
        e.event_type === 'boot' && (e.pid === 13 || e.pid === 14)
          ? [{ index, issue: e.pid === 13 ? { path: '', code: 'too_large', message: 'the event is 2097152 bytes as JSON; the limit is 1048576' } : { path: '', code: 'kafka_refused', message: 'Kafka refused the event (INVALID_RECORD)' } }]
          : [],
      ),
  };

  it('lists each refused event at its index in the request: 413 when the sink took none for their size, else the partial 400', async () => {
    const { app: gw, stats } = await createGateway({ sink: refusing, mapOtlpRecord });
    try {
      const mixed = await gw.inject({ method: 'POST', url: '/v1/events', payload: [boot(), { ...boot(), event_type: 'heartbeat' }, boot({ pid: 13 }), boot(), boot({ pid: 14 })] });
      expect(mixed.statusCode).toBe(400);
      expect(mixed.json()).toMatchObject({ code: 'CONT_ERR_EVENT_INVALID', accepted: 2 });
      expect(mixed.json().rejected).toEqual([
        { index: 1, issues: [expect.objectContaining({ code: 'unknown_event_type' })] },
        { index: 2, issues: [expect.objectContaining({ code: 'too_large' })] },
        { index: 4, issues: [expect.objectContaining({ code: 'kafka_refused' })] },
      ]);

      const tooLarge = await gw.inject({ method: 'POST', url: '/v1/events', payload: [boot({ pid: 13 }), boot({ pid: 13 })] });
      expect(tooLarge.statusCode).toBe(413);
      expect(tooLarge.headers['retry-after']).toBeUndefined();
      expect(tooLarge.json()).toMatchObject({ code: 'CONT_ERR_EVENT_TOO_LARGE', accepted: 0, rejected: [{ index: 0 }, { index: 1 }] });

      const partial = await gw.inject({ method: 'POST', url: '/v1/events', payload: [boot(), boot({ pid: 13 })] });
      expect(partial.statusCode).toBe(400);
      expect(partial.json()).toMatchObject({ code: 'CONT_ERR_EVENT_TOO_LARGE', accepted: 1, rejected: [{ index: 1 }] });

      const refused = await gw.inject({ method: 'POST', url: '/v1/events', payload: [boot({ pid: 14 })] });
      expect(refused.statusCode).toBe(400);
      expect(refused.json()).toMatchObject({ code: 'CONT_ERR_EVENT_REFUSED', accepted: 0, rejected: [{ index: 0 }] });

      // OTLP keeps its convention: the refused records are a partial success.
      const ts = String(Date.now() * 1_000_000);
      const record = (pid: number) => ({ timeUnixNano: ts, eventName: 'boot', attributes: [{ key: 'continuity.pid', value: { intValue: String(pid) } }] });
      const otlp = await gw.inject({
        method: 'POST',
        url: '/v1/logs',
        payload: { resourceLogs: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: 'refusals' } }, { key: 'continuity.boot_id', value: { stringValue: 'boot-refusals' } }] }, scopeLogs: [{ logRecords: [record(9), record(13), record(9)] }] }] },
      });
      expect(otlp.statusCode).toBe(200);
      expect(otlp.json().partialSuccess).toMatchObject({ rejectedLogRecords: 1, errorMessage: expect.stringMatching(/^record 1: \(record\) too_large/) });
      expect(stats).toMatchObject({ accepted: 2 + 0 + 1 + 0 + 2, rejected: 3 + 2 + 1 + 1 + 1 });
      expect(stats.rejectedByCode).toMatchObject({ too_large: 5, kafka_refused: 2 });
    } finally {
      await gw.close();
    }
  });

  it('counts every request it answers with 503, those refused while it shuts down too', async () => {
    let ready = true;
    let failNext = false;
    let release: () => void = () => undefined;
    let arrived: () => void = () => undefined;
    const inSink = new Promise<void>((r) => (arrived = r));
    const sink: EventSink = {
      ready: () => ready,
      accept: async (events) => {
        if (failNext) throw new ContinuityError('CONT_ERR_INGEST_UNAVAILABLE', 'Kafka: test');
        if (events.some((e) => e.event_type === 'boot' && e.pid === 77)) {
          arrived();
          await new Promise<void>((r) => (release = r));
        }
      },
    };
    const { app: gw, stats } = await createGateway({ sink, mapOtlpRecord });
    await gw.listen({ host: '127.0.0.1', port: 0 });
    const port = (gw.server.address() as AddressInfo).port;

    ready = false;
    const notReady = await fetch(`http://127.0.0.1:${port}/v1/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([boot(), boot()]) });
    expect(notReady.status).toBe(503);
    ready = true;
    failNext = true;
    const refused = await fetch(`http://127.0.0.1:${port}/v1/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([boot()]) });
    expect(refused.status).toBe(503);
    failNext = false;
    expect(stats).toMatchObject({ unavailable: 2, unavailableEvents: 3 });

    // A keep-alive connection with a request in the sink when the shutdown starts: its
    // next request arrives while the gateway closes and is answered 503 like the others.
    const conn = connect(port, '127.0.0.1');
    const responses = readResponses(conn);
    conn.write(post([boot({ pid: 77 })]));
    await inSink;
    const closed = gw.close();
    await new Promise((r) => setTimeout(r, 50));
    release();
    const first = await responses.next();
    expect(first.status).toBe(200);
    conn.write(post([boot()]));
    const second = await responses.next();
    expect(second.status).toBe(503);
    expect(second.headers['retry-after']).toMatch(/^\d+$/);
    expect(JSON.parse(second.body)).toMatchObject({ code: 'CONT_ERR_SHUTDOWN' });
    await closed;
    expect(stats).toMatchObject({ unavailable: 3 });
  });
});

/** An HTTP/1.1 POST of `events` to /v1/events, keep-alive. */
function post(events: unknown[]): string {
  const body = JSON.stringify(events);
  return `POST /v1/events HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: keep-alive\r\n\r\n${body}`;
}

/** Reads the HTTP/1.1 responses of one connection in order (each with a content-length). */
function readResponses(socket: Socket): { next(): Promise<{ status: number; headers: Record<string, string>; body: string }> } {
  let buffered = Buffer.alloc(0);
  let wake: () => void = () => undefined;
  socket.on('data', (d: Buffer) => {
    buffered = Buffer.concat([buffered, d]);
    wake();
  });
  socket.on('close', () => wake());
  return {
    async next() {
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end >= 0) {
          const [statusLine, ...lines] = buffered.subarray(0, end).toString('latin1').split('\r\n');
          const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
          const length = Number(headers['content-length'] ?? 0);
          if (buffered.length >= end + 4 + length) {
            const body = buffered.subarray(end + 4, end + 4 + length).toString('utf8');
            buffered = buffered.subarray(end + 4 + length);
            return { status: Number(statusLine!.split(' ')[1]), headers, body };
          }
        }
        if (socket.destroyed) throw new Error('the connection closed before a whole response');
        await new Promise<void>((r) => (wake = r));
      }
    },
  };
}

/**
 * Writes `request` on a new connection and reads the one answer until the server
 * closes it (the answers to a refused request end with the connection).
 */
async function rawExchange(port: number, request: string): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const conn = connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  conn.on('data', (c: Buffer) => chunks.push(c));
  const closed = new Promise<void>((resolve) => conn.on('close', () => resolve()));
  conn.on('error', () => {});
  conn.write(request);
  await closed;
  const text = Buffer.concat(chunks).toString('utf8');
  const [head = '', body = ''] = text.split('\r\n\r\n', 2);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.split(' ')[1]), headers, body };
}
