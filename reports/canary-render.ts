import { oneLine, visibleText } from '../core/text.ts';
import { pct, type CanaryReport, type GateResult, type ProportionBound, type QueryRead } from './canary.ts';

/** Output formats of the canary report. */
export type CanaryFormat = 'md' | 'json' | 'html';
/** The formats `--format` accepts. */
export const CANARY_FORMATS: readonly CanaryFormat[] = ['md', 'json', 'html'];

/**
 * Renders the canary report: `json` is the whole object; `md` and `html` read
 * top to bottom as summary line, gates (threshold, value, verdict, evidence),
 * bounds, what to look at next. Event values (user agents, boot ids, releases)
 * are escaped for the format: HTML entities in `html`, which is self-contained
 * (inline CSS, no scripts, no external assets, a CSP that forbids both);
 * Markdown-significant characters in `md`.
 */
export function renderCanary(r: CanaryReport, format: CanaryFormat): string {
  if (format === 'json') return JSON.stringify(r, null, 2) + '\n';
  if (format === 'html') return renderCanaryHtml(r);
  return renderCanaryMarkdown(r);
}

const VERDICT_TEXT = { pass: 'PASS', fail: 'FAIL', cannot_evaluate: 'CANNOT EVALUATE' } as const;
const GATE_TEXT = { pass: 'pass', fail: 'FAIL', not_evaluated: 'not evaluated' } as const;

/** The one-line summary both formats start with (plain text, unescaped). */
export function canarySummaryLine(r: CanaryReport): string {
  const parts: string[] = [VERDICT_TEXT[r.verdict]];
  const d = r.deploy;
  if (d) {
    parts.push(
      d.source === 'server'
        ? `deploy ${d.boot_id} (${d.service ? `service ${d.service}, ` : ''}release ${d.release || '?'}${d.previous_release ? `, was ${d.previous_release}` : ''})`
        : `deploy inferred from the proxy log (${d.evidence}${d.service ? `, service ${d.service}` : ''})`,
    );
  } else {
    parts.push(`deploy ${r.requested} not resolved`);
  }
  if (r.window) parts.push(`window ${r.window.from} → ${r.window.to}`);
  if (r.verdict === 'cannot_evaluate') parts.push(r.reason ?? '');
  else parts.push(`${r.counts.failed} of ${r.gates.length} gates failed${r.counts.not_evaluated ? `, ${r.counts.not_evaluated} not evaluated` : ''}`);
  return parts.filter(Boolean).join(' · ');
}

/** Numbers that are fractions to print as percentages (`deploy_rate`, `limit`, …). */
const isRateKey = (k: string): boolean => /(^|_)rate$/.test(k) || k === 'limit';

function valueText(g: GateResult): string {
  if (g.value === null) return '—';
  return g.unit === 'rate' ? pct(g.value) : String(g.value);
}

function boundCells(b: ProportionBound): string[] {
  return [
    b.label,
    `${b.successes} / ${b.trials}`,
    b.estimate === null ? '—' : pct(b.estimate, 1),
    b.lower === null ? '—' : pct(b.lower, 1),
    String(b.more_needed),
  ];
}

/** A gate's number as text: rates as percentages, none (null: not evaluated) as `n/a`. */
function numberText(key: string, v: unknown): string {
  if (v === null || v === undefined) return 'n/a';
  return typeof v === 'number' && isRateKey(key) ? pct(v) : cellText(v);
}

/** Which of the report's ranges a query read, for "Read from": ` (deploy window)`, ` (baseline)`, ` (life of the boot that ended)` (the life range: it ends with the window), else nothing. */
function rangeLabel(r: CanaryReport, q: QueryRead): string {
  const { t_from: from, t_to: to } = q.params;
  if (r.window && from === r.window.from && to === r.window.to) return ' (deploy window)';
  if (r.baseline && from === r.baseline.from && to === r.baseline.to) return ' (baseline)';
  if (r.window && to === r.window.to) return ' (life of the boot that ended)';
  return '';
}

