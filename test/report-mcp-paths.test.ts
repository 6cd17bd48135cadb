// A wrong CONTINUITY_MCP_PATHS (mcp_paths) leaves every proxy-derived number at 0:
// the report must say so instead of reading as a clean range (checkMcpPaths).
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importCaddyLogs } from '../collectors/index.ts';
import { hasherForConfig } from '../core/index.ts';
import { checkMcpPaths } from '../queries/index.ts';
import { buildContinuityReport, renderContinuityText } from '../reports/index.ts';
import type { Store } from '../store/index.ts';
import { insertEvents, proxyEvents, repeat } from './fixtures/proxy-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

const CAPTURES = fileURLToPath(new URL('./fixtures/captures/', import.meta.url));
const LINES = { read: 0, parsed: 0, rejected: 0, skipped: 0 };
const NONE_FOUND = 'No continuity problems found in this range.';

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('report_mcp_paths');
  // the real capture: an SDK client on /mcp behind Caddy, two restarts, 25 refused misses
  await importCaddyLogs(t.store, {
    access: [`${CAPTURES}caddy-sdk-restart/caddy-access.log`],
    errors: [`${CAPTURES}caddy-sdk-restart/caddy-error.log`],
    hasher: hasherForConfig(t.config),
    service: 'restart',
  });
  // the real capture of 401s: a client without a token, one with a bad one, one with a good one
  await importCaddyLogs(t.store, {
    access: [`${CAPTURES}caddy-sdk-auth/caddy-access.log`],
    errors: [`${CAPTURES}caddy-sdk-auth/caddy-error.log`],
    hasher: hasherForConfig(t.config),
    service: 'auth',
  });
  // a log whose lines carry MCP session headers on seven paths, one of them not printable
  const paths = ['/a', '/b', '/c', '/d', '/e', '/f', '/odd path\n'];
  const lines = paths.flatMap((path, i) => repeat(paths.length - i, i * 10, 1, (at) => ({ at, status: 200, sid: `many-${i}`, path })));
  await insertEvents(t.store, proxyEvents(lines).map((e) => ({ ...e, service: 'many' })));
});
afterAll(async () => {
  await t?.close();
});

const reports = new Map<string, ReturnType<typeof buildContinuityReport>>();
/** The report over the capture with `mcp_paths` (undefined: inferred), each built once. */
function report(mcp_paths?: string, extra: Record<string, unknown> = {}): ReturnType<typeof buildContinuityReport> {
  const params = { service: 'restart', ...(mcp_paths === undefined ? {} : { mcp_paths }), ...extra };
  const key = JSON.stringify(params);
  if (!reports.has(key)) reports.set(key, buildContinuityReport(t.store, params, LINES));
  return reports.get(key)!;
}

