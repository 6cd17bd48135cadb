import type { DrillResult } from './run.ts';

/** Renders a drill result for a terminal: timeline, what the client saw, and truth vs reported per check. */
export function renderDrillText(r: DrillResult): string {
  const out: string[] = [];
  const t = r.truth;
  out.push(`restart drill, variant ${r.variant} (service ${r.service}): ${r.ok ? 'PASS' : 'FAIL'} in ${r.duration_s.toFixed(1)} s`);
  out.push('timeline:');
  for (const e of r.timeline) out.push(`  +${e.t.toFixed(3).padStart(7)} s  ${e.what}`);
  const statuses = Object.entries(t.by_status)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([s, n]) => `${s}×${n}`)
    .join(' ');
  out.push(`client: ${t.requests} HTTP requests (${statuses}); sessions minted ${t.sessions.minted}, stale ${t.sessions.stale}, recovered ${t.sessions.recovered}`);
  for (const b of t.boots) {
    out.push(`  boot ${b.label}: ${b.ended_by}, open at the end: ${b.open_at_end.join(', ') || 'none'}`);
  }
  for (const x of t.restarts) out.push(`  restart ${x.k} (${x.kind}): down ${x.down_ms} ms, ${x.proxy_502} proxy 502(s); in flight at the kill: ${x.client_in_flight.join(', ') || 'none'}`);
  out.push(`proxy log: ${r.proxy_import.lines_read} lines, ${r.proxy_import.proxy_access} proxy_access, ${r.proxy_import.joined_upstream_errors} joined to upstream errors, ${r.proxy_import.rejected} rejected`);
  const width = Math.max(...r.checks.map((c) => c.name.length));
  out.push(`${'check'.padEnd(width)}  truth  reported`);
  for (const c of r.checks) {
    const reported = c.reported === null ? '—' : String(c.reported);
    const tag = c.kind === 'drill' ? ' (drill precondition)' : '';
    out.push(`${c.name.padEnd(width)}  ${String(c.truth).padStart(5)}  ${reported.padStart(8)}  ${c.ok ? 'ok' : 'DIFFERS'}${tag}${!c.ok && c.note ? `: ${c.note}` : ''}`);
  }
  const failed = r.checks.filter((c) => !c.ok);
  if (failed.length > 0) {
    out.push(`${failed.length} of ${r.checks.length} numbers differ; reported numbers are read from:`);
    for (const c of failed) out.push(`  ${c.name}: ${c.reads}`);
  }
  if (r.files) out.push(`files kept in ${r.files.dir}`);
  return out.join('\n') + '\n';
}
