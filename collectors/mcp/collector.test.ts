import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListPromptsResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeyedHasher } from '../../core/index.ts';
import { parseEvent } from '../../schema/index.ts';
import type { ContractEventInput } from './log-record.ts';
import {
  allAttributeText,
  EXPIRED_TOKEN,
  GOOD_TOKEN,
  HASH_KEY,
  invalidEvents,
  postJson,
  PRINCIPAL,
  startFixture,
  type Fixture,
} from './test-support/sdk-fixture.ts';

const hash = createKeyedHasher(Buffer.from(HASH_KEY, 'hex'));

const byType = (events: ContractEventInput[], type: string) => events.filter((e) => e.event_type === type);
const arrivalOf = (events: ContractEventInput[], pred: (a: ContractEventInput) => boolean) => byType(events, 'arrival').find(pred);
const settlementFor = (events: ContractEventInput[], arrival: ContractEventInput | undefined) =>
  arrival ? byType(events, 'settlement').find((s) => s.arrival_id === arrival.arrival_id) : undefined;

async function connect(fx: Fixture, path: string, headers: Record<string, string> = {}) {
  const client = new Client({ name: 'fixture-client', version: '0.0.1' });
  const transport = new StreamableHTTPClientTransport(fx.url(path), { requestInit: { headers } });
  await client.connect(transport);
  return { client, transport };
}