describe('configured MCP endpoint paths that match no proxy line (CONTINUITY_MCP_PATHS, mcp_paths)', () => {
  it("name a request's own mcp_paths as the parameter, not the environment variable (a newcomer pass: an unset variable was blamed)", async () => {
    const r = await buildContinuityReport(t.store, { service: 'restart', mcp_paths: '/mcp/' }, LINES, 'mcp_paths');
    expect(r.findings[0]).toBe(
      "The mcp_paths parameter (/mcp/) matches no proxy line in this range; the proxy log's MCP endpoint looks like /mcp. " +
        'The proxy-derived numbers count nothing: correct the mcp_paths parameter, or leave it out to infer the endpoint.',
    );
    const some = await checkMcpPaths(t.store, { service: 'restart', mcp_paths: '/mcp,/v2/mcp' }, 'in this range', 'mcp_paths');
    expect(some?.warning).toMatch(/^The mcp_paths parameter: \/v2\/mcp matches no proxy line in this range \(\/mcp does\)/);
  });

  it('put a warning naming both paths first, and never "no problems found"', async () => {
    const r = await report('/mcp/');
    expect(r.refused_misses.total).toBe(0); // what the setting does: the proxy log is not read
    expect(r.findings[0]).toBe(
      "CONTINUITY_MCP_PATHS (/mcp/) matches no proxy line in this range; the proxy log's MCP endpoint looks like /mcp. " +
        'The proxy-derived numbers count nothing: correct CONTINUITY_MCP_PATHS (or the mcp_paths parameter), or leave it unset to infer the endpoint.',
    );
    expect(r.findings).not.toContain(NONE_FOUND);
    expect(r.mcp_paths).toEqual({
      configured: ['/mcp/'],
      matched: [],
      unmatched: ['/mcp/'],
      endpoints: ['/mcp'],
      endpoint_count: 1,
      verdict: 'none_match',
      warning: r.findings[0],
    });
    expect(renderContinuityText(r)).toContain("Findings\n  - CONTINUITY_MCP_PATHS (/mcp/) matches no proxy line in this range; the proxy log's MCP endpoint looks like /mcp.");
  });

  it('do not call the 401s loops or lost: with no success read on the proxy, every challenge would look so', async () => {
    const right = await report(undefined, { service: 'auth' });
    const wrong = await report('/mcp/', { service: 'auth' });
    expect(right.auth_challenges.by_verdict.loop ?? 0).toBe(0);
    expect(wrong.auth_challenges.by_verdict.loop).toBeGreaterThan(0);
    expect(wrong.findings[0]).toMatch(/^CONTINUITY_MCP_PATHS \(\/mcp\/\) matches no proxy line in this range/);
    expect(wrong.findings.filter((f) => /challenge/.test(f))).toEqual([
      `${wrong.auth_challenges.by_verdict.loop} challenge(s) look like authentication loops or lost sessions, but no success on the proxy was read to clear them: the configured MCP paths match no proxy line (above). Correct them before reading these.`,
    ]);
    // the text's tally says so too (it printed verdicts {"loop":3} bare: a newcomer pass)
    expect(renderContinuityText(wrong)).toMatch(/verdicts +loop \d+[^\n]* \(unconfirmed: the configured MCP paths match no proxy line\)\n/);
    expect(renderContinuityText(right)).not.toContain('unconfirmed');
  });

  it('with several configured paths of which some match: a milder warning, the counts unchanged', async () => {
    const [right, both] = await Promise.all([report('/mcp'), report('/v2/mcp,/mcp')]);
    expect(both.refused_misses).toEqual(right.refused_misses);
    expect(both.mcp_paths).toMatchObject({ matched: ['/mcp'], unmatched: ['/v2/mcp'], endpoints: [], verdict: 'some_unmatched' });
    expect(both.findings[0]).toBe('CONTINUITY_MCP_PATHS: /v2/mcp matches no proxy line in this range (/mcp does); the proxy-derived numbers count only /mcp.');
    expect(both.findings.slice(1)).toEqual(right.findings);
  });

  it('say nothing when the paths match, when none are configured, or when the range holds no MCP traffic', async () => {
    // the capture ends at 04:04:59 UTC
    const [right, inferred, after] = await Promise.all([report('/mcp'), report(), report('/mcp/', { t_from: '2026-11-30 05:00:00' })]);
    expect(right.mcp_paths).toMatchObject({ verdict: 'ok', warning: null });
    expect(right.findings).toEqual(inferred.findings);
    expect(inferred.mcp_paths).toBeNull();
    expect(after.mcp_paths).toMatchObject({ verdict: 'ok', warning: null, unmatched: ['/mcp/'] });
    // (a range without MCP traffic has nothing to judge: not "no problems found")
    expect(after.findings).toEqual([
      'Nothing to judge: no session, server arrival, restart, refused miss or challenge from 2026-11-30 05:00:00 for service "restart" (check --from/--to, --service and --environment).',
    ]);
    expect(await checkMcpPaths(t.store, { service: 'nothing-here', mcp_paths: '/mcp/' })).toMatchObject({ verdict: 'ok', warning: null, endpoints: [] });
  });

  it('run no query when no path is configured, and one when one is', async () => {
    // (the engine's settings are looked up once per store object, queries/registry.ts
    // analysisSettings: not the check's query)
    let queries = 0;
    const counting: Store = {
      ...t.store,
      query: (...args: Parameters<Store['query']>) => (args[0].includes('system.settings') || queries++, t.store.query(...args)),
    } as Store;
    expect(await checkMcpPaths(counting, { service: 'restart' })).toBeNull();
    expect(await checkMcpPaths(counting, { service: 'restart', mcp_paths: [] })).toBeNull();
    expect(queries).toBe(0);
    expect(await checkMcpPaths(counting, { service: 'restart', mcp_paths: ['/mcp'] })).toMatchObject({ verdict: 'ok' });
    expect(queries).toBe(1);
  });

  it('name at most five endpoint paths, busiest first, quoting what is not printable', async () => {
    const check = await checkMcpPaths(t.store, { service: 'many', mcp_paths: '/mcp' });
    expect(check).toMatchObject({ endpoints: ['/a', '/b', '/c', '/d', '/e'], endpoint_count: 7, verdict: 'none_match' });
    expect(check?.warning).toContain("the proxy log's MCP endpoint looks like /a, /b, /c, /d, /e (and 2 more path(s) with MCP session headers).");
    const odd = await checkMcpPaths(t.store, { service: 'many', mcp_paths: '/mcp', t_from: T(60) });
    expect(odd?.warning).toContain('looks like "/odd path\\n".');
  });

  it('refuses a bad path or range with CONT_ERR_QUERY_PARAM, as the named queries do', async () => {
    await expect(checkMcpPaths(t.store, { mcp_paths: 'mcp' })).rejects.toMatchObject({ code: 'CONT_ERR_QUERY_PARAM' });
    await expect(checkMcpPaths(t.store, { mcp_paths: '/mcp', t_from: '2026-12-01', t_to: '2026-11-30' })).rejects.toMatchObject({ code: 'CONT_ERR_QUERY_PARAM' });
    await expect(report('mcp')).rejects.toMatchObject({ code: 'CONT_ERR_QUERY_PARAM' });
  });
});

/** The scenario start (2026-11-30 04:00:00 UTC) plus `s` seconds, as a time parameter. */
function T(s: number): string {
  return new Date(Date.UTC(2026, 10, 30, 4, 0, s)).toISOString();
}
