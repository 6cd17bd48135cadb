import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeyedHasher } from '../../core/index.ts';
import { createMcpCollector, type McpCollector } from './collector.ts';
import { fromReadableLogRecord, logRecordToEvents, type ContractEventInput } from './log-record.ts';
import { createFixtureMcpServer, HASH_KEY, invalidEvents, KeepingExporter, postJson, type Gate } from './test-support/sdk-fixture.ts';

const hash = createKeyedHasher(Buffer.from(HASH_KEY, 'hex'));
const gate: Gate = { wait: async () => {}, release: () => {} };
const byType = (events: ContractEventInput[], type: string) => events.filter((e) => e.event_type === type);

interface Host {
  collector: McpCollector;
  exporter: KeepingExporter;
  base: string;
  close(): Promise<void>;
}

function newCollector(name: string) {
  const exporter = new KeepingExporter();
  const collector = createMcpCollector({ hashKey: HASH_KEY, service: { name }, exporter, batch: { scheduledDelayMillis: 20 } });
  return { exporter, collector };
}

/** The session routing of the SDK examples, shared by both hosts. */
function createSessionRouter() {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  return {
    transports,
    /** The transport for a request, or undefined when the session is unknown (the host answers 404). */
    async transportFor(sid: string | undefined, body: unknown): Promise<StreamableHTTPServerTransport | undefined> {
      if (sid) return transports.get(sid);
      if (!isInitializeRequest(body)) return undefined;
      const t: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: randomUUID,
        onsessioninitialized: (id) => {
          transports.set(id, t);
        },
      });
      await createFixtureMcpServer(gate).connect(t);
      return t;
    },
  };
}

const NOT_FOUND = { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null };

