import { constants as osConstants } from 'node:os';
import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import type { ImportProgress, ImportReport } from '../../collectors/index.ts';
import { ContinuityError } from '../../core/errors.ts';
import { hasherForConfig, deploymentKeyWarning } from '../../core/hash.ts';
import type { Config } from '../../core/config.ts';
import { oneLine } from '../../core/text.ts';
import { buildContinuityReport, importedLineCounts, renderContinuityText } from '../../reports/index.ts';
import { readRetention, type Retention, type Store } from '../../store/index.ts';
import { configFrom, withStore } from '../context.ts';
import { untilSignal } from '../signals.ts';
import { reportParams, withReportOptions, type ReportFlags } from './report.ts';

interface ImportFlags {
  errors?: string[];
  service?: string;
  environment?: string;
}

const collect = (v: string, acc: string[] = []) => [...acc, v];

/** How many inputs an import reads: the error logs, then the access logs. */
const files = (flags: ImportFlags, access: string[]) => (flags.errors ?? []).length + access.length;

/**
 * A label flag's value ('' when not given): at most 256 characters, as the queries'
 * `service` and `environment` parameters take (a longer one was cut to 256 on import,
 * and then refused by report: a break-it pass).
 * @throws ContinuityError CONT_ERR_CONFIG naming the flag.
 */
function labelFlag(flag: string, value: string | undefined): string {
  if (value !== undefined && value.length > 256) throw new ContinuityError('CONT_ERR_CONFIG', `${flag} takes at most 256 characters (got ${value.length})`);
  return value ?? '';
}

/** What stops an import: the first SIGINT, SIGTERM or SIGHUP ({@link stopOnSignal}). */
interface ImportStop {
  readonly signal: AbortSignal;
  /** The signal that stopped it, if one came. */
  by(): NodeJS.Signals | undefined;
  /** The store being written, once open (a second signal must not exit under a running statement). */
  store?: Store;
}

/**
 * Makes the first signal stop the import: the reading ends, and what was read is
 * written and recorded (an import killed by Node's default handler left its events
 * without their import_runs row and said nothing: a break-it pass). A second signal
 * exits at once (cli/signals.ts). Installed before the store opens, so a signal at
 * any point of the command ends it this way.
 */
function stopOnSignal(): ImportStop {
  const abort = new AbortController();
  let by: NodeJS.Signals | undefined;
  const stop: ImportStop = { signal: abort.signal, by: () => by };
  void untilSignal(
    () => 'the lines being written may be lost, and the input has no import_runs row',
    () => (stop.store?.statements ?? 0) > 0,
  ).then((signal) => {
    by = signal;
    abort.abort(new Error(signal));
  });
  return stop;
}

/** The exit status of a process a signal ended: 128 + its number (POSIX shells' `$?`; 130 for SIGINT). */
function exitStatusOf(signal: NodeJS.Signals): number {
  return 128 + (osConstants.signals[signal] ?? 2);
}

/**
 * Imports Caddy logs with a progress bar on a TTY (stderr), and prints rejected
 * lines with their line numbers and reasons to stderr. When a signal came (`stop`),
 * before every input was read (the report says `interrupted`) or after, it says so
 * on stderr, sets the exit status to 128 + the signal's number, and returns the report.
 * @throws ContinuityError CONT_ERR_NOTHING_IMPORTED when no access entry was read (and the import was not stopped).
 */
