/**
 * The collector benchmark's MCP server (child process of bench/collector.ts): the
 * SDK examples' stateful Streamable HTTP server with an `echo` tool, with or
 * without collectors/mcp; like the SDK's Express examples it parses each POST
 * body once and passes it to the transport (see `parsedBody`).
 *
 *   node --import tsx bench/collector-server.ts --collector on|off [--otlp URL] [--body host|sdk]
 *
 * Talks to the parent over IPC: sends `{ ready: port }` once listening; answers
 * `{ cmd: 'stats' }` with `{ stats: { cpu_us, gc_us, emitted, events, exported, dropped, failed } }`
 * (`cpu_us`: this process's user + system CPU time so far, µs; `gc_us`: time in
 * garbage-collection pauses so far, µs; `emitted`: log records, `events`: the contract
 * events they carry — an `exchange` record carries an arrival and a settlement).
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { createMcpCollector } from '../collectors/index.ts';

const { values: args } = parseArgs({
  options: { collector: { type: 'string', default: 'on' }, otlp: { type: 'string', default: 'http://127.0.0.1:4318/v1/logs' }, body: { type: 'string', default: 'host' } },
});

const collector = createMcpCollector({
  enabled: args.collector === 'on',
  hashKey: '00112233445566778899aabbccddeeff',
  service: { name: 'bench-mcp', version: 'bench' },
  otlp: { url: args.otlp! },
});

function echoServer(): McpServer {
  const server = new McpServer({ name: 'bench', version: '1.0.0' });
  server.registerTool('echo', { description: 'echoes', inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: 'text', text }] }));
  return server;
}

const transports = new Map<string, StreamableHTTPServerTransport>();

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? (JSON.parse(text) as unknown) : undefined;
}

/**
 * Reads and parses a POST body once, as the SDK's Express examples do with
 * `express.json()`: the body is set on `req.body` and handed to the transport
 * pre-parsed (`handleRequest(req, res, parsedBody)`), so neither the SDK nor the
 * collector parses it again. Both servers of the benchmark do this.
 */
async function parsedBody(req: IncomingMessage): Promise<unknown> {
  if (req.method !== 'POST') return undefined;
  const body = await readBody(req);
  (req as IncomingMessage & { body?: unknown }).body = body;
  return body;
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const sid = req.headers['mcp-session-id'];
  if (typeof sid === 'string') {
    const t = transports.get(sid);
    if (!t) {
      res.writeHead(404, { 'Content-Type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
      return;
    }
    // --body sdk: the transport reads and parses the body itself (and the collector parses its copy).
    if (args.body === 'sdk') await t.handleRequest(req, res);
    else await t.handleRequest(req, res, await parsedBody(req));
    return;
  }
  const body = await parsedBody(req);
  if (!isInitializeRequest(body)) {
    res.writeHead(400).end();
    return;
  }
  const t: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({ sessionIdGenerator: randomUUID, onsessioninitialized: (id) => void transports.set(id, t) });
  t.onclose = () => {
    if (t.sessionId) transports.delete(t.sessionId);
  };
  await echoServer().connect(t);
  await t.handleRequest(req, res, body);
}

const server = createServer(
  collector.wrapHandler((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  }),
);
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.send?.({ ready: (server.address() as AddressInfo).port }));

// Time spent in garbage collection (pauses on the main thread), µs.
let gcUs = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) gcUs += e.duration * 1000;
}).observe({ entryTypes: ['gc'] });

process.on('message', (m: { cmd?: string }) => {
  if (m.cmd !== 'stats') return;
  const cpu = process.cpuUsage();
  const c = collector.counters();
  process.send?.({ stats: { cpu_us: cpu.user + cpu.system, gc_us: gcUs, emitted: c.emitted, events: c.emitted_events, exported: c.exported, dropped: c.dropped, failed: c.failed_records } });
});
process.on('disconnect', () => process.exit(0));
