import { describe, expect, it } from 'vitest';
import { emptyFindings, JsonBodyTap, noteResponseMessage, noteResponseText, responseBodyKind, SseBodyTap, summarizeRequest } from './inspect.ts';

describe('SseBodyTap', () => {
  const collect = (limit = 65_536) => {
    const messages: unknown[] = [];
    return { messages, tap: new SseBodyTap(limit, (m) => messages.push(m)) };
  };

  it('dispatches on blank lines, joins multi-line data, skips comments and other fields', () => {
    const { messages, tap } = collect();
    tap.write(': keepalive\n\nevent: message\nid: 1\ndata: {"a":\ndata: 1}\n\n');
    expect(messages).toEqual([{ a: 1 }]);
  });

  it('handles CRLF and CR line ends split across chunks, and multi-byte characters split across buffers', () => {
    const { messages, tap } = collect();
    const text = 'data: {"t":"é✓"}\r\n\r\ndata: {"n":2}\r\r';
    const bytes = Buffer.from(text, 'utf8');
    for (let i = 0; i < bytes.length; i += 3) tap.write(bytes.subarray(i, i + 3));
    expect(messages).toEqual([{ t: 'é✓' }]);
    tap.end();
    expect(messages).toEqual([{ t: 'é✓' }, { n: 2 }]);
  });

  it('ignores priming events with empty data and non-JSON data', () => {
    const { messages, tap } = collect();
    tap.write('id: p1\ndata: \n\ndata: not json\n\ndata:{"ok":true}\n\n');
    expect(messages).toEqual([{ ok: true }]);
  });

  it('reads only the first limit bytes of a long-lived stream and marks it truncated', () => {
    const { messages, tap } = collect(1024);
    const event = `data: ${JSON.stringify({ pad: 'x'.repeat(200) })}\n\n`;
    for (let i = 0; i < 1000; i++) tap.write(event);
    expect(tap.truncated).toBe(true);
    expect(messages.length).toBeLessThanOrEqual(5);
    expect(messages.length).toBeGreaterThan(0);
  });
});

describe('JsonBodyTap', () => {
  it('parses a body written in pieces and encodings', () => {
    const tap = new JsonBodyTap(1024);
    tap.write('{"a":');
    tap.write(Buffer.from('"b"'));
    tap.write(Buffer.from('}').toString('base64'), 'base64');
    expect(tap.parse()).toEqual({ a: 'b' });
  });

  it('never parses a body over the limit', () => {
    const tap = new JsonBodyTap(1024);
    tap.write(JSON.stringify({ x: 'y'.repeat(2000) }));
    expect(tap.truncated).toBe(true);
    expect(tap.parse()).toBeUndefined();
  });
});

describe('summarizeRequest', () => {
  it('gives a response the client sends (to a server request) no id: the id is the server request\'s', () => {
    expect(summarizeRequest({ jsonrpc: '2.0', id: 99, result: {} })).toMatchObject({ method: '', id: '', expectsResponse: false });
    expect(summarizeRequest({ jsonrpc: '2.0', id: 7, error: { code: -1, message: 'no' } })).toMatchObject({ id: '' });
    expect(summarizeRequest({ jsonrpc: '2.0', id: 3, method: 'tools/list' })).toMatchObject({ method: 'tools/list', id: '3' });
  });
  it('reads method, id, tool name, client info and protocol version', () => {
    expect(summarizeRequest({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'search' } })).toMatchObject({
      method: 'tools/call',
      id: '3',
      toolName: 'search',
      batchSize: 1,
      expectsResponse: true,
    });
    expect(
      summarizeRequest({ jsonrpc: '2.0', id: 'a', method: 'initialize', params: { protocolVersion: '2025-06-18', clientInfo: { name: 'claude-ai', version: '0.1' } } }),
    ).toMatchObject({ method: 'initialize', id: 'a', clientName: 'claude-ai', clientVersion: '0.1', protocolVersion: '2025-06-18' });
  });

  it('represents a batch by its first request and counts its messages', () => {
    const s = summarizeRequest([
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 9 } },
      { jsonrpc: '2.0', id: 4, method: 'tools/list' },
    ]);
    expect(s).toMatchObject({ method: 'tools/list', id: '4', batchSize: 2, expectsResponse: true, cancelledRequestId: '9' });
  });

  it('notifications expect no response; non-JSON-RPC bodies give no summary', () => {
    expect(summarizeRequest({ jsonrpc: '2.0', method: 'notifications/initialized' })).toMatchObject({ id: '', expectsResponse: false });
    expect(summarizeRequest('text')).toBeUndefined();
    expect(summarizeRequest([])).toBeUndefined();
  });
});

describe('noteResponseMessage and responseBodyKind', () => {
  it('finds the first error, tool errors and the negotiated protocol version', () => {
    const f = emptyFindings();
    noteResponseMessage(f, { jsonrpc: '2.0', id: 1, result: { protocolVersion: '2025-11-25' } });
    noteResponseMessage(f, [
      { jsonrpc: '2.0', id: 2, result: { isError: true, content: [] } },
      { jsonrpc: '2.0', id: 3, error: { code: -32602, message: 'bad' } },
    ]);
    noteResponseMessage(f, { jsonrpc: '2.0', method: 'notifications/progress', params: {} });
    expect(f).toMatchObject({ responses: 3, toolError: true, protocolVersion: '2025-11-25', firstError: { code: -32602, message: 'bad' } });
  });

  it('inspects JSON and SSE bodies, not encoded or other types', () => {
    expect(responseBodyKind('text/event-stream', '')).toBe('sse');
    expect(responseBodyKind('application/json; charset=utf-8', '')).toBe('json');
    expect(responseBodyKind('', '')).toBe('json');
    expect(responseBodyKind('application/json', 'gzip')).toBe('skip');
    expect(responseBodyKind('text/html', '')).toBe('skip');
  });
});

describe('noteResponseText', () => {
  const cases: unknown[] = [
    { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'ok' }] } },
    { jsonrpc: '2.0', id: 2, result: { content: [{ type: 'text', text: 'a "method" and an "error" in text' }] } },
    { jsonrpc: '2.0', id: 3, result: { isError: true, content: [] } },
    { jsonrpc: '2.0', id: 4, error: { code: -32601, message: 'Method not found' } },
    { jsonrpc: '2.0', id: 5, result: { protocolVersion: '2025-11-25', capabilities: {} } },
    { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, result: 'x', id: 2 } },
    [{ jsonrpc: '2.0', id: 6, result: {} }, { jsonrpc: '2.0', id: 7, result: { isError: true } }],
    { jsonrpc: '2.0', id: 8, result: { content: [{ type: 'text', text: 'error' }], note: 'method' } },
  ];
  it('finds exactly what parsing the message finds', () => {
    for (const message of cases) {
      const fast = emptyFindings();
      expect(noteResponseText(fast, JSON.stringify(message))).toBe(true);
      const slow = emptyFindings();
      noteResponseMessage(slow, message);
      expect(fast).toEqual(slow);
    }
  });
  it('reports text that is not JSON', () => {
    expect(noteResponseText(emptyFindings(), '{"result": ')).toBe(false);
  });
});
