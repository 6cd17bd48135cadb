import { checkMcpPaths, checkReportParams, runQuery, type McpPathsCheck, type McpPathsSetting } from '../queries/index.ts';
import { retentionDaysOf, type Store } from '../store/index.ts';
import { formatTimeMicros, parseTimeMicros } from '../core/time.ts';

/** Lines read by the import(s) the report covers. */
export interface LineCounts {
  read: number;
  parsed: number;
  rejected: number;
  /** Neither parsed nor rejected: lines of other kinds (Caddy's runtime logs) and blank lines, so parsed + rejected + skipped = read. */
  skipped: number;
  /**
   * What the counts cover: `import`, the import this report follows (`continuity
   * import`); `store`, every input ever imported into the store, each content counted
   * once, whatever the report's range, service or environment: an import run is a
   * file, not a time range (absent: `import`). See {@link importedLineCounts} for what
   * counts as the same content.
   */
  scope?: 'import' | 'store';
  /**
   * The import's lines older than the store's retention (`all` or `some`, by the
   * input's time range), which the store drops; absent: none (or not an import).
   */
  expired?: 'all' | 'some';
  /**
   * The store's retention, days (0: kept for ever), the one it keeps now; with
   * `expired`, the one those lines are older than. Absent: not read (`continuity import`).
   */
  retention_days?: number;
  /**
   * With scope `import` (`continuity analyze`): what else the store held, since the
   * report's numbers are the whole store's: lines of the other inputs ever imported
   * into it (each content once, {@link importedLineCounts}), and its server events
   * (from `serve` or `consumer`). Absent: not counted (`continuity import`).
   */
  others?: { lines: number; server_events: number };
}

/**
 * The session-continuity report: what `continuity analyze` and `continuity report`
 * print. Every number comes from the named queries (DESIGN §4) over the stored
 * events; `--json` prints this object. Counts are events or distinct sessions as
 * named; times are ISO-8601 UTC; durations are seconds.
 */
export interface ContinuityReport {
  range: { t_from: string; t_to: string; service: string; environment: string };
  lines: LineCounts;
  /** `server`: restarts from boot events; `inferred`: proxy-inferred restarts no server boot explains. */
  restarts: { total: number; server: number; inferred: number; list: Array<Record<string, unknown>> };
  /** Arrivals joined to settlements by arrival_id (server evidence only). */
  settlements: { arrivals: number; settled: number; unsettled: number; unsettled_at_shutdown: number; settled_share: number | null; tool_error: number };
  proxy_errors: { proxy_generated: number; gaps: number; gap_p50_s: number | null; gap_max_s: number | null };
  refused_misses: {
    total: number;
    sessions: number;
    by_reason: Record<string, number>;
    by_status: Record<string, number>;
    by_next: Record<string, number>;
  };
  remint_pairs: { distinct: number; adopted: number; orphaned: number; inferred: number };
  sessions: {
    total: number;
    minted_unused: number;
    stale: number;
    recovered: number;
    unrecovered_stale: number;
    abandoned_after_failure: number;
    survived_1_restart: number;
    survived_2_restarts: number;
    by_ua_family: Array<Record<string, unknown>>;
  };
  auth_challenges: {
    total: number;
    missing_credential: number;
    invalid_token: number;
    expired_token: number;
    insufficient_scope: number;
    invalid_request: number;
    other: number;
    by_verdict: Record<string, number>;
  };
  /**
   * The configured MCP endpoint paths (`mcp_paths`, CONTINUITY_MCP_PATHS) against the
   * proxy log in the range (queries/registry.ts checkMcpPaths); null when none are
   * configured (the endpoint is inferred). Its `warning`, when set, is the first finding.
   */
  mcp_paths: McpPathsCheck | null;
  /**
   * Plain-language findings for the on-call reader, most important first. A
   * configured endpoint path that matches no proxy line comes first, and when none
   * matches the report never says that no problem was found: it did not look.
   */
  findings: string[];
}

/** Query parameters shared by all sections (see queries/registry.ts CommonParams). */
export type ReportParams = Record<string, unknown>;

const num = (v: unknown): number => (typeof v === 'number' ? v : Number(v ?? 0));

function tally(rows: Array<Record<string, unknown>>, key: string, value: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of rows) out[String(r[key])] = (out[String(r[key])] ?? 0) + num(r[value]);
  return out;
}

