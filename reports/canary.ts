import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { extname } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { z } from 'zod';
import { ContinuityError, isContinuityError } from '../core/errors.ts';
import { isoMicros, parseTimeMicros } from '../core/time.ts';
import { checkMcpPaths, countChallenges, countSessionOutcomes, countSessionsAcross, eventSpan, listServerRestarts, MAX_TIME_PARAM_MICROS, MIN_TIME_PARAM_MICROS, runQuery, type EndpointPathsMemo, type EventSpan, type McpPathsCheck } from '../queries/index.ts';
import type { Store } from '../store/index.ts';
import { additionalSuccessesNeeded, clopperPearsonLower } from './bounds.ts';

/**
 * The post-deploy canary report (DESIGN §4, last paragraph): gates with pass/fail
 * over one deploy's window, an exit code for pipelines, and success proportions
 * with exact one-sided Clopper–Pearson bounds. Every number is read through the
 * named queries (queries/registry.ts) with `t_from`/`t_to`/`service` bound, or
 * through the checks there that answer one narrow question from the same fragments
 * (listServerRestarts, countSessionsAcross, countSessionOutcomes, countChallenges,
 * checkMcpPaths); this file holds no SQL.
 *
 * Windows (all half-open, UTC, µs precision in the report, ms in query params):
 * - deploy window W = [down_from, boot + after): from the restart's `down_from`
 *   (the previous boot's shutdown, else its last 2xx; proxy-inferred: the last
 *   upstream-served response before the gap) to `after` (default 15 min) past the
 *   boot (proxy-inferred: the first served response after the gap), or to the
 *   service's next restart's `down_from` when that comes sooner (with a note).
 * - baseline B = [down_from − baseline, down_from); baseline defaults to |W|.
 * - life range L = [start of the boot that ended, end of W): where a question
 *   needs what the sessions did before the deploy (refused misses on sessions the
 *   server knew, sessions that survived, arrivals in flight at shutdown).
 */

// ---------------------------------------------------------------------------
// Gates and their thresholds

/** The five gates, in report order. */
export const GATE_IDS = ['proxy_5xx_in_gap', 'refused_after_boot', 'unsettled_at_shutdown', 'sessions_lost_tools', 'invalid_token_rate'] as const;
export type GateId = (typeof GATE_IDS)[number];

/** A count gate: fails when the count exceeds `max`. */
export interface CountGateConfig {
  readonly enabled: boolean;
  /** Largest count that still passes (an integer ≥ 0). */
  readonly max: number;
}

/**
 * The invalid_token rate gate: fails when the deploy window's rate exceeds
 * max(ratio × baseline rate, baseline rate + margin_pp percentage points).
 */
export interface RateGateConfig {
  readonly enabled: boolean;
  /** Multiple of the baseline rate that still passes (≥ 1). */
  readonly ratio: number;
  /** Absolute allowance over the baseline, in percentage points (0–100). */
  readonly margin_pp: number;
}

/** Thresholds for every gate (defaults: {@link DEFAULT_GATES}). */
export interface GatesConfig {
  readonly proxy_5xx_in_gap: CountGateConfig;
  readonly refused_after_boot: CountGateConfig;
  readonly unsettled_at_shutdown: CountGateConfig;
  readonly sessions_lost_tools: CountGateConfig;
  readonly invalid_token_rate: RateGateConfig;
}

/**
 * Default thresholds. A clean deploy of an MCP server behind a proxy produces
 * none of the counted events, so every count gate allows 0:
 * 1. `proxy_5xx_in_gap` max 0 — proxy-generated 5xx (the proxy could not reach the
 *    upstream) in the restart gap: requests the clients saw fail.
 * 2. `refused_after_boot` max 0 — refused misses after the boot on sessions active
 *    before it (reason unknown_after_boot): the server forgot live sessions.
 * 3. `unsettled_at_shutdown` max 0 — arrivals of the boot that ended which never
 *    settled: the process died under them (standalone GET streams, which every
 *    shutdown closes, are not counted: settlements.sql `streams_open`).
 * 4. `sessions_lost_tools` max 0 — sessions refused in the deploy window and never
 *    recovered (no re-mint, no re-initialize): those chats lost their tools; a
 *    session refused already before the window (an earlier restart broke it) is
 *    reported apart (session_continuity.sql `unrecovered_new`).
 * 5. `invalid_token_rate` ratio 2, margin_pp 1 — challenges of class invalid_token
 *    or expired_token per request: fails when the deploy rate exceeds
 *    max(2 × baseline, baseline + 1 percentage point), e.g. a deploy that rotated
 *    the token-signing key or lost the token cache.
 */
export const DEFAULT_GATES: GatesConfig = Object.freeze({
  proxy_5xx_in_gap: Object.freeze({ enabled: true, max: 0 }),
  refused_after_boot: Object.freeze({ enabled: true, max: 0 }),
  unsettled_at_shutdown: Object.freeze({ enabled: true, max: 0 }),
  sessions_lost_tools: Object.freeze({ enabled: true, max: 0 }),
  invalid_token_rate: Object.freeze({ enabled: true, ratio: 2, margin_pp: 1 }),
});

const GATE_TITLES: Readonly<Record<GateId, string>> = {
  proxy_5xx_in_gap: 'proxy-generated 5xx in the restart gap',
  refused_after_boot: 'refused misses after the boot on sessions active before it',
  unsettled_at_shutdown: 'arrivals unsettled at shutdown (the boot that ended)',
  sessions_lost_tools: 'sessions that lost their tools in the deploy window (refused there, never recovered)',
  invalid_token_rate: 'invalid_token rate against the baseline',
};

/** The gates and their defaults in words, for `--help` and the docs (generated from {@link DEFAULT_GATES}). */
export function describeGates(gates: GatesConfig = DEFAULT_GATES): string[] {
  return GATE_IDS.map((id, i) => `${i + 1}. ${id}: ${GATE_TITLES[id]}; ${thresholdText(id, gates)}`);
}

function thresholdText(id: GateId, gates: GatesConfig): string {
  if (id === 'invalid_token_rate') {
    const g = gates.invalid_token_rate;
    return `fail when the deploy rate > max(${g.ratio} × baseline, baseline + ${g.margin_pp} pp)`;
  }
  return `at most ${gates[id].max}`;
}

const CountGateSchema = z.strictObject({
  enabled: z.boolean().optional(),
  max: z.number().int().min(0).optional(),
});
const RateGateSchema = z.strictObject({
  enabled: z.boolean().optional(),
  ratio: z.number().min(1).max(1000).optional(),
  margin_pp: z.number().min(0).max(100).optional(),
});
/**
 * A gates file: any subset of the gates, each with any subset of its fields;
 * what is left out keeps its default. Unknown gates and fields are refused, so a
 * typo cannot silently leave a default in force. Example (YAML):
 *
 *     version: 1
 *     proxy_5xx_in_gap: { max: 3 }
 *     invalid_token_rate: { ratio: 3, margin_pp: 0.5 }
 *     unsettled_at_shutdown: { enabled: false }
 */
export const GatesFileSchema = z.strictObject({
  version: z.literal(1).optional(),
  proxy_5xx_in_gap: CountGateSchema.optional(),
  refused_after_boot: CountGateSchema.optional(),
  unsettled_at_shutdown: CountGateSchema.optional(),
  sessions_lost_tools: CountGateSchema.optional(),
  invalid_token_rate: RateGateSchema.optional(),
});

/**
 * Parses and validates a gates file's text (JSON, or YAML — a superset of JSON)
 * and merges it over the defaults.
 * @param text the file contents
 * @param file the path, named in errors
 * @returns the frozen thresholds.
 * @throws ContinuityError CONT_ERR_CONFIG naming the file and each bad field
 *   (`details.file`, `details.fields`).
 */
export function parseGates(text: string, file: string): GatesConfig {
  if (Buffer.byteLength(text) > GATES_MAX_BYTES) {
    throw new ContinuityError('CONT_ERR_CONFIG', `gates file ${file}: over ${GATES_MAX_BYTES} bytes; a gates file holds a few thresholds`, { details: { file, fields: [] } });
  }
  let raw: unknown;
  const isJson = extname(file).toLowerCase() === '.json';
  // A byte order mark is not part of the text (RFC 8259 §8.1 lets a parser ignore it;
  // the YAML parser did, JSON.parse refused it: a break-it pass)
  text = text.replace(/^\uFEFF/, '');
  try {
    // A .json file must be JSON (the YAML parser alone took a trailing comma), and is
    // read by the YAML 1.2 parser too (JSON is a subset of it), which refuses a
    // repeated key where JSON.parse would keep the last one silently.
    if (isJson) JSON.parse(text);
    // (warnings, such as an unknown tag `!foo`, are errors here: the parser printed them
    // raw on stderr as a Node warning and kept the value as a string; a break-it pass)
    const docs = parseAllDocuments(text, { logLevel: 'silent' });
    // (one document: a second after `---` was dropped silently; a break-it pass)
    if (Array.isArray(docs) && docs.length > 1) throw new Error(`${docs.length} documents (separated by ---); a gates file is one`);
    const doc = Array.isArray(docs) ? docs[0] : undefined;
    const problem = doc?.errors[0] ?? doc?.warnings[0];
    if (problem) throw problem;
    raw = doc?.toJS() ?? null;
  } catch (err) {
    const what = isJson ? 'JSON' : 'YAML';
    // (the YAML parser's first line ends in a colon before its excerpt of the file: the
    // message ended "… at line 2, column 1:", a newcomer pass)
    throw new ContinuityError('CONT_ERR_CONFIG', `gates file ${file}: not valid ${what}: ${firstLine((err as Error).message).replace(/:\s*$/, '')}`, {
      cause: err,
      details: { file, fields: [] },
    });
  }
  // A YAML tag can make a value that JSON has no word for (!!binary a Buffer,
  // !!timestamp a Date, !!set a Set): the schema then listed every method of a Buffer
  // as an unknown field (16 KB of error; a break-it pass). Name the field instead.
  const odd = notPlainData(raw, []);
  if (odd !== undefined) {
    const field = odd.join('.') || '(top level)';
    throw new ContinuityError('CONT_ERR_CONFIG', `gates file ${file}: field ${field}: not a number, boolean or mapping (a YAML tag such as !!binary or !!timestamp, or an alias to a node that holds it, made it something else)`, {
      details: { file, fields: [field] },
    });
  }
  return gatesFromData(raw, `gates file ${file}`, file);
}

