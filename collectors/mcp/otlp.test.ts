import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEvent } from '../../schema/index.ts';
import { createMcpCollector } from './collector.ts';
import { logRecordToEvent, logRecordToEvents, type OtlpKeyValue } from './log-record.ts';
import { HASH_KEY } from './test-support/sdk-fixture.ts';

/** A stand-in OTLP/HTTP receiver on loopback that keeps every request. */
interface Received {
  path: string;
  contentType: string;
  body: Buffer;
}

interface OtlpJsonLogs {
  resourceLogs: Array<{
    resource?: { attributes?: OtlpKeyValue[] };
    scopeLogs: Array<{
      scope?: { name?: string; version?: string };
      logRecords: Array<{ eventName?: string; timeUnixNano?: string; observedTimeUnixNano?: string; attributes?: OtlpKeyValue[] }>;
    }>;
  }>;
}

describe('OTLP/HTTP export', () => {
  let server: Server;
  let url: string;
  const received: Received[] = [];
  /** The receiver's answer body (OTLP ExportLogsServiceResponse as JSON). */
  let answer = '{}';

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ path: req.url ?? '', contentType: req.headers['content-type'] ?? '', body: Buffer.concat(chunks) });
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(answer);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/logs`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('JSON: the records that arrive at the endpoint map back to valid contract events (the gateway path)', async () => {
    const collector = createMcpCollector({ hashKey: HASH_KEY, service: { name: 'otlp-json', version: '9.9.9', environment: 'prod' }, otlp: { url } });
    collector.recordSessionLifecycle({ action: 'evicted', sessionId: 'raw-session-XYZ', principal: 'raw-principal-XYZ', capKind: 'live', liveCount: 8, liveCap: 8, victimIdleMs: 1234.5 });
    collector.recordRemint({ staleSessionId: 'raw-session-XYZ', replacementSessionId: 'raw-session-NEW', mode: 'alias', outcome: 'created' });
    collector.recordCapSnapshot({ principal: 'raw-principal-XYZ', liveCount: 3, liveCap: 8, globalCount: 40, globalCap: 256 });
    await collector.shutdown({ reason: 'upgrade', drainTimeoutMs: 0 });
    const json = received.filter((r) => r.contentType.startsWith('application/json'));
    expect(json.length).toBeGreaterThan(0);
    expect(json[0]!.path).toBe('/v1/logs');
    const text = json.map((r) => r.body.toString('utf8')).join('\n');
    expect(text).not.toContain('raw-session');
    expect(text).not.toContain('raw-principal');
    const events = json.flatMap((r) => {
      const payload = JSON.parse(r.body.toString('utf8')) as OtlpJsonLogs;
      return payload.resourceLogs.flatMap((rl) =>
        rl.scopeLogs.flatMap((sl) =>
          sl.logRecords.map((lr) =>
            logRecordToEvent({
              eventName: lr.eventName,
              timeUnixNano: lr.timeUnixNano,
              observedTimeUnixNano: lr.observedTimeUnixNano,
              attributes: lr.attributes,
              resourceAttributes: rl.resource?.attributes,
            }),
          ),
        ),
      );
    });
    expect(events.map((e) => e.event_type)).toEqual(['boot', 'session_lifecycle', 'remint', 'cap_snapshot', 'shutdown']);
    for (const e of events) {
      const parsed = parseEvent(e);
      expect(parsed.ok, JSON.stringify(parsed)).toBe(true);
      expect(e).toMatchObject({ service: 'otlp-json', release: '9.9.9', environment: 'prod', source: 'server' });
    }
    expect(events[1]).toMatchObject({ action: 'evicted', cap_kind: 'live', live_count: 8, live_cap: 8, victim_idle_ms: 1234.5 });
    expect(events[2]).toMatchObject({ mode: 'alias', outcome: 'created' });
    expect(String(events[2]!.stale_session_key)).toMatch(/^[0-9a-f]{32}$/);
    expect(events[3]).toMatchObject({ global_count: 40, global_cap: 256 });
    expect(events[4]).toMatchObject({ reason: 'upgrade', in_flight: 0 });
    expect(collector.counters()).toMatchObject({ exported: 5, export_failures: 0, dropped: 0 });
  });

  it('JSON: counts the records a receiver refuses (partial success) as failed, not exported (a break-it pass: all counted exported)', async () => {
    const before = received.length;
    answer = '{"partialSuccess":{"rejectedLogRecords":"1","errorMessage":"record 0: client_name lone_surrogate"}}';
    try {
      const collector = createMcpCollector({ hashKey: HASH_KEY, service: { name: 'otlp-partial' }, otlp: { url } });
      collector.recordCapSnapshot({ principal: 'p', liveCount: 1, liveCap: 8 });
      await collector.shutdown({ drainTimeoutMs: 0 });
      const requests = received.length - before;
      expect(requests).toBeGreaterThan(0);
      expect(collector.counters()).toMatchObject({ emitted: 3, exported: 3 - requests, failed_records: requests, export_failures: 0 });
    } finally {
      answer = '{}';
    }
  });

  it('JSON: a request becomes one exchange record that splits into a valid arrival and settlement', async () => {
    const before = received.length;
    const collector = createMcpCollector({ hashKey: HASH_KEY, service: { name: 'otlp-exchange' }, otlp: { url } });
    const host = createServer(
      collector.wrapHandler((req, res) => {
        req.resume();
        req.on('end', () => res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 'raw-session-EX' }).end('event: message\ndata: {"jsonrpc":"2.0","id":7,"result":{"content":[]}}\n\n'));
      }),
    );
    await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve));
    const res = await fetch(`http://127.0.0.1:${(host.address() as AddressInfo).port}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'ua "quoted" \\ é' },
      body: '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}',
    });
    await res.text();
    host.closeAllConnections();
    await new Promise<void>((resolve) => host.close(() => resolve()));
    await collector.shutdown({ drainTimeoutMs: 1000 });
    const payloads = received.slice(before).map((r) => JSON.parse(r.body.toString('utf8')) as OtlpJsonLogs);
    const records = payloads.flatMap((p) => p.resourceLogs.flatMap((rl) => rl.scopeLogs.flatMap((sl) => sl.logRecords.map((lr) => ({ lr, resource: rl.resource?.attributes })))));
    expect(records.map((r) => r.lr.eventName)).toEqual(['boot', 'exchange', 'shutdown']);
    const events = records.flatMap(({ lr, resource }) => logRecordToEvents({ eventName: lr.eventName, timeUnixNano: lr.timeUnixNano, attributes: lr.attributes, resourceAttributes: resource }));
    expect(events.map((e) => e.event_type)).toEqual(['boot', 'arrival', 'settlement', 'shutdown']);
    for (const e of events) expect(parseEvent(e).ok, JSON.stringify(parseEvent(e))).toBe(true);
    const [, arrival, settlement] = events;
    expect(arrival).toMatchObject({ mcp_method: 'tools/call', tool_name: 'echo', jsonrpc_id: '7', user_agent: 'ua "quoted" \\ é', source: 'server' });
    expect(arrival!.event_id).toBe(arrival!.arrival_id);
    expect(settlement).toMatchObject({ outcome: 'ok', http_status: 200, session_resolution: 'new', arrival_id: arrival!.arrival_id });
    expect(settlement!.session_key).toBe(settlement!.minted_session_key);
    expect(Number(settlement!.ts)).toBeGreaterThanOrEqual(Number(arrival!.ts));
  });

  it('protobuf: sends application/x-protobuf to the same endpoint', async () => {
    const before = received.length;
    const collector = createMcpCollector({ hashKey: HASH_KEY, service: { name: 'otlp-proto' }, otlp: { url, encoding: 'protobuf' } });
    await collector.shutdown({ drainTimeoutMs: 0 });
    const sent = received.slice(before);
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.every((r) => r.contentType === 'application/x-protobuf')).toBe(true);
    // The boot event name is in the protobuf payload as a plain string field.
    expect(sent.some((r) => r.body.includes('otlp-proto'))).toBe(true);
    expect(collector.counters()).toMatchObject({ exported: 2, export_failures: 0 });
  });
});
