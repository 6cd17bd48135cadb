// `--param k=v` flags parsed as a query string is: a repeated name keeps every value.
import { describe, expect, it } from 'vitest';
import { parseParams } from '../cli/context.ts';

describe('parseParams (continuity query --param)', () => {
  it('keeps one value as a string and every value of a repeated name in order', () => {
    expect(parseParams(['window_s=5', 'mcp_paths=/mcp', 'mcp_paths=/nothing', 'mcp_paths=/x=y'])).toEqual({ window_s: '5', mcp_paths: ['/mcp', '/nothing', '/x=y'] });
  });
  it('takes an empty value, and __proto__ as a plain name', () => {
    const p = parseParams(['service=', '__proto__=x']);
    expect(p.service).toBe('');
    expect(Object.getPrototypeOf(p)).toBe(Object.prototype);
    expect(Object.hasOwn(p, '__proto__')).toBe(true);
  });
  it('refuses a flag without name= (CONT_ERR_QUERY_PARAM)', () => {
    expect(() => parseParams(['=x'])).toThrow(expect.objectContaining({ code: 'CONT_ERR_QUERY_PARAM' }));
    expect(() => parseParams(['novalue'])).toThrow(/--param takes name=value/);
  });
});