/**
 * Validates gate thresholds already read as plain data (a gates file's document, or the
 * parsed `gates` object of a `POST /api/canary` body) and merges them over the defaults.
 * @param raw the data; `{}` keeps every default. None at all (null, undefined: an empty
 *   file, one of only comments, `gates: null`) is refused: a template that rendered to
 *   nothing judged the deploy on the defaults without a word (a break-it pass).
 * @param what names the source in errors (`gates file x.yaml`, `gates`).
 * @param file `details.file` of an error.
 * @returns the frozen thresholds.
 * @throws ContinuityError CONT_ERR_CONFIG naming each bad field (at most 10; `details.fields`).
 */
export function gatesFromData(raw: unknown, what: string, file: string): GatesConfig {
  if (raw === null || raw === undefined) {
    throw new ContinuityError('CONT_ERR_CONFIG', `${what}: holds no gates (empty, null or only comments); give the gates to change, {} for the defaults, or leave them out`, {
      details: { file, fields: [] },
    });
  }
  const parsed = GatesFileSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.flatMap((i) => {
      // an unknown key is reported on its parent; name the key itself
      const keys = i.code === 'unrecognized_keys' ? i.keys : [undefined];
      return keys.map((k) => {
        const field = [...i.path, ...(k === undefined ? [] : [k])].map(String).join('.') || '(top level)';
        // (at the top level the key is a gate's name; below, a gate's field)
        const gate = GatesFileSchema.shape[String(i.path[0]) as keyof typeof GatesFileSchema.shape]?.unwrap();
        const fields = gate instanceof z.ZodObject ? ` (its fields: ${Object.keys(gate.shape).join(', ')})` : '';
        const unknown = i.path.length === 0 ? 'unknown gate' : `unknown field of gate ${String(i.path[0])}${fields}`;
        return { field, message: k === undefined ? i.message : unknown };
      });
    });
    const listed = issues.slice(0, 10).map((i) => `field ${i.field}: ${i.message}`);
    if (issues.length > 10) listed.push(`and ${issues.length - 10} more`);
    // (the gates there are, once)
    if (issues.some((i) => i.message === 'unknown gate')) listed.push(`the gates: ${GATE_IDS.join(', ')}`);
    throw new ContinuityError('CONT_ERR_CONFIG', `${what}: ${listed.join('; ')}`, {
      details: { file, fields: issues.slice(0, 10).map((i) => i.field), issues: issues.slice(0, 10) },
    });
  }
  const f = parsed.data;
  const count = (id: Exclude<GateId, 'invalid_token_rate'>): CountGateConfig =>
    Object.freeze({ enabled: f[id]?.enabled ?? DEFAULT_GATES[id].enabled, max: f[id]?.max ?? DEFAULT_GATES[id].max });
  const rate = DEFAULT_GATES.invalid_token_rate;
  return Object.freeze({
    proxy_5xx_in_gap: count('proxy_5xx_in_gap'),
    refused_after_boot: count('refused_after_boot'),
    unsettled_at_shutdown: count('unsettled_at_shutdown'),
    sessions_lost_tools: count('sessions_lost_tools'),
    invalid_token_rate: Object.freeze({
      enabled: f.invalid_token_rate?.enabled ?? rate.enabled,
      ratio: f.invalid_token_rate?.ratio ?? rate.ratio,
      margin_pp: f.invalid_token_rate?.margin_pp ?? rate.margin_pp,
    }),
  });
}

/**
 * The path to the first value in `v` that is not plain data (a mapping with the plain
 * object prototype, a sequence, a string, number, boolean or null), or undefined.
 */
function notPlainData(v: unknown, path: string[], within: ReadonlySet<object> = new Set()): string[] | undefined {
  if (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return undefined;
  // a value inside itself (a YAML alias to an enclosing node, `a: &a [*a]`) is no plain
  // data either: following it overflowed the stack (a break-it pass)
  if (typeof v === 'object' && within.has(v)) return path;
  if (Array.isArray(v)) {
    const inner = new Set(within).add(v);
    for (let i = 0; i < v.length; i++) {
      const odd = notPlainData(v[i], [...path, String(i)], inner);
      if (odd) return odd;
    }
    return undefined;
  }
  if (typeof v === 'object' && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null)) {
    const inner = new Set(within).add(v);
    for (const [k, x] of Object.entries(v)) {
      const odd = notPlainData(x, [...path, k], inner);
      if (odd) return odd;
    }
    return undefined;
  }
  return path;
}

/**
 * Reads a gates file (`.json` as JSON, anything else as YAML) and validates it.
 * @param file a path, or `-`: standard input, read from `stdinFd` (bin/continuity.mjs
 *   hands a command given `-` its standard input on a descriptor of its own).
 * @throws ContinuityError CONT_ERR_CONFIG when the file cannot be read, is over 1 MiB,
 *   names standard input by a path (/dev/stdin: give `-`), or a field is invalid.
 */
