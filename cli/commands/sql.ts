import type { Command } from 'commander';
import { configFrom, withStore } from '../context.ts';

const FORMATS: Record<string, string> = {
  table: 'PrettyCompactMonoBlock',
  json: 'JSONEachRow',
  csv: 'CSVWithNames',
  arrow: 'ArrowStream',
};

/**
 * `continuity sql "<SELECT…>"`: ad hoc SQL, read-only as enforced by the store
 * (readonly=1). One query only: SHOW/DESCRIBE/EXPLAIN are refused (store.readOnly
 * says why), so the help points at the system tables instead.
 */
export function registerSql(program: Command): void {
  program
    .command('sql')
    .description('run ad hoc read-only SQL (the store enforces readonly=1; writes are refused)')
    .argument('<statement>', 'one SELECT (WITH, subqueries and UNION are fine; no SETTINGS clause); for tables and columns query system.tables and system.columns')
    .option('-f, --format <format>', 'table | json | csv | arrow (Arrow IPC stream)', 'table')
    .option('--max-rows <n>', 'stop after this many rows', '10000')
    .option('--timeout <seconds>', 'maximum execution time', '30')
    .action(async (statement: string, opts: { format: string; maxRows: string; timeout: string }, cmd: Command) => {
      const format = FORMATS[opts.format];
      if (!format) throw new Error(`--format must be one of ${Object.keys(FORMATS).join(', ')}`);
      const config = configFrom(cmd.optsWithGlobals());
      const out = await withStore(config, (store) =>
        store.readOnly(statement, { format, maxRows: Number(opts.maxRows), maxExecutionS: Number(opts.timeout) }),
      );
      process.stdout.write(out);
    });
}
