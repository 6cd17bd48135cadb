/**
 * The restart drill: Caddy in front of a real SDK MCP server run as a child
 * process, killed for real, with the ground truth compared against what the
 * named queries report (see run.ts).
 */
export { runDrill } from './run.ts';
export type { DrillOptions, DrillResult, TimelineEntry } from './run.ts';
export { compareWithReport, deriveTruth, drillPreconditions } from './truth.ts';
export type { BootTruth, DrillCheck, DrillVariant, GroundTruth, RestartTruth, SettlementsRows } from './truth.ts';
export { renderDrillText } from './render.ts';
export { caddyfile, ensureCaddy, findCaddy, startCaddy } from './caddy.ts';
export type { CaddyOptions, CaddyProcess } from './caddy.ts';
export { createRecordingFetch, DrillClient } from './client.ts';
export type { DrillClientOptions, Reinit, RequestRecord } from './client.ts';
export { spawnMcpServer } from './server-process.ts';
export type { McpServerProcess, McpServerProcessOptions, ServerLine } from './server-process.ts';
export { freePort, waitFor, waitForExit } from './wait.ts';
