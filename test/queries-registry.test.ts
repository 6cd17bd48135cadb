// The named queries as composed from their files and fragments: every placeholder
// is a declared parameter of that type, every fragment is used, and the composed
// text lists each fragment once, before its readers.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { authOkForm, bindParams, INTERNAL_PARAM_TYPES, NAMED_QUERIES, NARROWED_QUERIES, querySql, withQueryDefaults } from '../queries/index.ts';

const PLACEHOLDER = /\{([a-z_]+):([^}]+)\}/g;
const fragments = readdirSync(new URL('../queries/sql/lib/', import.meta.url)).map((f) => f.replace(/\.sql$/, ''));

describe('named query composition', () => {
  for (const [name, q] of Object.entries(NAMED_QUERIES)) {
    it(`${name}: every placeholder is a declared parameter with the declared type`, () => {
      const sql = querySql(name);
      const seen = new Map<string, string>();
      for (const [, param, type] of sql.matchAll(PLACEHOLDER)) seen.set(param!, type!);
      expect(seen.size).toBeGreaterThan(0);
      for (const [param, type] of seen) expect({ param, type }).toEqual({ param, type: q.paramTypes[param] ?? INTERNAL_PARAM_TYPES[param] });
    });
  }

  for (const [name, { check, sql, substitutes }] of Object.entries(NARROWED_QUERIES)) {
    it(`${name}: its narrowed form and its check read only the query's parameters, with their types`, () => {
      for (const text of [querySql(sql, substitutes), querySql(`checks/${check}`)]) {
        const seen = [...text.matchAll(PLACEHOLDER)].map(([, param, type]) => ({ param, type }));
        expect(seen.length).toBeGreaterThan(0);
        for (const { param, type } of seen) expect({ param, type }).toEqual({ param, type: NAMED_QUERIES[name]!.paramTypes[param!] ?? INTERNAL_PARAM_TYPES[param!] });
      }
    });
  }

  it('uses every fragment in some query or narrowed form (proxy_endpoints: in the endpoint resolution before them)', () => {
    // (auth_challenges' form from the rows alone: queries/registry.ts authOkForm)
    const authRows = authOkForm(bindParams('auth_challenges', { auth_window_s: 1 }));
    expect(authRows).toEqual({ auth_ok_minutes: 'auth_ok_rows' });
    const all = [
      ...Object.keys(NAMED_QUERIES).map((n) => querySql(n)),
      ...Object.values(NARROWED_QUERIES).map((q) => querySql(q.sql, q.substitutes)),
      querySql('auth_challenges', authRows),
    ];
    const substituted = [...Object.values(NARROWED_QUERIES).flatMap((q) => Object.values(q.substitutes ?? {})), ...Object.values(authRows)];
    for (const f of fragments.filter((f) => f !== 'proxy_endpoints' && !substituted.includes(f))) expect(all.some((sql) => new RegExp(`\\b${f} AS\\n\\(`).test(sql)), f).toBe(true);
    expect(all.filter((sql) => sql.includes('{endpoint_paths:Array(String)}')).length).toBeGreaterThan(0);
  });

  it('puts a fragment before the fragments that read it, once', () => {
    const sql = querySql('refused_misses');
    const at = (f: string): number => sql.search(new RegExp(`\\b${f} AS\\n\\(`));
    expect(at('proxy_lines')).toBeGreaterThan(-1);
    expect(at('proxy_lines')).toBeLessThan(at('proxy_seq'));
    expect(at('proxy_seq')).toBeLessThan(at('proxy_restarts'));
    expect(sql.match(/\bproxy_lines AS\n\(/g)).toHaveLength(1);
  });

  it('refuses a time range that ends before it starts (or is empty)', () => {
    for (const [t_from, t_to] of [
      ['2026-11-30', '2026-11-29'],
      ['2026-11-30T00:00:00Z', '2026-11-30T00:00:00Z'],
    ]) {
      expect(() => bindParams('restarts', { t_from, t_to })).toThrow(expect.objectContaining({ code: 'CONT_ERR_QUERY_PARAM' }));
    }
    expect(bindParams('restarts', { t_from: '2026-11-29', t_to: '2026-11-30' })).toMatchObject({ t_from: '2026-11-29 00:00:00.000000', t_to: '2026-11-30 00:00:00.000000' });
  });
});

describe('the deployment’s defaults of query parameters (withQueryDefaults)', () => {
  const defaults = { mcpPaths: ['/mcp', '/v2/mcp'], remintWindowS: 30 };
  it('fills in only the parameters the query takes, and a given value wins', () => {
    expect(withQueryDefaults('remint_pairs', {}, defaults)).toEqual({ mcp_paths: ['/mcp', '/v2/mcp'], window_s: 30 });
    expect(withQueryDefaults('cap_pressure', {}, defaults)).toEqual({ mcp_paths: ['/mcp', '/v2/mcp'] });
    expect(withQueryDefaults('remint_pairs', { window_s: '5', mcp_paths: '/x' }, defaults)).toEqual({ mcp_paths: '/x', window_s: '5' });
    expect(withQueryDefaults('remint_pairs', {}, { remintWindowS: 30 })).toEqual({ window_s: 30 });
    // the values bind as the query's own parameters
    expect(bindParams('remint_pairs', withQueryDefaults('remint_pairs', {}, defaults))).toMatchObject({ mcp_paths: ['/mcp', '/v2/mcp'], window_s: 30 });
  });
});

describe('a parameter given more than once (a repeated query-string key)', () => {
  it('is refused for a one-value parameter, and taken for an Array one', () => {
    expect(() => bindParams('remint_pairs', { window_s: ['5', '6'] })).toThrow(/window_s given more than once/);
    expect(bindParams('remint_pairs', { mcp_paths: ['/a', '/b'] })).toMatchObject({ mcp_paths: ['/a', '/b'] });
  });
});

describe('numeric parameters', () => {
  it('take a number or its decimal text, and refuse what Number() alone took: hex, binary, Infinity, blank', () => {
    expect(bindParams('remint_pairs', { window_s: '2.5' })).toMatchObject({ window_s: 2.5 });
    expect(bindParams('remint_pairs', { window_s: ' 1e1 ' })).toMatchObject({ window_s: 10 });
    expect(bindParams('remint_pairs', { window_s: 7 })).toMatchObject({ window_s: 7 });
    expect(bindParams('auth_challenges', { loop_min: '4' })).toMatchObject({ loop_min: 4 });
    for (const bad of ['0x10', '0b1', 'Infinity', '', ' ', '1,5', '10s']) {
      expect(() => bindParams('remint_pairs', { window_s: bad }), JSON.stringify(bad)).toThrow(/window_s/);
    }
    expect(() => bindParams('auth_challenges', { loop_min: '2.5' })).toThrow(/loop_min/);
    expect(() => bindParams('cap_pressure', { active_s: '-1' })).toThrow(/active_s/);
  });
});

describe('proxy_signal_lines', () => {
  it('is proxy_lines over proxy_signals: the same columns and filters (schema/migrations/0012)', () => {
    const body = (name: string) => {
      const text = readFileSync(new URL(`../queries/sql/lib/${name}.sql`, import.meta.url), 'utf8');
      return text.slice(text.indexOf('\nSELECT'));
    };
    const lines = body('proxy_lines');
    expect(lines).toContain('FROM proxy_access FINAL');
    expect(body('proxy_signal_lines')).toBe(lines.replace('FROM proxy_access FINAL', 'FROM proxy_signals FINAL'));
  });
});
