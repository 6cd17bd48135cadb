import { formatTable } from '../core/table.ts';

/** Output formats for row results. */
export type RowFormat = 'table' | 'json' | 'csv';

/** Renders rows as a terminal table, JSON (an array) or CSV (RFC 4180). */
export function formatRows(rows: Array<Record<string, unknown>>, format: RowFormat, columns?: string[]): string {
  const cols = columns ?? (rows[0] ? Object.keys(rows[0]) : []);
  if (format === 'json') return JSON.stringify(rows, null, 2) + '\n';
  if (format === 'csv') {
    const cell = (v: unknown) => {
      const s = v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
      return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
    };
    return [cols.map(cell).join(','), ...rows.map((r) => cols.map((c) => cell(r[c])).join(','))].join('\r\n') + '\r\n';
  }
  const text = (v: unknown) => (v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));
  return formatTable(cols, rows.map((r) => cols.map((c) => text(r[c]))));
}
