import { describe, expect, it } from 'vitest';
import { codedRequestError, JsonBodyError, parseJsonBody } from './http.ts';

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