/**
 * Builds the report by running the named queries.
 * @param lines import line counts; when omitted, the store's ({@link importedLineCounts}).
 * @param pathsSetting where `mcp_paths` came from, for the finding when it matches no
 *   proxy line: CONTINUITY_MCP_PATHS (default) or a request's own `mcp_paths`.
 * @throws ContinuityError from the store or for bad parameters.
 */
export async function buildContinuityReport(store: Store, params: ReportParams = {}, lines?: LineCounts, pathsSetting?: McpPathsSetting): Promise<ContinuityReport> {
  // a bad parameter is the report's error, named as given (not by the query that bound it first)
  checkReportParams(params);
  const windowParams = { ...params };
  const common = Object.fromEntries(Object.entries(params).filter(([k]) => ['t_from', 't_to', 'service', 'environment', 'mcp_paths'].includes(k)));
  const [restarts, proxyErrors, refused, pairs, continuity, auth, settlements, mcpPaths] = await Promise.all([
    runQuery(store, 'restarts', common),
    runQuery(store, 'proxy_errors', common),
    runQuery(store, 'refused_misses', pick(windowParams, 'window_s')),
    runQuery(store, 'remint_pairs', pick(windowParams, 'window_s')),
    runQuery(store, 'session_continuity', pick(windowParams, 'window_s')),
    runQuery(store, 'auth_challenges', pick(windowParams, 'auth_window_s', 'loop_min')),
    runQuery(store, 'settlements', common),
    // last, so that for a bad parameter the named query's error is the one reported
    checkMcpPaths(store, common, undefined, pathsSetting),
  ]);
  function pick(p: ReportParams, ...extra: string[]): ReportParams {
    return { ...common, ...Object.fromEntries(Object.entries(p).filter(([k]) => extra.includes(k))) };
  }

  const sum = (rows: Array<Record<string, unknown>>, key: string) => rows.reduce((a, r) => a + num(r[key]), 0);
  const classes = tally(auth, 'challenge_class', 'challenges');
  const report: ContinuityReport = {
    range: {
      t_from: rangeEnd(params.t_from),
      t_to: rangeEnd(params.t_to),
      service: String(params.service ?? ''),
      environment: String(params.environment ?? ''),
    },
    lines: lines ?? { ...(await importedLineCounts(store)), retention_days: await retentionDaysOf(store) },
    restarts: {
      total: restarts.length,
      server: restarts.filter((r) => r.source === 'server').length,
      inferred: restarts.filter((r) => r.source === 'proxy').length,
      list: restarts,
    },
    settlements: {
      arrivals: sum(settlements, 'arrivals'),
      settled: sum(settlements, 'settled'),
      unsettled: sum(settlements, 'unsettled'),
      unsettled_at_shutdown: sum(settlements, 'unsettled_at_shutdown'),
      settled_share: sum(settlements, 'arrivals') > 0 ? sum(settlements, 'settled') / sum(settlements, 'arrivals') : null,
      tool_error: sum(settlements, 'tool_error'),
    },
    proxy_errors: {
      proxy_generated: sum(proxyErrors, 'proxy_5xx'),
      gaps: proxyErrors.length,
      gap_p50_s: proxyErrors.length ? num(proxyErrors[0]!.gap_p50_s) : null,
      gap_max_s: proxyErrors.length ? num(proxyErrors[0]!.gap_max_s) : null,
    },
    refused_misses: {
      total: sum(refused, 'misses'),
      sessions: sum(continuity, 'stale'),
      by_reason: tally(refused, 'reason', 'misses'),
      by_status: tally(refused, 'http_status', 'misses'),
      by_next: tally(refused, 'next', 'misses'),
    },
    remint_pairs: {
      distinct: pairs.length,
      adopted: pairs.filter((p) => p.adopted === true || p.adopted === 1).length,
      orphaned: pairs.filter((p) => !(p.adopted === true || p.adopted === 1)).length,
      inferred: pairs.filter((p) => num(p.inferred) === 1).length,
    },
    sessions: {
      total: sum(continuity, 'sessions'),
      minted_unused: sum(continuity, 'minted_unused'),
      stale: sum(continuity, 'stale'),
      recovered: sum(continuity, 'recovered'),
      unrecovered_stale: sum(continuity, 'unrecovered_stale'),
      abandoned_after_failure: sum(continuity, 'abandoned_after_failure'),
      survived_1_restart: sum(continuity, 'survived_1'),
      survived_2_restarts: sum(continuity, 'survived_2'),
      by_ua_family: continuity,
    },
    auth_challenges: {
      total: sum(auth, 'challenges'),
      missing_credential: classes.missing_credential ?? 0,
      invalid_token: classes.invalid_token ?? 0,
      expired_token: classes.expired_token ?? 0,
      insufficient_scope: classes.insufficient_scope ?? 0,
      invalid_request: classes.invalid_request ?? 0,
      other: classes.other ?? 0,
      by_verdict: tally(auth, 'verdict', 'challenges'),
    },
    mcp_paths: mcpPaths,
    findings: [],
  };
  report.findings = findings(report);
  return report;
}

