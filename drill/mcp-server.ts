/**
 * The restart drill's MCP server: a real SDK server (McpServer +
 * StreamableHTTPServerTransport, stateful, sessions in memory, the SDK examples'
 * per-session routing) with one `echo` tool, instrumented by collectors/mcp and
 * exporting OTLP/HTTP. Run as a child process so the drill can kill it for real:
 *
 *   node --import tsx drill/mcp-server.ts --port P --otlp URL --boot-label N [--service S] [--standby] [--no-collector] [--no-trace]
 *
 * The hash key comes from `CONTINUITY_HASH_KEY` (core/config.ts).
 *
 * `--standby` loads everything, prints `{"ev":"standby"}` and waits for a `go`
 * line on stdin before it creates the collector (the `boot` event) and binds the
 * port: a warm standby is how the drill restarts a server in well under 0.5 s.
 *
 * Protocol (one JSON object per stdout line; `t` is epoch ms):
 * - `{"ev":"ready","port","pid","boot_id","boot_label","t"}` once listening;
 * - with tracing (default): `{"ev":"req","n","method","t"}` when a request comes in
 *   and `{"ev":"res","n","status","finished","t"}` when its response finished or
 *   the connection closed first (`n` is the `x-drill-req` request header), and
 *   `{"ev":"tool","text","t"}` when a delayed echo starts;
 * - stdin `flush` → `{"ev":"flushed","counters"}` once every record emitted so far
 *   was exported (the collector's counters, collectors/mcp `CollectorCounters`);
 * - SIGTERM/SIGINT → graceful stop (stop accepting, `collector.shutdown`), then
 *   `{"ev":"stopped","counters"}` and exit 0.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { createMcpCollector, type McpCollector } from '../collectors/index.ts';
import { loadConfig } from '../core/index.ts';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string' },
    otlp: { type: 'string' },
    'boot-label': { type: 'string', default: '1' },
    service: { type: 'string', default: 'drill-mcp' },
    standby: { type: 'boolean', default: false },
    'no-collector': { type: 'boolean', default: false },
    'no-trace': { type: 'boolean', default: false },
  },
});

const port = Number(args.port);
if (!Number.isInteger(port) || port <= 0 || port > 65_535) fail('--port <1..65535> is required');
if (!args['no-collector'] && !args.otlp) fail('--otlp <url> is required (or --no-collector)');
const trace = !args['no-trace'];
const bootLabel = args['boot-label'];

function fail(message: string): never {
  process.stderr.write(`drill/mcp-server: ${message}\n`);
  process.exit(2);
}

function emit(line: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ ...line, t: Date.now() }) + '\n');
}

/** The drill's MCP server: `echo` answers its text; with `delay_ms` it first waits (cancellable). */
function createEchoServer(): McpServer {
  const server = new McpServer({ name: 'continuity-drill', version: '1.0.0' });
  server.registerTool(
    'echo',
    { description: 'echoes the text, optionally after delay_ms', inputSchema: { text: z.string(), delay_ms: z.number().int().min(0).max(600_000).optional() } },
    async ({ text, delay_ms }, extra) => {
      if (delay_ms) {
        if (trace) emit({ ev: 'tool', text });
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delay_ms);
          extra.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
        });
      }
      return { content: [{ type: 'text', text }] };
    },
  );
  return server;
}

const NOT_FOUND = JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
const NO_SESSION = JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null });

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? (JSON.parse(text) as unknown) : undefined;
}

async function boot(): Promise<void> {
  const config = loadConfig();
  const collector: McpCollector = createMcpCollector({
    enabled: !args['no-collector'],
    hashKey: config.hashKeyHex,
    service: { name: args.service!, version: 'drill', instanceId: `drill-${process.pid}` },
    otlp: { url: args.otlp ?? 'http://127.0.0.1:4318/v1/logs', timeoutMillis: 5000 },
    // Near real time, so a kill loses little; the drill still flushes before each kill.
    batch: { scheduledDelayMillis: 100 },
  });
  const transports = new Map<string, StreamableHTTPServerTransport>();

  // The SDK examples' stateful routing: one transport per session, created by initialize.
  const handleMcp = async (req: IncomingMessage, res: ServerResponse) => {
    const sid = req.headers['mcp-session-id'];
    if (typeof sid === 'string') {
      const transport = transports.get(sid);
      if (!transport) {
        res.writeHead(404, { 'Content-Type': 'application/json' }).end(NOT_FOUND);
        return;
      }
      await transport.handleRequest(req, res);
      return;
    }
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    if (!isInitializeRequest(body)) {
      res.writeHead(400, { 'Content-Type': 'application/json' }).end(NO_SESSION);
      return;
    }
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      onsessioninitialized: (id) => {
        transports.set(id, transport);
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) transports.delete(transport.sessionId);
    };
    await createEchoServer().connect(transport);
    await transport.handleRequest(req, res, body);
  };

  const server = createServer(
    collector.wrapHandler((req, res) => {
      if (trace) {
        const n = Number(req.headers['x-drill-req'] ?? 0);
        emit({ ev: 'req', n, method: req.method });
        let done = false;
        const settle = () => {
          if (done) return;
          done = true;
          emit({ ev: 'res', n, status: res.statusCode, finished: res.writableFinished });
        };
        res.once('finish', settle);
        res.once('close', settle);
      }
      const path = new URL(req.url ?? '/', 'http://drill').pathname;
      if (path !== '/mcp') {
        res.writeHead(404).end();
        return;
      }
      handleMcp(req, res).catch((err: unknown) => {
        process.stderr.write(`drill/mcp-server: ${(err as Error).stack ?? String(err)}\n`);
        if (!res.headersSent) res.writeHead(500);
        res.end();
      });
    }),
  );
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  emit({ ev: 'ready', port, pid: process.pid, boot_id: collector.bootId, boot_label: bootLabel });

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    server.close();
    await collector.shutdown({ reason: 'signal', drainTimeoutMs: 3000 });
    for (const t of transports.values()) await t.close().catch(() => {});
    server.closeAllConnections();
    emit({ ev: 'stopped', counters: collector.counters() });
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop());
  process.once('SIGINT', () => void stop());
  commands.on('line', (line) => {
    if (line.trim() === 'flush') void collector.flush().then(() => emit({ ev: 'flushed', counters: collector.counters() }));
  });
}

const commands = createInterface({ input: process.stdin });
// The drill holds stdin open: when it goes away (even killed), so does this server.
commands.on('close', () => process.exit(0));
if (args.standby) {
  emit({ ev: 'standby', pid: process.pid });
  const onGo = (line: string) => {
    if (line.trim() !== 'go') return;
    commands.off('line', onGo);
    boot().catch((err: unknown) => fail(`boot failed: ${(err as Error).stack ?? String(err)}`));
  };
  commands.on('line', onGo);
} else {
  boot().catch((err: unknown) => fail(`boot failed: ${(err as Error).stack ?? String(err)}`));
}
