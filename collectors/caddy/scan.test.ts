import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { prng } from '../../bench/prng.ts';
import {
  CaddyLineScanner,
  F_DURATION,
  F_H_AUTH,
  F_H_PV,
  F_H_SID,
  F_H_UA,
  F_LOGGER,
  F_R_METHOD,
  F_R_REMOTE_IP,
  F_R_REMOTE_PORT,
  F_R_URI,
  F_REQUEST,
  F_RH_SID,
  F_RH_WWW_AUTH,
  F_STATUS,
  F_TS,
  T_ARRAY,
  T_NONE,
  T_NUMBER,
  T_OBJECT,
  T_STRING,
} from './scan.ts';

const CAPTURES = fileURLToPath(new URL('../../test/fixtures/captures/', import.meta.url));
const captureLines = ['caddy-sdk-restart/caddy-access.log', 'caddy-sdk-restart/caddy-error.log', 'caddy-sdk-auth/caddy-access.log', 'caddy-sdk-auth/caddy-error.log']
  .flatMap((f) => readFileSync(CAPTURES + f, 'utf8').split('\n'))
  .filter((l) => l.length > 0);

function scan(text: string | Buffer): { ok: boolean; sc: CaddyLineScanner } {
  const buf = typeof text === 'string' ? Buffer.from(text) : text;
  const sc = new CaddyLineScanner();
  return { ok: sc.scan(buf, 0, buf.length), sc };
}

