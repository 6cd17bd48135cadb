import type { Command } from 'commander';
import type { Config } from '../../core/index.ts';
import { checkReportParams, withQueryDefaults } from '../../queries/index.ts';
import { buildContinuityReport, renderContinuityText } from '../../reports/index.ts';
import { configFrom, withStore } from '../context.ts';

/** Report flags shared by `report` and `analyze`. */
export interface ReportFlags {
  from?: string;
  to?: string;
  service?: string;
  environment?: string;
  window?: string;
  json?: boolean;
}

/** The report's flag for each query parameter it sets. */
const REPORT_FLAGS: Readonly<Record<string, string>> = { t_from: '--from', t_to: '--to', service: '--service', environment: '--environment', window_s: '--window' };

/**
 * Converts report flags to named-query parameters, over the deployment's defaults
 * (CONTINUITY_MCP_PATHS, CONTINUITY_REMINT_WINDOW_S) from `config`.
 * @throws ContinuityError CONT_ERR_CONFIG naming the flag for a bad value.
 */
export function reportParams(flags: ReportFlags, config: Pick<Config, 'mcpPaths' | 'remintWindowS'>): Record<string, unknown> {
  const p: Record<string, unknown> = {};
  if (flags.from) p.t_from = flags.from;
  if (flags.to) p.t_to = flags.to;
  if (flags.service) p.service = flags.service;
  if (flags.environment) p.environment = flags.environment;
  if (flags.window) p.window_s = flags.window;
  // checked here, so that an error names the flags typed, not the queries' parameters
  checkReportParams(p, REPORT_FLAGS);
  return withQueryDefaults(undefined, p, config);
}

/** Adds the report flags to a command. */
export function withReportOptions(cmd: Command): Command {
  return cmd
    .option('--from <time>', 'start of the range: ISO-8601 / RFC 3339 (an offset, or none: UTC), "YYYY-MM-DD[ hh:mm[:ss[.ffffff]]]" (UTC) or epoch seconds (eight digits that are also a date, 20261203, are refused as ambiguous)')
    .option('--to <time>', 'end of the range (exclusive), in the forms --from takes')
    .option('--service <name>', 'only this service')
    .option('--environment <name>', 'only this environment')
    .option('--window <seconds>', 'window for inferred re-mints and recoveries (default: CONTINUITY_REMINT_WINDOW_S, else 10)')
    .option('--json', 'print the report as one JSON object');
}

/** `continuity report [--json]`: the session-continuity report over what the store holds. */
export function registerReport(program: Command): void {
  withReportOptions(program.command('report').description('print the session-continuity report for the stored events')).action(
    async (opts: ReportFlags, cmd: Command) => {
      const config = configFrom(cmd.optsWithGlobals());
      const report = await withStore(config, (store) => buildContinuityReport(store, reportParams(opts, config)), { read: true });
      process.stdout.write(opts.json ? JSON.stringify(report, null, 2) + '\n' : renderContinuityText(report));
    },
  );
}
