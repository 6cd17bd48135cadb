import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import { answerClientError, badUrlError, closeWithin, codedRequestError, ContinuityError, foreignHostError, isContinuityError, isLoopbackHost, REQUEST_TIMEOUT_MS } from '../core/index.ts';
import { createGateway, createInProcessTransport, mapOtlpRecord, registerConnectionRules, registerRequestBodies, type InProcessTransport, type InProcessTransportOptions } from '../ingest/index.ts';
import type { Store } from '../store/index.ts';
import type { QueryDefaults } from '../queries/index.ts';
import { apiRoutes } from './routes.ts';

/** Options of {@link createContinuityServer}. */
export interface ContinuityServerOptions {
  /** The migrated store: events are written to it and the read API reads it. The caller owns (and closes) it. */
  store: Store;
  /** Bearer token required on the ingest routes (`/v1/*`) and the read API (`/api/*`); none when unset. */
  bearerToken?: string | undefined;
  /** Batching of the in-process writer (rows per batch, flush interval). */
  transport?: InProcessTransportOptions;
  /** fastify's request logger (default off). */
  logger?: boolean;
  /** The deployment's defaults of query parameters for the read API (a request's own values win). */
  queryDefaults?: QueryDefaults;
  /** How long `shutdown` waits for requests in flight before it closes their connections, ms (default core/http.ts CLOSE_GRACE_MS). */
  closeGraceMs?: number;
}

/** Where a listening server takes events and answers reads. */
export interface ServerEndpoints {
  /** Base URL, e.g. `http://127.0.0.1:4318`. */
  base: string;
  /** OTLP/HTTP logs endpoint (`OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`). */
  otlpLogs: string;
  /** JSON contract events endpoint. */
  events: string;
  /** Read API root. */
  api: string;
}

/** The one-process server of `continuity serve`. */
export interface ContinuityServer {
  readonly app: FastifyInstance;
  readonly transport: InProcessTransport;
  /** Starts listening; `port` 0 picks a free port. @returns the endpoints, with the port actually bound. */
  listen(host: string, port: number): Promise<ServerEndpoints>;
  /**
   * Graceful shutdown, once (later calls return the same promise): stops accepting
   * connections and waits for open requests (fastify `close`), then flushes the
   * writer into the store. Does not close the store. Never rejects: a failed final
   * write is returned as `error`.
   */
  shutdown(): Promise<{ error?: Error }>;
}

/**
 * Builds embedded mode's single process (DESIGN §2): the ingest gateway (`POST
 * /v1/logs` OTLP/HTTP, `POST /v1/events`, `/healthz`, `/readyz`) handing events
 * to the in-process transport, which writes batches to `store`, plus the read API
 * under `/api` (api/routes.ts) on the same fastify instance.
 */
export async function createContinuityServer(options: ContinuityServerOptions): Promise<ContinuityServer> {
  const transport = createInProcessTransport(options.store, options.transport);
  const { app } = await createGateway({ sink: transport, mapOtlpRecord, bearerToken: options.bearerToken, logger: options.logger ?? false });
  const hosts = guardLoopbackHosts(app, options.bearerToken);
  await app.register(apiRoutes, { prefix: '/api', store: options.store, bearerToken: options.bearerToken, queryDefaults: options.queryDefaults });
  let closing: Promise<{ error?: Error }> | undefined;
  return {
    app,
    transport,
    async listen(host, port) {
      hosts.loopbackOnly = isLoopbackHost(host);
      await app.listen({ host, port });
      const base = baseUrlOf(app, host);
      return { base, otlpLogs: `${base}/v1/logs`, events: `${base}/v1/events`, api: `${base}/api` };
    },
    shutdown() {
      closing ??= (async () => {
        let error: Error | undefined;
        try {
          await closeWithin(app, options.closeGraceMs);
        } catch (err) {
          error = err as Error;
        }
        try {
          await transport.shutdown();
        } catch (err) {
          error ??= err as Error;
        }
        if (!error && transport.writer.error) error = transport.writer.error;
        return error ? { error } : {};
      })();
      return closing;
    },
  };
}

/** Options of {@link createReadServer}. */
export interface ReadServerOptions {
  /** The migrated store the read API reads; the caller owns (and closes) it. */
  store: Store;
  /** Bearer token every route but `/healthz` requires; none when unset. */
  bearerToken?: string | undefined;
  /** The deployment's defaults of query parameters (a request's own values win). */
  queryDefaults?: QueryDefaults;
  /** The body of `GET /healthz`: the owning process's state (e.g. the consumer's lag). */
  health: () => Record<string, unknown>;
  /** Largest `POST /api/sql` body once decoded, bytes (default 1 MiB). */
  maxBodyBytes?: number;
}

