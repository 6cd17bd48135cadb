import type { Command } from 'commander';
import { NAMED_QUERIES, checkMcpPaths, readsProxyLines, describeQueries, getQuery, runQuery, withQueryDefaults } from '../../queries/index.ts';
import { configFrom, parseParams, withStore } from '../context.ts';
import { ContinuityError } from '../../core/errors.ts';
import { formatRows, type RowFormat } from '../format.ts';

/** `continuity query <name> [--param k=v…] [--format table|json|csv]`, `continuity query --list [name] [--format table|json]` (json: the document `GET /api/queries` answers). */
export function registerQuery(program: Command): void {
  program
    .command('query')
    .description('run a named query with bound parameters')
    .argument('[name]', `one of: ${Object.keys(NAMED_QUERIES).join(', ')}`)
    .option('-p, --param <name=value>', 'a query parameter (repeatable); an Array parameter takes its values comma-separated (mcp_paths=/mcp,/v2/mcp); a time (t_from, t_to) is ISO 8601 / RFC 3339 (no offset: UTC), "YYYY-MM-DD hh:mm:ss[.ffffff]" (UTC) or epoch seconds (eight digits that are also a date, 20261203, are refused as ambiguous)', (v: string, acc: string[] | undefined) => [...(acc ?? []), v])
    .option('-f, --format <format>', 'table | json | csv', 'table')
    .option('--list', 'list the named queries with their parameters and row shapes')
    .action(async (name: string | undefined, opts: { param?: string[]; format: RowFormat; list?: boolean; dataDir?: string }, cmd: Command) => {
      if (opts.list || !name) {
        if (opts.format !== 'table' && opts.format !== 'json') throw new ContinuityError('CONT_ERR_CONFIG', `--list prints a table or json (got --format ${JSON.stringify(opts.format)})`);
        // each parameter with its default (the deployment's settings included); a name
        // lists that query alone (it was ignored: a newcomer pass)
        const queries = describeQueries(configFrom(cmd.optsWithGlobals())).filter((q) => name === undefined || q.name === getQuery(name).name);
        if (opts.format === 'json') {
          // the document `GET /api/queries` answers (a break-it pass: --format was ignored)
          process.stdout.write(JSON.stringify({ queries }, null, 2) + '\n');
          return;
        }
        for (const q of queries) {
          const params = Object.entries(q.params).map(([k, t]) => `${k} ${t} = ${JSON.stringify(q.defaults[k])}`);
          process.stdout.write(`${q.name}: ${q.description}\n  params: ${params.join(', ')}\n  rows:   ${Object.entries(q.columns).map(([k, t]) => `${k} ${t}`).join(', ')}\n`);
        }
        return;
      }
      if (!['table', 'json', 'csv'].includes(opts.format)) throw new ContinuityError('CONT_ERR_CONFIG', `--format must be table, json or csv (got ${JSON.stringify(opts.format)}); for Arrow use continuity sql --format arrow`);
      const q = getQuery(name);
      const params = parseParams(opts.param ?? []);
      const config = configFrom(cmd.optsWithGlobals());
      const given = withQueryDefaults(q.name, params, config);
      const { rows, paths } = await withStore(
        config,
        async (store) => ({
          rows: await runQuery(store, q.name, given),
          // configured MCP paths that match no proxy line make every proxy-derived row
          // vanish: said on stderr, as the report does ("(no rows)" alone: a newcomer pass)
          paths: readsProxyLines(q.name) ? await checkMcpPaths(store, given, undefined, 'mcp_paths' in params ? 'mcp_paths' : undefined) : null,
        }),
        { read: true },
      );
      process.stdout.write(formatRows(rows, opts.format, Object.keys(q.columns)));
      if (paths?.warning) process.stderr.write(`warning: ${paths.warning}\n`);
    });
}