async function runImport(store: Store, config: Config, access: string[], flags: ImportFlags, stop: ImportStop): Promise<ImportReport> {
  stop.store = store;
  // (loaded here, not at start: the commands that import nothing would pay for the parsers)
  const { assertSomethingImported, importCaddyLogs } = await import('../../collectors/index.ts');
  const bar = process.stderr.isTTY
    ? new cliProgress.SingleBar(
        { format: 'importing {file} [{bar}] {percentage}% {value}/{total} MiB', hideCursor: true, clearOnComplete: true },
        cliProgress.Presets.shades_classic,
      )
    : undefined;
  let started = false;
  const onProgress = (p: ImportProgress) => {
    if (!bar || p.totalBytes === undefined || p.totalBytes < 8 << 20) return;
    const total = Math.ceil(p.totalBytes / 2 ** 20);
    if (!started) {
      bar.start(total, 0, { file: p.path });
      started = true;
    }
    bar.setTotal(total);
    bar.update(Math.floor(p.bytesRead / 2 ** 20), { file: p.path });
  };
  let report: ImportReport;
  const mismatch = deploymentKeyWarning(config);
  if (mismatch) process.stderr.write(mismatch + '\n');
  try {
    report = await importCaddyLogs(store, {
      access,
      errors: flags.errors ?? [],
      hasher: hasherForConfig(config),
      service: labelFlag('--service', flags.service),
      environment: labelFlag('--environment', flags.environment),
      onProgress,
      signal: stop.signal,
    });
  } finally {
    if (started) bar?.stop();
  }
  printRejects(report);
  printUnjoined(report);
  const stoppedBy = stop.by();
  if (stoppedBy !== undefined) {
    const at = report.files.at(-1);
    if (report.interrupted && at) {
      process.stderr.write(
        `interrupted by ${stoppedBy}: ${at.path} was read to line ${at.lines.read}` +
          (report.files.length < files(flags, access) ? `, and ${files(flags, access) - report.files.length} input(s) after it not at all` : '') +
          '; the lines read are stored and recorded. Import the input(s) again to finish: ' +
          'lines stored now are not counted twice\n',
      );
    } else {
      // The input had ended when the signal came: a Ctrl-C at a terminal also stops the
      // command writing into the pipe, whose end (perhaps mid-line) can come first; the
      // import is complete and said so (a newcomer pass: exit 0 and no word).
      process.stderr.write(
        `interrupted by ${stoppedBy} after the input(s) ended: every line read is stored and recorded` +
          (report.lines.rejected > 0 ? ' (a last line cut off by a stopped writer is rejected above)' : '') +
          '; if the input was cut short, import it again: lines stored now are not counted twice\n',
      );
    }
    process.exitCode = exitStatusOf(stoppedBy);
    return report;
  }
  warnExpired(report, await readRetention(store));
  warnRelabelled(report);
  if ((flags.errors ?? []).length === 0) await warnUpstreamErrorsReplaced(store, report);
  assertSomethingImported(report);
  return report;
}

/**
 * Says so when an input's lines were imported before under other labels: they carry
 * this import's now, and reads filtered by the old ones no longer find them (a newcomer
 * pass: a log imported with --service, then analyzed without it, was relabelled unsaid).
 */
function warnRelabelled(report: ImportReport): void {
  // (quoted, with control and bidi characters shown as escapes: core/text.ts)
  const labels = (l: { service: string; environment: string }) =>
    `${l.service ? `--service ${oneLine(JSON.stringify(l.service))}` : 'no --service'}${l.environment ? ` --environment ${oneLine(JSON.stringify(l.environment))}` : ' and no --environment'}`;
  for (const r of report.relabelled) {
    process.stderr.write(
      `warning: ${r.path} was imported before with ${r.before.map(labels).join(', and with ')}; its lines now carry ${labels(r.now)} ` +
        '(a line is stored once, with the labels of its last import). Import it again with the labels it should keep.\n',
    );
  }
}

/**
 * Says so when the input reaches back past the retention TTL: the store drops such
 * events in a merge it schedules right after writing them (the TTL is applied by merges,
 * not by the write), and the report would otherwise just be empty. The cutoff is the
 * one every write path uses (store/retention.ts); an import warns once for its time
 * range rather than dead-lettering each line of an old log.
 */
function warnExpired(report: ImportReport, retention: Retention): void {
  const share = expiredShare(report, retention);
  if (share === null || report.time_range === null) return;
  const all = share === 'all';
  process.stderr.write(
    `warning: ${all ? 'every entry' : 'some entries'} of this input (${report.time_range.first} .. ${report.time_range.last}) ` +
      `${all ? 'is' : 'are'} older than the ${retention.days}-day retention; the store drops those events. ` +
      'To keep such events, import them again with CONTINUITY_RETENTION_DAYS=0 (or enough days) set.\n',
  );
}

