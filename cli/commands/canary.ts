import { existsSync, realpathSync } from 'node:fs';
import { delimiter, isAbsolute, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CommanderError, type Command } from 'commander';
import { ContinuityError, ERROR_CODES, isContinuityError, type ErrorCode } from '../../core/errors.ts';
import {
  buildCanaryReport,
  CANARY_FORMATS,
  DEFAULT_AFTER_S,
  describeGates,
  loadGatesFile,
  parseDuration,
  renderCanary,
  shellQuote,
  type CanaryFormat,
} from '../../reports/index.ts';
import { configFrom, outputFailure, reportError, withStore } from '../context.ts';

interface CanaryFlags {
  deploy?: string;
  url?: string;
  token?: string;
  after: string;
  baseline?: string;
  format: string;
  gates?: string;
  service?: string;
  environment?: string;
}

const HELP = `
Gates (defaults; override any of them in a JSON or YAML --gates file):
${describeGates()
  .map((l) => `  ${l}`)
  .join('\n')}

Gates file example (YAML; unknown gates or fields are refused):
  proxy_5xx_in_gap: { max: 3 }
  invalid_token_rate: { ratio: 3, margin_pp: 0.5 }
  unsettled_at_shutdown: { enabled: false }

Windows: the deploy window runs from the restart's down_from (the previous boot's
shutdown or last 2xx; for a restart only the proxy log shows, the last response the
upstream served before the gap, whatever its status) to --after past the boot, or to the service's next restart when that
comes sooner; the baseline is as long, just before.
Bounds: one-sided 95% Clopper–Pearson lower bounds on the share of sessions that kept
working and of requests that succeeded, with the clean observations still needed for 99%.

Deploy: a release names its most recent restart (a release deployed to several services needs
--service), a boot_id that restart, latest the most recent restart, a time the last restart up
at or before it.

Exit codes: 0 pass, 1 fail, 2 cannot evaluate (unknown or ambiguous deploy, no events, no gate
evaluated, bad flags or gates file, or CONTINUITY_MCP_PATHS matching no proxy line of the deploy
window with no server events in it); with --format json, stdout is a JSON document once the
flags parse, an error's too.`;

/**
 * `continuity canary --deploy <release|boot_id|latest|time> [--after 15m] [--baseline <duration>]
 * [--format md|json|html] [--gates <file>] [--service <name>]`: the post-deploy canary
 * report, with an exit code a pipeline can gate on.
 */