export function loadGatesFile(file: string, stdinFd?: number): GatesConfig {
  if (STDIN_PATHS.has(file)) {
    throw new ContinuityError('CONT_ERR_CONFIG', `gates file ${file}: standard input is not open to this command by that name; give --gates - to read the gates from standard input`, {
      details: { file, fields: [] },
    });
  }
  let text: string;
  let fd: number | undefined;
  try {
    fd = file === '-' ? stdinFd : openSync(file, 'r');
    if (fd === undefined) throw Object.assign(new Error('standard input is not open to this command'), { code: 'EBADF' });
    // standard input by another name (/dev//stdin, a link to it): the file opened is the
    // command's fd 0, which bin/continuity.mjs made /dev/null (a break-it pass: read as empty)
    if (file !== '-' && sameFile(fd, 0)) {
      throw new ContinuityError('CONT_ERR_CONFIG', `gates file ${file}: this is the command's standard input, which it does not read by a name; give --gates - to read the gates from standard input`, {
        details: { file, fields: [] },
      });
    }
    // at most GATES_MAX_BYTES: a device or a large file named by mistake (/dev/zero) made
    // the engine's process abort on an allocation (exit 134; a break-it pass)
    const buf = Buffer.alloc(GATES_MAX_BYTES + 1);
    let n = 0;
    for (let got = -1; got !== 0 && n < buf.length; n += got) got = readSync(fd, buf, n, buf.length - n, null);
    if (n > GATES_MAX_BYTES) {
      throw new ContinuityError('CONT_ERR_CONFIG', `gates file ${file}: over ${GATES_MAX_BYTES} bytes; a gates file holds a few thresholds`, { details: { file, fields: [] } });
    }
    text = buf.subarray(0, n).toString('utf8');
  } catch (err) {
    if (isContinuityError(err)) throw err;
    throw new ContinuityError('CONT_ERR_CONFIG', `gates file ${file}: cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, {
      cause: err,
      details: { file, fields: [] },
    });
  } finally {
    if (fd !== undefined && file !== '-') closeSync(fd);
  }
  return parseGates(text, file === '-' ? 'standard input' : file);
}

/** True when descriptors `a` and `b` are open on the same file (device and inode); false when either is not open. */
function sameFile(a: number, b: number): boolean {
  try {
    const x = fstatSync(a);
    const y = fstatSync(b);
    return x.dev === y.dev && x.ino === y.ino;
  } catch {
    return false;
  }
}

/**
 * The most a gates file may hold, bytes. A gates file holds a few thresholds; the YAML
 * parser's check for repeated keys grows with the square of a mapping's keys (80,000
 * keys in 869 KB took 46 s: a break-it pass), so the cap is small.
 */
const GATES_MAX_BYTES = 64 << 10;
/** Names of standard input that a command without `-` does not have open (bin/continuity.mjs gives it /dev/null). */
const STDIN_PATHS = new Set(['/dev/stdin', '/dev/fd/0', '/proc/self/fd/0']);

/**
 * Parses a duration such as `90s`, `30m`, `1h`, `1.5h`, `2d` (a bare number is seconds).
 * @param flag the flag or field named in the error
 * @returns seconds, from 0.001 (1 ms: the report's times are µs, and a shorter window
 *   rounded to an empty one) to 30 days.
 * @throws ContinuityError CONT_ERR_CONFIG naming `flag`.
 */
export function parseDuration(text: string, flag: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  const unit = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400 } as const;
  const seconds = m ? Number(m[1]) * unit[(m[2] ?? 's') as keyof typeof unit] : NaN;
  if (!(seconds >= 0.001) || seconds > 30 * 86_400) {
    throw new ContinuityError('CONT_ERR_CONFIG', `${flag}: ${JSON.stringify(text)} is not a duration (e.g. 90s, 30m, 1h; at least 1ms, at most 30d)`, {
      details: { field: flag },
    });
  }
  return seconds;
}

// ---------------------------------------------------------------------------
// The report

/** Overall result: `exit_code` 0 pass, 1 fail, 2 cannot evaluate. */
export type CanaryVerdict = 'pass' | 'fail' | 'cannot_evaluate';
/** A gate's result; `not_evaluated`: the evidence it needs is absent (e.g. no server events), or it is disabled. */
export type GateVerdict = 'pass' | 'fail' | 'not_evaluated';

/**
 * A named query a gate or bound read, with the parameters it was bound to (ready for
 * `continuity query`); or a check the report ran itself, named `check:<name>`
 * (queries/sql/checks/<name>.sql, not a named query), with its parameters.
 */
export interface QueryRead {
  readonly name: string;
  readonly params: Readonly<Record<string, string | number>>;
}

/** One gate's outcome. */
export interface GateResult {
  readonly id: GateId;
  /** 1-based position in the report. */
  readonly index: number;
  readonly title: string;
  /** The threshold in words ("at most 0", "fail when … > max(…)"). */
  readonly threshold: string;
  /** The configured numbers behind `threshold`. */
  readonly limits: Readonly<Record<string, number | boolean>>;
  /** The measured value: a count, or for the rate gate the deploy window's rate as a fraction (0.02 = 2%). */
  readonly value: number | null;
  readonly unit: 'count' | 'rate';
  readonly verdict: GateVerdict;
  /** One sentence: the numbers that decided the verdict, or why it could not be evaluated. */
  readonly summary: string;
  /** The numbers that matter, by name. Rates are fractions. */
  readonly numbers: Readonly<Record<string, number | string | null>>;
  /** The query rows that matter (already filtered to this deploy), as the named query returned them. */
  readonly rows: ReadonlyArray<Record<string, unknown>>;
  readonly queries: readonly QueryRead[];
}

/** A success proportion with its exact one-sided lower bound. */
export interface ProportionBound {
  readonly id: 'sessions_kept_working' | 'requests_succeeded';
  readonly label: string;
  /** How successes and trials are counted, and from which evidence. */
  readonly definition: string;
  readonly source: 'server' | 'proxy' | 'server+proxy' | 'none';
  readonly successes: number;
  readonly trials: number;
  /** successes / trials, null when trials = 0. */
  readonly estimate: number | null;
  /** One-sided Clopper–Pearson lower bound at `confidence`, null when trials = 0. */
  readonly lower: number | null;
  readonly confidence: number;
  /** The proportion a reader would like to claim. */
  readonly target: number;
  /** More consecutive clean observations needed before the lower bound clears `target`. */
  readonly more_needed: number;
  readonly queries: readonly QueryRead[];
}

/** A concrete next step: why, and the command to run. */
export interface NextStep {
  readonly why: string;
  /**
   * A shell command: `continuity query …`, `continuity sql …` or `continuity report …`;
   * for a report asked of the read API ({@link CanaryOptions.api}), a `curl` of that
   * API's `GET /api/queries/<name>`, `POST /api/sql` or `GET /api/report`.
   */
  readonly command: string;
}

/**
 * What a next step runs, before it is written as a command ({@link stepCommand}): a named
 * query, ad hoc SQL, or the continuity report; `params` by the read API's names (`t_from`,
 * `t_to`, `service`, …; a parameter left out takes its default).
 */
export type StepTarget =
  | { readonly kind: 'query'; readonly name: string; readonly params: Readonly<Record<string, string | number>> }
  | { readonly kind: 'sql'; readonly sql: string }
  | { readonly kind: 'report'; readonly params: Readonly<Record<string, string | number>> };

/** A next step as the report plans it: why, and what to run. */
interface PlannedStep {
  readonly why: string;
  readonly target: StepTarget;
}

/** A half-open UTC time range; `from`/`to` are ISO-8601 with µs. */
export interface TimeRange {
  readonly from: string;
  readonly to: string;
  readonly seconds: number;
}

/** The restart the report is about, as the `restarts` query returned it. */
export interface DeployInfo {
  /** What `--deploy` said: a release, a boot_id, `latest`, or a time (the last restart up at or before it). */
  readonly requested: string;
  /** `server`: a boot event that follows an earlier boot; `proxy`: inferred from the proxy log only. */
  readonly source: 'server' | 'proxy';
  readonly evidence: string;
  readonly service: string;
  /** The new boot ('' for a proxy-inferred restart). */
  readonly boot_id: string;
  readonly release: string;
  /**
   * The release of the boot before (the `restarts` row's prev_release, which may be the
   * service's first boot); null for a proxy-inferred restart or an unknown release.
   */
  readonly previous_release: string | null;
  /** The boot that ended (the `restarts` row's prev_boot_id); null for a proxy-inferred restart. */
  readonly previous_boot_id: string | null;
  /** ISO-8601 UTC: the previous boot's shutdown / last 2xx (proxy: last served response before the gap). */
  readonly down_from: string;
  /** ISO-8601 UTC: the boot (proxy: first served response after the gap); null when the upstream never came back in the log. */
  readonly up_at: string | null;
  /** Seconds from down_from to up_at, as the `restarts` query computed them. */
  readonly downtime_s: number | null;
}

/**
 * The canary report; `--format json` prints this object. Times are ISO-8601 UTC,
 * durations seconds, rates and proportions fractions in [0, 1].
 */
export interface CanaryReport {
  readonly verdict: CanaryVerdict;
  /** 0 pass, 1 fail, 2 cannot evaluate. */
  readonly exit_code: 0 | 1 | 2;
  /** Why the report cannot be evaluated (only with `cannot_evaluate`). */
  readonly reason: string | null;
  /** What `--deploy` said: a release, a boot_id, `latest`, or a time (the last restart up at or before it). */
  readonly requested: string;
  readonly deploy: DeployInfo | null;
  /**
   * The deploy window W (null when the deploy could not be resolved): `after_s` is
   * --after; `next_restart_at` the service's next restart's down_from (ISO, µs) when
   * that came first and ends the window there, else null.
   */
  readonly window: (TimeRange & { readonly after_s: number; readonly next_restart_at: string | null }) | null;
  readonly baseline: TimeRange | null;
  /** Filters every query was bound to ('' = all). */
  readonly scope: { readonly service: string; readonly environment: string };
  readonly gates: readonly GateResult[];
  readonly counts: { readonly passed: number; readonly failed: number; readonly not_evaluated: number };
  readonly bounds: readonly ProportionBound[];
  readonly next: readonly NextStep[];
  /** Caveats about the evidence (several services in scope, no baseline traffic, …). */
  readonly notes: readonly string[];
}

/** What {@link buildCanaryReport} needs. */
export interface CanaryOptions {
  /** A release, a boot_id, `latest`, or a time (ISO-8601: the last restart, server or proxy-inferred, up at or before it). */
  readonly deploy: string;
  /** Seconds after the boot the deploy window runs (default 900). */
  readonly afterS?: number;
  /** Baseline length in seconds (default: the deploy window's length). */
  readonly baselineS?: number;
  readonly service?: string;
  readonly environment?: string;
  /** MCP endpoint paths for proxy inference (default: inferred). */
  readonly mcpPaths?: readonly string[];
  /** Window for inferred re-mints and recoveries, seconds (default 10). */
  readonly remintWindowS?: number;
  readonly gates?: GatesConfig;
  /** Confidence of the lower bounds (default 0.95) and the proportion to claim (default 0.99). */
  readonly confidence?: number;
  readonly target?: number;
  /** The clock, µs since the epoch (default `Date.now() * 1000`): a deploy window that ends after it is still open. */
  readonly nowMicros?: () => number;
  /**
   * How the next steps' commands start (default `continuity`): the CLI adds the
   * `--data-dir` it read, so a pasted command reads the same store.
   */
  readonly command?: string;
  /**
   * Write the next steps as requests to this read API instead of CLI commands: set
   * by `POST /api/canary`, whose process owns the store (a pasted `continuity query`
   * would stop with CONT_ERR_STORE_LOCKED; a break-it pass). `base` is the URL the
   * request reached (e.g. `http://127.0.0.1:4318`); with `token` the commands send
   * `Authorization: Bearer $CONTINUITY_INGEST_TOKEN` (the token itself is never
   * written into a report).
   */
  readonly api?: { readonly base: string; readonly token: boolean };
}

/** Default deploy window after the boot: 15 minutes. */
export const DEFAULT_AFTER_S = 900;

interface RestartRow {
  service: string;
  source: string;
  evidence: string;
  boot_id: string;
  release: string;
  prev_boot_id: string;
  prev_release: string;
  down_from: string;
  up_at: string | null;
  downtime_s: number | null;
  proxy_5xx: number;
}

const num = (v: unknown): number => (typeof v === 'number' ? v : Number(v ?? 0));
const sum = (rows: ReadonlyArray<Record<string, unknown>>, key: string): number => rows.reduce((a, r) => a + num(r[key]), 0);

/** Store DateTime64 text ('YYYY-MM-DD hh:mm:ss.ffffff', UTC) → µs since the epoch. */
function storeTimeToMicros(s: string): number {
  const us = parseTimeMicros(s);
  if (us === undefined) throw new RangeError(`not a store time: ${s}`);
  return us;
}

const EPOCH = 0;

/**
 * Builds the canary report for one deploy.
 *
 * Resolving `deploy` (among the server restarts in scope, then its `restarts` row over
 * the life of the boot that ended: resolveServerDeploy; else from `restarts` over
 * everything in scope):
 * `latest` is the most recent server restart (a boot after an earlier boot of the
 * same service), else the most recent proxy-inferred restart; otherwise a boot_id
 * of a server restart, else the most recent server restart whose release equals it
 * (a note lists the others; a release deployed to several services, with no
 * `service` given, cannot be evaluated: the reason names each service's latest).
 * A deploy that cannot be resolved, a deploy window still open (it ends after
 * `nowMicros`), or one without a single request, gives `cannot_evaluate` (exit
 * code 2) with the reason; nothing is thrown for those.
 *
 * Configured MCP endpoint paths (`mcpPaths`, CONTINUITY_MCP_PATHS) are checked
 * against the proxy log ({@link checkMcpPaths}, one query): over the deploy window,
 * or over the whole scope when no restart is found. A path that matches nothing is
 * the first note. When no configured path matches a proxy line of the deploy window
 * while the log shows the MCP endpoint elsewhere, the proxy evidence is 0 because of
 * the setting, not because the deploy was clean: without server arrivals in the
 * window the report is `cannot_evaluate` (exit 2: a pass would judge a deploy no
 * one looked at); with them the gates are evaluated on the server evidence, and
 * gate 1 (proxy-generated 5xx, proxy evidence only) is not evaluated and says why.
 *
 * @throws ContinuityError from the store (CONT_ERR_STORE_*) or for bad query parameters.
 */
export async function buildCanaryReport(store: Store, options: CanaryOptions): Promise<CanaryReport> {
  const { next, ...report } = await judgeDeploy(store, options);
  // the token is never written: say where the commands read it (a newcomer pass pasted them without it)
  const notes = options.api?.token
    ? [...report.notes, 'The next steps are requests to the read API that wrote this report; they send its token from $CONTINUITY_INGEST_TOKEN: export it before pasting them.']
    : report.notes;
  return { ...report, notes, next: next.map((n) => ({ why: n.why, command: stepCommand(n.target, options) })) };
}

/** {@link buildCanaryReport}, its next steps still to be written as commands. */
async function judgeDeploy(store: Store, options: CanaryOptions): Promise<Omit<CanaryReport, 'next'> & { next: PlannedStep[] }> {
  const gates = options.gates ?? DEFAULT_GATES;
  const afterS = options.afterS ?? DEFAULT_AFTER_S;
  const confidence = options.confidence ?? 0.95;
  const target = options.target ?? 0.99;
  const scope = { service: options.service ?? '', environment: options.environment ?? '' };
  const common: Record<string, string | number> = { ...scope };
  if (options.mcpPaths?.length) common.mcp_paths = options.mcpPaths.join(',');
  const windowS = options.remintWindowS ?? 10;
  const notes: string[] = [];
  const requested = options.deploy.trim();
  const extraNext: PlannedStep[] = [];
  // The configured endpoint paths against the proxy log (one query, only when configured):
  // the warning is the first note, and the restarts on the endpoint the log shows are a next step.
  const checkPaths = async (params: Record<string, string | number>, where: string): Promise<McpPathsCheck | null> => {
    const check = await checkMcpPaths(store, params, where);
    if (check?.warning) notes.unshift(check.warning);
    if (check?.verdict === 'none_match' && !check.endpoints.some((path) => path.includes(','))) {
      extraNext.push({
        why: 'The restarts on the path(s) the proxy log shows as the MCP endpoint (then correct CONTINUITY_MCP_PATHS)',
        target: query('restarts', { ...common, mcp_paths: check.endpoints.join(',') }),
      });
    }
    return check;
  };

  const cannot = (
    reason: string,
    deploy: DeployInfo | null = null,
    window: CanaryReport['window'] = null,
    baseline: TimeRange | null = null,
  ): Omit<CanaryReport, 'next'> & { next: PlannedStep[] } => ({
    verdict: 'cannot_evaluate',
    exit_code: 2,
    reason,
    requested,
    deploy,
    window,
    baseline,
    scope,
    gates: [],
    counts: { passed: 0, failed: 0, not_evaluated: 0 },
    bounds: [],
    next: [
      ...extraNext,
      { why: 'List the restarts the store holds (release, boot_id, evidence) to pick a deploy', target: query('restarts', common) },
      { why: 'See what the store holds overall', target: reportStep(scope) },
    ],
    notes,
  });

  // -- the deploy ---------------------------------------------------------------
  const at = (r: { up_at: string | null; down_from: string }) => storeTimeToMicros(r.up_at ?? r.down_from);
  // A server deploy is found among the server restarts alone (a cheap read), and its
  // row is read from `restarts` over the life of the boot that ended onward: over the
  // whole store, `restarts` spends most of its time inferring proxy restarts long
  // before the deploy. Anything else (a proxy-inferred deploy, an unknown one, no
  // restart at all) reads `restarts` over the whole store, as before.
  const resolved = await resolveServerDeploy(store, requested, common, afterS);
  let deployRow: RestartRow;
  let previousAt: number | null;
  let next: NextRestart | null;
  if (resolved && 'ambiguous' in resolved) {
    // one release deployed to several services, or one boot_id that several services'
    // collectors used: a gate must not guess which one
    const services = [...new Set(resolved.ambiguous.map((b) => b.service))].join(', ');
    if (resolved.by === 'boot_id') return cannot(`boot_id ${JSON.stringify(requested)} is a restart of several services (${services}): name one with --service`);
    const named = resolved.ambiguous.map((b) => `${b.service} ${b.boot_id}`).join(', ');
    return cannot(
      `release ${JSON.stringify(requested)} was deployed to several services (${services}): name one with --service, or the restart by its boot_id (latest of each: ${named})`,
    );
  }
  if (resolved) {
    ({ row: deployRow, previousAt, next } = resolved);
    if (resolved.sameRelease.length > 1) {
      notes.push(
        `Release ${JSON.stringify(requested)} was deployed ${resolved.sameRelease.length} times (${resolved.sameRelease.map((b) => b.boot_id).join(', ')}, oldest first): this report judges the latest; name another by its boot_id.`,
      );
    }
  } else {
    // a proxy restart with no up_at at its down_from
    const restarts = inTimeOrder((await runQuery<RestartRow>(store, 'restarts', common)).slice(), at);
    if (restarts.length === 0) {
      const forService = scope.service ? ` for service ${JSON.stringify(scope.service)}` : '';
      const paths = await checkPaths(common, `in the store${forService}`);
      // a mistyped --service or --environment: name the ones there are (found by a
      // newcomer pass, then a break-it pass for --environment)
      for (const [column, value, unlabelled] of [
        ['service', scope.service, '(none: imported without --service)'],
        ['environment', scope.environment, '(none)'],
      ] as const) {
        if (!value) continue;
        const known = (await store.query<{ v: string }>(`SELECT DISTINCT ${column} AS v FROM events ORDER BY v LIMIT 21`)).map((r) => r.v);
        if (!known.includes(value)) {
          const list = known.slice(0, 20).map((x) => (x === '' ? unlabelled : JSON.stringify(x))).join(', ') + (known.length > 20 ? ', …' : '');
          return cannot(`the store at ${store.location} holds no events for ${column} ${JSON.stringify(value)}${known.length ? `; its ${column === 'service' ? 'services' : 'environments'}: ${list}` : ''}`);
        }
      }
      // (where: a mistyped --data-dir opens a new, empty store)
      return cannot(
        `no restart found${forService} in the store at ${store.location}: no server boot follows an earlier boot, and ` +
          (paths?.verdict === 'none_match'
            ? 'the proxy log was not read: CONTINUITY_MCP_PATHS matches none of its lines (see the notes)'
            : 'the proxy log shows no restart (no events for any deploy)'),
      );
    }
    const serverRows = restarts.filter((r) => r.source === 'server');
    let row = pickServerRestart(serverRows, requested) ?? (requested === 'latest' ? restarts.at(-1) : undefined);
    // a boot that is no restart, named by its boot_id or release: its service's first
    // (found by a newcomer pass: it got the unknown deploy's words); looked up before
    // the value is read as a time, so a release named like one ("2026-12-05", a build
    // number) is that boot, not the restart before a time (a break-it pass: another
    // service's restart was judged under it)
    const [first] = row
      ? []
      : await store.query<{ service: string; boot_id: string; release: string }>(
          `SELECT service, toString(boot_id) AS boot_id, release FROM events
           WHERE event_type = 'boot' AND (toString(boot_id) = {r:String} OR release = {r:String})
             AND ({service:String} = '' OR service = {service:String})
           ORDER BY ts LIMIT 1`,
          { r: requested, service: scope.service },
        );
    const asTime = first ? undefined : deployTimeMicros(requested);
    // a time: the last restart, server or proxy-inferred, up at or before it (the only
    // way to name a proxy-inferred restart other than the latest)
    if (!row && asTime !== undefined) row = restarts.filter((r) => at(r) <= asTime).at(-1);
    if (!row) {
      // the proxy's restarts are missing from the list when the configured paths match
      // none of its lines: said (it named only the server boots: a newcomer pass)
      const paths = await checkPaths(common, `in the store${scope.service ? ` for service ${JSON.stringify(scope.service)}` : ''}`);
      const unread = paths?.verdict === 'none_match' ? '; the proxy log was not read: CONTINUITY_MCP_PATHS matches none of its lines (see the notes)' : '';
      if (asTime !== undefined) {
        return cannot(`no restart up at or before ${isoMicros(asTime)}${restarts.length ? ` (the first is up at ${isoMicros(at(restarts[0]!))})` : ''}${unread}`);
      }
      const releases = [...new Set(serverRows.map((r) => r.release).filter(Boolean))];
      // (the latest restart's time rounded up to the second: cut to it, the example was
      // before that restart and named the one before: a newcomer pass)
      const example = `A time (ISO-8601 or epoch seconds, e.g. ${isoMicros(Math.ceil(at(restarts.at(-1)!) / 1e6) * 1e6).replace(/\.\d+Z$/, 'Z')}, just after the latest restart) names the last restart up at or before it, proxy-inferred ones too`;
      return cannot(
        first
          ? `${JSON.stringify(requested)} is the first boot of service ${JSON.stringify(first.service)} (boot_id ${first.boot_id}${first.release ? `, release ${first.release}` : ''}) in the store: ` +
              `a service's first boot is not a deploy, there is no earlier boot to compare it with. ${example}`
          : looksLikeTime(requested)
            ? // (a bad date was answered as an unknown release: a newcomer pass)
              `${JSON.stringify(requested)} is not a valid time, and no boot has that boot_id or release: a time is ISO-8601 ` +
              `(YYYY-MM-DD[Thh:mm[:ss[.ffffff]]][Z|±hh:mm], UTC without an offset) or epoch seconds. ${example}`
            : `unknown deploy ${JSON.stringify(requested)}: no boot has that boot_id or release` +
              (releases.length ? ` (releases with a restart: ${releases.join(', ')})` : ' (the store has no server restarts)') +
              `${unread}. ${example}`,
      );
    }
    deployRow = row;
    const previous = restarts.filter((r) => r.source === row.source && r.service === row.service && at(r) < at(row)).at(-1);
    previousAt = previous ? at(previous) : null;
    const after = restarts.find((r) => r.source === row.source && r.service === row.service && at(r) > at(row));
    next = after ? { boot_id: after.source === 'server' ? after.boot_id : '', down_from: storeTimeToMicros(after.down_from) } : null;
  }
  const deploy: DeployInfo = {
    requested,
    source: deployRow.source === 'server' ? 'server' : 'proxy',
    evidence: deployRow.evidence,
    service: deployRow.service,
    boot_id: deployRow.boot_id,
    release: deployRow.release,
    // from the row itself, not from the previous restart row: a service's first boot
    // is no restart, so a deploy right after it has no restart row before it
    previous_release: deployRow.source === 'server' && deployRow.prev_release ? deployRow.prev_release : null,
    previous_boot_id: deployRow.source === 'server' && deployRow.prev_boot_id ? deployRow.prev_boot_id : null,
    down_from: isoMicros(storeTimeToMicros(deployRow.down_from)),
    up_at: deployRow.up_at === null ? null : isoMicros(storeTimeToMicros(deployRow.up_at)),
    downtime_s: deployRow.downtime_s === null ? null : num(deployRow.downtime_s),
  };
  // The store holds events of several services and no --service was given: the gates
  // count the deploy's service (one service's deploy failed on another's 401s, that
  // service never restarting: a newcomer pass). Not where some events carry no service
  // (a proxy log imported without --service beside labelled server events): a service
  // filter would drop that evidence, which restart_rows.sql pairs with any service, so
  // all are counted.
  // (one read: the services in the scope's environment, at most 21, and whether any
  // event has none)
  const [labels] = scope.service
    ? []
    : await store.query<{ s: string[]; unlabelled: number }>(
        "SELECT arraySort(groupUniqArrayIf(21)(service, service != '')) AS s, toUInt8(countIf(service = '') > 0) AS unlabelled FROM events WHERE {environment:String} = '' OR environment = {environment:String}",
        { environment: scope.environment },
      );
  const services = labels?.s ?? [];
  if (services.length > 1) {
    const named = services.length > 20 ? `${services.slice(0, 20).join(', ')}, …` : services.join(', ');
    const several = `The store holds events of several services (${named}) and no --service was given`;
    const unlabelled = deploy.service !== '' && Number(labels?.unlabelled) > 0;
    if (deploy.service && !unlabelled) {
      scope.service = deploy.service;
      common.service = deploy.service;
      notes.push(`${several}: the gates count the deploy's service, ${JSON.stringify(deploy.service)} (--service names another scope).`);
    } else {
      const why = deploy.service ? 'some events carry no service (imported without --service), which a service filter would leave out' : 'the deploy has no service';
      notes.push(`${several}, and ${why}: the gates count events of all of them.`);
    }
  } else if (services.length === 1 && deploy.service === '') {
    // An unlabelled deploy (a proxy log imported without --service) beside one labelled
    // service: no filter can name the unlabelled events alone ('' is every service), so
    // the other service's 401s and misses count against this deploy (a newcomer pass:
    // another service's invalid_token challenges failed it, and nothing said why).
    notes.push(
      `The deploy has no service (a proxy log imported without --service) and the store also holds events of ${JSON.stringify(services[0])}: the gates count events of both. Import the log again with --service to keep them apart.`,
    );
  }
  if (deployRow.up_at === null) notes.push('The proxy log shows no served response after the gap: the upstream had not come back when the log ends; the window runs from the gap.');

  // -- windows ------------------------------------------------------------------
  const downUs = storeTimeToMicros(deployRow.down_from);
  const bootUs = at(deployRow);
  // The window ends --after past the boot, or where the service's next restart began
  // if that is sooner: the next deploy's gap and misses are that deploy's, not this
  // one's (a break-it pass found them charged to both). That restart's down_from is
  // this instance's last response, so the window includes it (1 µs past it): a
  // refused miss served there was in no canary (a break-it pass, on the real capture).
  const afterUs = bootUs + Math.round(afterS * 1e6);
  const cut = next !== null && next.down_from > bootUs && next.down_from < afterUs ? next : null;
  const endUs = cut ? cut.down_from + 1 : afterUs;
  if (cut) {
    notes.push(
      `The service restarted again ${((cut.down_from - bootUs) / 1e6).toFixed(3)} s after this boot${cut.boot_id ? ` (${cut.boot_id})` : ''}, before --after ended: the deploy window ends with that restart's down_from, ${isoMicros(cut.down_from)} (the last response before it, included).`,
    );
  }
  if (downUs >= endUs) {
    // Overlapping instances: the boot before was still serving (or shut down) after the
    // window would end, so the window [down_from, boot + after] would be empty.
    return cannot(
      `the boot before this deploy was still active until ${isoMicros(downUs)}, ${((downUs - bootUs) / 1e6).toFixed(3)} s after the new boot and past the deploy window's end (${isoMicros(endUs)}, --after ${afterS} s): the window would be empty; rerun with an --after longer than ${Math.ceil((downUs - bootUs) / 1e6)} s`,
      deploy,
    );
  }
  const baseUs = options.baselineS !== undefined ? Math.round(options.baselineS * 1e6) : endUs - downUs;
  const lifeFromUs = previousAt ?? EPOCH;
  const range = (fromUs: number, toUs: number): TimeRange => ({ from: isoMicros(fromUs), to: isoMicros(toUs), seconds: (toUs - fromUs) / 1e6 });
  const W = range(downUs, endUs);
  const B = range(downUs - baseUs, downUs);
  const L = range(lifeFromUs, endUs);
  const window = { ...W, after_s: afterS, next_restart_at: cut ? isoMicros(cut.down_from) : null };
  // A window that has not ended yet: its events can still arrive, so a pass now would
  // judge a deploy on the minutes before the evidence (a newcomer pass: a canary run at
  // once after a deploy passed with 14 of its 15 minutes still to come). A pipeline
  // waits for exit 0 or 1.
  const nowUs = options.nowMicros?.() ?? Date.now() * 1000;
  if (endUs > nowUs) {
    return cannot(
      `the deploy window is still open: it ends at ${isoMicros(endUs)} (--after ${afterS} s past the boot), ${Math.ceil((endUs - nowUs) / 1e6)} s from now, and its events can still arrive; run the canary again after it ends, or with a shorter --after`,
      deploy,
      window,
    );
  }
  const p = (r: TimeRange, extra: Record<string, string | number> = {}): Record<string, string | number> => rangeParams(r, common, extra);
  const win = { window_s: windowS };

  // -- evidence, through named queries and checks --------------------------------
  const paths: EndpointPathsMemo = new Map(); // W, B and L: each range's endpoint resolved once
  const read = async (name: string, params: Record<string, string | number>): Promise<Read> => ({ rows: await runQuery(store, name, params, paths), q: { name, params } });
  // the sessions of the deploy's service that kept working across this restart
  const span = { from: deploy.down_from, to: deploy.up_at ?? deploy.down_from, service: deploy.service, source: deploy.source };
  const acrossParams = { ...p(L), span_from: span.from, span_to: span.to, span_service: span.service, span_source: span.source };
  const across = async (): Promise<Across> => ({ sessions: await countSessionsAcross(store, acrossParams, span, paths), q: { name: 'check:sessions_across', params: acrossParams } });
  const [trafficW, trafficB, settleW, settleB, settleL, proxyErrW, refusedL, contW, survivors, authW, authB, mcpPaths, held] = await Promise.all([
    read('proxy_traffic', p(W)),
    read('proxy_traffic', p(B)),
    read('settlements', p(W)),
    read('settlements', p(B)),
    read('settlements', p(L)),
    read('proxy_errors', p(W)),
    read('refused_misses', p(L, win)),
    // gate 4 needs session_continuity's rows but not its survivors (every restart in W): the check counts them as it does
    countSessionOutcomes(store, p(W, win), paths).then((rows): Read => ({ rows, q: { name: 'session_continuity', params: p(W, win) } })),
    across(),
    read('auth_challenges', p(W)),
    // the baseline's challenges are only counted: the check counts them as auth_challenges does, without the verdicts
    countChallenges(store, p(B)).then((rows): Read => ({ rows, q: { name: 'auth_challenges', params: p(B) } })),
    checkPaths(p(W), 'in the deploy window'),
    eventSpan(store, p(range(downUs - baseUs, endUs))),
  ]);
  const e: Evidence = {
    deploy,
    downUs,
    endUs,
    proxyRequestsW: sum(trafficW.rows, 'requests'),
    serverEvidence: sum(settleW.rows, 'arrivals') > 0,
    trafficW,
    trafficB,
    settleW,
    settleB,
    settleL,
    proxyErrW,
    refusedL,
    contW,
    survivors,
    authW,
    authB,
    mcpPaths,
  };
  const pathsMissed = mcpPaths?.verdict === 'none_match';
  if (pathsMissed && !e.serverEvidence) {
    // Proxy gates on no proxy evidence would pass a deploy nobody looked at.
    return cannot(
      `CONTINUITY_MCP_PATHS matches no proxy line in the deploy window ${W.from} .. ${W.to} (see the notes) and the window holds no server arrivals: no evidence to judge this deploy on`,
      deploy,
      window,
      B,
    );
  }
  if (e.proxyRequestsW === 0 && !e.serverEvidence) {
    return cannot(
      `no requests recorded in the deploy window ${W.from} .. ${W.to} (neither server arrivals nor proxy access lines): nothing to evaluate for this deploy`,
      deploy,
      window,
      B,
    );
  }
  if (!e.serverEvidence) notes.push('No server events in the deploy window: gates and bounds use proxy evidence only (inferred restarts, refused misses and re-mints).');
  notes.push(...eventSpanNotes(held, downUs - baseUs, endUs));
  if (e.proxyRequestsW === 0 && !pathsMissed) notes.push('No proxy access lines in the deploy window: the restart gap as clients saw it is not observed.');
  if ((e.serverEvidence ? sum(e.settleB.rows, 'arrivals') : sum(e.trafficB.rows, 'requests')) === 0) {
    notes.push(`No ${e.serverEvidence ? 'server arrivals' : 'proxy requests'} in the baseline: the invalid_token baseline rate is taken as 0.`);
  }

  const results = GATE_IDS.map((id) => finishGate(id, MEASURE[id](e, gates), gates));
  const bounds = proportionBounds(e, confidence, target);

  // -- verdict and next steps ---------------------------------------------------
  const failed = results.filter((g) => g.verdict === 'fail');
  const counts = {
    passed: results.filter((g) => g.verdict === 'pass').length,
    failed: failed.length,
    not_evaluated: results.filter((g) => g.verdict === 'not_evaluated').length,
  };
  // no gate judged anything (each disabled, or without the evidence it needs): a pass
  // would say the deploy was checked when it was not
  const judged = counts.passed + counts.failed > 0;
  const verdict: CanaryVerdict = failed.length > 0 ? 'fail' : judged ? 'pass' : 'cannot_evaluate';
  return {
    verdict,
    exit_code: verdict === 'fail' ? 1 : verdict === 'pass' ? 0 : 2,
    reason: judged ? null : 'no gate was evaluated: each is disabled by the gates file or lacks the evidence it needs (see each gate)',
    requested,
    deploy,
    window,
    baseline: B,
    scope,
    gates: results,
    counts,
    bounds,
    next: [...extraNext, ...nextSteps(results, bounds, { W, B, L, common, win, scope })],
    notes,
  };
}

/**
 * A server deploy found among the server restarts alone ({@link listServerRestarts}),
 * chosen as among the `restarts` rows: `latest` is the most recent, otherwise the
 * one whose boot_id, else the most recent whose release, is `requested`. Its row is then read from
 * `restarts` over [the boot before it − 1 s, the later of the deploy window's end and
 * the boot before's end + 1 s) (from the start of the store when the boot before was
 * the service's first). The row's server columns are the whole store's: the boot
 * before's boot, shutdown, last 2xx and last event all lie in that range. Its proxy
 * evidence (the proxy restarts that bracket the boot) is inferred from the proxy lines
 * of that range: the life of the boot that ended and the deploy window, which the
 * gates read too.
 * @returns the row, the time of the service's restart before it (µs; null: none, so
 *   the life range starts at the epoch) and the restarts of the release
 *   when `requested` named one (oldest first); `{ ambiguous }` (each service's latest
 *   restart of the release) when it named a release that restarts of several services
 *   have; null when no server restart matches `requested` (the caller reads
 *   `restarts` over the whole store).
 * @throws ContinuityError from the store.
 */
async function resolveServerDeploy(
  store: Store,
  requested: string,
  common: Record<string, string | number>,
  afterS: number,
): Promise<
  | {
      row: RestartRow;
      previousAt: number | null;
      sameRelease: Array<{ service: string; boot_id: string }>;
      next: NextRestart | null;
    }
  | { ambiguous: Array<{ service: string; boot_id: string }>; by: 'release' | 'boot_id' }
  | null
> {
  const list = inTimeOrder(
    (await listServerRestarts(store, common)).map((b) => ({ ...b, us: storeTimeToMicros(b.up_at) })),
    (b) => b.us,
  );
  const pick = pickServerRestart(list, requested);
  if (!pick) return null;
  // a boot_id that several services' collectors used: a gate must not guess which one
  // (a break-it pass: it took the first silently)
  const sameBoot = requested === 'latest' ? [] : list.filter((b) => b.boot_id === requested);
  if (new Set(sameBoot.map((b) => b.service)).size > 1) return { ambiguous: sameBoot, by: 'boot_id' };
  const sameRelease = requested !== 'latest' && pick.boot_id !== requested ? list.filter((b) => b.release === requested) : [];
  const releaseServices = [...new Set(sameRelease.map((b) => b.service))];
  if (releaseServices.length > 1) return { ambiguous: releaseServices.map((s) => sameRelease.filter((b) => b.service === s).at(-1)!), by: 'release' };
  const previous = list.filter((b) => b.service === pick.service && b.us < pick.us).at(-1);
  const previousAt = previous ? previous.us : null;
  const after = list.find((b) => b.service === pick.service && b.us > pick.us);
  const next = after ? { boot_id: after.boot_id, down_from: storeTimeToMicros(after.down_from) } : null;
  const params = {
    ...common,
    ...(previousAt === null ? {} : { t_from: isoMicros(previousAt - 1_000_000) }),
    // past the deploy window, and past the boot before's end (overlapping instances)
    t_to: isoMicros(Math.max(pick.us + Math.round(afterS * 1e6), storeTimeToMicros(pick.down_from)) + 1_000_000),
  };
  const rows = await runQuery<RestartRow>(store, 'restarts', params);
  const row = rows.find((r) => r.source === 'server' && r.service === pick.service && r.boot_id === pick.boot_id);
  if (!row) return null;
  return { row, previousAt, sameRelease, next };
}

/** The service's restart after the deploy: its boot_id ('' for a proxy-inferred one) and down_from (µs). */
interface NextRestart {
  readonly boot_id: string;
  readonly down_from: number;
}

/** `rows` sorted in place by time (`at`, µs); at the same µs by service, then boot id, as the `restarts` query orders its rows. */
function inTimeOrder<T extends { service: string; boot_id: string }>(rows: T[], at: (r: T) => number): T[] {
  return rows.sort((a, b) => at(a) - at(b) || a.service.localeCompare(b.service) || a.boot_id.localeCompare(b.boot_id));
}

/**
 * The server restart `requested` names, among `rows` in time order: `latest` the
 * last, else the one with that boot_id, else the last with that release (a release
 * deployed, rolled back and deployed again is judged where it is now, not where it
 * first was: a break-it pass got the first one's stale pass).
 */
function pickServerRestart<T extends { boot_id: string; release: string }>(rows: readonly T[], requested: string): T | undefined {
  return requested === 'latest' ? rows.at(-1) : (rows.find((r) => r.boot_id === requested) ?? rows.findLast((r) => r.release === requested));
}

/**
 * `--deploy` as a time, when it is one: an ISO-8601 / RFC 3339 date-time
 * (parseTimeMicros; a bare number is a release, not epoch seconds), in µs.
 * @returns undefined when it is not a time.
 */
function deployTimeMicros(requested: string): number | undefined {
  const us = looksLikeTime(requested) ? parseTimeMicros(requested) : undefined;
  // the bounds every time parameter has (queries/registry.ts): epoch milliseconds were
  // read as seconds far in the future, naming the latest restart (a break-it pass)
  return us !== undefined && us >= MIN_TIME_PARAM_MICROS && us <= MAX_TIME_PARAM_MICROS ? us : undefined;
}

/**
 * Whether `--deploy` names a time rather than a release or boot_id: a date first
 * (`YYYY-MM-DD…`, the forms {@link parseTimeMicros} reads) or epoch seconds of 9 digits
 * or more (from 1973 on), so a short build number stays a release. A release or boot_id
 * of that shape is matched first all the same.
 */
function looksLikeTime(requested: string): boolean {
  return /^\d{4}-\d{2}-\d{2}/.test(requested) || /^\d{9,}(\.\d+)?$/.test(requested);
}

/** One named query's rows and how it was called. */
interface Read {
  readonly rows: Array<Record<string, unknown>>;
  readonly q: QueryRead;
}

/** The sessions_across check's count ({@link countSessionsAcross}) and how it was called. */
interface Across {
  readonly sessions: number;
  readonly q: QueryRead;
}

/**
 * Everything the gates and bounds read, each named query run once per range:
 * W the deploy window, B the baseline, L the life range (see the file comment).
 */
interface Evidence {
  readonly deploy: DeployInfo;
  /** down_from and the end of W, µs since the epoch. */
  readonly downUs: number;
  readonly endUs: number;
  readonly proxyRequestsW: number;
  /** The deploy window holds server arrivals: server evidence decides request counts. */
  readonly serverEvidence: boolean;
  readonly trafficW: Read;
  readonly trafficB: Read;
  readonly settleW: Read;
  readonly settleB: Read;
  readonly settleL: Read;
  readonly proxyErrW: Read;
  readonly refusedL: Read;
  readonly contW: Read;
  /** Sessions of the deploy's service with a 2xx in L before the restart and one after it. */
  readonly survivors: Across;
  readonly authW: Read;
  /**
   * The baseline's challenges by class and status (countChallenges: the same counts as
   * `auth_challenges` over B, which `q` names, without the verdicts).
   */
  readonly authB: Read;
  /** The configured MCP endpoint paths against the proxy lines of W; null when none are configured. */
  readonly mcpPaths: McpPathsCheck | null;
}

/** What a gate measured; {@link finishGate} adds its identity and threshold. */
type Measured = Omit<GateResult, 'id' | 'index' | 'title' | 'threshold' | 'limits'>;

function finishGate(id: GateId, m: Measured, gates: GatesConfig): GateResult {
  const cfg = gates[id];
  return {
    id,
    index: GATE_IDS.indexOf(id) + 1,
    title: GATE_TITLES[id],
    // (a disabled gate has no threshold: its default would read as one, found by a newcomer pass)
    threshold: cfg.enabled ? thresholdText(id, gates) : `none: disabled by the gates file (when enabled: ${thresholdText(id, gates)})`,
    limits: { ...cfg },
    ...m,
    ...(cfg.enabled ? {} : { verdict: 'not_evaluated' as const, summary: `disabled by the gates file; measured: ${m.summary}` }),
  };
}

const countVerdict = (max: number, value: number): GateVerdict => (value > max ? 'fail' : 'pass');

/** The gates, each from the evidence it names. */
const MEASURE: Readonly<Record<GateId, (e: Evidence, gates: GatesConfig) => Measured>> = {
  proxy_5xx_in_gap: measureProxy5xx,
  refused_after_boot: measureRefusedAfterBoot,
  unsettled_at_shutdown: measureUnsettledAtShutdown,
  sessions_lost_tools: measureSessionsLostTools,
  invalid_token_rate: measureInvalidTokenRate,
};

/** Gate 1: proxy-generated 5xx in the deploy window (`proxy_errors` over W); not evaluated without proxy lines (`proxy_traffic`). */
function measureProxy5xx(e: Evidence, gates: GatesConfig): Measured {
  const { proxyErrW, trafficW, proxyRequestsW, deploy } = e;
  const rows = proxyErrW.rows.map((r) => pick(r, 'first_5xx', 'last_5xx', 'gap_s', 'proxy_5xx', 'proxy_5xx_post', 'proxy_5xx_get'));
  const value = sum(rows, 'proxy_5xx');
  const evaluable = proxyRequestsW > 0;
  return {
    value: evaluable ? value : null,
    unit: 'count',
    verdict: evaluable ? countVerdict(gates.proxy_5xx_in_gap.max, value) : 'not_evaluated',
    summary: evaluable
      ? `${value} proxy-generated 5xx (${sum(rows, 'proxy_5xx_post')} POST, ${sum(rows, 'proxy_5xx_get')} GET) in ${rows.length} gap(s)` +
        (rows.length ? `, longest ${Math.max(...rows.map((r) => num(r.gap_s)))} s` : '') +
        ` among ${proxyRequestsW} proxy request(s) in the deploy window`
      : e.mcpPaths?.verdict === 'none_match'
        ? 'no proxy line in the deploy window is on the configured MCP endpoint paths (CONTINUITY_MCP_PATHS; see the notes): the proxy log was not read'
        : 'no proxy access lines in the deploy window: import the proxy log to see what clients got while the upstream was down',
    numbers: {
      proxy_generated_5xx: evaluable ? value : null,
      post: sum(rows, 'proxy_5xx_post'),
      get: sum(rows, 'proxy_5xx_get'),
      gaps: rows.length,
      proxy_requests: proxyRequestsW,
      restart_downtime_s: deploy.downtime_s,
    },
    rows,
    queries: [proxyErrW.q, trafficW.q],
  };
}

/**
 * Gate 2: refused misses with reason unknown_after_boot attributed to the new boot, on
 * sessions the boot that ended served (`refused_misses` over L, the life of that boot:
 * its `misses_active`, misses on sessions with a 2xx in L before them). A session
 * already stale before that boot (refused since an earlier restart, still resending
 * its id) is not this deploy's doing and is reported apart.
 */
function measureRefusedAfterBoot(e: Evidence, gates: GatesConfig): Measured {
  const { refusedL, deploy, downUs, endUs } = e;
  const downSec = downUs / 1e6 - 1;
  const afterBoot = refusedL.rows.filter((r) => {
    if (r.source === 'server') return deploy.source === 'server' && r.boot === deploy.boot_id;
    const bootAt = r.boot_at === null || r.boot_at === undefined ? null : storeTimeToMicros(String(r.boot_at)) / 1e6;
    return bootAt !== null && bootAt >= downSec && bootAt * 1e6 < endUs;
  });
  const counted = afterBoot.filter((r) => r.reason === 'unknown_after_boot');
  const other = afterBoot.filter((r) => r.reason !== 'unknown_after_boot');
  const value = sum(counted, 'misses_active');
  const staleBefore = sum(counted, 'misses') - value;
  const byNext = tally(counted, 'next', 'misses_active');
  return {
    value,
    unit: 'count',
    verdict: countVerdict(gates.refused_after_boot.max, value),
    summary:
      `${value} refused miss(es) with reason unknown_after_boot after the boot` +
      (value ? ` (what the session sent next: ${Object.entries(byNext).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${v}`).join(', ')})` : '') +
      (staleBefore ? `; ${staleBefore} more on session(s) already stale before the boot that ended (refused since an earlier restart), not counted` : '') +
      (other.length ? `; ${sum(other, 'misses')} other refused miss(es) after the boot not counted (${Object.keys(tally(other, 'reason', 'misses')).join(', ')}: not caused by the restart)` : ''),
    numbers: { refused_misses: value, not_counted_stale_before: staleBefore, not_counted_other_reasons: sum(other, 'misses'), ...prefixKeys('next_', byNext) },
    // a proxy row's `boot` is the inferred restart's ordinal within L, which another
    // range numbers differently: its boot_at names it
    rows: [...counted, ...other].map((r) =>
      pick({ ...r, boot: r.source === 'proxy' ? 'inferred' : r.boot }, 'source', 'boot', 'boot_at', 'reason', 'http_status', 'http_method', 'mcp_method', 'next', 'misses', 'sessions', 'misses_active'),
    ),
    queries: [refusedL.q],
  };
}

/** Gate 3: arrivals of the boot that ended that never settled (`settlements` over L: the whole life of that boot). */
function measureUnsettledAtShutdown(e: Evidence, gates: GatesConfig): Measured {
  const { settleL, deploy } = e;
  const ended = settleL.rows.filter(
    (r) =>
      deploy.source === 'server' &&
      r.boot_id !== deploy.boot_id &&
      (!deploy.service || r.service === deploy.service) &&
      // every server restart names the boot before it (restarts.prev_boot_id), the
      // service's first boot included: exactly that boot, never a guess
      r.boot_id === deploy.previous_boot_id,
  );
  const value = sum(ended, 'unsettled_at_shutdown');
  const streams = sum(ended, 'streams_open');
  const endedIds = [...new Set(ended.map((r) => String(r.boot_id)))];
  const evaluable = deploy.source === 'server' && sum(settleL.rows, 'arrivals') > 0;
  const streamNote = streams > 0 ? `; ${streams} standalone GET stream(s) were open, which every shutdown closes (not counted)` : '';
  return {
    value: evaluable ? value : null,
    unit: 'count',
    verdict: evaluable ? countVerdict(gates.unsettled_at_shutdown.max, value) : 'not_evaluated',
    summary: evaluable
      ? `${value} of ${sum(ended, 'arrivals') - streams} request(s) of the boot that ended (${endedIds.join(', ') || 'no arrivals recorded'}) never settled${streamNote}`
      : 'no server arrivals: only an instrumented server records arrivals and settlements (collectors/mcp)',
    numbers: {
      unsettled_at_shutdown: evaluable ? value : null,
      arrivals: sum(ended, 'arrivals'),
      settled: sum(ended, 'settled'),
      streams_open: streams,
      ended_boot_id: endedIds.join(', ') || null,
    },
    rows: ended.map((r) => pick(r, 'service', 'boot_id', 'boot_ended', 'mcp_method', 'arrivals', 'settled', 'streams_open', 'unsettled_at_shutdown', 'settled_share')),
    queries: [settleL.q],
  };
}

/**
 * Sessions refused in the deploy window that were refused already before it and never
 * recovered (`session_continuity`'s unrecovered_stale − unrecovered_new): an earlier
 * restart broke them, not this deploy.
 */
function brokenBeforeWindow(rows: ReadonlyArray<Record<string, unknown>>): number {
  return sum(rows, 'unrecovered_stale') - sum(rows, 'unrecovered_new');
}

/** Gate 4: sessions refused in the deploy window and never recovered (`session_continuity` over W). */
function measureSessionsLostTools(e: Evidence, gates: GatesConfig): Measured {
  const { contW } = e;
  const stale = contW.rows.filter((r) => num(r.stale) > 0);
  // a session refused already before the window (an earlier restart broke it) is not this deploy's doing
  const value = sum(contW.rows, 'unrecovered_new');
  const brokenBefore = brokenBeforeWindow(contW.rows);
  return {
    value,
    unit: 'count',
    verdict: countVerdict(gates.sessions_lost_tools.max, value),
    summary:
      `${value} session(s) refused in the deploy window for the first time never recovered (no re-mint, no re-initialize); ` +
      `${sum(stale, 'stale')} refused in it in all, ${sum(stale, 'recovered')} of them recovered` +
      (value
        ? `: ${stale
            .filter((r) => num(r.unrecovered_new) > 0)
            .map((r) => `${num(r.unrecovered_new)} from ${String(r.ua_family) || 'an unknown client'}`)
            .join(', ')}`
        : '') +
      (brokenBefore ? `; ${brokenBefore} more already refused before the window (an earlier restart broke them), not counted` : ''),
    // named as in the rows (session_continuity): unrecovered_stale all of them,
    // unrecovered_new those the gate counts
    numbers: {
      unrecovered_new: value,
      unrecovered_stale: sum(contW.rows, 'unrecovered_stale'),
      not_counted_refused_before: brokenBefore,
      stale: sum(stale, 'stale'),
      recovered: sum(stale, 'recovered'),
      abandoned_after_failure: sum(contW.rows, 'abandoned_after_failure'),
    },
    rows: stale.map((r) => pick(r, 'ua_family', 'origin', 'stale', 'recovered', 'unrecovered_stale', 'unrecovered_new', 'abandoned_after_failure')),
    queries: [contW.q],
  };
}

/**
 * Whether cW/nW > max(ratio × cB/nB, cB/nB + marginPp/100) (cB/nB = 0 when nB is 0;
 * nW > 0), compared on the counts multiplied out, not on the rates: at exactly the
 * limit (3 in 17 against 1 in 17, ratio 3) the rates differed in the last bit
 * (3 × (1/17) < 3/17) and a deploy at the limit failed (a break-it pass). The
 * thresholds are decimals the user wrote, so a difference within 1e-9 of the limit
 * (relative) is at it, not above it.
 */
export function rateAboveLimit(cW: number, nW: number, cB: number, nB: number, ratio: number, marginPp: number): boolean {
  const above = (a: number, b: number) => a - b > 1e-9 * Math.max(Math.abs(a), Math.abs(b));
  if (nB === 0) return cW > 0 && above(100 * cW, marginPp * nW);
  return above(cW * nB, ratio * cB * nW) && above(100 * cW * nB, 100 * cB * nW + marginPp * nW * nB);
}

/** Gate 5: invalid_token/expired_token challenges per request, deploy window against baseline (`auth_challenges`; requests from `settlements` or, without server events, `proxy_traffic`). */
function measureInvalidTokenRate(e: Evidence, gates: GatesConfig): Measured {
  const { authW, authB, settleW, settleB, trafficW, trafficB, serverEvidence } = e;
  const TOKEN_CLASSES = new Set(['invalid_token', 'expired_token']);
  const tokenRows = (rows: Array<Record<string, unknown>>) => rows.filter((r) => TOKEN_CLASSES.has(String(r.challenge_class)));
  // one denominator source for both windows: server arrivals when the deploy window has them
  const requests = (settle: Array<Record<string, unknown>>, traffic: Array<Record<string, unknown>>) =>
    serverEvidence ? sum(settle, 'arrivals') : sum(traffic, 'requests');
  const cW = sum(tokenRows(authW.rows), 'challenges');
  const cB = sum(tokenRows(authB.rows), 'challenges');
  const nW = requests(settleW.rows, trafficW.rows);
  const nB = requests(settleB.rows, trafficB.rows);
  const rateW = nW > 0 ? cW / nW : null;
  const rateB = nB > 0 ? cB / nB : 0;
  const g = gates.invalid_token_rate;
  const limit = Math.max(g.ratio * rateB, rateB + g.margin_pp / 100);
  return {
    value: rateW,
    unit: 'rate',
    verdict: rateW === null ? 'not_evaluated' : rateAboveLimit(cW, nW, cB, nB, g.ratio, g.margin_pp) ? 'fail' : 'pass',
    summary:
      rateW === null
        ? 'no requests in the deploy window'
        : `${cW} invalid/expired-token challenge(s) in ${nW} request(s) = ${pct(rateW)} after the deploy, against ${cB} in ${nB} = ${pct(rateB)} before; limit ${pct(limit)}`,
    numbers: {
      deploy_challenges: cW,
      deploy_requests: nW,
      deploy_rate: rateW,
      baseline_challenges: cB,
      baseline_requests: nB,
      baseline_rate: rateB,
      limit,
      requests_from: serverEvidence ? 'server arrivals' : 'proxy requests',
    },
    rows: tokenRows(authW.rows).map((r) => pick(r, 'hour', 'user_agent', 'challenge_class', 'http_status', 'verdict', 'challenges')),
    queries: [authW.q, authB.q, serverEvidence ? settleW.q : trafficW.q, serverEvidence ? settleB.q : trafficB.q],
  };
}

/** The two success proportions with their exact lower bounds. */
function proportionBounds(e: Evidence, confidence: number, target: number): ProportionBound[] {
  const { survivors, contW, settleW, trafficW, proxyRequestsW, serverEvidence, deploy } = e;
  const bound = (
    id: ProportionBound['id'],
    label: string,
    definition: string,
    source: ProportionBound['source'],
    successes: number,
    trials: number,
    queries: QueryRead[],
  ): ProportionBound => {
    const s = Math.min(successes, trials);
    return {
      id,
      label,
      definition,
      source,
      successes: s,
      trials,
      estimate: trials > 0 ? s / trials : null,
      lower: trials > 0 ? clopperPearsonLower(s, trials, confidence) : null,
      confidence,
      target,
      more_needed: additionalSuccessesNeeded(s, trials, target, confidence),
      queries,
    };
  };
  const survived = survivors.sessions;
  // gate 4 leaves out the sessions an earlier restart broke; so do the trials
  const staleW = sum(contW.rows, 'stale') - brokenBeforeWindow(contW.rows);
  const recoveredW = sum(contW.rows, 'recovered');
  const hasProxy = proxyRequestsW > 0;
  const bounds: ProportionBound[] = [
    bound(
      'sessions_kept_working',
      'sessions active before the deploy that kept working after it',
      "trials: sessions with a 2xx before the restart that were seen again after it, i.e. those of the deploy's service with a 2xx on the same session before the earlier and after the later of its down_from and up_at, in the boot's life (survived), plus those refused in the deploy window (stale), but those already refused before it that never recovered (an earlier restart broke them); successes: survived plus stale sessions that recovered (re-minted or re-initialized)",
      serverEvidence && hasProxy ? 'server+proxy' : serverEvidence ? 'server' : 'proxy',
      survived + recoveredW,
      survived + staleW,
      [survivors.q, contW.q],
    ),
    serverEvidence
      ? bound(
          'requests_succeeded',
          'requests in the deploy window that succeeded',
          'trials: server arrivals in the deploy window whose fate is known (settled, or unsettled on a boot that has ended: the boot before the deploy always has); successes: settled with outcome ok',
          'server',
          sum(settleW.rows, 'ok'),
          sum(settleW.rows, 'settled') + lostWithTheirBoot(settleW.rows, deploy),
          [settleW.q],
        )
      : bound(
          'requests_succeeded',
          'requests in the deploy window that succeeded',
          'trials: requests to the MCP endpoint in the proxy log in the deploy window; successes: upstream 2xx delivered whole (not a response the upstream\'s death cut; no server events)',
          'proxy',
          sum(trafficW.rows, 'ok'),
          proxyRequestsW,
          [trafficW.q],
        ),
  ];
  return bounds;
}

/**
 * Arrivals in `rows` (settlements query) that will never settle: unsettled on a
 * boot of the deploy's service other than the new one (it ended when the deploy
 * booted, even if the query's range holds no event saying so), or unsettled at
 * shutdown as the query judged it. Arrivals still in flight on a running boot are
 * left out: their fate is not known yet; so are standalone GET streams (the
 * query's `streams_open`), which every shutdown ends and which are no request.
 */
function lostWithTheirBoot(rows: ReadonlyArray<Record<string, unknown>>, deploy: DeployInfo): number {
  return rows.reduce(
    (n, r) =>
      n +
      (r.boot_id !== deploy.boot_id && (!deploy.service || r.service === deploy.service)
        ? num(r.unsettled) - num(r.streams_open)
        : num(r.unsettled_at_shutdown)),
    0,
  );
}

function nextSteps(
  gates: readonly GateResult[],
  bounds: readonly ProportionBound[],
  c: { W: TimeRange; B: TimeRange; L: TimeRange; common: Record<string, string | number>; win: Record<string, number>; scope: { service: string; environment: string } },
): PlannedStep[] {
  const out: PlannedStep[] = [];
  const pw = (r: TimeRange, extra: Record<string, string | number> = {}) => rangeParams(r, c.common, extra);
  const failed = new Set(gates.filter((g) => g.verdict === 'fail').map((g) => g.id));
  if (failed.has('proxy_5xx_in_gap')) {
    out.push({ why: 'The restart gap as the proxy saw it: when the 5xx started and stopped, POST vs GET', target: query('proxy_errors', pw(c.W)) });
    out.push({ why: 'Downtime of this and earlier restarts (is the gap growing?)', target: query('restarts', c.common) });
  }
  if (failed.has('refused_after_boot')) {
    out.push({ why: 'Refused misses by reason, status and method, and what each session sent next', target: query('refused_misses', pw(c.L, c.win)) });
    out.push({ why: 'Did the server re-mint the refused sessions, and did clients adopt the replacements?', target: query('remint_pairs', pw(c.W, c.win)) });
  }
  if (failed.has('unsettled_at_shutdown')) {
    out.push({ why: 'Which methods were in flight when the boot ended (settled share per boot and method)', target: query('settlements', pw(c.L)) });
    const ended = gates.find((g) => g.id === 'unsettled_at_shutdown')?.numbers.ended_boot_id;
    const id = typeof ended === 'string' ? ended : null;
    // only a plain id goes into a SQL literal in a suggested command
    if (id && /^[\w.:-]+$/.test(id)) {
      out.push({
        why: 'The unsettled arrivals themselves (ad hoc, read-only SQL)',
        target: {
          kind: 'sql',
          // (as the gate counts them: not the GET streams a shutdown closes, settlements.sql;
          // FINAL: a re-delivered event once)
          sql: `SELECT ts, arrival_id, mcp_method, tool_name FROM events FINAL WHERE event_type = 'arrival' AND boot_id = '${id}' AND http_method <> 'GET' AND arrival_id NOT IN (SELECT arrival_id FROM events WHERE event_type = 'settlement') ORDER BY ts`,
        },
      });
    }
    out.push({ why: 'Drain on shutdown: wait for in-flight requests (or SSE streams) before exiting, and check the shutdown reason', target: query('restarts', c.common) });
  }
  if (failed.has('sessions_lost_tools')) {
    out.push({ why: 'Which clients (user-agent family, origin) kept a dead session id, and which recovered', target: query('session_continuity', pw(c.W, c.win)) });
    out.push({ why: 'Recovery pairs (stale → replacement), adopted or orphaned', target: query('remint_pairs', pw(c.W, c.win)) });
  }
  if (failed.has('invalid_token_rate')) {
    out.push({ why: 'Challenges by hour, user agent and class, judged benign, lost or loop (after the deploy)', target: query('auth_challenges', pw(c.W)) });
    out.push({ why: 'The same before the deploy, for comparison', target: query('auth_challenges', pw(c.B)) });
  }
  // a share below the target is a finding, not thin evidence; a share at it with too
  // few observations is thin evidence
  const low = bounds.filter((b) => b.trials > 0 && b.estimate !== null && b.estimate < b.target);
  const thin = bounds.filter((b) => b.trials > 0 && b.estimate !== null && b.estimate >= b.target && b.lower !== null && b.lower < b.target);
  if (failed.size === 0) {
    for (const b of low) {
      out.push({
        why: `No gate failed, but ${b.label}: ${b.successes} of ${b.trials} (${pct(b.estimate!)}), below the ${pct(b.target, 0)} target. Find those that did not`,
        target: b.id === 'sessions_kept_working' ? query('session_continuity', pw(c.W, c.win)) : query(b.source === 'proxy' ? 'proxy_traffic' : 'settlements', pw(c.W)),
      });
    }
    if (thin.length > 0) {
      out.push({
        why: `The evidence is still thin: ${thin.map((b) => `${b.label}: ${b.more_needed} more clean observation(s) to claim ${pct(b.target, 0)}`).join('; ')}. Compare with earlier deploys`,
        target: query('restarts', c.common),
      });
    }
  }
  // (from the boot that ended: `restarts` counts a boot only after an earlier one in the
  // range, so a report over the window alone, from down_from, showed no restart at all;
  // a newcomer pass)
  out.push({
    why: 'The full continuity report from the boot that ended through the deploy window',
    target: reportStep(rangeParams({ from: c.L.from, to: c.W.to }, c.scope, {})),
  });
  // Two failed gates may point at the same command: list it once, with both reasons.
  const joined = (a: string, b: string) => (/[?.]$/.test(a) ? `${a} ${b}` : `${a}; ${b[0]!.toLowerCase()}${b.slice(1)}`);
  const byTarget = new Map<string, PlannedStep>();
  for (const planned of out) {
    const key = JSON.stringify(planned.target);
    const seen = byTarget.get(key);
    byTarget.set(key, seen ? { ...seen, why: joined(seen.why, planned.why) } : planned);
  }
  return [...byTarget.values()];
}

/**
 * Notes for a baseline that begins, or a deploy window that ends, well away from the
 * store's events in scope (`held`, over `fromUs`..`endUs`, µs): an imported log that
 * ends a minute into a 15-minute window judged the deploy on that minute, and the
 * report did not say so (a newcomer pass). "Well away": more than a minute and more
 * than a tenth of the span.
 */
function eventSpanNotes(held: EventSpan, fromUs: number, endUs: number): string[] {
  if (held.first_at === null || held.last_at === null) return [];
  const slack = Math.max(60e6, (endUs - fromUs) / 10);
  const firstUs = storeTimeToMicros(held.first_at);
  const lastUs = storeTimeToMicros(held.last_at);
  const s = (us: number) => (us / 1e6).toFixed(3);
  const notes: string[] = [];
  if (firstUs - fromUs > slack) {
    notes.push(`The store's first event in scope is at ${isoMicros(firstUs)}, ${s(firstUs - fromUs)} s after the baseline begins: that part of the baseline holds no events.`);
  }
  if (endUs - lastUs > slack) {
    notes.push(
      `The store's last event in scope is at ${isoMicros(lastUs)}, ${s(endUs - lastUs)} s before the deploy window ends: that part of the window holds no events (a log that ends there, or no traffic).`,
    );
  }
  return notes;
}