/**
 * How much of what `report` imported is older than the retention, by its time range:
 * `all`, `some`, or null (none, or nothing with a time was read).
 */
function expiredShare(report: ImportReport, retention: Retention): 'all' | 'some' | null {
  const cutoff = retention.cutoffMicros();
  if (report.time_range === null || !(Date.parse(report.time_range.first) * 1000 < cutoff)) return null;
  return Date.parse(report.time_range.last) * 1000 < cutoff ? 'all' : 'some';
}

/**
 * Says so when an access log imported before is imported again without --errors
 * while the store holds error-log imports: each line's newest copy wins (that is how
 * a re-import relabels its lines), so lines joined to an upstream error before lose
 * their `upstream_error` (no named query counts it; ad hoc SQL reads it). "May": an
 * insert identical to an earlier one (the same lines without errors imported before)
 * is dropped as a duplicate and replaces nothing. Found by a newcomer pass: the
 * re-import dropped 9 of 9 silently.
 */
async function warnUpstreamErrorsReplaced(store: Store, report: ImportReport): Promise<void> {
  const hashes = report.files.filter((f) => f.kind === 'access' && f.decoded_hash !== '').map((f) => f.decoded_hash);
  if (hashes.length === 0) return;
  const [row] = await store.query<{ again: number; errors: number }>(
    `SELECT
         (SELECT count() FROM (SELECT decoded_hash FROM import_runs WHERE kind = 'caddy_access' AND decoded_hash IN {hashes:Array(String)}
                               GROUP BY decoded_hash HAVING count() > 1)) AS again,
         (SELECT count() FROM import_runs WHERE kind = 'caddy_error') AS errors`,
    { hashes },
  );
  if (!row || Number(row.again) === 0 || Number(row.errors) === 0) return;
  process.stderr.write(
    `warning: ${Number(row.again)} of these access log(s) ${Number(row.again) === 1 ? 'was' : 'were'} imported before, and this import has no --errors: ` +
      'their lines replace the stored copies (the newest copy of a line wins), so lines joined to an upstream error before may lose ' +
      'their upstream_error; import them again with --errors <error.log> to keep it.\n',
  );
}

/**
 * Warns when error-log entries were read and none joined an access line: an entry
 * joins only the access lines read after it (Caddy writes the error before the
 * access line), so a combined log whose error lines come last (`cat access.log
 * error.log`) joins nothing, silently (a break-it pass).
 */
function printUnjoined(report: ImportReport): void {
  if (report.error_entries === 0 || report.joined_upstream_errors > 0 || report.proxy_access === 0) return;
  process.stderr.write(
    `warning: ${report.error_entries} upstream error entries were read and none joined an access line: an entry joins only the access lines read after it, ` +
      'as Caddy writes them; give the error log with --errors <error.log> (read first), or keep a combined log in the order Caddy wrote it.\n',
  );
}

function printRejects(report: ImportReport): void {
  if (report.lines.rejected === 0) return;
  process.stderr.write(`${report.lines.rejected} line(s) rejected: ${JSON.stringify(report.rejects_by_reason)}\n`);
  for (const r of report.rejects.slice(0, 20)) process.stderr.write(`  ${r.file}:${r.line}: ${r.reason}${r.detail ? ` (${r.detail})` : ''}\n`);
  if (report.lines.rejected > 20) process.stderr.write(`  … all of them are in the dead_letters table (continuity sql "SELECT * FROM dead_letters")\n`);
}

/**
 * Every input of an import readable, checked before the store is opened (which creates
 * it): collectors/caddy/import.ts `checkImportInputs`.
 * @throws ContinuityError CONT_ERR_INPUT_UNREADABLE naming the path.
 */
async function checkInputsFirst(access: string[], flags: ImportFlags): Promise<void> {
  const { checkImportInputs } = await import('../../collectors/index.ts');
  await checkImportInputs([...access, ...(flags.errors ?? [])]);
}