/**
 * The lines of every input imported into the store (`import_runs`), each content
 * once: importing the same lines again stores nothing twice (deterministic event ids
 * and deduplication tokens), so they are counted once too.
 *
 * - The same content (SHA-256 of the decompressed bytes: a file and its gzip are the
 *   same) counts once, with its latest run's counts.
 * - A content that a later import extends (a log that grew: the later input begins
 *   with all of its bytes) does not count: the longer run counts every line of it. A
 *   log caught in the middle of a line counts the line as it was read when complete.
 *   Only an earlier, shorter content is recognised (the import computes the prefix
 *   hashes at the lengths imported before it): a shorter copy imported after the
 *   longer log counts on its own.
 * - A corrected file (rejected lines fixed by hand, then imported again) is new
 *   content, so both runs count: the first with its rejected lines (they stay in
 *   `dead_letters`), the second with the fixed ones parsed; the lines the two share
 *   count twice (their events are stored once). Telling a correction from another
 *   log that shares some lines would take a hash of every line; `import_runs` keeps
 *   each run's counts and `origin` to read them apart.
 * - Runs recorded before migration 0009 are known by the hash of their bytes as read;
 *   a later run of the same bytes matches them, a grown log does not extend them.
 *
 * Keys are per kind (an access log and an error log are different inputs, even when
 * one file is given as both). `skipped` is what is neither parsed nor rejected (blank
 * lines included: runs do not record them apart).
 */
export async function importedLineCounts(store: Store): Promise<LineCounts> {
  // content: the decompressed hash; for an old run, that of a later run with the same
  // bytes, else the old hash. A content named in a run's prefix_hashes was extended.
  const [row] = await store.query<{ read: number; parsed: number; rejected: number }>(
    `SELECT sum(latest.1) AS read, sum(latest.2) AS parsed, sum(latest.3) AS rejected
     FROM
     (
         SELECT argMax((lines_read, lines_parsed, lines_rejected), (finished_at, run_id)) AS latest
         FROM
         (
             SELECT r.kind AS kind, r.run_id AS run_id, r.finished_at AS finished_at,
                    r.lines_read AS lines_read, r.lines_parsed AS lines_parsed, r.lines_rejected AS lines_rejected,
                    multiIf(r.decoded_hash != '', r.decoded_hash,
                            ifNull(m.same_bytes_hash, '') != '', m.same_bytes_hash,
                            r.content_hash != '', r.content_hash,
                            toString(r.run_id)) AS content
             FROM import_runs AS r
             LEFT JOIN
             (
                 SELECT kind, content_hash, any(decoded_hash) AS same_bytes_hash
                 FROM import_runs
                 WHERE decoded_hash != '' AND content_hash != ''
                 GROUP BY kind, content_hash
             ) AS m ON m.kind = r.kind AND m.content_hash = r.content_hash
         )
         WHERE (kind, content) NOT IN (SELECT kind, arrayJoin(prefix_hashes) FROM import_runs)
         GROUP BY kind, content
     )`,
  );
  const read = num(row?.read);
  const parsed = num(row?.parsed);
  const rejected = num(row?.rejected);
  return { read, parsed, rejected, skipped: Math.max(0, read - parsed - rejected), scope: 'store' };
}

