import { describe, expect, it } from 'vitest';
import { classifySettlement, isRefusedMiss, knownRefusalMessage, type ExchangeFacts } from './classify.ts';
import { emptyFindings, type ResponseFindings } from './inspect.ts';

const A = 'a'.repeat(32);
const B = 'b'.repeat(32);

function facts(over: Partial<Omit<ExchangeFacts, 'findings'>> & { findings?: Partial<ResponseFindings> } = {}): ExchangeFacts {
  const { findings, ...rest } = over;
  return {
    finished: true,
    status: 200,
    requestSessionKey: A,
    responseSessionKey: '',
    expectsResponse: true,
    sse: false,
    cancelled: false,
    challenged: false,
    ...rest,
    findings: { ...emptyFindings(), responses: 1, ...findings },
  };
}

describe('isRefusedMiss', () => {
  it.each([
    [404, { code: -32001, message: 'Session not found' }, true, true],
    [400, { code: -32000, message: 'Bad Request: Mcp-Session-Id header is required' }, false, true],
    [400, { code: -32000, message: 'Bad Request: Server not initialized' }, true, true],
    [400, { code: -32000, message: 'Bad Request: No valid session ID provided' }, false, true],
    [400, { code: -32001, message: 'whatever' }, true, true],
    [400, { code: -32600, message: 'Invalid Request: Server already initialized' }, true, false],
    [400, { code: -32700, message: 'Parse error: Invalid JSON' }, true, false],
    [404, undefined, true, true],
    [404, undefined, false, false],
    [409, { code: -32000, message: 'Conflict: Only one SSE stream is allowed per session' }, true, false],
  ] as const)('status %i, error %j, session %s → %s', (status, error, hadSession, expected) => {
    expect(isRefusedMiss(status, error, hadSession)).toBe(expected);
  });
});

describe('classifySettlement', () => {
  it('ok on 2xx, known session', () => {
    expect(classifySettlement(facts())).toMatchObject({ outcome: 'ok', errorType: '', resolution: 'known', mintedSessionKey: '' });
  });
  it('initialize minting a session is new; a different id on a served request is alias', () => {
    expect(classifySettlement(facts({ requestSessionKey: '', responseSessionKey: B }))).toMatchObject({ resolution: 'new', mintedSessionKey: B });
    expect(classifySettlement(facts({ responseSessionKey: B }))).toMatchObject({ resolution: 'alias', mintedSessionKey: B });
    expect(classifySettlement(facts({ responseSessionKey: A }))).toMatchObject({ resolution: 'known', mintedSessionKey: '' });
  });
  it('tool_error (S12) and jsonrpc_error', () => {
    expect(classifySettlement(facts({ findings: { toolError: true } }))).toMatchObject({ outcome: 'tool_error', errorType: 'tool_error', rpcStatusCode: '' });
    expect(classifySettlement(facts({ findings: { firstError: { code: -32602, message: 'x' } } }))).toMatchObject({
      outcome: 'jsonrpc_error',
      errorType: '-32602',
      rpcStatusCode: '-32602',
    });
  });
  it('a 403 that is no challenge (no WWW-Authenticate: the SDK\'s Host check) settles by its body, not as auth_challenge', () => {
    const hostCheck = { firstError: { code: -32000, message: 'Invalid Host header: evil.example' } };
    expect(classifySettlement(facts({ status: 403, findings: hostCheck }))).toMatchObject({ outcome: 'jsonrpc_error', errorType: '-32000' });
    expect(classifySettlement(facts({ status: 403, challenged: true, findings: {} }))).toMatchObject({ outcome: 'auth_challenge', errorType: '403' });
  });
  it('refused wins over jsonrpc_error; auth_challenge wins over refused', () => {
    const notFound = { firstError: { code: -32001, message: 'Session not found' } };
    expect(classifySettlement(facts({ status: 404, findings: notFound }))).toMatchObject({ outcome: 'refused', refused: true, resolution: 'refused', errorType: '-32001' });
    expect(classifySettlement(facts({ status: 401, challenged: true, findings: {} }))).toMatchObject({ outcome: 'auth_challenge', errorType: '401', resolution: 'none', refused: false });
  });
  it('disconnected and cancelled', () => {
    expect(classifySettlement(facts({ finished: false }))).toMatchObject({ outcome: 'disconnected' });
    expect(classifySettlement(facts({ finished: false, cancelled: true }))).toMatchObject({ outcome: 'cancelled' });
  });
  it('a listening stream (2xx SSE, no request in it) that the client closed is ok; any other unfinished answer is disconnected', () => {
    const listening = { finished: false, sse: true, expectsResponse: false, findings: { responses: 0 } };
    expect(classifySettlement(facts(listening))).toMatchObject({ outcome: 'ok', errorType: '' });
    expect(classifySettlement(facts({ ...listening, expectsResponse: true }))).toMatchObject({ outcome: 'disconnected' });
    expect(classifySettlement(facts({ ...listening, sse: false }))).toMatchObject({ outcome: 'disconnected' });
    expect(classifySettlement(facts({ ...listening, status: 0 }))).toMatchObject({ outcome: 'disconnected' });
    expect(classifySettlement(facts({ ...listening, status: 405 }))).toMatchObject({ outcome: 'disconnected' });
  });
  it('an SSE answer that ended without a response is unknown; 5xx without a body is unknown with the status', () => {
    expect(classifySettlement(facts({ sse: true, findings: { responses: 0 } }))).toMatchObject({ outcome: 'unknown' });
    expect(classifySettlement(facts({ sse: true, expectsResponse: false, findings: { responses: 0 } }))).toMatchObject({ outcome: 'ok' });
    expect(classifySettlement(facts({ status: 502, findings: { responses: 0 } }))).toMatchObject({ outcome: 'unknown', errorType: '502', resolution: 'none' });
  });
});

describe('knownRefusalMessage', () => {
  it('keeps only fixed phrases, never free text that could quote a raw id', () => {
    expect(knownRefusalMessage('Bad Request: Mcp-Session-Id header is required')).toBe('Mcp-Session-Id header is required');
    expect(knownRefusalMessage('session not found')).toBe('Session not found');
    expect(knownRefusalMessage('Session 3f2a-raw-id expired')).toBe('');
  });
});
