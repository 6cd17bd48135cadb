/**
 * Test fixture: a real MCP SDK server (McpServer + StreamableHTTPServerTransport)
 * on a loopback port, instrumented by the collector, with the emitted log records
 * captured by the OpenTelemetry SDK's InMemoryLogRecordExporter.
 *
 * Routes:
 * - `/mcp`     stateful, one transport per session (the SDK examples' layout); an
 *              unknown session id gets the SDK transport's own 404 body; a POST
 *              without session id goes to a fresh transport, so a non-initialize
 *              request gets the SDK's own 400 "Server not initialized".
 * - `/single`  one stateful transport for the whole server: the SDK itself answers
 *              404 "Session not found" and 400 "Mcp-Session-Id header is required".
 * - `/auth/…`  a bearer-token guard in front of `/mcp` (401 + WWW-Authenticate).
 * - `/v2026`   a sessionless 2026-07-28-style endpoint answering JSON directly
 *              (SDK 1.32 does not implement that revision).
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryLogRecordExporter, type ReadableLogRecord } from '@opentelemetry/sdk-logs';
import { z } from 'zod';
import { parseEvent, type ParseResult } from '../../../schema/index.ts';
import { createMcpCollector, type McpCollector, type McpCollectorOptions } from '../collector.ts';
import { fromReadableLogRecord, logRecordToEvents, type ContractEventInput } from '../log-record.ts';

export const HASH_KEY = '00112233445566778899aabbccddeeff';
export const GOOD_TOKEN = 'tok-good-SECRET-4711';
export const EXPIRED_TOKEN = 'tok-expired-SECRET-4712';
export const PRINCIPAL = 'principal-alice-RAW';

/** Keeps records after shutdown (the SDK's in-memory exporter clears them on shutdown). */
export class KeepingExporter extends InMemoryLogRecordExporter {
  override async shutdown(): Promise<void> {}
}

/** A gate a tool waits on, released by the test. */
export interface Gate {
  wait(signal: AbortSignal): Promise<void>;
  release(): void;
}

function createGate(): Gate {
  let open = false;
  const waiters = new Set<() => void>();
  return {
    wait(signal) {
      if (open) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const done = () => {
          waiters.delete(done);
          resolve();
        };
        waiters.add(done);
        signal.addEventListener('abort', done, { once: true });
      });
    },
    release() {
      open = true;
      for (const w of [...waiters]) w();
    },
  };
}

/** The fixture's MCP server: tools `echo` (ok), `fail` (isError result, S12), `slow` (waits on the gate). */
export function createFixtureMcpServer(gate: Gate): McpServer {
  const server = new McpServer({ name: 'fixture-server', version: '1.0.0' });
  server.registerTool('echo', { description: 'echoes', inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: 'text', text }],
  }));
  server.registerTool('fail', { description: 'fails like an upstream auth problem' }, async () => ({
    content: [{ type: 'text', text: 'upstream authorization failed: token rejected by provider' }],
    isError: true,
  }));
  server.registerTool('slow', { description: 'waits' }, async (extra) => {
    await gate.wait(extra.signal);
    return { content: [{ type: 'text', text: 'done' }] };
  });
  return server;
}

export interface Fixture {
  readonly collector: McpCollector;
  readonly exporter: KeepingExporter;
  readonly gate: Gate;
  readonly port: number;
  url(path: string): URL;
  /** Raw log records exported so far (after a flush). */
  records(): Promise<ReadableLogRecord[]>;
  /** Contract event inputs mapped back from the records (the gateway's path). */
  events(): Promise<ContractEventInput[]>;
  /** Polls (flushing each time) until `predicate` holds or the deadline passes; returns the events. */
  eventsWhen(predicate: (events: ContractEventInput[]) => boolean, deadlineMs?: number): Promise<ContractEventInput[]>;
  close(): Promise<void>;
}

/** Reads a JSON body (the /v2026 endpoint). */
async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
}

/**
 * Starts the fixture. `overrides` are merged into the collector options
 * (the exporter is always the in-memory one unless given).
 */
