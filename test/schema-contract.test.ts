import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderErrorDocs } from '../core/errors.ts';
import { EVENT_SCHEMAS, contractFields } from '../schema/index.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// The zod contract and the store's columns are one contract: this test fails
// when a field is added on one side only, or when the kinds of type disagree.

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('contract');
});
afterAll(async () => {
  await t?.close();
});

/** Storage-only columns that are not part of the event contract. */
const STORAGE_ONLY = new Set(['ingested_at']);

function zodKind(field: string): string {
  for (const schema of Object.values(EVENT_SCHEMAS)) {
    const s = (schema.shape as Record<string, { def?: { type?: string; innerType?: unknown }; type?: string }>)[field];
    if (!s) continue;
    let node: any = s;
    while (node?.def && ['default', 'optional', 'nullable', 'pipe'].includes(node.def.type)) node = node.def.innerType ?? node.def.in;
    return node?.def?.type ?? node?.type;
  }
  return 'missing';
}

function clickhouseKind(type: string): string {
  const t = type.replace(/^LowCardinality\((.*)\)$/, '$1').replace(/^Nullable\((.*)\)$/, '$1');
  if (t === 'String' || t === 'UUID') return 'string';
  if (t === 'Bool') return 'boolean';
  if (/^U?Int\d+$|^Float\d+$/.test(t)) return 'number';
  if (t.startsWith('DateTime64')) return 'time';
  if (t.startsWith('Map(')) return 'record';
  return t;
}

describe('event contract ↔ events table', () => {
  it('has exactly the contract fields as columns', async () => {
    const rows = await t.store.query<{ name: string }>("SELECT name FROM system.columns WHERE database = currentDatabase() AND table = 'events'");
    const columns = new Set(rows.map((r) => r.name).filter((n) => !STORAGE_ONLY.has(n)));
    const fields = contractFields();
    expect([...fields].filter((f) => !columns.has(f)).sort()).toEqual([]);
    expect([...columns].filter((c) => !fields.has(c)).sort()).toEqual([]);
  });

  it('gives every field a column of the same kind', async () => {
    const rows = await t.store.query<{ name: string; type: string }>(
      "SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = 'events'",
    );
    const mismatches: string[] = [];
    for (const { name, type } of rows) {
      if (STORAGE_ONLY.has(name)) continue;
      const z = zodKind(name);
      const ch = clickhouseKind(type);
      const expected: Record<string, string[]> = {
        string: ['string', 'enum', 'literal'],
        boolean: ['boolean'],
        number: ['number'],
        time: ['number'], // µs since the epoch on the wire
        record: ['record'],
      };
      if (!(expected[ch] ?? []).includes(z)) mismatches.push(`${name}: zod ${z} vs ClickHouse ${type}`);
    }
    expect(mismatches).toEqual([]);
  });

  it('records applied migrations and re-applying them changes nothing', async () => {
    const { migrate, loadMigrations } = await import('../store/index.ts');
    const applied = await t.store.query<{ version: number }>('SELECT version FROM schema_migrations FINAL ORDER BY version');
    expect(applied.map((r) => r.version)).toEqual(loadMigrations().map((m) => m.version));
    expect(applied.length).toBeGreaterThanOrEqual(4);
    expect(await migrate(t.store)).toEqual([]);
  });
});

describe('error registry', () => {
  it('docs/errors.md lists every code (regenerate with npm run docs:errors)', () => {
    expect(readFileSync(new URL('../docs/errors.md', import.meta.url), 'utf8')).toBe(renderErrorDocs());
  });
});
