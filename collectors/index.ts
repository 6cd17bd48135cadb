/** Collectors: where events are born (the Caddy log importer; the MCP server instrumentation comes later). */
export { classifyChallenge, parseBearerParams } from './challenge.ts';
export type { ChallengeInfo } from './challenge.ts';
export { assertSomethingImported, checkImportInputs, convertCaddyLogs, importCaddyLogs } from './caddy/import.ts';
export type {
  CaddyImportOptions,
  ImportFileReport,
  ImportProgress,
  ImportReport,
  LineCounts,
  RejectRecord,
} from './caddy/import.ts';
export type { RejectReason } from './caddy/convert.ts';
export { classifyUpstreamError } from './caddy/upstream.ts';
export type { UpstreamErrorClass } from './caddy/upstream.ts';
export { DEFAULT_MAX_LINE_BYTES, readLines } from './caddy/line-reader.ts';
export type { LineHandler, ReadLinesOptions, ReadLinesResult, ReadProgress } from './caddy/line-reader.ts';
export { createMcpCollector, logRecordToEvent, logRecordToEvents } from './mcp/index.ts';
export type { McpCollector, McpCollectorOptions, CollectorCounters, OtelAttributes, LogRecordInput } from './mcp/index.ts';