/** A listening read API: where it is, and how to stop it. */
export interface ReadServer {
  readonly app: FastifyInstance;
  /** Starts listening; `port` 0 picks a free port. @returns the base URL with the port bound, e.g. `http://127.0.0.1:4319`. */
  listen(host: string, port: number): Promise<string>;
  /** Stops accepting connections and waits for open requests (fastify `close`). Idempotent. */
  close(): Promise<void>;
}

/**
 * The read API alone (api/routes.ts under `/api`, plus `GET /healthz`), for a
 * long-running process other than `serve` that owns the embedded store: the Kafka
 * consumer. DESIGN §2: while a process owns the data directory, other commands reach
 * the store through that process's HTTP API. Request bodies are read as on `serve`
 * (ingest `registerRequestBodies`: gzip or deflate, JSON without prototype keys); an
 * unknown route is 404 `CONT_ERR_NOT_FOUND`; errors are the coded JSON shape.
 */
export async function createReadServer(options: ReadServerOptions): Promise<ReadServer> {
  const app = Fastify({
    logger: false,
    bodyLimit: options.maxBodyBytes ?? 1 << 20,
    requestTimeout: REQUEST_TIMEOUT_MS,
    // (Node's refusal of a request without Host is a bare 400: registerConnectionRules answers it)
    http: { requireHostHeader: false },
    clientErrorHandler: answerClientError,
    frameworkErrors: (err, _req, reply) => {
      const coded = badUrlError(err);
      void (reply as unknown as FastifyReply).status(coded.httpStatus).send(coded.toJSON());
    },
  });
  registerConnectionRules(app);
  await registerRequestBodies(app);
  const send = (reply: FastifyReply, err: ContinuityError): FastifyReply => reply.status(err.httpStatus).send(err.toJSON());
  app.setNotFoundHandler((req, reply) => send(reply, new ContinuityError('CONT_ERR_NOT_FOUND', `${req.method} ${req.url}`, { details: { method: req.method, url: req.url } })));
  app.setErrorHandler((err: FastifyError | ContinuityError, req, reply) => {
    if (isContinuityError(err)) return send(reply, err);
    const coded = codedRequestError(err, req.routeOptions.bodyLimit);
    if (coded) return send(reply, coded);
    return reply.status(500).send({ code: 'INTERNAL', message: 'internal error' });
  });
  const hosts = guardLoopbackHosts(app, options.bearerToken);
  app.get('/healthz', async () => ({ status: 'ok', ...options.health() }));
  await app.register(apiRoutes, { prefix: '/api', store: options.store, bearerToken: options.bearerToken, queryDefaults: options.queryDefaults });
  let closing: Promise<void> | undefined;
  return {
    app,
    async listen(host, port) {
      hosts.loopbackOnly = isLoopbackHost(host);
      await app.listen({ host, port });
      return baseUrlOf(app, host);
    },
    close() {
      closing ??= closeWithin(app);
      return closing;
    },
  };
}

/**
 * With no bearer token: once the app listens on a loopback address (`loopbackOnly`,
 * set by `listen`), a request whose Host is not loopback is refused with
 * CONT_ERR_HOST_REFUSED (core/http.ts `foreignHostError`): a web page could otherwise
 * reach the tokenless API, ad hoc SQL over the whole store included, by a DNS name of
 * its own resolved to 127.0.0.1 (DNS rebinding; a break-it pass). With a token the
 * token guards it (a page cannot send it), and on another address serve warns.
 */
function guardLoopbackHosts(app: FastifyInstance, bearerToken: string | undefined): { loopbackOnly: boolean } {
  const state = { loopbackOnly: false };
  if (bearerToken) return state;
  app.addHook('onRequest', async (req) => {
    if (!state.loopbackOnly) return;
    const err = foreignHostError(req.headers.host);
    if (err) throw err;
  });
  return state;
}

/** The base URL of a listening app: the port it bound, a wildcard host shown as loopback, an IPv6 host in brackets. */
function baseUrlOf(app: FastifyInstance, host: string): string {
  const bound = (app.server.address() as AddressInfo).port;
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${shown}:${bound}`;
}