function cellText(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

// ---------------------------------------------------------------------------
// Markdown

/**
 * Escapes text for a Markdown paragraph or table cell: on one line (every line break,
 * a bare CR too, a space) with control and bidi characters shown as escapes
 * (core/text.ts oneLine), inline HTML neutralised (`<`, and `&` where it would begin
 * an entity), pipes, code, emphasis and strikethrough escaped. Only what CommonMark (0.31, GFM)
 * would read as markup is escaped, so the text stays readable on a terminal, where md
 * is the canary's default (a newcomer pass read `proxy\_5xx\_gap` and `&gt;`): an `_`
 * between letters or digits opens no emphasis (§6.2, intraword), `>` is markup only
 * where a line begins, after up to 3 spaces (a block quote, §5.1), `#` likewise (a heading, §4.2), `=` and `-`
 * (a setext underline or thematic break, §4.3, §4.1), and `+`, `-` or digits and `.`/`)`
 * then a space begin a list only there too (§5.2).
 */
export function escapeMarkdown(s: string): string {
  return oneLine(s)
    .replace(/&(?=#?[0-9A-Za-z]+;)/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/([\\`*~[\]|])/g, '\\$1')
    .replace(/_/g, (m, at: number, all: string) => (/[0-9A-Za-z]/.test(all[at - 1] ?? '') && /[0-9A-Za-z]/.test(all[at + 1] ?? '') ? m : '\\_'))
    .replace(/^( {0,3})([>#+=-])/, '$1\\$2')
    .replace(/^( {0,3}\d{1,9})([.)])(?=\s|$)/, '$1\\$2');
}

/** Inline code that cannot be broken out of (a backtick run longer than any inside; on one line, controls shown: core/text.ts oneLine). */
function mdCode(text: string): string {
  const s = oneLine(text);
  const longest = Math.max(0, ...(s.match(/`+/g) ?? []).map((m) => m.length));
  const fence = '`'.repeat(longest + 1);
  return `${fence}${longest ? ' ' : ''}${s}${longest ? ' ' : ''}${fence}`;
}

function mdTable(head: string[], rows: string[][]): string[] {
  return [`| ${head.map(escapeMarkdown).join(' | ')} |`, `| ${head.map(() => '---').join(' | ')} |`, ...rows.map((r) => `| ${r.map(escapeMarkdown).join(' | ')} |`)];
}

/** The report as Markdown. */
export function renderCanaryMarkdown(r: CanaryReport): string {
  const out: string[] = [];
  out.push(`# ${escapeMarkdown(canarySummaryLine(r))}`, '');
  out.push(...detailLines(r).map((l) => `- ${escapeMarkdown(l)}`), '');
  if (r.gates.length) {
    out.push('## Gates', '');
    out.push(...mdTable(['#', 'gate', 'threshold', 'value', 'verdict'], r.gates.map((g) => [String(g.index), g.title, g.threshold, valueText(g), GATE_TEXT[g.verdict]])), '');
    for (const g of r.gates) {
      out.push(`### ${g.index}. ${escapeMarkdown(g.title)} — ${GATE_TEXT[g.verdict]}`, '');
      out.push(`Threshold: ${escapeMarkdown(g.threshold)}. Value: ${escapeMarkdown(valueText(g))}.`, '');
      out.push(`Evidence: ${escapeMarkdown(g.summary)}.`, '');
      const nums = Object.entries(g.numbers).map(([k, v]) => `${k} = ${numberText(k, v)}`);
      if (nums.length) out.push(escapeMarkdown(nums.join(', ')), '');
      if (g.rows.length) {
        const cols = Object.keys(g.rows[0]!);
        out.push(...mdTable(cols, g.rows.map((row) => cols.map((c) => cellText(row[c])))), '');
      }
      out.push(`Read from: ${g.queries.map((q) => `${mdCode(q.name)}${escapeMarkdown(rangeLabel(r, q))}`).join(', ')}.`, '');
    }
  }
  if (r.bounds.length) {
    const b0 = r.bounds[0]!;
    out.push(`## Success proportions (one-sided ${pct(b0.confidence, 0)} Clopper–Pearson lower bounds)`, '');
    out.push(
      ...mdTable(
        ['proportion', 'successes / trials', 'estimate', `${pct(b0.confidence, 0)} lower bound`, `more clean observations to claim ${pct(b0.target, 0)}`],
        r.bounds.map(boundCells),
      ),
      '',
    );
    for (const b of r.bounds) out.push(`- ${escapeMarkdown(`${b.label} (${b.source}): ${b.definition}.`)}`);
    out.push('');
  }
  if (r.notes.length) {
    out.push('## Notes', '', ...r.notes.map((n) => `- ${escapeMarkdown(n)}`), '');
  }
  out.push('## What to look at next', '');
  r.next.forEach((s, i) => out.push(`${i + 1}. ${escapeMarkdown(s.why)}: ${mdCode(s.command)}`));
  return out.join('\n') + '\n';
}

function detailLines(r: CanaryReport): string[] {
  const out: string[] = [];
  const d = r.deploy;
  if (d) {
    out.push(
      `Deploy: requested ${JSON.stringify(d.requested)} → ${d.source === 'server' ? `boot ${d.boot_id}, release ${d.release || '?'}` : 'proxy-inferred restart'}; evidence ${d.evidence}` +
        (d.previous_boot_id ? `; boot that ended ${d.previous_boot_id}` : ''),
    );
    out.push(`Restart: down from ${d.down_from}, up at ${d.up_at ?? 'not seen'}${d.downtime_s === null ? '' : `, downtime ${d.downtime_s} s`}`);
  }
  if (r.window) {
    const w = r.window;
    const span = w.next_restart_at
      ? `the restart until the service's next restart, before --after's ${w.after_s} s after the boot ended`
      : `the restart plus ${w.after_s} s after the boot`;
    out.push(`Deploy window: ${w.from} → ${w.to} (${w.seconds.toFixed(3)} s: ${span})`);
  }
  if (r.baseline) out.push(`Baseline: ${r.baseline.from} → ${r.baseline.to} (${r.baseline.seconds.toFixed(3)} s)`);
  out.push(`Scope: service ${r.scope.service || '(all)'}${r.scope.environment ? `, environment ${r.scope.environment}` : ''}`);
  out.push(`Exit code: ${r.exit_code} (0 pass, 1 fail, 2 cannot evaluate)`);
  return out;
}

// ---------------------------------------------------------------------------
// HTML

/**
 * Escapes text for HTML element content and quoted attribute values, with control and
 * bidi characters shown as escapes first (core/text.ts visibleText): entities alone
 * left an ESC or a U+202E from a user agent or a release name acting in the page
 * (a break-it pass).
 */
export function escapeHtml(s: string): string {
  return visibleText(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

// (a wide evidence table scrolls inside the page instead of running off it: a newcomer
// pass found refused_misses' last column cut off at 1280 px)
const CSS = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;color:#1b1f23}
h1{font-size:1.35rem;padding:.6rem .8rem;border-radius:6px}
h1.pass{background:#e6f4ea;color:#0b5d1e}h1.fail{background:#fdecea;color:#8a1c12}h1.cannot_evaluate{background:#fff4e5;color:#7a4b00}
h2{font-size:1.1rem;margin-top:1.8rem;border-bottom:1px solid #d0d7de}h3{font-size:1rem;margin-bottom:.3rem}
table{border-collapse:collapse;margin:.4rem 0 1rem;display:block;max-width:100%;overflow-x:auto}th,td{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
.v-pass{color:#0b5d1e;font-weight:600}.v-fail{color:#8a1c12;font-weight:700}.v-not_evaluated{color:#6e7781}
code{background:#f6f8fa;padding:.1rem .3rem;border-radius:4px;word-break:break-all}ul.meta{list-style:none;padding:0}
`;

function htmlTable(head: string[], rows: unknown[][]): string {
  const th = head.map((h) => `<th>${escapeHtml(h)}</th>`).join('');
  const trs = rows
    .map((r) => `<tr>${r.map((c) => `<td${typeof c === 'number' ? ' class="num"' : ''}>${escapeHtml(cellText(c))}</td>`).join('')}</tr>`)
    .join('\n');
  return `<table><thead><tr>${th}</tr></thead><tbody>\n${trs}\n</tbody></table>`;
}

/** The report as one self-contained HTML page; every event value is escaped. */
export function renderCanaryHtml(r: CanaryReport): string {
  const e = escapeHtml;
  const body: string[] = [];
  body.push(`<h1 class="${r.verdict}">${e(canarySummaryLine(r))}</h1>`);
  body.push(`<ul class="meta">${detailLines(r).map((l) => `<li>${e(l)}</li>`).join('')}</ul>`);
  if (r.gates.length) {
    body.push('<h2>Gates</h2>');
    body.push(
      `<table><thead><tr><th>#</th><th>gate</th><th>threshold</th><th>value</th><th>verdict</th></tr></thead><tbody>${r.gates
        .map(
          (g) =>
            `<tr><td class="num">${g.index}</td><td><a href="#gate-${g.id}">${e(g.title)}</a></td><td>${e(g.threshold)}</td><td class="num">${e(valueText(g))}</td><td class="v-${g.verdict}">${e(GATE_TEXT[g.verdict])}</td></tr>`,
        )
        .join('')}</tbody></table>`,
    );
    for (const g of r.gates) {
      body.push(`<section id="gate-${g.id}"><h3>${g.index}. ${e(g.title)} — <span class="v-${g.verdict}">${e(GATE_TEXT[g.verdict])}</span></h3>`);
      body.push(`<p>Threshold: ${e(g.threshold)}. Value: ${e(valueText(g))}.</p>`);
      body.push(`<p>Evidence: ${e(g.summary)}.</p>`);
      const nums = Object.entries(g.numbers);
      if (nums.length) body.push(htmlTable(['number', 'value'], nums.map(([k, v]) => [k, numberText(k, v)])));
      if (g.rows.length) {
        const cols = Object.keys(g.rows[0]!);
        body.push(htmlTable(cols, g.rows.map((row) => cols.map((c) => row[c]))));
      }
      body.push(`<p>Read from: ${g.queries.map((q) => `<code>${e(q.name)}</code>${e(rangeLabel(r, q))}`).join(', ')}.</p></section>`);
    }
  }
  if (r.bounds.length) {
    const b0 = r.bounds[0]!;
    body.push(`<h2>Success proportions (one-sided ${e(pct(b0.confidence, 0))} Clopper–Pearson lower bounds)</h2>`);
    body.push(
      htmlTable(
        ['proportion', 'successes / trials', 'estimate', `${pct(b0.confidence, 0)} lower bound`, `more clean observations to claim ${pct(b0.target, 0)}`],
        r.bounds.map(boundCells),
      ),
    );
    body.push(`<ul>${r.bounds.map((b) => `<li>${e(`${b.label} (${b.source}): ${b.definition}.`)}</li>`).join('')}</ul>`);
  }
  if (r.notes.length) body.push(`<h2>Notes</h2><ul>${r.notes.map((n) => `<li>${e(n)}</li>`).join('')}</ul>`);
  body.push(`<h2>What to look at next</h2><ol>${r.next.map((s) => `<li>${e(s.why)}:<br><code>${e(s.command)}</code></li>`).join('')}</ol>`);
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    // no scripts, no external anything: an injected tag could not load or run
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">`,
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${e(`Canary ${VERDICT_TEXT[r.verdict]}${r.deploy ? ` · ${r.deploy.boot_id || r.deploy.evidence}` : ''}`)}</title>`,
    `<style>${CSS}</style>`,
    '</head>',
    '<body>',
    ...body,
    '</body>',
    '</html>',
    '',
  ].join('\n');
}