/** Query parameters for a range; a range from the epoch leaves `t_from` at its default (everything). */
function rangeParams(r: Pick<TimeRange, 'from' | 'to'>, common: Record<string, string | number>, extra: Record<string, string | number>): Record<string, string | number> {
  return { ...(r.from === isoMicros(EPOCH) ? {} : { t_from: r.from }), t_to: r.to, ...common, ...extra };
}

/** A named query as a next step; empty parameters left out. */
function query(name: string, params: Record<string, string | number>): StepTarget {
  return { kind: 'query', name, params: withoutEmpty(params) };
}

/** The continuity report as a next step; empty parameters left out. */
function reportStep(params: Record<string, string | number>): StepTarget {
  return { kind: 'report', params: withoutEmpty(params) };
}

function withoutEmpty(params: Record<string, string | number>): Record<string, string | number> {
  return Object.fromEntries(Object.entries(params).filter(([, v]) => v !== ''));
}

/** `continuity report`'s flag for each of the read API's report parameters it takes. */
const REPORT_FLAGS: Readonly<Record<string, string>> = { t_from: 'from', t_to: 'to', service: 'service', environment: 'environment' };

/**
 * A next step written as a shell command: by default the CLI's (`continuity query <name>
 * --param k=v …`, `continuity sql '…'`, `continuity report --from … --to …`), starting with
 * `options.command`; with `options.api`, a `curl` of that read API's `GET
 * /api/queries/<name>?k=v…`, `POST /api/sql` or `GET /api/report`. Values are
 * shell-quoted where needed ({@link shellQuote}).
 */
