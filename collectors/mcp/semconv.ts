/**
 * Attribute names this collector writes on OpenTelemetry log records, copied
 * here the way OpenTelemetry instrumentations copy the incubating semantic
 * conventions they use (the names are still "Development" stability upstream, so
 * a local copy keeps a rename upstream from silently changing our output).
 *
 * Sources:
 * - MCP: OpenTelemetry GenAI semantic conventions, "Semantic conventions for
 *   Model Context Protocol (MCP)" — `mcp.method.name`, `mcp.session.id`,
 *   `mcp.protocol.version`, `jsonrpc.request.id`, `rpc.response.status_code`,
 *   `gen_ai.tool.name`, and `error.type` = `tool_error` for `isError` results.
 * - HTTP, user agent, URL, client, process, log record: the stable general
 *   registry (`http.*`, `user_agent.original`, `url.path`, `client.*`,
 *   `process.pid`, `log.record.uid`).
 * - Resource: `service.name`, `service.instance.id`, `service.version`,
 *   `deployment.environment.name`.
 *
 * Contract fields (DESIGN §3) with no semantic-convention name are written as
 * `continuity.<field>` — see {@link attributeForField}.
 */

// MCP / JSON-RPC (GenAI semconv, development).
export const ATTR_MCP_METHOD_NAME = 'mcp.method.name';
/** Holds the KEYED HASH of `Mcp-Session-Id`, never the raw id (DESIGN §3 Privacy). */
export const ATTR_MCP_SESSION_ID = 'mcp.session.id';
export const ATTR_MCP_PROTOCOL_VERSION = 'mcp.protocol.version';
export const ATTR_JSONRPC_REQUEST_ID = 'jsonrpc.request.id';
/** Older name of `jsonrpc.request.id`, still emitted by some instrumentations; accepted on input only. */
export const ATTR_MCP_REQUEST_ID_LEGACY = 'mcp.request.id';
export const ATTR_RPC_RESPONSE_STATUS_CODE = 'rpc.response.status_code';
export const ATTR_GEN_AI_TOOL_NAME = 'gen_ai.tool.name';

// General registry (stable).
export const ATTR_ERROR_TYPE = 'error.type';
export const ATTR_HTTP_REQUEST_METHOD = 'http.request.method';
export const ATTR_HTTP_RESPONSE_STATUS_CODE = 'http.response.status_code';
export const ATTR_HTTP_RESPONSE_BODY_SIZE = 'http.response.body.size';
export const ATTR_USER_AGENT_ORIGINAL = 'user_agent.original';
export const ATTR_URL_PATH = 'url.path';
export const ATTR_CLIENT_ADDRESS = 'client.address';
export const ATTR_CLIENT_PORT = 'client.port';
export const ATTR_PROCESS_PID = 'process.pid';
/** A unique id for the log record: carries the contract's `event_id` (the dedupe key). */
export const ATTR_LOG_RECORD_UID = 'log.record.uid';
/** Pre-1.x event-name attribute; accepted on input when a record has no `eventName`. */
export const ATTR_EVENT_NAME_LEGACY = 'event.name';

// Resource attributes.
export const ATTR_SERVICE_NAME = 'service.name';
export const ATTR_SERVICE_INSTANCE_ID = 'service.instance.id';
export const ATTR_SERVICE_VERSION = 'service.version';
export const ATTR_DEPLOYMENT_ENVIRONMENT_NAME = 'deployment.environment.name';

/** Prefix of this project's own attribute names. */
export const CONTINUITY_PREFIX = 'continuity.';
/** Process incarnation (resource attribute; also accepted on the record). */
export const ATTR_CONTINUITY_BOOT_ID = 'continuity.boot_id';
export const ATTR_CONTINUITY_ARRIVAL_ID = 'continuity.arrival_id';
export const ATTR_CONTINUITY_OUTCOME = 'continuity.outcome';
export const ATTR_CONTINUITY_SESSION_RESOLUTION = 'continuity.session_resolution';
export const ATTR_CONTINUITY_REASON = 'continuity.reason';
export const ATTR_CONTINUITY_PRINCIPAL_KEY = 'continuity.principal_key';
export const ATTR_CONTINUITY_MINTED_SESSION_KEY = 'continuity.minted_session_key';