describe('collectors/mcp against a real SDK server and client', () => {
  let fx: Fixture;
  const rawSessionIds: string[] = [];

  beforeAll(async () => {
    fx = await startFixture();
  });
  afterAll(async () => {
    await fx.close();
    await fx.collector.shutdown({ drainTimeoutMs: 0 });
  });

  it('records boot, initialize (new session), notifications, tools/list, tools/call ok', async () => {
    const { client, transport } = await connect(fx, '/mcp');
    const sid = transport.sessionId!;
    rawSessionIds.push(sid);
    await client.listTools();
    const echo = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
    expect(echo.isError).toBeFalsy();
    const key = hash(sid);

    const events = await fx.eventsWhen((evs) => byType(evs, 'settlement').filter((s) => s.session_key === key).length >= 4);
    const boot = byType(events, 'boot');
    expect(boot).toHaveLength(1);
    expect(boot[0]).toMatchObject({ pid: process.pid, boot_id: fx.collector.bootId, service: 'fixture-mcp', instance: 'fixture-1', release: '1.2.3', environment: 'test', source: 'server' });

    const init = arrivalOf(events, (a) => a.mcp_method === 'initialize');
    expect(init).toMatchObject({ http_method: 'POST', jsonrpc_id: '0', client_name: 'fixture-client', client_version: '0.0.1', has_credential: false });
    expect(init?.session_key).toBeUndefined(); // no session yet
    expect(String(init?.arrival_id)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(settlementFor(events, init)).toMatchObject({
      outcome: 'ok',
      http_status: 200,
      session_resolution: 'new',
      minted_session_key: key,
      session_key: key,
      protocol_version: '2025-11-25',
    });

    const initialized = arrivalOf(events, (a) => a.mcp_method === 'notifications/initialized');
    expect(initialized).toMatchObject({ session_key: key, client_name: 'fixture-client' });
    expect(settlementFor(events, initialized)).toMatchObject({ outcome: 'ok', http_status: 202, session_resolution: 'known' });

    const list = arrivalOf(events, (a) => a.mcp_method === 'tools/list');
    expect(list).toMatchObject({ session_key: key, protocol_version: '2025-11-25' });
    expect(settlementFor(events, list)).toMatchObject({ outcome: 'ok', http_status: 200, session_resolution: 'known' });

    const call = arrivalOf(events, (a) => a.mcp_method === 'tools/call' && a.tool_name === 'echo');
    expect(call).toBeDefined();
    const s = settlementFor(events, call);
    expect(s).toMatchObject({ outcome: 'ok', http_status: 200 });
    expect(typeof s?.duration_ms).toBe('number');
    await client.close();
  });

  it('tool_error for isError results (S12) and for an unknown tool (SDK 1.32 answers it with isError)', async () => {
    const { client, transport } = await connect(fx, '/mcp');
    rawSessionIds.push(transport.sessionId!);
    const failed = await client.callTool({ name: 'fail', arguments: {} });
    expect(failed.isError).toBe(true);
    const unknown = await client.callTool({ name: 'no-such-tool', arguments: {} });
    expect(unknown.isError).toBe(true);
    const events = await fx.eventsWhen((evs) =>
      ['fail', 'no-such-tool'].every((t) => settlementFor(evs, arrivalOf(evs, (a) => a.tool_name === t))),
    );
    for (const tool of ['fail', 'no-such-tool']) {
      const s = settlementFor(events, arrivalOf(events, (a) => a.tool_name === tool));
      expect(s).toMatchObject({ outcome: 'tool_error', error_type: 'tool_error', http_status: 200 });
      expect(s?.rpc_status_code).toBeUndefined();
    }
    expect(byType(events, 'auth_challenge')).toHaveLength(0);
    await client.close();
  });

  it('jsonrpc_error for a JSON-RPC error response (method not found)', async () => {
    const { client, transport } = await connect(fx, '/mcp');
    rawSessionIds.push(transport.sessionId!);
    await expect(client.request({ method: 'prompts/list', params: {} }, ListPromptsResultSchema)).rejects.toThrow();
    const events = await fx.eventsWhen((evs) => Boolean(settlementFor(evs, arrivalOf(evs, (a) => a.mcp_method === 'prompts/list'))));
    expect(settlementFor(events, arrivalOf(events, (a) => a.mcp_method === 'prompts/list'))).toMatchObject({
      outcome: 'jsonrpc_error',
      rpc_status_code: '-32601',
      error_type: '-32601',
      http_status: 200,
    });
    await client.close();
  });

  it('keeps every string well-formed: a client name cut at its limit inside an emoji was half a character, and every event of the session was refused downstream (a break-it pass)', async () => {
    const name = 'a'.repeat(255) + '\u{1F600}';
    const client = new Client({ name, version: '1' });
    const transport = new StreamableHTTPClientTransport(fx.url('/mcp'));
    await client.connect(transport);
    const key = hash(transport.sessionId!);
    rawSessionIds.push(transport.sessionId!);
    await client.callTool({ name: 'echo', arguments: { text: 'x' } });
    await client.close();
    const events = await fx.eventsWhen((evs) => byType(evs, 'settlement').filter((e) => e.session_key === key).length >= 2);
    const mine = events.filter((e) => e.session_key === key && e.client_name !== undefined && e.client_name !== '');
    expect(mine.length).toBeGreaterThan(0);
    expect(invalidEvents(mine)).toEqual([]);
    expect(new Set(mine.map((e) => e.client_name))).toEqual(new Set(['a'.repeat(255) + '\uFFFD']));
  });

  it('refused misses: unknown session id (404) → unknown_after_boot', async () => {
    const stale = 'stale-session-RAW-0001';
    rawSessionIds.push(stale);
    const r = await postJson(fx.url('/mcp'), { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' } } }, {
      'Mcp-Session-Id': stale,
      'MCP-Protocol-Version': '2025-11-25',
      'User-Agent': 'mcp-remote/0.1.29',
    });
    expect(r.status).toBe(404);
    const key = hash(stale);
    const events = await fx.eventsWhen((evs) => byType(evs, 'session_refused').some((e) => e.session_key === key));
    const arrival = arrivalOf(events, (a) => a.session_key === key);
    expect(arrival).toMatchObject({ mcp_method: 'tools/call', tool_name: 'echo', jsonrpc_id: '7', user_agent: 'mcp-remote/0.1.29' });
    expect(settlementFor(events, arrival)).toMatchObject({ outcome: 'refused', http_status: 404, session_resolution: 'refused', rpc_status_code: '-32001' });
    expect(byType(events, 'session_refused').find((e) => e.arrival_id === arrival?.arrival_id)).toMatchObject({
      reason: 'unknown_after_boot',
      http_status: 404,
      remint_eligible: false,
      session_key: key,
    });
  });

  it("refused misses answered by the SDK transport itself: 404 Session not found, 400 Mcp-Session-Id header is required, 400 Server not initialized", async () => {
    const { client, transport } = await connect(fx, '/single');
    rawSessionIds.push(transport.sessionId!);
    const wrong = 'wrong-session-RAW-0002';
    rawSessionIds.push(wrong);
    const body = { jsonrpc: '2.0', id: 11, method: 'tools/list', params: {} };
    const h = { 'MCP-Protocol-Version': '2025-11-25' };
    const notFound = await postJson(fx.url('/single'), body, { ...h, 'Mcp-Session-Id': wrong });
    expect(notFound.status).toBe(404);
    expect(notFound.text).toContain('Session not found');
    const missing = await postJson(fx.url('/single'), { ...body, id: 12 }, h);
    expect(missing.status).toBe(400);
    expect(missing.text).toContain('Mcp-Session-Id header is required');
    const notInit = await postJson(fx.url('/mcp'), { ...body, id: 13 }, h);
    expect(notInit.status).toBe(400);
    expect(notInit.text).toContain('Server not initialized');

    const events = await fx.eventsWhen((evs) => byType(evs, 'session_refused').length >= 4);
    const refusedFor = (id: string) => {
      const a = arrivalOf(events, (x) => x.jsonrpc_id === id && x.mcp_method === 'tools/list');
      return [settlementFor(events, a), byType(events, 'session_refused').find((e) => e.arrival_id === a?.arrival_id)];
    };
    const [s11, r11] = refusedFor('11');
    expect(s11).toMatchObject({ outcome: 'refused', http_status: 404, rpc_status_code: '-32001' });
    expect(r11).toMatchObject({ reason: 'unknown_after_boot', http_status: 404, session_key: hash(wrong) });
    const [s12, r12] = refusedFor('12');
    expect(s12).toMatchObject({ outcome: 'refused', http_status: 400, rpc_status_code: '-32000', session_resolution: 'refused' });
    expect(r12).toMatchObject({ reason: 'never_seen', http_status: 400 });
    expect(r12?.session_key).toBeUndefined();
    expect(r12?.attrs).toMatchObject({ 'continuity.rpc_message': 'Mcp-Session-Id header is required' });
    const [s13, r13] = refusedFor('13');
    expect(s13).toMatchObject({ outcome: 'refused', http_status: 400 });
    expect(r13).toMatchObject({ reason: 'never_seen' });
    await client.close();
  });

  it('a session deleted by the client and used again is refused with reason deleted', async () => {
    const { client, transport } = await connect(fx, '/mcp');
    const sid = transport.sessionId!;
    rawSessionIds.push(sid);
    await transport.terminateSession();
    const again = await postJson(fx.url('/mcp'), { jsonrpc: '2.0', id: 21, method: 'tools/list' }, { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' });
    expect(again.status).toBe(404);
    const key = hash(sid);
    const events = await fx.eventsWhen((evs) => byType(evs, 'session_refused').some((e) => e.session_key === key));
    const del = arrivalOf(events, (a) => a.http_method === 'DELETE' && a.session_key === key);
    expect(settlementFor(events, del)).toMatchObject({ outcome: 'ok', http_status: 200 });
    expect(byType(events, 'session_refused').find((e) => e.session_key === key)).toMatchObject({
      reason: 'deleted',
      attrs: { 'continuity.reason_source': 'lifecycle' },
    });
    await client.close();
  });

  it('401 challenges from an auth guard are classified; the principal is hashed', async () => {
    const body = { jsonrpc: '2.0', id: 31, method: 'tools/list' };
    const none = await postJson(fx.url('/auth/mcp'), body, { 'User-Agent': 'claude-code/2.1.0' });
    expect(none.status).toBe(401);
    const expired = await postJson(fx.url('/auth/mcp'), { ...body, id: 32 }, { Authorization: `Bearer ${EXPIRED_TOKEN}` });
    expect(expired.status).toBe(401);
    const { client } = await connect(fx, '/auth/mcp', { Authorization: `Bearer ${GOOD_TOKEN}` });
    await client.listTools();

    const events = await fx.eventsWhen((evs) => byType(evs, 'auth_challenge').length >= 2 && byType(evs, 'settlement').some((s) => s.principal_key === hash(PRINCIPAL) && s.session_resolution === 'known'));
    const challenges = byType(events, 'auth_challenge');
    const missing = challenges.find((c) => c.challenge_class === 'missing_credential');
    expect(missing).toMatchObject({ http_status: 401, has_credential: false, has_resource_metadata: true, user_agent: 'claude-code/2.1.0' });
    const a31 = arrivalOf(events, (a) => a.jsonrpc_id === '31');
    expect(missing?.arrival_id).toBe(a31?.arrival_id);
    expect(settlementFor(events, a31)).toMatchObject({ outcome: 'auth_challenge', http_status: 401, error_type: '401', session_resolution: 'none' });
    expect(challenges.find((c) => c.challenge_class === 'expired_token')).toMatchObject({ http_status: 401, has_credential: true, has_resource_metadata: false });
    expect(arrivalOf(events, (a) => a.jsonrpc_id === '32')).toMatchObject({ has_credential: true });
    // The authenticated session carries the hashed principal on its settlements.
    expect(byType(events, 'settlement').some((s) => s.principal_key === hash(PRINCIPAL))).toBe(true);
    await client.close();
  });

  it('2026-07-28 sessionless POSTs: method and tool name from the body, or from Mcp-Method/Mcp-Name when the body cannot be read', async () => {
    const h = { 'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo' };
    const ok = await postJson(fx.url('/v2026'), { jsonrpc: '2.0', id: 41, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' } } }, h);
    expect(ok.status).toBe(200);
    // A body over the inspection limit (64 KiB) is not parsed: only the headers name the method and tool.
    const big = { jsonrpc: '2.0', id: 42, method: 'tools/call', params: { name: 'search', arguments: { text: 'y'.repeat(70_000) } } };
    const large = await postJson(fx.url('/v2026'), big, { ...h, 'Mcp-Name': 'search' });
    expect(large.status).toBe(200);
    // The guard answers before the handler reads the body; Node discards it afterwards and the tap still sees it.
    const guarded = await postJson(fx.url('/auth/mcp'), { jsonrpc: '2.0', id: 43, method: 'tools/call', params: { name: 'fetch' } }, { ...h, 'Mcp-Name': 'fetch' });
    expect(guarded.status).toBe(401);
    const events = await fx.eventsWhen((evs) => byType(evs, 'settlement').filter((s) => s.protocol_version === '2026-07-28').length >= 3);
    const a41 = arrivalOf(events, (a) => a.jsonrpc_id === '41');
    expect(a41).toMatchObject({ mcp_method: 'tools/call', tool_name: 'echo', protocol_version: '2026-07-28' });
    expect(a41?.session_key).toBeUndefined();
    expect(settlementFor(events, a41)).toMatchObject({ outcome: 'ok', session_resolution: 'none', http_status: 200 });
    const a42 = arrivalOf(events, (a) => a.tool_name === 'search');
    expect(a42).toMatchObject({ mcp_method: 'tools/call', protocol_version: '2026-07-28', attrs: { 'continuity.body_truncated': 'true' } });
    expect(a42?.jsonrpc_id).toBeUndefined();
    expect(settlementFor(events, a42)).toMatchObject({ outcome: 'ok' });
    const a43 = arrivalOf(events, (a) => a.tool_name === 'fetch');
    expect(a43).toMatchObject({ mcp_method: 'tools/call', jsonrpc_id: '43', protocol_version: '2026-07-28' });
    expect(settlementFor(events, a43)).toMatchObject({ outcome: 'auth_challenge' });
  });

  it('a cancelled request settles as cancelled', async () => {
    const { client, transport } = await connect(fx, '/mcp');
    rawSessionIds.push(transport.sessionId!);
    const ac = new AbortController();
    const pending = client.callTool({ name: 'slow', arguments: {} }, undefined, { signal: ac.signal });
    const key = hash(transport.sessionId!);
    await fx.eventsWhen((evs) => byType(evs, 'arrival').some((a) => a.tool_name === 'slow' && a.session_key === key));
    ac.abort('user cancelled');
    await expect(pending).rejects.toThrow();
    // Settled at the cancellation, with the session still open: the SDK server keeps the
    // cancelled request's SSE stream open, so it settled only when the session closed
    // (at a shutdown, an unsettled arrival and a drain timeout: a break-it pass).
    await client.callTool({ name: 'echo', arguments: { text: 'after the cancel' } });
    const events = await fx.eventsWhen((evs) => Boolean(settlementFor(evs, arrivalOf(evs, (a) => a.tool_name === 'slow' && a.session_key === key))));
    expect(settlementFor(events, arrivalOf(events, (a) => a.tool_name === 'slow' && a.session_key === key))).toMatchObject({ outcome: 'cancelled' });
    await client.close();
  });

  it('every record maps back to a valid contract event; no raw id, token or principal leaves the process', async () => {
    // Let the GET streams of closed clients settle too.
    await fx.eventsWhen(() => fx.collector.counters().in_flight === 0);
    expect(fx.collector.counters().in_flight).toBe(0);
    const records = await fx.records();
    const events = records.map((r) => r);
    expect(events.length).toBeGreaterThan(30);
    const mapped = await fx.events();
    expect(invalidEvents(mapped)).toEqual([]);
    for (const e of mapped) expect(parseEvent(e).ok).toBe(true);
    const text = allAttributeText(records);
    for (const raw of [...rawSessionIds, GOOD_TOKEN, EXPIRED_TOKEN, PRINCIPAL]) expect(text).not.toContain(raw);
    // Session keys are present, as keyed hashes.
    expect(mapped.some((e) => e.session_key === hash(rawSessionIds[0]!))).toBe(true);
    // Every settlement has an arrival with the same arrival_id.
    const arrivals = new Set(byType(mapped, 'arrival').map((a) => a.arrival_id));
    for (const s of byType(mapped, 'settlement')) expect(arrivals.has(s.arrival_id)).toBe(true);
    // The GET streams the SDK client opens and closes with each session end as ok, not
    // disconnected: a disconnect would make every closed session's last request a
    // failure (abandoned after failure; a newcomer's pass found 3 of 4 sessions so).
    const gets = byType(mapped, 'arrival').filter((a) => a.http_method === 'GET');
    const getOutcomes = gets.map((a) => settlementFor(mapped, a)?.outcome);
    expect(getOutcomes.length).toBeGreaterThan(0);
    expect(getOutcomes.filter((o) => o !== 'ok')).toEqual([]);
    expect(fx.collector.counters()).toMatchObject({ internal_errors: 0, dropped: 0, rejected_calls: 0 });
  });
});