export async function startFixture(overrides: Partial<McpCollectorOptions> = {}): Promise<Fixture> {
  const exporter = new KeepingExporter();
  const gate = createGate();
  const collector = createMcpCollector({
    hashKey: HASH_KEY,
    service: { name: 'fixture-mcp', instanceId: 'fixture-1', version: '1.2.3', environment: 'test' },
    exporter,
    batch: { scheduledDelayMillis: 20 },
    ...overrides,
  });

  const transports = new Map<string, StreamableHTTPServerTransport>();
  const single = new StreamableHTTPServerTransport({ sessionIdGenerator: randomUUID });
  await createFixtureMcpServer(gate).connect(single);

  const handleMcp = async (req: IncomingMessage, res: ServerResponse) => {
    const sid = req.headers['mcp-session-id'];
    if (typeof sid === 'string') {
      const t = transports.get(sid);
      if (!t) {
        res.writeHead(404, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
        return;
      }
      await t.handleRequest(req, res);
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(400, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null }));
      return;
    }
    const t: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      onsessioninitialized: (id) => {
        transports.set(id, t);
      },
    });
    t.onclose = () => {
      if (t.sessionId) transports.delete(t.sessionId);
    };
    await createFixtureMcpServer(gate).connect(t);
    await t.handleRequest(req, res);
  };

  const handler = async (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path === '/mcp') return handleMcp(req, res);
    if (path === '/single') return single.handleRequest(req, res);
    if (path === '/auth/mcp') {
      const auth = req.headers.authorization;
      if (!auth) {
        res.writeHead(401, {
          'WWW-Authenticate': `Bearer resource_metadata="http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp"`,
          'Content-Type': 'application/json',
        });
        res.end(JSON.stringify({ error: 'invalid_request', error_description: 'Missing Authorization header' }));
        return;
      }
      if (auth !== `Bearer ${GOOD_TOKEN}`) {
        res.writeHead(401, {
          'WWW-Authenticate': 'Bearer error="invalid_token", error_description="The access token expired"',
          'Content-Type': 'application/json',
        });
        res.end(JSON.stringify({ error: 'invalid_token', error_description: 'The access token expired' }));
        return;
      }
      (req as IncomingMessage & { auth?: unknown }).auth = { token: GOOD_TOKEN, clientId: PRINCIPAL, scopes: [] };
      return handleMcp(req, res);
    }
    if (path === '/v2026') {
      const body = (await readJson(req)) as { id?: unknown };
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: body.id ?? null, result: { content: [{ type: 'text', text: 'ok' }] } }));
      return;
    }
    res.writeHead(404).end();
  };

  const server: Server = createServer(
    collector.wrapHandler((req, res) => {
      handler(req, res).catch(() => {
        if (!res.headersSent) res.writeHead(500);
        res.end();
      });
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  const records = async () => {
    await collector.flush();
    return [...exporter.getFinishedLogRecords()];
  };
  const events = async () => (await records()).flatMap((r) => logRecordToEvents(fromReadableLogRecord(r)));
  return {
    collector,
    exporter,
    gate,
    port,
    url: (path) => new URL(`http://127.0.0.1:${port}${path}`),
    records,
    events,
    async eventsWhen(predicate, deadlineMs = 5000) {
      const deadline = Date.now() + deadlineMs;
      for (;;) {
        const evs = await events();
        if (predicate(evs) || Date.now() > deadline) return evs;
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async close() {
      gate.release();
      for (const t of transports.values()) await t.close().catch(() => {});
      await single.close().catch(() => {});
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** POSTs a JSON-RPC body like an MCP client would, with extra headers. */
export async function postJson(url: URL, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** Validates every event; returns the failures (empty when all pass). */
export function invalidEvents(events: ContractEventInput[]): Array<{ event: ContractEventInput; result: ParseResult }> {
  return events.map((event) => ({ event, result: parseEvent(event) })).filter((x) => !x.result.ok);
}

/** All attribute and resource-attribute values of the records, as one string (for leak checks). */
export function allAttributeText(records: ReadableLogRecord[]): string {
  return JSON.stringify(records.map((r) => [r.eventName, r.attributes, r.resource.attributes, r.body ?? null]));
}
