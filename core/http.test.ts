import Fastify from 'fastify';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { closeWithin, codedRequestError, JsonBodyError, parseJsonBody, trackConnections } from './http.ts';

describe('parseJsonBody', () => {
  it('parses JSON, skipping a byte-order mark', () => {
    expect(parseJsonBody('\ufeff[{"a":1}]')).toEqual([{ a: 1 }]);
    expect(parseJsonBody('3')).toBe(3);
  });
  it('says what is wrong with an empty body and with text that is not JSON', () => {
    expect(() => parseJsonBody('')).toThrow(/the body is empty/);
    expect(() => parseJsonBody('{"a":')).toThrow(/the body is not valid JSON: /);
  });
  it('refuses __proto__ keys (escaped too) and constructor.prototype, naming the key and where', () => {
    const refusal = (text: string): JsonBodyError => {
      try {
        parseJsonBody(text);
      } catch (err) {
        return err as JsonBodyError;
      }
      throw new Error(`not refused: ${text}`);
    };
    expect(refusal('{"events":[{"a":1},{"attrs":{"__proto__":{"x":1}}}]}')).toMatchObject({ statusCode: 400, details: { key: '__proto__', path: '$.events[1].attrs' } });
    expect(refusal('[{"\\u005f\\u005fproto__":1}]').details).toEqual({ key: '__proto__', path: '$[0]' });
    expect(refusal('{"constructor":{"prototype":{}}}').details).toEqual({ key: 'constructor', path: '$' });
    // Iterative: a body nested 100,000 deep with the key at the bottom is scanned without exhausting the stack.
    const n = 100_000;
    expect(refusal(`${'['.repeat(n)}{"__proto__":1}${']'.repeat(n)}`).details).toMatchObject({ key: '__proto__' });
    // As a framework error it becomes CONT_ERR_BAD_REQUEST with the details.
    expect(codedRequestError(refusal('{"__proto__":1}'), 1024)?.toJSON()).toMatchObject({ code: 'CONT_ERR_BAD_REQUEST', details: { key: '__proto__', path: '$' } });
  });
  it('lets a constructor key without a prototype, and __proto__ as a value, through', () => {
    expect(parseJsonBody('{"constructor":"c","k":"__proto__","v":{"constructor":{"x":1}}}')).toEqual({ constructor: 'c', k: '__proto__', v: { constructor: { x: 1 } } });
  });
});

describe('closeWithin', () => {
  it('answers a request still running at the deadline 503 CONT_ERR_SHUTDOWN (it was cut off with no answer), and lets a quick one finish', async () => {
    const app = Fastify();
    trackConnections(app.server);
    let release: () => void = () => {};
    const never = new Promise<void>((resolve) => (release = resolve));
    app.get('/slow', async () => {
      await never;
      return { late: true };
    });
    app.get('/quick', async () => {
      await new Promise((r) => setTimeout(r, 50));
      return { ok: true };
    });
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    const slow = fetch(`${base}/slow`);
    const quick = fetch(`${base}/quick`);
    await new Promise((r) => setTimeout(r, 20));
    await closeWithin(app, 300);
    const [s, q] = await Promise.all([slow, quick]);
    expect(q.status).toBe(200);
    expect(await q.json()).toEqual({ ok: true });
    expect(s.status).toBe(503);
    expect(s.headers.get('retry-after')).toBe('1');
    expect(await s.json()).toMatchObject({ code: 'CONT_ERR_SHUTDOWN', details: { graceMs: 300 } });
    release();
  });

  it('lets a response whose body is still being written to a slow reader finish (Node destroyed it as idle at close)', async () => {
    const app = Fastify();
    trackConnections(app.server);
    const big = 'x'.repeat(16 << 20);
    app.get('/big', async (_req, reply) => reply.header('content-type', 'text/plain').send(big));
    await app.listen({ host: '127.0.0.1', port: 0 });
    const port = (app.server.address() as { port: number }).port;
    let received = 0;
    let closing: Promise<void> | undefined;
    const done = new Promise<void>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.write('GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'));
      socket.on('data', (chunk: Buffer) => {
        received += chunk.length;
        // the server is told to stop while most of the body is still to come
        closing ??= closeWithin(app, 20_000);
        socket.pause();
        setTimeout(() => socket.resume(), 8);
      });
      socket.on('end', () => resolve());
      socket.on('error', reject);
    });
    await done;
    await closing;
    expect(received).toBeGreaterThan(16 << 20); // the whole body, and its head
  }, 60_000);
});