export function registerCanary(program: Command): void {
  program
    .command('canary')
    .description('post-deploy canary: gates over one deploy window and success bounds; exit 0 pass, 1 fail, 2 cannot evaluate')
    .option('--deploy <release|boot_id|latest|time>', 'the deploy: a release, a boot_id, latest (the most recent restart), or a time (ISO-8601, a date (its midnight, UTC), or epoch seconds of 9 digits or more: the last restart up at or before it)')
    .option('--after <duration>', 'how long after the boot the deploy window runs (e.g. 90s, 15m, 1h; a bare number is seconds)', `${DEFAULT_AFTER_S / 60}m`)
    .option('--baseline <duration>', 'baseline length before the restart, a duration like --after (default: as long as the deploy window)')
    .option('--format <format>', 'md | json | html', 'md')
    .option('--gates <file>', 'a JSON or YAML file overriding gate thresholds (- : standard input)')
    .option('--service <name>', 'only this service')
    .option('--environment <name>', 'only this environment')
    .option('--url <base>', 'ask a running `continuity serve` (e.g. http://127.0.0.1:4318), which owns the store, instead of opening it')
    .option('--token <token>', 'with --url: its bearer token (env CONTINUITY_INGEST_TOKEN)')
    .addHelpText('after', HELP)
    // a usage error (unknown flag, missing value, stray argument) cannot judge the
    // deploy either: 2, not commander's 1, which a pipeline reads as a failed gate
    .exitOverride((err) => {
      throw err.exitCode === 0 ? err : new CommanderError(2, err.code, err.message);
    })
    .action(async (opts: CanaryFlags, cmd: Command) => {
      // Every error means the deploy could not be judged: exit 2, never 1 (1 is a failed gate).
      // So is a report that could not be written (a full disk: a break-it pass got 1).
      outputFailure.exitCode = 2;
      try {
        if (!opts.deploy?.trim()) throw new ContinuityError('CONT_ERR_CONFIG', '--deploy is required: a release, a boot_id, latest, or a time');
        if (!CANARY_FORMATS.includes(opts.format as CanaryFormat)) {
          throw new ContinuityError('CONT_ERR_CONFIG', `--format: ${JSON.stringify(opts.format)}; one of ${CANARY_FORMATS.join(', ')}`);
        }
        const afterS = parseDuration(opts.after, '--after');
        const baselineS = opts.baseline === undefined ? undefined : parseDuration(opts.baseline, '--baseline');
        const stdinFd = Number(process.env.CONTINUITY_STDIN_FD);
        const gates = opts.gates === undefined ? undefined : loadGatesFile(opts.gates, Number.isInteger(stdinFd) && stdinFd > 2 ? stdinFd : undefined);
        if (opts.url !== undefined) {
          // serve owns the store while it runs: its /api/canary judges the deploy there
          const config = configFrom({ ...cmd.optsWithGlobals(), ingestToken: opts.token });
          const answer = await askServe(opts.url, config.ingestToken, {
            deploy: opts.deploy,
            after: opts.after,
            ...(opts.baseline === undefined ? {} : { baseline: opts.baseline }),
            ...(opts.service === undefined ? {} : { service: opts.service }),
            ...(opts.environment === undefined ? {} : { environment: opts.environment }),
            format: opts.format,
            ...(gates === undefined ? {} : { gates }),
          });
          process.stdout.write(answer.body);
          process.exitCode = answer.exitCode;
          return;
        }
        // (a token given without --url was ignored unsaid: a newcomer pass)
        if (opts.token !== undefined) throw new ContinuityError('CONT_ERR_CONFIG', '--token is the bearer token of --url (a serve to ask); without --url the canary reads the store itself and takes no token');
        const config = configFrom(cmd.optsWithGlobals());
        const report = await withStore(config, (store) =>
          buildCanaryReport(store, {
            deploy: opts.deploy!,
            afterS,
            baselineS,
            service: opts.service,
            environment: opts.environment,
            mcpPaths: config.mcpPaths,
            remintWindowS: config.remintWindowS,
            gates,
            // a next step pasted as printed reads the same store (a newcomer pass: it read ./.continuity)
            // (and by the name this CLI was started by: in a clone that is ./bin/continuity.mjs, not `continuity`)
            command: dataDirGiven(cmd) ? `${invokedAs()} --data-dir=${shellQuote(config.dataDir)}` : invokedAs(),
          }),
          { read: true },
        );
        process.stdout.write(renderCanary(report, opts.format as CanaryFormat));
        process.exitCode = report.exit_code;
      } catch (err) {
        reportError(err);
        // a pipeline reading --format json gets a document either way
        if (opts.format === 'json') {
          const error = isContinuityError(err) ? { code: err.code, message: err.message } : { code: 'INTERNAL', message: (err as Error).message };
          process.stdout.write(JSON.stringify({ verdict: 'cannot_evaluate', exit_code: 2, reason: `${error.code}: ${error.message}`, error }, null, 2) + '\n');
        }
        process.exitCode = 2;
      }
    });
}

/**
 * POSTs a canary request to `continuity serve`'s `/api/canary` at `base` and returns
 * the rendered report and the exit code its `x-continuity-exit-code` header gives.
 * @throws ContinuityError: the server's coded error (its code, when this registry has
 *   it), CONT_ERR_API_UNAVAILABLE when `base` cannot be reached or answers no report,
 *   CONT_ERR_CONFIG for a `base` that is not an http(s) URL.
 */