/**
 * Extra attributes the collector adds beyond the contract fields. They travel
 * into the event's `attrs` map under these exact names.
 */
export const EXTRA_BATCH_SIZE = 'continuity.batch_size';
/** `true` when the body was larger than the inspection limit and was only partly read. */
export const EXTRA_BODY_TRUNCATED = 'continuity.body_truncated';
/** Where a refused-miss reason came from: `app` (annotated), `lifecycle` (recorded or observed DELETE), `inferred`. */
export const EXTRA_REASON_SOURCE = 'continuity.reason_source';
/** The shutdown reason the application asked for, when the emitted reason became `drain_timeout`. */
export const EXTRA_REQUESTED_REASON = 'continuity.requested_reason';
/** Open GET (server-push SSE) streams among `in_flight` at shutdown. */
export const EXTRA_IN_FLIGHT_STREAMS = 'continuity.in_flight_streams';
/**
 * Wire-only names of the `exchange` record: one log record for a request that
 * settled before its arrival was exported, carrying the arrival and the
 * settlement together (the gateway splits it, log-record.ts `logRecordToEvents`).
 */
export const EXCHANGE_EVENT_NAME = 'exchange';
/** On an `exchange` record: `continuity.body_truncated` of the arrival (the request body); the plain name belongs to the settlement. */
export const EXTRA_REQUEST_BODY_TRUNCATED = 'continuity.request_body_truncated';
/** On an `exchange` record: the settlement's `protocol_version` when it differs from the arrival's (an `initialize` answer). */
export const ATTR_SETTLED_PROTOCOL_VERSION = 'continuity.settled_protocol_version';
/** The known refusal phrase of a refused miss (e.g. `Session not found`); never free text, which could quote a raw id. */
export const EXTRA_RPC_MESSAGE = 'continuity.rpc_message';

/** Contract fields whose OpenTelemetry name is a semantic convention (DESIGN §3 mapping). */
export const FIELD_ATTRIBUTES: Readonly<Record<string, string>> = Object.freeze({
  event_id: ATTR_LOG_RECORD_UID,
  mcp_method: ATTR_MCP_METHOD_NAME,
  session_key: ATTR_MCP_SESSION_ID,
  jsonrpc_id: ATTR_JSONRPC_REQUEST_ID,
  tool_name: ATTR_GEN_AI_TOOL_NAME,
  protocol_version: ATTR_MCP_PROTOCOL_VERSION,
  http_method: ATTR_HTTP_REQUEST_METHOD,
  http_status: ATTR_HTTP_RESPONSE_STATUS_CODE,
  user_agent: ATTR_USER_AGENT_ORIGINAL,
  error_type: ATTR_ERROR_TYPE,
  rpc_status_code: ATTR_RPC_RESPONSE_STATUS_CODE,
  url_path: ATTR_URL_PATH,
  bytes: ATTR_HTTP_RESPONSE_BODY_SIZE,
  client_address: ATTR_CLIENT_ADDRESS,
  client_port: ATTR_CLIENT_PORT,
  pid: ATTR_PROCESS_PID,
});

/** Envelope fields carried on the OpenTelemetry resource rather than on each record. */
export const RESOURCE_FIELDS: Readonly<Record<string, string>> = Object.freeze({
  service: ATTR_SERVICE_NAME,
  instance: ATTR_SERVICE_INSTANCE_ID,
  release: ATTR_SERVICE_VERSION,
  environment: ATTR_DEPLOYMENT_ENVIRONMENT_NAME,
  boot_id: ATTR_CONTINUITY_BOOT_ID,
});

/**
 * The log-record attribute name for a contract field: its semantic-convention
 * name when one exists ({@link FIELD_ATTRIBUTES}), otherwise `continuity.<field>`.
 */
export function attributeForField(field: string): string {
  return FIELD_ATTRIBUTES[field] ?? CONTINUITY_PREFIX + field;
}
