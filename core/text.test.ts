import { describe, expect, it } from 'vitest';
import { formatRows } from '../cli/format.ts';
import { oneLine, visibleText } from './text.ts';

describe('visibleText and oneLine', () => {
  it('writes controls, DEL, C1 and bidi controls as escapes, and keeps text, tabs and line feeds', () => {
    expect(visibleText('a\u001b[2Jb\u0000c\u007fd\u0085e\u202ef\u2066g\u200fh')).toBe('a\\x1B[2Jb\\x00c\\x7Fd\\x85e\\u202Ef\\u2066g\\u200Fh');
    expect(visibleText('tab\there\nnext')).toBe('tab\there\nnext');
    expect(visibleText('bare\rreturn')).toBe('bare\\x0Dreturn');
    expect(visibleText('Grüße, 日本, emoji 🙂')).toBe('Grüße, 日本, emoji 🙂');
  });

  it('oneLine: every line break a space (CR LF once), then the escapes', () => {
    expect(oneLine('a\r\nb\rc\nd\u0085e\u2028f\u2029g')).toBe('a b c d e f g');
    expect(oneLine('x\r# heading\u001b]8;;http://evil\u0007')).toBe('x # heading\\x1B]8;;http://evil\\x07');
  });

  it('the terminal table shows a hostile user agent inert; JSON and CSV keep the value as stored', () => {
    const rows = [{ user_agent: 'ua\u001b[31mred\u202e', n: 1 }];
    const table = formatRows(rows, 'table');
    expect(table).not.toMatch(/[\u001b\u202e]/);
    expect(table).toContain('ua\\x1B[31mred\\u202E');
    expect(JSON.parse(formatRows(rows, 'json'))).toEqual(rows);
    expect(formatRows(rows, 'csv')).toContain('ua\u001b[31mred\u202e');
  });
});
