/**
 * collectors/mcp: server-side instrumentation for Streamable HTTP MCP servers
 * built on @modelcontextprotocol/sdk, emitting contract events (DESIGN §3) as
 * OpenTelemetry log records. See README.md.
 */
export { createMcpCollector, CONTRACT_VERSION, INSTRUMENTATION_SCOPE } from './collector.ts';
export type {
  CapKindValue,
  CapSnapshotInput,
  CollectorCounters,
  LifecycleActionValue,
  McpCollector,
  McpCollectorOptions,
  NodeHandler,
  RefusedReasonValue,
  RemintInput,
  RemintModeValue,
  RemintOutcomeValue,
  RequestAnnotation,
  SessionLifecycleInput,
  SessionResolutionValue,
  ShutdownOptions,
  ShutdownReasonValue,
} from './collector.ts';
export { classifySettlement, isRefusedMiss, knownRefusalMessage } from './classify.ts';
export type { ExchangeFacts, SettlementOutcome, SettlementVerdict } from './classify.ts';
export { eventAttributes, fromReadableLogRecord, logRecordToEvent, logRecordToEvents, micros } from './log-record.ts';
export type { AttributeValue, ContractEventInput, LogRecordInput, OtelAttributes, OtelTime, OtlpKeyValue } from './log-record.ts';
export { createOtlpExporter, DEFAULT_OTLP_URL } from './pipeline.ts';
export type { OtlpOptions, PipelineCounters } from './pipeline.ts';
export { createUuidV7Generator } from './uuidv7.ts';
export {
  ATTR_CONTINUITY_ARRIVAL_ID,
  ATTR_CONTINUITY_BOOT_ID,
  ATTR_CONTINUITY_MINTED_SESSION_KEY,
  ATTR_CONTINUITY_OUTCOME,
  ATTR_CONTINUITY_PRINCIPAL_KEY,
  ATTR_CONTINUITY_REASON,
  ATTR_CONTINUITY_SESSION_RESOLUTION,
  ATTR_DEPLOYMENT_ENVIRONMENT_NAME,
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_JSONRPC_REQUEST_ID,
  ATTR_LOG_RECORD_UID,
  ATTR_MCP_METHOD_NAME,
  ATTR_MCP_PROTOCOL_VERSION,
  ATTR_MCP_REQUEST_ID_LEGACY,
  ATTR_MCP_SESSION_ID,
  ATTR_RPC_RESPONSE_STATUS_CODE,
  ATTR_SERVICE_INSTANCE_ID,
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
  ATTR_USER_AGENT_ORIGINAL,
  attributeForField,
  CONTINUITY_PREFIX,
  FIELD_ATTRIBUTES,
  RESOURCE_FIELDS,
} from './semconv.ts';