async function askServe(base: string, token: string | undefined, body: Record<string, unknown>): Promise<{ body: string; exitCode: number }> {
  let url: URL;
  try {
    url = new URL('api/canary', base.endsWith('/') ? base : `${base}/`);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(url.protocol);
  } catch {
    // (one holding an @, as user info would, is not repeated: the message reaches a
    // pipeline's logs, and a password with / ? # in it escaped a masking; a break-it pass)
    const shown = base.includes('@') ? 'the value given (not repeated: it holds an @, as user info would)' : JSON.stringify(base);
    throw new ContinuityError('CONT_ERR_CONFIG', `--url: ${shown} is not an http(s) URL (e.g. http://127.0.0.1:4318, what serve prints as "listening on")`);
  }
  // credentials in the URL were printed back in errors and never the way to authenticate (a break-it pass)
  if (url.username !== '' || url.password !== '') {
    throw new ContinuityError('CONT_ERR_CONFIG', `--url: ${url.origin} carries user info (user:password@), which is neither sent nor printed; give the token with --token or CONTINUITY_INGEST_TOKEN`);
  }
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(300_000),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new ContinuityError('CONT_ERR_API_UNAVAILABLE', `${url.origin}: ${cause?.code ?? cause?.message ?? (err as Error).message} (is continuity serve running there?)`, { cause: err });
  }
  let text: string;
  try {
    text = await readCapped(res, ANSWER_MAX_BYTES);
  } catch (err) {
    if (isContinuityError(err)) throw err;
    throw new ContinuityError('CONT_ERR_API_UNAVAILABLE', `${url.origin}: the answer was cut off (${(err as Error).message})`, { cause: err });
  }
  // A report only with both headers, agreeing, and (json) a document that says the same:
  // any server answering 200 would otherwise pass every deploy (a break-it pass: no
  // header read as exit 0).
  const verdictHeader = res.headers.get('x-continuity-verdict');
  const codeHeader = res.headers.get('x-continuity-exit-code');
  const exitCode = codeHeader !== null && /^[012]$/.test(codeHeader) ? Number(codeHeader) : undefined;
  if (res.ok && exitCode !== undefined && VERDICT_EXIT[verdictHeader ?? ''] === exitCode && jsonAgrees(body.format, text, verdictHeader!, exitCode)) {
    return { body: text, exitCode };
  }
  let coded: { code?: string; message?: string } = {};
  try {
    coded = JSON.parse(text) as typeof coded;
  } catch {
    // not a coded error: a proxy's page, another server
  }
  if (coded.code !== undefined && Object.hasOwn(ERROR_CODES, coded.code)) {
    // the server's error as it raised it (its message starts with the registry's words)
    const code = coded.code as ErrorCode;
    const prefix = `${ERROR_CODES[code].message}: `;
    const detail = coded.message?.startsWith(prefix) ? coded.message.slice(prefix.length) : coded.message;
    throw new ContinuityError(code, `${detail ?? ''} (${url.origin} answered ${res.status})`, { details: { status: res.status } });
  }
  throw new ContinuityError('CONT_ERR_API_UNAVAILABLE', `${url.origin} answered ${res.status} without a canary report: ${text.slice(0, 200)}`, { details: { status: res.status } });
}

/** The exit code of each verdict (reports/canary.ts). */
const VERDICT_EXIT: Readonly<Record<string, number>> = { pass: 0, fail: 1, cannot_evaluate: 2 };
/** The most of an answer `--url` reads, bytes: a report is tens of KB. */
const ANSWER_MAX_BYTES = 32 << 20;

/** With `--format json`, the document's verdict and exit code are the headers'. */
function jsonAgrees(format: unknown, text: string, verdict: string, exitCode: number): boolean {
  if (format !== 'json') return true;
  try {
    const doc = JSON.parse(text) as { verdict?: unknown; exit_code?: unknown };
    return doc.verdict === verdict && doc.exit_code === exitCode;
  } catch {
    return false;
  }
}

/**
 * The body of `res` as text, at most `max` bytes.
 * @throws ContinuityError CONT_ERR_API_UNAVAILABLE over `max`; the stream's error when it is cut.
 */
async function readCapped(res: Response, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const chunk of res.body ?? []) {
    n += (chunk as Uint8Array).length;
    if (n > max) throw new ContinuityError('CONT_ERR_API_UNAVAILABLE', `the answer is over ${max} bytes: no canary report is that long`);
    chunks.push(Buffer.from(chunk as Uint8Array));
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** This package's launcher, bin/continuity.mjs (absolute). */
const LAUNCHER = fileURLToPath(new URL('../../bin/continuity.mjs', import.meta.url));

/**
 * How to run this CLI in a command a reader pastes: `continuity` when that name on the
 * PATH is this package's launcher (`npm link`, a global install), else the launcher's
 * path, `./`-relative when it lies under the working directory, absolute otherwise;
 * shell-quoted. Not the script the process was started with: under `npm run continuity`
 * that is cli/main.ts (no shebang), under `npx` a shim off the PATH (a break-it pass).
 * @param path the PATH to search (default process.env.PATH)
 */
export function invokedAs(cwd = process.cwd(), path = process.env.PATH ?? '', launcher = LAUNCHER): string {
  const same = (p: string): boolean => {
    try {
      return realpathSync(p) === realpathSync(launcher);
    } catch {
      return false;
    }
  };
  const first = path.split(delimiter).filter(Boolean).map((dir) => join(dir, 'continuity')).find((p) => existsSync(p));
  if (first !== undefined && same(first)) return 'continuity';
  const rel = relative(cwd, launcher);
  return shellQuote(rel !== '' && !rel.startsWith('..') && !isAbsolute(rel) ? `./${rel}` : launcher);
}

/** True when the data directory was named (`--data-dir` or CONTINUITY_DATA_DIR), not the default. */
function dataDirGiven(cmd: Command): boolean {
  return Boolean((cmd.optsWithGlobals() as { dataDir?: string }).dataDir || process.env.CONTINUITY_DATA_DIR);
}
