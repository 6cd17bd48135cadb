import type { ResponseFindings } from './inspect.ts';

/** Settlement outcome (contract `Outcome`, DESIGN §3). */
export type SettlementOutcome = 'ok' | 'jsonrpc_error' | 'tool_error' | 'refused' | 'auth_challenge' | 'cancelled' | 'disconnected' | 'unknown';
/** Contract `SessionResolution`. */
export type SessionResolutionValue = 'known' | 'new' | 'alias' | 'rebuilt' | 'refused' | 'none';

/** Everything the classifier looks at, gathered by the collector for one HTTP exchange. */
export interface ExchangeFacts {
  /** The response was completely handed to the OS ('finish'); false: the connection closed first. */
  readonly finished: boolean;
  /** HTTP status; 0 when no header was ever written. */
  readonly status: number;
  /** Keyed hash of the request's `Mcp-Session-Id` ('' when absent). */
  readonly requestSessionKey: string;
  /** Keyed hash of the response's `Mcp-Session-Id` ('' when absent). */
  readonly responseSessionKey: string;
  /** The request held a JSON-RPC request (not only notifications/responses). */
  readonly expectsResponse: boolean;
  /** The response was an SSE stream. */
  readonly sse: boolean;
  readonly findings: ResponseFindings;
  /** The client cancelled the request (`notifications/cancelled` naming its id). */
  readonly cancelled: boolean;
  /** The response is an authentication challenge (a 401, or a 403 with `WWW-Authenticate`: collectors/challenge.ts `isAuthChallenge`). */
  readonly challenged: boolean;
}

/** The classifier's verdict. */
export interface SettlementVerdict {
  readonly outcome: SettlementOutcome;
  /** `error.type`: the JSON-RPC code as text, `tool_error`, or the HTTP status as text; '' on success. */
  readonly errorType: string;
  /** `rpc.response.status_code`: the JSON-RPC error code as text, '' when none. */
  readonly rpcStatusCode: string;
  /** A refused miss (see {@link isRefusedMiss}). */
  readonly refused: boolean;
  readonly resolution: SessionResolutionValue;
  /** Keyed hash of a session id the server set that differs from the request's ('' otherwise). */
  readonly mintedSessionKey: string;
}

/**
 * JSON-RPC error codes and messages servers use to refuse an unknown session.
 * The SDK's StreamableHTTPServerTransport (1.x, `validateSession`) answers
 * 404 `-32001 "Session not found"`, 400 `-32000 "Bad Request: Mcp-Session-Id
 * header is required"` and 400 `-32000 "Bad Request: Server not initialized"`;
 * the SDK's example servers answer 400 `-32000 "Bad Request: No valid session ID
 * provided"`; other servers use 400 or 404 with -32001, -32600 or -32000 (DESIGN §1).
 */
const SESSION_REFUSAL_MESSAGE = /session|not initiali[sz]ed/i;
const SESSION_NOT_FOUND_CODE = -32001;

const KNOWN_REFUSALS = [
  'Session not found',
  'Mcp-Session-Id header is required',
  'Server not initialized',
  'No valid session ID provided',
] as const;

/**
 * The known refusal phrase in a JSON-RPC error message ('' when none). Only these
 * fixed phrases are ever recorded: an arbitrary server message could quote the
 * raw session id.
 */
export function knownRefusalMessage(message: string): string {
  const lower = message.toLowerCase();
  return KNOWN_REFUSALS.find((phrase) => lower.includes(phrase.toLowerCase())) ?? '';
}

/**
 * True when a response is a refused miss: status 404 or 400, and either the
 * JSON-RPC error code is -32001 or its message names the session or an
 * uninitialized server; or, with no JSON-RPC error to read, a 404 to a request
 * that carried a session id.
 */
export function isRefusedMiss(status: number, error: ResponseFindings['firstError'], requestHadSession: boolean): boolean {
  if (status !== 404 && status !== 400) return false;
  if (error) return error.code === SESSION_NOT_FOUND_CODE || SESSION_REFUSAL_MESSAGE.test(error.message);
  return status === 404 && requestHadSession;
}

/**
 * True for a stream the client listens on without having sent a JSON-RPC request
 * (MCP Streamable HTTP, "Listening for Messages from the Server": the GET stream,
 * opened by the SDK client for every session): a 2xx SSE answer to an exchange that
 * expected no response. It has no end of its own, so the client closing it
 * ('close' without 'finish') is how it normally ends, not a failure.
 */
export function isListeningStream(f: ExchangeFacts): boolean {
  return f.sse && !f.expectsResponse && f.status >= 200 && f.status < 300;
}

/**
 * Classifies one finished (or abandoned) exchange. Order: cancelled, disconnected
 * ('close' without 'finish', except a listening stream ({@link isListeningStream}),
 * which the client closing ends as ok: the SDK client does so at every close, and as
 * `disconnected` it made the session's last request a failure), auth_challenge
 * (401/403), refused miss, JSON-RPC error, tool error (`isError: true`, S12), then
 * by status: 2xx is ok unless an SSE answer to a request ended with no JSON-RPC
 * response (unknown); other statuses are unknown.
 *
 * Session resolution: refused for a refused miss; `new` when the response set a
 * session id and the request had none (initialize); `alias` when it set one
 * different from the request's (a re-mint — the application may refine this);
 * `known` when the request's session was served with 2xx; otherwise `none`
 * (including 401/403, answered before any session lookup).
 */
export function classifySettlement(f: ExchangeFacts): SettlementVerdict {
  const err = f.findings.firstError;
  const rpcStatusCode = err?.code !== undefined ? String(err.code) : '';
  const minted = f.responseSessionKey !== '' && f.responseSessionKey !== f.requestSessionKey ? f.responseSessionKey : '';
  const refused = f.finished && !f.cancelled && isRefusedMiss(f.status, err, f.requestSessionKey !== '');
  let outcome: SettlementOutcome;
  let errorType = '';
  if (f.cancelled) outcome = 'cancelled';
  else if (!f.finished) outcome = isListeningStream(f) ? 'ok' : 'disconnected';
  else if (f.challenged) {
    outcome = 'auth_challenge';
    errorType = String(f.status);
  } else if (refused) {
    outcome = 'refused';
    errorType = rpcStatusCode || String(f.status);
  } else if (err) {
    outcome = 'jsonrpc_error';
    errorType = rpcStatusCode || 'jsonrpc_error';
  } else if (f.findings.toolError) {
    outcome = 'tool_error';
    errorType = 'tool_error';
  } else if (f.status >= 200 && f.status < 300) {
    const noAnswer = f.sse && f.expectsResponse && f.findings.responses === 0 && !f.findings.truncated;
    outcome = noAnswer ? 'unknown' : 'ok';
  } else {
    outcome = 'unknown';
    if (f.status >= 400) errorType = String(f.status);
  }
  let resolution: SessionResolutionValue;
  if (refused) resolution = 'refused';
  else if (minted && f.requestSessionKey === '') resolution = 'new';
  else if (minted) resolution = 'alias';
  else if (f.requestSessionKey !== '' && f.status >= 200 && f.status < 300) resolution = 'known';
  else resolution = 'none';
  return { outcome, errorType, rpcStatusCode, refused, resolution, mintedSessionKey: minted };
}
