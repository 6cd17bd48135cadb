/**
 * The HTTP API of `continuity serve`: read routes over the store (named queries,
 * the continuity report, read-only SQL) and the one-process server that puts them
 * next to the ingest gateway on one fastify instance.
 */
export { apiRoutes, SQL_FORMATS } from './routes.ts';
export type { ApiOptions } from './routes.ts';
export { createContinuityServer, createReadServer } from './server.ts';
export type { ContinuityServer, ContinuityServerOptions, ReadServer, ReadServerOptions, ServerEndpoints } from './server.ts';