export function stepCommand(t: StepTarget, options: Pick<CanaryOptions, 'command' | 'api'>): string {
  const api = options.api;
  if (api) {
    const base = api.base.replace(/\/+$/, '');
    // (--fail-with-body: an error answer, e.g. 401 with the variable unset, is a failed command, its coded error printed)
    const curl = `curl -s --fail-with-body${api.token ? ' -H "authorization: Bearer $CONTINUITY_INGEST_TOKEN"' : ''}`;
    const get = (path: string, params: Record<string, string | number>) => {
      const qs = new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)])).toString();
      return `${curl} ${shellQuote(`${base}${path}${qs ? `?${qs}` : ''}`)}`;
    };
    if (t.kind !== 'sql') return get(t.kind === 'query' ? `/api/queries/${t.name}` : '/api/report', t.params);
    return `${curl} -H 'content-type: application/json' --data ${shellQuote(JSON.stringify({ sql: t.sql }))} ${shellQuote(`${base}/api/sql`)}`;
  }
  const cli = options.command ?? 'continuity';
  if (t.kind === 'query') return [`${cli} query`, t.name, ...Object.entries(t.params).map(([k, v]) => `--param ${shellQuote(`${k}=${String(v)}`)}`)].join(' ');
  // (--flag=value: a service named `--data-dir=…` is a value, not another flag; a break-it pass)
  if (t.kind === 'report') return [`${cli} report`, ...Object.entries(t.params).map(([k, v]) => `--${REPORT_FLAGS[k] ?? k}=${shellQuote(String(v))}`)].join(' ');
  return `${cli} sql ${shellQuote(t.sql)}`;
}

/**
 * Quotes `s` for a POSIX shell when it holds anything but plain characters:
 * double quotes when nothing in it is special inside them (SQL with '…' literals
 * stays readable), else single quotes.
 */
export function shellQuote(s: string): string {
  if (/^[\w.,:@%+=/-]+$/.test(s)) return s;
  if (!/["$`\\!]/.test(s)) return `"${s}"`;
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

function pick(r: Record<string, unknown>, ...keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.map((k) => [k, r[k] ?? null]));
}

function tally(rows: ReadonlyArray<Record<string, unknown>>, key: string, value: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of rows) out[String(r[key])] = (out[String(r[key])] ?? 0) + num(r[value]);
  return out;
}

function prefixKeys(prefix: string, o: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [prefix + k, v]));
}

/** A fraction as a percentage ("1.25%"). */
export function pct(x: number, digits = 2): string {
  return `${(x * 100).toFixed(digits)}%`;
}

function firstLine(s: string): string {
  return s.split('\n')[0] ?? s;
}