/**
 * A range end as the report shows it: 'all' when absent, else the time in UTC as
 * `YYYY-MM-DD hh:mm:ss[.ffffff]` however it was typed (epoch seconds, ISO 8601 with
 * `T`/`Z` or an offset: the header once echoed `2026-11-30 04:05:00 .. 2026-11-30T04:06:00Z`,
 * a newcomer pass); a value that is not a time as given (the parameters were checked
 * before, so only a caller's own).
 */
function rangeEnd(v: unknown): string {
  if (v === undefined || v === null) return 'all';
  const us = typeof v === 'number' || typeof v === 'string' ? parseTimeMicros(v) : undefined;
  return us === undefined ? String(v) : formatTimeMicros(us).replace(/\.0{6}$/, '');
}

/** The report's range in words: `in the whole store`, `from X`, `before Y`, `in X .. Y` ('all' = unbounded). */
function rangeWords(range: ContinuityReport['range']): string {
  const from = range.t_from === 'all' ? '' : range.t_from;
  const to = range.t_to === 'all' ? '' : range.t_to;
  if (from && to) return `in ${from} .. ${to}`;
  if (from) return `from ${from}`;
  if (to) return `before ${to}`;
  return 'in the whole store';
}

function findings(r: ContinuityReport): string[] {
  const out: string[] = [];
  const paths = r.mcp_paths;
  const unrecovered = r.sessions.by_ua_family.filter((row) => num(row.unrecovered_stale) > 0);
  if (r.sessions.unrecovered_stale > 0) {
    const who = unrecovered.map((row) => `${num(row.unrecovered_stale)} from ${String(row.ua_family) || 'unknown client'}`).join(', ');
    out.push(
      `${r.sessions.unrecovered_stale} session(s) kept sending a session id the server no longer knew and never re-initialized (${who}): those chats lost their tools.`,
    );
  }
  if (r.restarts.total > 0) {
    out.push(
      `${r.restarts.total} restart(s): ${r.restarts.server} from server boot events, ${r.restarts.inferred} inferred from the proxy log; ` +
        `${r.proxy_errors.proxy_generated} request(s) got a proxy-generated 5xx while the upstream was down.`,
    );
  }
  if (r.settlements.unsettled_at_shutdown > 0) {
    out.push(`${r.settlements.unsettled_at_shutdown} request(s) never settled: the process died under them (in flight at shutdown).`);
  }
  if (r.refused_misses.total > 0) {
    out.push(`${r.refused_misses.total} refused miss(es) on ${r.refused_misses.sessions} session(s); next action: ${formatCounts(r.refused_misses.by_next)}.`);
  }
  for (const row of r.sessions.by_ua_family) {
    if (num(row.minted_unused) >= 2) {
      out.push(
        `${num(row.minted_unused)} session id(s) minted but never sent back by the client` +
          `${row.origin ? ` (origin ${String(row.origin)})` : ''}${row.ua_family ? ` [${String(row.ua_family)}]` : ''}: ` +
          'the client does not return Mcp-Session-Id (for browsers: expose it with Access-Control-Expose-Headers).',
      );
    }
  }
  const loops = r.auth_challenges.by_verdict.loop ?? 0;
  const lost = r.auth_challenges.by_verdict.lost ?? 0;
  if (paths?.verdict === 'none_match' && loops + lost > 0) {
    // Challenges count on any path, successes only on the endpoint: with paths that match
    // no line, no proxy success clears a challenge, and every one looks lost or looped
    // (a newcomer pass: 3 "authentication loops" from a mistyped path).
    out.push(
      `${loops + lost} challenge(s) look like authentication loops or lost sessions, but no success on the proxy was read to clear them: the configured MCP paths match no proxy line (above). Correct them before reading these.`,
    );
  } else {
    if (loops > 0) out.push(`${loops} challenge(s) belong to authentication loops: a client challenged again and again with no success in between.`);
    if (lost > 0) out.push(`${lost} challenge(s) hit established sessions that never succeeded again (tools lost to auth).`);
  }
  if (r.sessions.abandoned_after_failure > 0) {
    out.push(`${r.sessions.abandoned_after_failure} session(s) ended on a failure with no re-initialize from the same client.`);
  }
  if (r.remint_pairs.orphaned > 0) out.push(`${r.remint_pairs.orphaned} replacement session(s) were never adopted by the client.`);
  // The import's lines older than the retention: the store drops them in a merge it
  // schedules right after the write, so until then some may still be counted; the
  // finding comes first and, when it is every line, replaces any verdict on the range
  // (a newcomer pass: "nothing to judge … check --from/--to").
  const days = r.lines.retention_days;
  const expired =
    r.lines.expired === 'all'
      ? `Every line of this input is older than the store's ${days}-day retention: the store drops them (numbers above 0 here are lines it has not dropped yet), so there is nothing to judge; import it again with CONTINUITY_RETENTION_DAYS=0 (keep events for ever) or enough days.`
      : r.lines.expired === 'some'
        ? `Some lines of this input are older than the store's ${days}-day retention: the store drops them, and this report leaves them out once it has; CONTINUITY_RETENTION_DAYS=0 (keep events for ever) or enough days keeps them.`
        : undefined;
  // The report is the store's, not the input's: say so where the store held more than
  // this import (a newcomer pass: a second `analyze` of another log printed the first
  // log's restarts and misses as its own).
  const others = r.lines.others;
  const held = others
    ? [others.lines > 0 ? `${others.lines} line(s) of other imported logs` : '', others.server_events > 0 ? `${others.server_events} server event(s)` : ''].filter(Boolean)
    : [];
  const mixed = held.length
    ? `The numbers above are the whole store's, which also holds ${held.join(' and ')} besides this input: to judge this input alone, analyze it with --data-dir naming a new directory.`
    : undefined;
  const first = [paths?.warning, expired, mixed].filter((f): f is string => typeof f === 'string' && f !== '');
  // With no configured path in the log, the proxy-derived sections looked at nothing.
  if (out.length === 0 && paths?.verdict !== 'none_match' && r.lines.expired !== 'all') {
    // Nothing at all is not a clean range: a mistyped --data-dir opens a new, empty
    // store, a mistyped --service matches nothing, and a log of rejected lines holds
    // nothing (found by a newcomer pass: each said "no problems").
    const seenNothing =
      r.settlements.arrivals === 0 && r.sessions.total === 0 && r.restarts.total === 0 && r.auth_challenges.total === 0 && r.refused_misses.total === 0 && r.proxy_errors.proxy_generated === 0;
    const scope = [r.range.service ? `service ${JSON.stringify(r.range.service)}` : '', r.range.environment ? `environment ${JSON.stringify(r.range.environment)}` : '']
      .filter(Boolean)
      .join(', ');
    if (!seenNothing) out.push('No continuity problems found in this range.');
    else if (r.lines.scope === 'store' && r.lines.read === 0)
      out.push(
        'Nothing to judge: no proxy log was ever imported into this store, and it holds no server events in this range (check --data-dir, --from/--to and --service; `continuity import` or `continuity serve` fill a store).',
      );
    else if (r.lines.scope === 'store' && r.lines.parsed > 0 && r.range.t_from === 'all' && r.range.t_to === 'all' && !scope) {
      // Parsed lines whose events are all gone: only the retention removes events (a
      // newcomer pass: a report after a 1-day retention dropped them blamed the filters).
      const now = r.lines.retention_days ? `its ${r.lines.retention_days}-day retention` : 'a retention it had before (it now keeps events for ever)';
      out.push(
        `Nothing to judge: ${r.lines.parsed} line(s) imported into this store were parsed, but it holds none of their events: ${now} dropped them; ` +
          'import the files again with CONTINUITY_RETENTION_DAYS=0 (keep events for ever) or enough days to keep them.',
      );
    } else
      out.push(
        `Nothing to judge: no session, server arrival, restart, refused miss or challenge ${rangeWords(r.range)}${scope ? ` for ${scope}` : ''}` +
          (r.lines.parsed === 0 && r.lines.rejected > 0 ? `, and every line imported into this store was rejected (${r.lines.rejected}; \`continuity import\` lists them with their reasons)` : '') +
          ' (check --from/--to, --service and --environment).',
      );
  }
  return [...first, ...out];
}

/**
 * Counts by name as `name n, name n`, in the order given ('none' when there are none):
 * the report's tallies for a person (the text report and the findings), not JSON.
 */
export function formatCounts(by: Readonly<Record<string, number>>): string {
  const entries = Object.entries(by);
  return entries.length === 0 ? 'none' : entries.map(([k, n]) => `${k} ${n}`).join(', ');
}