/** `continuity import caddy <files…> [--errors <error.log>]`. */
export function registerImport(program: Command): void {
  const imp = program.command('import').description('import observations into the store');
  imp
    .command('caddy')
    .description('import Caddy v2 JSON access logs (plain or gzip; - for stdin), joined with error logs')
    .argument('<files...>', 'access logs (or combined access+error logs)')
    .option('-e, --errors <error.log>', 'a Caddy error log, for upstream errors (repeatable)', collect)
    .option('--service <name>', 'the service name to record on the events')
    .option('--environment <name>', 'the environment to record on the events (as a server\'s deployment.environment.name), so --environment filters keep them')
    .option('--json', 'print the import report as JSON')
    .action(async (files: string[], flags: ImportFlags & { json?: boolean }, cmd: Command) => {
      const config = configFrom(cmd.optsWithGlobals());
      // (an unreadable input left an empty store behind, which later reads took for one: a newcomer pass)
      await checkInputsFirst(files, flags);
      const stop = stopOnSignal();
      const report = await withStore(config, (store) => runImport(store, config, files, flags, stop));
      if (flags.json) process.stdout.write(JSON.stringify(report, null, 2) + '\n');
      else {
        const l = report.lines;
        process.stdout.write(
          `imported ${l.parsed} of ${l.read} lines (${l.rejected} rejected, ${l.skipped} skipped, ${l.blank} blank): ` +
            `${report.proxy_access} proxy_access, ${report.auth_challenges} auth_challenge events; ` +
            `${report.joined_upstream_errors} joined to upstream errors\n`,
        );
      }
    });
}

/** `continuity analyze <access.log…> [--errors <error.log>] [--json]`: import, then report. */
export function registerAnalyze(program: Command): void {
  withReportOptions(
    program
      .command('analyze')
      .description('import Caddy logs and print the session-continuity report (the main job); --service and --environment also label the imported lines')
      .argument('<files...>', 'Caddy access logs (plain or gzip; - for stdin)')
      .option('-e, --errors <error.log>', 'a Caddy error log, for upstream errors (repeatable)', collect),
  ).action(async (files: string[], flags: ImportFlags & ReportFlags, cmd: Command) => {
    const config = configFrom(cmd.optsWithGlobals());
    // the report's flags checked before anything is imported
    const params = reportParams(flags, config);
    await checkInputsFirst(files, flags);
    const stop = stopOnSignal();
    const report = await withStore(config, async (store) => {
      const imported = await runImport(store, config, files, flags, stop);
      if (stop.by() !== undefined) return undefined; // (runImport said so and set the exit status)
      const l = imported.lines;
      // the report's words when every line was older than the retention (a newcomer pass: it said to check --from/--to)
      const retention = await readRetention(store);
      const expired = expiredShare(imported, retention);
      // what else the store holds: the report is over all of it (importedLineCounts
      // counts each content once, so this input's lines are in its total once)
      const inStore = await importedLineCounts(store);
      const [server] = await store.query<{ n: number | string }>("SELECT count() AS n FROM events WHERE source = 'server'");
      const others = { lines: Math.max(0, inStore.read - l.read), server_events: Number(server?.n ?? 0) };
      // (blank lines are skipped lines in the report, as in the store's counts: the four add up)
      return buildContinuityReport(store, params, {
        read: l.read,
        parsed: l.parsed,
        rejected: l.rejected,
        skipped: l.skipped + l.blank,
        scope: 'import',
        others,
        // (the store's retention always, as `report` gives it: a newcomer pass missed it here)
        retention_days: retention.days,
        ...(expired === null ? {} : { expired }),
      });
    });
    if (report === undefined) return; // interrupted: runImport said so and set the exit status
    const late = stop.by();
    if (late !== undefined) {
      // (a signal while the report's queries ran: they cannot be cancelled, so it came now)
      process.stderr.write(`interrupted by ${late} after the import: the report is not printed; \`continuity report\` prints it from the store\n`);
      process.exitCode = exitStatusOf(late);
      return;
    }
    process.stdout.write(flags.json ? JSON.stringify(report, null, 2) + '\n' : renderContinuityText(report));
  });
}
