import { describe, expect, it } from 'vitest';
import { createJsonLines } from './json-lines.ts';

describe('createJsonLines', () => {
  it('keeps each line followed by a newline, readable whole, by range and one by one', () => {
    const l = createJsonLines();
    const lines = ['{"a":1}', '{"b":"two"}', '{}'];
    for (const line of lines) l.push(line);
    expect(l.length).toBe(3);
    expect(l.byteLength).toBe(lines.join('\n').length + 1);
    expect(l.lines(0, 3).toString()).toBe('{"a":1}\n{"b":"two"}\n{}\n');
    expect(l.lines(1, 2).toString()).toBe('{"b":"two"}\n');
    expect(l.lines(2, 3).toString()).toBe('{}\n');
    expect(l.lines(1, 1).length).toBe(0);
    expect(l.lines(2, 1).length).toBe(0);
    expect(lines.map((_, i) => l.line(i))).toEqual(lines);
  });

  it('encodes UTF-8 exactly as Buffer.from does, growing past a small first capacity', () => {
    const l = createJsonLines(1); // below the 1 KiB floor: many grows on the way
    const expected: string[] = [];
    for (let i = 0; i < 500; i++) {
      // 1-, 2-, 3- and 4-byte characters, and a line longer than the current buffer.
      const line = JSON.stringify({ i, s: `é€😀${'x'.repeat(i % 7 === 0 ? 3000 : i)}` });
      l.push(line);
      expected.push(line);
    }
    const want = Buffer.from(expected.join('\n') + '\n');
    expect(l.byteLength).toBe(want.length);
    expect(l.lines(0, l.length).equals(want)).toBe(true);
    expect(l.line(499)).toBe(expected[499]);
    expect(l.lines(10, 12).toString()).toBe(`${expected[10]}\n${expected[11]}\n`);
  });

  it('refuses ranges and indexes outside the lines', () => {
    const l = createJsonLines();
    expect(() => l.line(0)).toThrow(RangeError);
    l.push('{}');
    expect(() => l.line(1)).toThrow(RangeError);
    expect(() => l.line(-1)).toThrow(RangeError);
    expect(() => l.lines(0, 2)).toThrow(RangeError);
    expect(() => l.lines(-1, 1)).toThrow(RangeError);
    expect(l.lines(0, 1).toString()).toBe('{}\n');
  });
});
