/** Terminal tables of stored values, shown inert (core/text.ts), for `continuity sql` and `POST /api/sql`'s `table` format. */
import Table from 'cli-table3';
import { ContinuityError } from './errors.ts';
import { visibleText } from './text.ts';

/**
 * Renders a header and rows of cell texts as a terminal table (cli-table3), every
 * cell through {@link visibleText}: what the store holds (a user agent, a path from a
 * proxy log) is shown with its control and bidi characters as escapes, never acted on
 * by the terminal (core/text.ts). `(no rows)` for none.
 */
export function formatTable(head: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  return drawVisible(head.map(visibleText), rows.map((r) => r.map(visibleText)));
}

/** Draws cells already made visible ({@link formatTable}). */
function drawVisible(head: string[], rows: string[][]): string {
  if (rows.length === 0) return '(no rows)\n';
  const table = new Table({ head, style: { head: [], border: [] } });
  for (const r of rows) table.push(r);
  return table.toString() + '\n';
}

/**
 * The most result text, bytes of `TabSeparatedWithNames`, {@link tsvTable} draws: drawing
 * is synchronous (cli-table3), and a 487 MB result held `serve`'s event loop, and every
 * other request with it, for 20 s (a break-it pass); 4 MiB draws in well under a second.
 */
export const TABLE_MAX_BYTES = 4 << 20;

/**
 * The most cells (rows × columns) {@link tsvTable} draws: cli-table3's time grows with
 * their square (measured: 15,000 cells 0.9 s, 30,000 3.2 s, 100,000 43 s), and 60,000
 * rows of a 349 KB result took 24 s, 130,000 overflowed the stack (a break-it pass).
 */
export const TABLE_MAX_CELLS = 10_000;

/**
 * The most characters {@link tsvTable} draws, borders and padding included (about
 * (2 × rows + 3) lines, each as wide as the columns' widest cells): 8 Mi, at most
 * 24 MiB of UTF-8.
 */
export const TABLE_MAX_DRAWN_CHARS = 8 << 20;

/**
 * An ad hoc result in `TabSeparatedWithNames` drawn as a table ({@link formatTable}).
 * @throws ContinuityError CONT_ERR_SQL_TABLE_TOO_LARGE over {@link TABLE_MAX_BYTES}
 *   (details `bytes`, `limitBytes`), {@link TABLE_MAX_CELLS} (details `cells`,
 *   `limitCells`) or {@link TABLE_MAX_DRAWN_CHARS} (details `drawnChars`,
 *   `limitDrawnChars`), naming the size, before drawing anything.
 */
export function tsvTable(tsv: Buffer): string {
  if (tsv.length > TABLE_MAX_BYTES) {
    throw new ContinuityError('CONT_ERR_SQL_TABLE_TOO_LARGE', `${tsv.length} bytes of result, over the ${TABLE_MAX_BYTES} a table draws`, {
      details: { bytes: tsv.length, limitBytes: TABLE_MAX_BYTES },
    });
  }
  const { head, rows } = parseTabSeparatedWithNames(tsv.toString('utf8'));
  const cells = rows.length * Math.max(1, head.length);
  if (cells > TABLE_MAX_CELLS) {
    throw new ContinuityError(
      'CONT_ERR_SQL_TABLE_TOO_LARGE',
      `${rows.length} rows of ${head.length} columns, ${cells} cells, over the ${TABLE_MAX_CELLS} a table draws`,
      { details: { cells, limitCells: TABLE_MAX_CELLS } },
    );
  }
  // Every row is drawn as wide as the widest cell of each column, between separator
  // lines: a 4 MB result of one row of four 1 MB cells drew 44 MB, and a wide cell
  // over 5,000 short rows would draw gigabytes (a break-it pass).
  // (each cell made visible once: measured here, then drawn)
  const shownHead = head.map(visibleText);
  const shown = rows.map((r) => r.map(visibleText));
  const widths = shownHead.map((h, c) => shown.reduce((w, r) => Math.max(w, (r[c] ?? '').length), h.length));
  const drawn = (2 * rows.length + 3) * (widths.reduce((a, w) => a + w + 3, 0) + 1);
  if (drawn > TABLE_MAX_DRAWN_CHARS) {
    throw new ContinuityError(
      'CONT_ERR_SQL_TABLE_TOO_LARGE',
      `the table would be about ${drawn} characters drawn (every row as wide as its column's widest cell), over the ${TABLE_MAX_DRAWN_CHARS} a table draws`,
      { details: { drawnChars: drawn, limitDrawnChars: TABLE_MAX_DRAWN_CHARS } },
    );
  }
  return drawVisible(shownHead, shown);
}

/**
 * Parses ClickHouse's `TabSeparatedWithNames` output: a header line of column names,
 * then a line per row, fields split by tabs, with the format's escapes undone
 * (`\\`, `\t`, `\n`, `\r`, `\0`, `\b`, `\f`, `\'`; ClickHouse docs, "TabSeparated":
 * "Data Formatting"), and `\N`, NULL, shown as `ᴺᵁᴸᴸ`. Every other value stays the
 * text the engine wrote (a 64-bit number exactly, an array as `[1,2]`).
 * @returns the column names and the rows' cell texts.
 */
export function parseTabSeparatedWithNames(text: string): { head: string[]; rows: string[][] } {
  // (\N alone is NULL, shown as ClickHouse's own terminal formats show it)
  const unescape = (field: string) =>
    field === '\\N'
      ? 'ᴺᵁᴸᴸ'
      : field.replace(/\\(.)/gs, (_m, c: string) => ({ t: '\t', n: '\n', r: '\r', '0': '\0', b: '\b', f: '\f', a: '\u0007', v: '\v', e: '\u001b' })[c] ?? c);
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  const [header, ...body] = lines;
  return { head: header === undefined ? [] : header.split('\t').map(unescape), rows: body.map((l) => l.split('\t').map(unescape)) };
}