function jsonParses(buf: Buffer): boolean {
  try {
    JSON.parse(buf.toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

/** Header lookup the slow way: parse and match names case-insensitively. */
function header(h: unknown, name: string): unknown {
  if (typeof h !== 'object' || h === null) return undefined;
  const entry = Object.entries(h).find(([k]) => k.toLowerCase() === name.toLowerCase());
  return entry?.[1];
}

describe('CaddyLineScanner agrees with JSON.parse', () => {
  it('on every capture line, and extracts the same fields', () => {
    for (const line of captureLines) {
      const { ok, sc } = scan(line);
      expect(ok, line).toBe(true);
      const e = JSON.parse(line) as Record<string, any>;
      expect(sc.topType).toBe(T_OBJECT);
      expect(sc.num(F_TS)).toBe(e.ts);
      expect(sc.str(F_LOGGER)).toBe(e.logger ?? '');
      if (e.request) {
        expect(sc.type[F_REQUEST]).toBe(T_OBJECT);
        expect(sc.str(F_R_METHOD)).toBe(e.request.method);
        expect(sc.str(F_R_URI)).toBe(e.request.uri);
        expect(sc.str(F_R_REMOTE_IP)).toBe(e.request.remote_ip);
        expect(sc.str(F_R_REMOTE_PORT)).toBe(e.request.remote_port);
        expect(sc.firstStr(F_H_UA)).toBe((header(e.request.headers, 'user-agent') as string[] | undefined)?.[0] ?? '');
        expect(sc.firstStr(F_H_SID)).toBe((header(e.request.headers, 'mcp-session-id') as string[] | undefined)?.[0] ?? '');
        expect(sc.firstStr(F_H_PV)).toBe((header(e.request.headers, 'mcp-protocol-version') as string[] | undefined)?.[0] ?? '');
        expect(sc.type[F_H_AUTH] !== T_NONE).toBe(header(e.request.headers, 'authorization') !== undefined);
      }
      if (typeof e.status === 'number') expect(sc.num(F_STATUS)).toBe(e.status);
      if (typeof e.duration === 'number') expect(sc.num(F_DURATION)).toBe(e.duration);
      if (e.resp_headers) {
        expect(sc.firstStr(F_RH_SID)).toBe((header(e.resp_headers, 'mcp-session-id') as string[] | undefined)?.[0] ?? '');
        expect(sc.strings(F_RH_WWW_AUTH)).toEqual(header(e.resp_headers, 'www-authenticate') ?? []);
        const others = Object.keys(e.resp_headers).filter((k) => k.toLowerCase() !== 'server');
        expect(sc.respOther).toBe(others.length);
      }
    }
  });

  it('on every truncation of capture lines (valid only when complete)', () => {
    for (const line of captureLines.slice(0, 6)) {
      const buf = Buffer.from(line);
      for (let n = 0; n < buf.length; n++) {
        const part = buf.subarray(0, n);
        expect(scan(part).ok, `${n}: ${part.toString()}`).toBe(jsonParses(part));
      }
    }
  });

  it('on random byte edits of capture lines', () => {
    const rand = prng(42);
    const alphabet = Buffer.from('{}[]",:\\/ \t\r0123456789.eE+-tfnaulrsxu\u0001\u001f\u007f\u00e9\u00ff');
    for (let i = 0; i < 20_000; i++) {
      const line = Buffer.from(captureLines[Math.floor(rand() * captureLines.length)]!);
      const edits = 1 + Math.floor(rand() * 3);
      for (let k = 0; k < edits; k++) {
        const at = Math.floor(rand() * line.length);
        line[at] = rand() < 0.5 ? alphabet[Math.floor(rand() * alphabet.length)]! : Math.floor(rand() * 256);
      }
      expect(scan(line).ok, line.toString('latin1')).toBe(jsonParses(line));
    }
  });

  it('on JSON grammar corner cases', () => {
    const cases = [
      '{}',
      '[]',
      '"x"',
      '0',
      '-0',
      '-0.5e+10',
      '1E5',
      '01',
      '1.',
      '.5',
      '-',
      '1e',
      '+1',
      'tru',
      'true',
      'null',
      'nul',
      'false',
      'fals',
      '{"a":1,}',
      '[1,]',
      '{"a" 1}',
      '{"a":1 "b":2}',
      '{a:1}',
      '"\\u00e9\\n\\"\\\\\\/\\b\\f\\r\\t"',
      '"\\u12"',
      '"\\x41"',
      '"\\ud800"',
      '"tab\there"',
      '  {"a" : [ 1 , { "b" : null } ] }  ',
      '{"a":1}x',
      '{"a":1}{"b":2}',
      '{"ts":1,"ts":2}',
      '\u00a0{}',
      '{"k":"\u00e9\u4e2d\ud83d\ude00"}',
      '[' .repeat(600) + ']'.repeat(600),
      '',
      '   ',
    ];
    for (const c of cases) {
      const buf = Buffer.from(c);
      if (c.startsWith('[[[')) {
        // Deeper than the scanner's limit: refused rather than recursing without bound.
        expect(scan(buf).ok).toBe(false);
        continue;
      }
      expect(scan(buf).ok, JSON.stringify(c)).toBe(jsonParses(buf));
    }
  });

  it('keeps the last of duplicate keys, like JSON.parse', () => {
    const { ok, sc } = scan('{"status":"x","status":404,"request":{"method":"GET"},"request":{"uri":"/a"}}');
    expect(ok).toBe(true);
    expect(sc.type[F_STATUS]).toBe(T_NUMBER);
    expect(sc.num(F_STATUS)).toBe(404);
    // The second request object replaces the first one entirely.
    expect(sc.type[F_R_METHOD]).toBe(T_NONE);
    expect(sc.str(F_R_URI)).toBe('/a');
  });

  it('decodes escaped strings and escaped keys', () => {
    const { ok, sc } = scan('{"\\u0074s":1.5,"request":{"uri":"/a\\u003fb","headers":{"Mcp-Session-\\u0049d":["s\\"1"]}}}');
    expect(ok).toBe(true);
    expect(sc.num(F_TS)).toBe(1.5);
    expect(sc.str(F_R_URI)).toBe('/a?b');
    expect(sc.type[F_H_SID]).toBe(T_ARRAY);
    expect(sc.firstStr(F_H_SID)).toBe('s"1');
    expect(sc.type[F_R_URI]).toBe(T_STRING);
  });

  it('reports where a line stops being JSON', () => {
    const { ok, sc } = scan('{"a":[1,2}');
    expect(ok).toBe(false);
    expect(sc.errorOffset).toBe(9);
    expect(sc.errorMessage).toMatch(/expected , or \]/);
  });
});
