import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { logs } from '@opentelemetry/api-logs';
import { OTLPLogExporter as OTLPJsonExporter } from '@opentelemetry/exporter-logs-otlp-http';
import { OTLPLogExporter as OTLPProtoExporter } from '@opentelemetry/exporter-logs-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchLogRecordProcessor, LoggerProvider } from '@opentelemetry/sdk-logs';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestStore, type TestStore } from '../../test/helpers/store.ts';
import { createInProcessTransport, type InProcessTransport } from '../transport/in-process.ts';
import { createGateway } from './app.ts';
import { encodeOtlpRequest } from './otlp.ts';
import { mapOtlpRecord } from './otlp-map.ts';

let t: TestStore;
let transport: InProcessTransport;
let app: FastifyInstance;
let url: string;
const TOKEN = 'test-ingest-token';
const auth = { authorization: `Bearer ${TOKEN}` };

beforeAll(async () => {
  t = await openTestStore('gateway');
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
const boot = (extra: Record<string, unknown> = {}) => ({ event_id: randomUUID(), event_type: 'boot', ts: nowMicros(), source: 'server', service: 'gw-test', pid: 42, ...extra });
async function stored(where: string): Promise<number> {
  await transport.flush();
  const [row] = await t.store.query<{ n: number }>(`SELECT count() AS n FROM events WHERE ${where}`);
  return row!.n;
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
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'partial' } }] },
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

  it('answers protobuf partial success in protobuf', async () => {
    const body = encodeOtlpRequest({
      resourceLogs: [{ scopeLogs: [{ logRecords: [{ timeUnixNano: String(Date.now() * 1_000_000), eventName: 'nope' }] }] }],
    });
    const res = await app.inject({ method: 'POST', url: '/v1/logs', headers: { ...auth, 'content-type': 'application/x-protobuf' }, payload: body });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('application/x-protobuf');
    expect(res.rawPayload.length).toBeGreaterThan(0);
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
});

describe('POST /v1/events', () => {
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
  it('answers /healthz and /readyz', async () => {
    expect((await app.inject({ url: '/healthz' })).statusCode).toBe(200);
    const ready = await app.inject({ url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toMatchObject({ status: 'ready' });
  });
});
