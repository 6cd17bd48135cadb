import { oneLine, visibleText } from '../core/text.ts';
import { formatCounts, type ContinuityReport } from './continuity.ts';

/** Renders the continuity report for a terminal: a summary, the numbers, the findings. */
export function renderContinuityText(r: ContinuityReport): string {
  const lines: string[] = [];
  // (each value and finding on its line: a user agent holding a line break began a
  // line of its own, "FAKE: No continuity problems found"; a break-it pass)
  const kv = (k: string, v: unknown) => lines.push(`  ${oneLine(k).padEnd(38)} ${oneLine(String(v))}`);
  lines.push('MCP session-continuity report');
  lines.push(`  range (UTC, as every time below): ${r.range.t_from} .. ${r.range.t_to}${r.range.service ? `  service: ${oneLine(r.range.service)}` : ''}${r.range.environment ? `  environment: ${oneLine(r.range.environment)}` : ''}`);
  lines.push('');
  lines.push(r.lines.scope === 'store' ? 'Input (every file imported into the store, each once; not limited to the range)' : 'Input');
  kv('lines parsed / rejected / skipped / read', `${r.lines.parsed} / ${r.lines.rejected} / ${r.lines.skipped} / ${r.lines.read}`);
  lines.push('Restarts');
  kv('restarts (server boots)', r.restarts.server);
  kv('restarts (inferred from proxy)', r.restarts.inferred);
  // (each restart says its source and service: listed under the counts, a server boot
  // read as one of the proxy's; a newcomer pass)
  for (const x of r.restarts.list) {
    const who = `${x.source === 'server' ? 'server boot' : 'inferred from proxy'}${x.service ? `, service ${String(x.service)}` : ''}`;
    kv(`  ${String(x.up_at ?? x.down_from)}`, `${who}: ${String(x.evidence)}; downtime ${x.downtime_s ?? '?'} s; proxy 5xx ${String(x.proxy_5xx)}; sessions refused ${String(x.sessions_refused)}`);
  }
  kv('proxy-generated 5xx', r.proxy_errors.proxy_generated);
  if (r.settlements.arrivals > 0) {
    lines.push('Requests (server)');
    kv('arrivals / settled / unsettled at shutdown', `${r.settlements.arrivals} / ${r.settlements.settled} / ${r.settlements.unsettled_at_shutdown}`);
  }
  lines.push('Refused misses');
  kv('total / sessions', `${r.refused_misses.total} / ${r.refused_misses.sessions}`);
  kv('by reason', formatCounts(r.refused_misses.by_reason));
  kv('what the session did next', formatCounts(r.refused_misses.by_next));
  lines.push('Re-mints');
  kv('distinct pairs / adopted / orphaned', `${r.remint_pairs.distinct} / ${r.remint_pairs.adopted} / ${r.remint_pairs.orphaned}`);
  lines.push('Sessions');
  kv('unrecovered stale', r.sessions.unrecovered_stale);
  kv('recovered', r.sessions.recovered);
  kv('minted but never used', r.sessions.minted_unused);
  kv('abandoned after failure', r.sessions.abandoned_after_failure);
  lines.push('Auth challenges');
  kv('missing_credential / invalid_token', `${r.auth_challenges.missing_credential} / ${r.auth_challenges.invalid_token}`);
  kv('expired / insufficient_scope / other', `${r.auth_challenges.expired_token} / ${r.auth_challenges.insufficient_scope} / ${r.auth_challenges.other}`);
  // (with paths that match no proxy line no success clears a challenge: the verdicts are
  // the query's, not confirmed loops; the findings say so, a newcomer pass)
  const unconfirmed = r.mcp_paths?.verdict === 'none_match' && Object.keys(r.auth_challenges.by_verdict).length > 0;
  kv('verdicts', formatCounts(r.auth_challenges.by_verdict) + (unconfirmed ? ' (unconfirmed: the configured MCP paths match no proxy line)' : ''));
  lines.push('');
  lines.push('Findings');
  for (const f of r.findings) lines.push(`  - ${oneLine(f)}`);
  // Values from the store (a user agent in a finding, a service name) are shown, never
  // acted on: control and bidi characters as escapes (core/text.ts; a break-it pass
  // found an OSC title change and U+202E from a user agent reaching the terminal).
  return visibleText(lines.join('\n') + '\n');
}