async function events(host: Host, predicate: (evs: ContractEventInput[]) => boolean): Promise<ContractEventInput[]> {
  const deadline = Date.now() + 5000;
  for (;;) {
    await host.collector.flush();
    const evs = host.exporter.getFinishedLogRecords().flatMap((r) => logRecordToEvents(fromReadableLogRecord(r)));
    if (predicate(evs) || Date.now() > deadline) return evs;
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function exercise(host: Host, path = '/mcp', headers: Record<string, string> = {}) {
  const client = new Client({ name: 'host-client', version: '2' });
  const transport = new StreamableHTTPClientTransport(new URL(host.base + path), { requestInit: { headers } });
  await client.connect(transport);
  const sid = transport.sessionId!;
  await client.callTool({ name: 'echo', arguments: { text: 'x' } });
  await client.close();
  const staleId = `stale-RAW-${randomUUID()}`;
  const stale = await postJson(new URL(host.base + path), { jsonrpc: '2.0', id: 5, method: 'tools/list' }, { ...headers, 'Mcp-Session-Id': staleId, 'MCP-Protocol-Version': '2025-11-25' });
  expect(stale.status).toBe(404);
  const key = hash(sid);
  const staleKey = hash(staleId);
  const evs = await events(host, (e) => byType(e, 'session_refused').some((r) => r.session_key === staleKey) && byType(e, 'settlement').some((s) => s.minted_session_key === key));
  const minted = byType(evs, 'settlement').find((s) => s.minted_session_key === key);
  expect(minted).toMatchObject({ outcome: 'ok', session_resolution: 'new' });
  expect(byType(evs, 'arrival').find((a) => a.arrival_id === minted?.arrival_id)).toMatchObject({ mcp_method: 'initialize', client_name: 'host-client' });
  const call = byType(evs, 'arrival').find((a) => a.tool_name === 'echo' && a.session_key === key);
  expect(byType(evs, 'settlement').find((s) => s.arrival_id === call?.arrival_id)).toMatchObject({ outcome: 'ok', session_key: key, client_name: 'host-client' });
  const staleArrival = byType(evs, 'arrival').find((a) => a.session_key === staleKey);
  expect(staleArrival).toMatchObject({ mcp_method: 'tools/list', jsonrpc_id: '5' });
  expect(byType(evs, 'session_refused').find((r) => r.session_key === staleKey)).toMatchObject({ reason: 'unknown_after_boot', http_status: 404, arrival_id: staleArrival?.arrival_id });
  expect(invalidEvents(evs)).toEqual([]);
  expect(host.collector.counters().internal_errors).toBe(0);
  return evs;
}

describe('Express host (createMcpExpressApp + app.use(collector.middleware))', () => {
  let host: Host;
  beforeAll(async () => {
    const { exporter, collector } = newCollector('express-mcp');
    const app = createMcpExpressApp();
    app.use(collector.middleware);
    const router = createSessionRouter();
    const auth = requireBearerAuth({
      verifier: {
        verifyAccessToken: async (token: string) => {
          if (token !== 'express-good-token') throw new InvalidTokenError('Token has expired');
          return { token, clientId: 'express-principal-RAW', scopes: [], expiresAt: Math.floor(Date.now() / 1000) + 3600 };
        },
      },
      resourceMetadataUrl: 'http://127.0.0.1/.well-known/oauth-protected-resource',
    });
    const handle = async (req: IncomingMessage & { body?: unknown }, res: ServerResponse & { status(code: number): { json(v: unknown): void } }) => {
      const sid = req.headers['mcp-session-id'];
      const t = await router.transportFor(typeof sid === 'string' ? sid : undefined, req.body);
      if (!t) return res.status(404).json(NOT_FOUND);
      await t.handleRequest(req, res, req.body);
    };
    app.all('/mcp', handle);
    app.all('/auth/mcp', auth, handle);
    const server: Server = await new Promise((resolve) => {
      const s: Server = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    host = {
      collector,
      exporter,
      base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      async close() {
        for (const t of router.transports.values()) await t.close();
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await collector.shutdown({ drainTimeoutMs: 0 });
      },
    };
  });
  afterAll(() => host.close());

  it('records arrivals and settlements with the parsed body, and refused misses', async () => {
    await exercise(host);
  });

  it("classifies the SDK's requireBearerAuth challenges and hashes req.auth.clientId as the principal", async () => {
    const none = await postJson(new URL(host.base + '/auth/mcp'), { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(none.status).toBe(401);
    const evs = await exercise(host, '/auth/mcp', { Authorization: 'Bearer express-good-token' });
    const challenge = byType(evs, 'auth_challenge')[0];
    // The SDK sends error="invalid_token" even when no credential was sent; with no
    // token to be invalid, classifyChallenge calls it the first handshake.
    expect(challenge).toMatchObject({ http_status: 401, has_credential: false, challenge_class: 'missing_credential', has_resource_metadata: true });
    expect(byType(evs, 'settlement').some((s) => s.principal_key === hash('express-principal-RAW'))).toBe(true);
  });
});

describe('Express host wrapped at the server (http.createServer(collector.wrapHandler(app)))', () => {
  // createMcpExpressApp installs express.json() and a Host check ahead of any app.use:
  // a middleware added after them never saw the requests they refused (malformed JSON,
  // a body over 100 kB), so those were missing from the store (a break-it pass).
  // Wrapped at the server, every request is observed.
  let host: Host;
  beforeAll(async () => {
    const { exporter, collector } = newCollector('express-wrapped');
    const app = createMcpExpressApp();
    app.post('/mcp', (_req: IncomingMessage, res: ServerResponse & { status(code: number): { json(v: unknown): void } }) => void res.status(404).json(NOT_FOUND));
    const server = createServer(collector.wrapHandler(app));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    host = {
      collector,
      exporter,
      base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      async close() {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await collector.shutdown({ drainTimeoutMs: 0 });
      },
    };
  });
  afterAll(() => host.close());

  it('records the requests express.json() refuses before any route: malformed JSON (400), a body over its limit (413)', async () => {
    const post = (body: string) => fetch(host.base + '/mcp', { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body });
    expect((await post('{"jsonrpc": "2.0", "id": 1, "method":')).status).toBe(400);
    expect((await post(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { pad: 'x'.repeat(200_000) } }))).status).toBe(413);
    const evs = await events(host, (e) => byType(e, 'settlement').length >= 2);
    expect(byType(evs, 'settlement').map((s) => s.http_status).sort()).toEqual([400, 413]);
    expect(byType(evs, 'arrival')).toHaveLength(2);
    expect(invalidEvents(evs)).toEqual([]);
  });
});

describe('fastify host (app.register(collector.fastifyPlugin), reply.hijack())', () => {
  let host: Host;
  beforeAll(async () => {
    const { exporter, collector } = newCollector('fastify-mcp');
    const app = Fastify();
    await app.register(collector.fastifyPlugin);
    const router = createSessionRouter();
    app.all('/mcp', async (request, reply) => {
      const sid = request.headers['mcp-session-id'];
      const t = await router.transportFor(typeof sid === 'string' ? sid : undefined, request.body);
      if (!t) return reply.code(404).send(NOT_FOUND);
      reply.hijack();
      await t.handleRequest(request.raw, reply.raw, request.body);
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as AddressInfo).port;
    host = {
      collector,
      exporter,
      base: `http://127.0.0.1:${port}`,
      async close() {
        for (const t of router.transports.values()) await t.close();
        app.server.closeAllConnections();
        await app.close();
        await collector.shutdown({ drainTimeoutMs: 0 });
      },
    };
  });
  afterAll(() => host.close());

  it('records arrivals and settlements through hijacked replies, and refused misses', async () => {
    await exercise(host);
  });
});
