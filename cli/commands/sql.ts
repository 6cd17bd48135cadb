import type { Command } from 'commander';
import { ContinuityError } from '../../core/errors.ts';
import { configFrom, positiveFlag, withStore } from '../context.ts';
import { MAX_SQL_ROWS } from '../../store/index.ts';
import { tsvTable } from '../../core/table.ts';

/** The longest an ad hoc statement may run, s (as `timeout_s` of POST /api/sql). */
const MAX_TIMEOUT_S = 600;

const FORMATS: Record<string, string> = {
  // (rendered here, as `continuity query` renders its rows: the engine's Pretty formats
  // write an escape sequence in a stored value to the terminal as it is, found by a
  // newcomer pass; the text values stay exact)
  table: 'TabSeparatedWithNames',
  json: 'JSONEachRow',
  csv: 'CSVWithNames',
  arrow: 'ArrowStream',
};

/**
 * `continuity sql "<SELECT…>"`: ad hoc SQL, read-only as enforced by the store
 * (readonly=1). One query only: SHOW/DESCRIBE/EXPLAIN are refused (store.readOnly
 * says why), so the help points at the system tables instead. An output of
 * --max-rows rows says on stderr that the result may have more.
 */
export function registerSql(program: Command): void {
  program
    .command('sql')
    .description('run ad hoc read-only SQL (the store enforces readonly=1; writes are refused)')
    .argument('<statement>', 'one SELECT (WITH, subqueries and UNION are fine; no SETTINGS clause); for tables and columns query system.tables and system.columns; read event tables with FINAL to count a re-delivered event once')
    .option('-f, --format <format>', 'table | json | csv | arrow (Arrow IPC stream)', 'table')
    .option('--max-rows <n>', `stop after this many rows, at most ${MAX_SQL_ROWS}`, '10000')
    .option('--timeout <seconds>', `maximum execution time, whole seconds, at most ${MAX_TIMEOUT_S}`, '30')
    .action(async (statement: string, opts: { format: string; maxRows: string; timeout: string }, cmd: Command) => {
      const format = Object.hasOwn(FORMATS, opts.format) ? FORMATS[opts.format] : undefined;
      if (!format) throw new ContinuityError('CONT_ERR_CONFIG', `--format must be one of ${Object.keys(FORMATS).join(', ')} (got ${JSON.stringify(opts.format)})`);
      // Arrow IPC is binary: drawn on a terminal it is noise and can change the terminal's state (a break-it pass)
      if (opts.format === 'arrow' && process.stdout.isTTY) {
        throw new ContinuityError('CONT_ERR_CONFIG', '--format arrow writes binary Arrow IPC, and standard output is a terminal: redirect it to a file or a pipe (> result.arrows)');
      }
      const maxRows = positiveFlag('--max-rows', opts.maxRows, true);
      // (as POST /api/sql: store/client.ts MAX_SQL_ROWS says why there is a bound)
      if (maxRows > MAX_SQL_ROWS) throw new ContinuityError('CONT_ERR_CONFIG', `--max-rows takes at most ${MAX_SQL_ROWS} rows (got ${JSON.stringify(opts.maxRows)}); for more, page with WHERE or LIMIT … OFFSET`);
      // whole seconds, 1 to 600, as POST /api/sql takes them (0.5 ran as 1 s, 700 was taken)
      const maxExecutionS = positiveFlag('--timeout', opts.timeout, true);
      if (maxExecutionS > MAX_TIMEOUT_S) throw new ContinuityError('CONT_ERR_CONFIG', `--timeout takes at most ${MAX_TIMEOUT_S} seconds (got ${JSON.stringify(opts.timeout)})`);
      const config = configFrom(cmd.optsWithGlobals());
      let limited = false;
      const out = await withStore(config, (store) => store.readOnly(statement, { format, maxRows, maxExecutionS, onResult: (r) => (limited = r.limited) }), { read: true });
      if (opts.format === 'table') {
        process.stdout.write(tsvTable(out));
      } else {
        process.stdout.write(out);
      }
      // (stderr: the output stays the result alone, for pipes and files)
      if (limited) {
        const more = maxRows < MAX_SQL_ROWS ? 'raise --max-rows' : 'page with WHERE or LIMIT … OFFSET';
        process.stderr.write(`note: the output stops at --max-rows ${maxRows} rows; the result may have more (${more})\n`);
      }
    });
}
