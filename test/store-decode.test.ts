import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { decodeCompact } from '../store/index.ts';
import { openTestStore } from './helpers/store.ts';

// decodeCompact turns the engine's JSONCompactEachRowWithNamesAndTypes text into row
// objects; it builds each row as one object literal generated from the column names,
// so the names must come out exactly as the engine gave them, whatever they hold.

const text = (names: string[], types: string[], rows: unknown[][]) =>
  [JSON.stringify(names), JSON.stringify(types), ...rows.map((r) => JSON.stringify(r))].join('\n') + '\n';

describe('decodeCompact', () => {
  it('keys each row by the column names, in order, numbers the engine quotes made numbers where exact', () => {
    const rows = decodeCompact<Record<string, unknown>>(
      text(
        ['name', 'n', 'big', 'neg', 'dec', 'maybe', 'f'],
        ['String', 'UInt64', 'UInt64', 'Int64', 'Decimal(10, 2)', 'Nullable(Int64)', 'Float64'],
        [
          ['a', '42', '18446744073709551615', '-9007199254740991', '1.50', null, 0.25],
          ['b', '0', '9007199254740993', '-7', '-2.00', '5', 1],
        ],
      ),
    );
    expect(rows).toEqual([
      { name: 'a', n: 42, big: '18446744073709551615', neg: -9007199254740991, dec: 1.5, maybe: null, f: 0.25 },
      { name: 'b', n: 0, big: '9007199254740993', neg: -7, dec: -2, maybe: 5, f: 1 },
    ]);
    expect(Object.keys(rows[0]!)).toEqual(['name', 'n', 'big', 'neg', 'dec', 'maybe', 'f']);
  });

  it('takes any column name as data: quotes, backslashes, line breaks, code, duplicates', () => {
    const names = ['a"b', 'c\\d', 'e\nf', "'); process.exit(1); ('", '`${1}`', '\u2028', 'x', 'x'];
    const [row] = decodeCompact<Record<string, unknown>>(text(names, names.map(() => 'String'), [names.map((_, i) => `v${i}`)]));
    expect(row).toEqual({ 'a"b': 'v0', 'c\\d': 'v1', 'e\nf': 'v2', "'); process.exit(1); ('": 'v3', '`${1}`': 'v4', '\u2028': 'v5', x: 'v7' });
  });

  it('keeps a column named __proto__ as an own field, not the prototype', () => {
    const [row] = decodeCompact<Record<string, unknown>>(text(['__proto__', 'n'], ['String', 'UInt64'], [['p', '3']]));
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(row, '__proto__')?.value).toBe('p');
    expect(row!.n).toBe(3);
  });

  it('gives no rows for an empty result, with or without its header lines', () => {
    expect(decodeCompact('')).toEqual([]);
    expect(decodeCompact(text(['a'], ['String'], []))).toEqual([]);
  });
});

describe('Store.query', () => {
  it('gives 64-bit and 128-bit integers above 2^53 exactly, as strings, and smaller ones as numbers', async () => {
    const t = await openTestStore('decode');
    try {
      const rows = await t.store.query(
        "SELECT toUInt64(18446744073709551615) AS u64, toInt64(-9223372036854775807) AS i64, toUInt128('340282366920938463463374607431768211455') AS u128, toUInt64(42) AS small, count() AS n FROM numbers(3)",
      );
      expect(rows).toEqual([{ u64: '18446744073709551615', i64: '-9223372036854775807', u128: '340282366920938463463374607431768211455', small: 42, n: 3 }]);
      // (the setting is the statement's own: the next one is unchanged)
      expect(await t.store.query('SELECT toUInt64(7) AS a;')).toEqual([{ a: 7 }]);
    } finally {
      await t.close();
    }
  });
});

describe('decodeCompact where code cannot be generated', () => {
  it('decodes the same rows', () => {
    const script = "import('./store/client.ts').then(({ decodeCompact }) => console.log(JSON.stringify(decodeCompact(['[\"a\",\"n\"]', '[\"String\",\"UInt64\"]', '[\"x\",\"5\"]', '[\"y\",\"18446744073709551615\"]'].join('\\n')))))";
    const out = execFileSync(process.execPath, ['--disallow-code-generation-from-strings', '--import', 'tsx', '-e', script], { encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual([{ a: 'x', n: 5 }, { a: 'y', n: '18446744073709551615' }]);
  });
});
