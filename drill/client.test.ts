import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestRecord } from './client.ts';
import { createRecordingFetch } from './client.ts';

// While the drill holds its client (a kill, until the standby listens), the SDK's own
// reopen of its GET stream waits too: on a loaded machine it went out after 1 s, got
// the proxy's 502, and failed the precondition that the fast restart is invisible to
// the proxy (a newcomer pass).
let server: Server;
let url: string;
const seen: string[] = [];
beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push(req.method ?? '');
    res.end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('the recording fetch', () => {
  it('holds a GET until released, and sends a POST at once', async () => {
    const records: RequestRecord[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const f = createRecordingFetch(records, () => 1, () => false, () => held);
    const get = f(url, { method: 'GET' });
    const post = await f(url, { method: 'POST', body: '{"method":"tools/call"}' });
    expect(await post.text()).toBe('ok');
    expect(seen).toEqual(['POST']);
    expect(records.map((r) => r.http_method)).toEqual(['POST']);
    release();
    expect(await (await get).text()).toBe('ok');
    expect(seen).toEqual(['POST', 'GET']);
    expect(records.map((r) => r.http_method)).toEqual(['POST', 'GET']);
  });
});
