import { describe, expect, it } from 'vitest';
import { decodeCompact } from '../store/index.ts';

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
