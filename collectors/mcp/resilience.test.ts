import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { LogRecordExporter } from '@opentelemetry/sdk-logs';
import { describe, expect, it } from 'vitest';
import { createKeyedHasher, isContinuityError } from '../../core/index.ts';
import { createMcpCollector } from './collector.ts';
import { fromReadableLogRecord, logRecordToEvents } from './log-record.ts';
import { HASH_KEY, KeepingExporter, startFixture, type Fixture } from './test-support/sdk-fixture.ts';

/** A loopback port with nothing listening (bound, then released). */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

async function until(predicate: () => boolean, deadlineMs = 10_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!predicate() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

async function exerciseClient(fx: Fixture): Promise<void> {
  const client = new Client({ name: 'resilience-client', version: '1' });
  const transport = new StreamableHTTPClientTransport(fx.url('/mcp'));
  await client.connect(transport);
  const tools = await client.listTools();
  expect(tools.tools.map((t) => t.name)).toContain('echo');
  const r = await client.callTool({ name: 'echo', arguments: { text: 'still works' } });
  expect(r.content).toEqual([{ type: 'text', text: 'still works' }]);
  await client.close();
}

describe('collectors/mcp never hurts the host', () => {
  it('survives an unreachable OTLP endpoint: requests succeed, failures and drops are counted, the queue stays bounded', async () => {
    const port = await closedPort();
    const maxQueueSize = 50;
    const fx = await startFixture({
      exporter: undefined,
      otlp: { url: `http://127.0.0.1:${port}/v1/logs`, timeoutMillis: 300 },
      batch: { maxQueueSize, maxExportBatchSize: 10, scheduledDelayMillis: 10, exportTimeoutMillis: 1000 },
    });
    try {
      await exerciseClient(fx);
      // A burst far larger than the queue, in one synchronous loop: the export is asynchronous, so at
      // most maxQueueSize records can be waiting and the rest must be dropped (and counted).
      for (let i = 0; i < 1000; i++) fx.collector.recordCapSnapshot({ principal: `p-${i}`, liveCount: 1, liveCap: 8 });
      const burst = fx.collector.counters();
      expect(burst.queued).toBeLessThanOrEqual(maxQueueSize);
      expect(burst.dropped).toBeGreaterThan(0);
      await until(() => fx.collector.counters().export_failures > 0);
      await exerciseClient(fx);
      const c = fx.collector.counters();
      expect(c.export_failures).toBeGreaterThan(0);
      expect(c.exported).toBe(0);
      expect(c.internal_errors).toBe(0);
      await fx.close();
      await fx.collector.shutdown({ drainTimeoutMs: 0, flushTimeoutMs: 10_000 });
      const end = fx.collector.counters();
      expect(end.emitted).toBe(end.dropped + end.queued + end.exporting + end.exported + end.failed_records);
      expect(end.queued).toBe(0);
    } finally {
      await fx.close().catch(() => {});
    }
  });

  it('a throwing principalOf, include, onInternalError or exporter never breaks a request', async () => {
    const throwingExporter: LogRecordExporter = {
      export() {
        throw new Error('exporter exploded');
      },
      forceFlush: async () => {},
      shutdown: async () => {},
    };
    let includeCalls = 0;
    const fx = await startFixture({
      exporter: throwingExporter,
      principalOf: () => {
        throw new Error('principal lookup exploded');
      },
      include: () => {
        includeCalls += 1;
        if (includeCalls % 2 === 0) throw new Error('include exploded');
        return true;
      },
      onInternalError: () => {
        throw new Error('diagnostic hook exploded');
      },
    });
    try {
      await exerciseClient(fx);
      await fx.collector.flush();
      const c = fx.collector.counters();
      expect(c.internal_errors).toBeGreaterThan(0);
      expect(c.export_failures).toBeGreaterThan(0);
    } finally {
      await fx.close();
      await fx.collector.shutdown({ drainTimeoutMs: 0 });
    }
  });

  it('taps keep the response byte-identical, whatever chunk types the handler writes', async () => {
    const exporter = new KeepingExporter();
    const collector = createMcpCollector({ hashKey: HASH_KEY, service: { name: 't' }, exporter });
    const handler = (req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      res.writeHead(200, [['Content-Type', 'text/event-stream'], ['Mcp-Session-Id', 'raw-sid']]);
      res.write('event: message\r\ndata: {"jsonrpc":"2.0","id":1,');
      res.write(Buffer.from('"result":{"isError":true}}\r\n\r\n'));
      res.write('ZXZlbnQ6IHBpbmcKCg==', 'base64');
      res.end(new Uint8Array([58, 32, 100, 111, 110, 101, 10]), () => {});
    };
    const server = createServer(collector.wrapHandler(handler));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, { method: 'POST', body: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}', headers: { 'content-type': 'application/json' } });
      expect(res.headers.get('mcp-session-id')).toBe('raw-sid');
      expect(await res.text()).toBe('event: message\r\ndata: {"jsonrpc":"2.0","id":1,"result":{"isError":true}}\r\n\r\nevent: ping\n\n: done\n');
      await until(() => collector.counters().in_flight === 0);
      expect(collector.counters()).toMatchObject({ internal_errors: 0, in_flight: 0 });
      // The tap read the SSE stream across chunk boundaries and encodings.
      await collector.flush();
      const events = exporter.getFinishedLogRecords().flatMap((r) => logRecordToEvents(fromReadableLogRecord(r)));
      const hash = createKeyedHasher(Buffer.from(HASH_KEY, 'hex'));
      expect(events.find((e) => e.event_type === 'settlement')).toMatchObject({
        outcome: 'tool_error',
        session_resolution: 'new',
        minted_session_key: hash('raw-sid'),
      });
      expect(events.find((e) => e.event_type === 'arrival')).toMatchObject({ mcp_method: 'tools/call', tool_name: 'x', jsonrpc_id: '1' });
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await collector.shutdown({ drainTimeoutMs: 0 });
    }
  });

  it('uses the body the host parsed (req.body) instead of parsing the tapped bytes again', async () => {
    const exporter = new KeepingExporter();
    const collector = createMcpCollector({ hashKey: HASH_KEY, service: { name: 't' }, exporter });
    const handler = (req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        // Like express.json(); a marker tool name shows which body the arrival was summarized from.
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { params: { name: string } };
        body.params.name = 'from-host';
        (req as IncomingMessage & { body?: unknown }).body = body;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":{}}');
      });
    };
    const server = createServer(collector.wrapHandler(handler));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, { method: 'POST', body: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"from-wire"}}', headers: { 'content-type': 'application/json' } });
      expect(res.status).toBe(200);
      await res.text();
      await until(() => collector.counters().in_flight === 0);
      await collector.flush();
      const events = exporter.getFinishedLogRecords().flatMap((r) => logRecordToEvents(fromReadableLogRecord(r)));
      expect(events.find((e) => e.event_type === 'arrival')).toMatchObject({ mcp_method: 'tools/call', tool_name: 'from-host', jsonrpc_id: '1' });
      expect(events.find((e) => e.event_type === 'settlement')).toMatchObject({ outcome: 'ok', http_status: 200 });
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await collector.shutdown({ drainTimeoutMs: 0 });
    }
  });

  it('is a no-op when disabled', async () => {
    const collector = createMcpCollector({ enabled: false, service: { name: 'off' } });
    let nextCalled = false;
    collector.middleware({} as IncomingMessage, {} as ServerResponse, () => {
      nextCalled = true;
    });
    expect(nextCalled).toBe(true);
    const handler = () => 'x';
    expect(collector.wrapHandler(handler)).toBe(handler);
    collector.recordCapSnapshot({ principal: 'p' });
    expect(collector.counters()).toMatchObject({ emitted: 0, in_flight: 0 });
    await collector.flush();
    await collector.shutdown();
  });

  it('refuses invalid options at creation with CONT_ERR_CONFIG, and invalid API calls without throwing', async () => {
    expect(() => createMcpCollector({ service: { name: 'x' } })).toThrow(/hashKey/);
    try {
      createMcpCollector({ hashKey: HASH_KEY, service: { name: '' } });
      expect.unreachable();
    } catch (err) {
      expect(isContinuityError(err, 'CONT_ERR_CONFIG')).toBe(true);
    }
    expect(() => createMcpCollector({ hashKey: HASH_KEY, service: { name: 'x' }, otlp: { url: 'not a url' } })).toThrow();
    // <data-dir>/hash.key's contents as read (a trailing newline) are the key; other text is not
    const fromFile = createMcpCollector({ hashKey: `${HASH_KEY}\n`, service: { name: 'x' }, otlp: { url: 'http://127.0.0.1:9/v1/logs' } });
    await fromFile.shutdown({ drainTimeoutMs: 0 });
    expect(() => createMcpCollector({ hashKey: `${HASH_KEY}zz`, service: { name: 'x' } })).toThrow(/hashKey text must be hex/);
    const fx = await startFixture();
    try {
      fx.collector.recordRemint({ staleSessionId: 'a', replacementSessionId: 'b', mode: 'nonsense' as never, outcome: 'created' });
      fx.collector.recordSessionLifecycle({ action: 'created', liveCount: -1 });
      fx.collector.recordCapSnapshot(undefined as never);
      expect(fx.collector.counters().rejected_calls).toBe(3);
      expect(fx.collector.counters().internal_errors).toBe(0);
    } finally {
      await fx.close();
      await fx.collector.shutdown({ drainTimeoutMs: 0 });
    }
  });
});
