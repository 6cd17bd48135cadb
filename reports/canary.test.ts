import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isContinuityError } from '../core/errors.ts';
import { isoMicros, parseTimeMicros } from '../core/time.ts';
import { countChallenges, countSessionOutcomes, countSessionsAcross, runQuery, type RestartSpan } from '../queries/index.ts';
import { authDeploy, failingDeploy, failingThirdBoot, firstBootDeploy, HOSTILE_UA, overlappingDeploy, passingDeploy, proxyOnlyDeploy, staleBeforeDeploy } from '../test/fixtures/canary-scenarios.ts';
import { insertEvents, proxyEvents, repeat, T0_MICROS } from '../test/fixtures/proxy-scenario.ts';
import { ServerScenario } from '../test/fixtures/server-scenario.ts';
import { openTestStore, type TestStore } from '../test/helpers/store.ts';
import { clopperPearsonLower } from './bounds.ts';
import { buildCanaryReport, DEFAULT_GATES, parseDuration, parseGates, rateAboveLimit, type CanaryReport, type GateId, type GateResult } from './canary.ts';
import { escapeHtml, escapeMarkdown, renderCanary, renderCanaryHtml, renderCanaryMarkdown } from './canary-render.ts';
import { buildContinuityReport } from './continuity.ts';

// The canary report over deploys built with the scenario builders, each under its
// own service in one real embedded store (see test/fixtures/canary-scenarios.ts).

let t: TestStore;
const reports = new Map<string, CanaryReport>();
beforeAll(async () => {
  t = await openTestStore('canary');
  // a deploy whose window holds no request: the traffic stopped before the restart
  const quiet = new ServerScenario('quiet');
  quiet.boot(0, 'v1');
  quiet.session('quiet-A', 1, 3);
  quiet.boot(7200, 'v2');
  // a server restart whose boots are the only server events; the requests are in the proxy log (on /mcp)
  const bootsOnly = new ServerScenario('bootsonly');
  bootsOnly.boot(0, 'v1');
  bootsOnly.boot(27, 'v2');
  const bootsOnlyProxy = proxyEvents([
    { at: 1, status: 200, minted: 'bootsonly-A' },
    ...repeat(20, 2, 1, (at) => ({ at, status: 200, sid: 'bootsonly-A' })),
    ...repeat(10, 28, 1, (at) => ({ at, status: 200, sid: 'bootsonly-A' })),
  ]).map((e) => ({ ...e, service: 'bootsonly' }));
  // two services restarting at the same microsecond, after every other deploy here
  const tiedDeploys = ['zeta', 'mid'].flatMap((svc) => {
    const s = new ServerScenario(svc);
    for (const [at, release] of [[9000, 'tie1'], [9100, 'tie2']] as const) {
      s.boot(at, release);
      s.session(`${svc}-${release}`, at + 1, 3);
    }
    return s.events;
  });
  // a release deployed, rolled back, and deployed again
  const roll = new ServerScenario('roll');
  for (const [at, release] of [[0, 'r1'], [100, 'r2'], [200, 'r1'], [300, 'r2']] as const) {
    roll.boot(at, release);
    roll.session(`roll-${at}`, at + 1, 3);
  }
  // a first boot whose release and boot_id read like times (a date, a 9-digit build number)
  const timey = new ServerScenario('timey');
  timey.boot(900, '2026-12-05');
  timey.events[0]!.boot_id = '123456789';
  await insertEvents(t.store, [...timey.events, ...roll.events, ...tiedDeploys, ...passingDeploy(), ...failingDeploy(), ...failingThirdBoot(), ...authDeploy(), ...proxyOnlyDeploy(), ...quiet.events, ...bootsOnly.events, ...bootsOnlyProxy, ...overlappingDeploy(), ...firstBootDeploy(), ...staleBeforeDeploy()]);
});
afterAll(async () => {
  await t?.close();
});

async function canary(service: string, deploy = 'latest', extra: Partial<Parameters<typeof buildCanaryReport>[1]> = {}): Promise<CanaryReport> {
  const key = `${service} ${deploy} ${JSON.stringify(extra)}`;
  let r = reports.get(key);
  if (!r) {
    r = await buildCanaryReport(t.store, { deploy, service, ...extra });
    reports.set(key, r);
  }
  return r;
}
const gate = (r: CanaryReport, id: GateId): GateResult => {
  const g = r.gates.find((x) => x.id === id);
  if (!g) throw new Error(`no gate ${id}`);
  return g;
};

describe('a clean deploy: graceful restart, sessions rebuilt under their ids', () => {
  it('passes every gate with exit code 0, each gate evaluated from its evidence', async () => {
    const r = await canary('pass');
    expect(r).toMatchObject({ verdict: 'pass', exit_code: 0, reason: null, counts: { passed: 5, failed: 0, not_evaluated: 0 } });
    expect(r.gates.map((g) => [g.id, g.value, g.verdict])).toEqual([
      ['proxy_5xx_in_gap', 0, 'pass'],
      ['refused_after_boot', 0, 'pass'],
      ['unsettled_at_shutdown', 0, 'pass'],
      ['sessions_lost_tools', 0, 'pass'],
      ['invalid_token_rate', 0, 'pass'],
    ]);
    // the gates saw traffic: a pass is not the absence of evidence
    expect(gate(r, 'proxy_5xx_in_gap').numbers.proxy_requests).toBe(26);
    // each SDK client held its standalone GET stream until the shutdown closed it: no request in flight
    expect(gate(r, 'unsettled_at_shutdown').numbers).toMatchObject({ arrivals: 44, settled: 42, streams_open: 2, ended_boot_id: 'boot-pass-0' });
    expect(gate(r, 'unsettled_at_shutdown').summary).toBe(
      '0 of 42 request(s) of the boot that ended (boot-pass-0) never settled; 2 standalone GET stream(s) were open, which every shutdown closes (not counted)',
    );
  });

  it('resolves latest, the release and the boot_id to the same restart; the window runs from the shutdown to 15 min after the boot', async () => {
    const r = await canary('pass');
    // the boot before, v1 at 0 s, is the service's first boot: no restart, still the boot that ended
    expect(r.deploy).toMatchObject({ source: 'server', boot_id: 'boot-pass-27', release: 'v2', service: 'pass', downtime_s: 2, previous_release: 'v1', previous_boot_id: 'boot-pass-0' });
    expect(r.deploy!.down_from).toBe('2026-11-30T04:00:25.000000Z');
    expect(r.window).toMatchObject({ from: '2026-11-30T04:00:25.000000Z', to: '2026-11-30T04:15:27.000000Z', after_s: 900, seconds: 902 });
    expect(r.baseline).toMatchObject({ to: r.window!.from, seconds: 902 });
    for (const deploy of ['v2', 'boot-pass-27']) {
      const other = await canary('pass', deploy);
      expect(other.deploy).toMatchObject({ boot_id: 'boot-pass-27', requested: deploy });
      expect(other.gates.map((g) => g.value)).toEqual(r.gates.map((g) => g.value));
    }
  });

  it('gives no verdict while the deploy window is still open (exit 2), and one once it has ended', async () => {
    // (a canary run at once after a deploy passed with 14 of its 15 minutes to come: a newcomer pass)
    const end = Date.parse('2026-11-30T04:15:27Z') * 1000;
    const open = await buildCanaryReport(t.store, { deploy: 'latest', service: 'pass', nowMicros: () => end - 60e6 });
    expect(open).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2, window: { to: '2026-11-30T04:15:27.000000Z' } });
    expect(open.reason).toBe(
      'the deploy window is still open: it ends at 2026-11-30T04:15:27.000000Z (--after 900 s past the boot), 60 s from now, and its events can still arrive; run the canary again after it ends, or with a shorter --after',
    );
    expect((await buildCanaryReport(t.store, { deploy: 'latest', service: 'pass', nowMicros: () => end })).verdict).toBe('pass');
  });

  it('honours --after and --baseline', async () => {
    const r = await canary('pass', 'latest', { afterS: 60, baselineS: 1800 });
    expect(r.window).toMatchObject({ to: '2026-11-30T04:01:27.000000Z', after_s: 60 });
    expect(r.baseline).toMatchObject({ from: '2026-11-30T03:30:25.000000Z', seconds: 1800 });
  });

  it('states exact one-sided 95% lower bounds and how many clean observations would support 99%', async () => {
    const r = await canary('pass');
    const [sessions, requests] = r.bounds;
    expect(sessions).toMatchObject({ id: 'sessions_kept_working', successes: 2, trials: 2, estimate: 1, more_needed: 297 });
    expect(sessions!.lower).toBeCloseTo(Math.sqrt(0.05), 10); // x = n: α^(1/n)
    expect(requests).toMatchObject({ id: 'requests_succeeded', source: 'server', successes: 26, trials: 26, more_needed: 299 - 26 });
    expect(requests!.lower).toBeCloseTo(clopperPearsonLower(26, 26), 12);
  });
});

describe('a failing deploy: proxy 5xx in the gap, stale sessions, a request that died with the process (S13 + S15)', () => {
  it('fails with exit code 1 on the gap, the refused misses, the unsettled arrival and the lost session', async () => {
    const r = await canary('fail', 'v2');
    expect(r).toMatchObject({ verdict: 'fail', exit_code: 1, counts: { failed: 4, passed: 1 } });
    expect(r.deploy).toMatchObject({ boot_id: 'boot-fail-16.9', release: 'v2', evidence: 'server_boot+proxy_5xx_gap+session_refusals' });
    expect(r.gates.map((g) => [g.id, g.value, g.verdict])).toEqual([
      ['proxy_5xx_in_gap', 9, 'fail'],
      ['refused_after_boot', 3, 'fail'],
      ['unsettled_at_shutdown', 1, 'fail'],
      ['sessions_lost_tools', 1, 'fail'],
      ['invalid_token_rate', 0, 'pass'],
    ]);
    // gates 2 and 4 both point at remint_pairs over the window: it is listed once, with both reasons
    const commands = r.next.map((n) => n.command);
    expect(new Set(commands).size).toBe(commands.length);
    expect(r.next.find((n) => n.command.startsWith('continuity query remint_pairs'))?.why).toMatch(/re-mint.*\? Recovery pairs/);
  });

  it('states each gate’s evidence: the numbers and the rows that matter', async () => {
    const r = await canary('fail', 'v2');
    const gap = gate(r, 'proxy_5xx_in_gap');
    expect(gap.numbers).toMatchObject({ proxy_generated_5xx: 9, post: 6, get: 3, gaps: 1 });
    expect(gap.rows).toEqual([expect.objectContaining({ proxy_5xx: 9, proxy_5xx_post: 6, proxy_5xx_get: 3, gap_s: 7.2 })]);
    expect(gap.queries.map((q) => q.name)).toEqual(['proxy_errors', 'proxy_traffic']);
    expect(gap.queries[0]!.params).toMatchObject({ t_from: r.window!.from, t_to: r.window!.to, service: 'fail' });

    const refused = gate(r, 'refused_after_boot');
    expect(refused.numbers).toMatchObject({ refused_misses: 3, next_initialize: 2, next_nothing: 1 });
    expect(refused.rows.every((row) => row.source === 'server' && row.boot === 'boot-fail-16.9' && row.reason === 'unknown_after_boot')).toBe(true);

    const unsettled = gate(r, 'unsettled_at_shutdown');
    expect(unsettled.numbers).toMatchObject({ unsettled_at_shutdown: 1, ended_boot_id: 'boot-fail-0' });
    expect(unsettled.rows).toContainEqual(expect.objectContaining({ boot_id: 'boot-fail-0', mcp_method: 'tools/call', unsettled_at_shutdown: 1 }));
    // the arrival belongs to the boot that ended, never to the new one
    expect(unsettled.rows.some((row) => row.boot_id === 'boot-fail-16.9')).toBe(false);

    const lost = gate(r, 'sessions_lost_tools');
    expect(lost.numbers).toMatchObject({ unrecovered_new: 1, unrecovered_stale: 1, stale: 3, recovered: 2 });
    expect(lost.rows).toContainEqual(expect.objectContaining({ ua_family: 'client-A', unrecovered_stale: 1 }));
    expect(lost.summary).toMatch(/1 from client-A/);
  });

  it('bounds: 2 of 3 sessions kept working; the unsettled and refused requests count against the request share', async () => {
    const r = await canary('fail', 'v2');
    const [sessions, requests] = r.bounds;
    expect(sessions).toMatchObject({ successes: 2, trials: 3 });
    expect(sessions!.lower).toBeCloseTo(clopperPearsonLower(2, 3), 12);
    expect(sessions!.more_needed).toBeGreaterThan(299);
    // 10 arrivals in the window: 6 ok (B2, C2), 3 refused, 1 that died with boot-fail-0
    expect(requests).toMatchObject({ successes: 6, trials: 10 });
  });

  it('says what to look at next with runnable named-query commands for the failed gates', async () => {
    const r = await canary('fail', 'v2');
    const commands = r.next.map((s) => s.command);
    expect(commands).toContain(`continuity query proxy_errors --param t_from=${r.window!.from} --param t_to=${r.window!.to} --param service=fail`);
    expect(commands.some((c) => c.startsWith('continuity query refused_misses --param t_to='))).toBe(true);
    expect(commands.some((c) => c.startsWith('continuity query session_continuity '))).toBe(true);
    expect(commands.some((c) => c.startsWith('continuity sql ') && c.includes("boot_id = 'boot-fail-0'"))).toBe(true);
    // the report from the boot that ended (here the service's first: from the start) through
    // the window, so it shows the restart the canary judged (over the window alone it had none)
    expect(commands.at(-1)).toBe(`continuity report --to=${r.window!.to} --service=fail`);
    const report = await buildContinuityReport(t.store, { t_to: r.window!.to, service: 'fail' });
    expect(report.restarts.server).toBeGreaterThanOrEqual(1);
    // the unsettled arrivals' SQL lists the arrival the gate counts
    const sql = commands.find((c) => c.startsWith('continuity sql '))!.replace(/^continuity sql "(.*)"$/, '$1');
    expect(await t.store.query(sql)).toHaveLength(gate(r, 'unsettled_at_shutdown').value as number);
  });
});

describe('a deploy whose previous boot was itself a restart', () => {
  it('reads the lifetime from the previous restart on, and judges the deploy as the same deploy after a first boot', async () => {
    const third = await canary('third');
    const fail = await canary('fail', 'v2');
    expect(third.deploy).toMatchObject({ boot_id: 'boot-third-16.9', release: 'v2', previous_release: 'v1', previous_boot_id: 'boot-third-0' });
    const same = (r: CanaryReport) => ({
      verdict: r.verdict,
      // both follow v1: in 'fail' the service's first boot, in 'third' a restart
      deploy: { ...r.deploy, boot_id: undefined, previous_boot_id: undefined, service: undefined, requested: undefined },
      window: r.window,
      gates: r.gates.map((g) => [g.id, g.value, g.verdict, { ...g.numbers, ended_boot_id: undefined }]),
      bounds: r.bounds.map((b) => [b.id, b.successes, b.trials, b.lower]),
    });
    expect(same(third)).toEqual(same(fail));
  });
});

describe('a server deploy found among the server restarts, its row read over the life of the boot that ended', () => {
  it('is the whole store’s `restarts` row, and the life range starts at the restart before it', async () => {
    // (resolveServerDeploy: `restarts` over the whole store spends its time on proxy inference)
    const all = await runQuery<Record<string, unknown>>(t.store, 'restarts', {});
    const iso = (v: unknown) => (v === null ? null : isoMicros(parseTimeMicros(String(v))!));
    for (const [service, deploy] of [['pass', 'latest'], ['fail', 'v2'], ['third', 'latest'], ['first', 'latest'], ['auth', 'latest'], ['', 'latest'], ['mid', 'tie2']] as const) {
      const r = service ? await canary(service, deploy) : await buildCanaryReport(t.store, { deploy });
      const row = all.find((x) => x.source === 'server' && x.boot_id === r.deploy?.boot_id);
      expect(row, `${service} ${deploy}`).toBeDefined();
      expect(r.deploy, `${service} ${deploy}`).toMatchObject({
        source: 'server',
        evidence: row!.evidence,
        service: row!.service,
        release: row!.release,
        previous_boot_id: row!.prev_boot_id,
        down_from: iso(row!.down_from),
        up_at: iso(row!.up_at),
        downtime_s: Number(row!.downtime_s),
      });
      // the life range: from the service's restart before this one (its boot), else the epoch
      const before = all
        .filter((x) => x.source === 'server' && x.service === row!.service && parseTimeMicros(String(x.up_at))! < parseTimeMicros(String(row!.up_at))!)
        .map((x) => iso(x.up_at)!)
        .sort()
        .at(-1);
      const refusedQuery = r.gates.find((g) => g.id === 'refused_after_boot')!.queries[0]!;
      expect(refusedQuery.params.t_from, `${service} ${deploy}`).toBe(before);
    }
  });
});

describe('a deploy right after the service’s first boot', () => {
  it('names that first boot as the boot before, in the report and its renderings, and gate 3 reads exactly that boot', async () => {
    const r = await canary('first', 'v2');
    expect(r.deploy).toMatchObject({ source: 'server', boot_id: 'boot-first-17', release: 'v2', previous_release: 'v1', previous_boot_id: 'boot-first-0' });
    // the earlier instance (its boot event never recorded) ended with a request in
    // flight; it is not the boot this deploy replaced, so gate 3 leaves it out
    const g = gate(r, 'unsettled_at_shutdown');
    expect([g.value, g.verdict]).toEqual([0, 'pass']);
    expect(g.numbers).toMatchObject({ ended_boot_id: 'boot-first-0', unsettled_at_shutdown: 0 });
    expect(g.rows.every((row) => row.boot_id === 'boot-first-0')).toBe(true);

    const md = renderCanaryMarkdown(r);
    expect(md.split('\n')[0]).toMatch(/ · deploy boot-first-17 \(service first, release v2, was v1\) · /);
    expect(md).toContain('boot that ended boot-first-0');
    const html = renderCanaryHtml(r);
    expect(/<h1 class="\w+">([^<]*)<\/h1>/.exec(html)?.[1]).toContain('deploy boot-first-17 (service first, release v2, was v1)');
    expect(html).toContain('boot that ended boot-first-0');
  });
});

describe('a deploy seen only by the proxy (S13 without server events)', () => {
  it('fails on proxy evidence and leaves the server-only gate not evaluated', async () => {
    const r = await canary('proxyonly');
    expect(r.deploy).toMatchObject({ source: 'proxy', boot_id: '', evidence: 'proxy_5xx_gap+session_refusals' });
    expect(r.gates.map((g) => [g.id, g.value, g.verdict])).toEqual([
      ['proxy_5xx_in_gap', 9, 'fail'],
      ['refused_after_boot', 3, 'fail'],
      ['unsettled_at_shutdown', null, 'not_evaluated'],
      ['sessions_lost_tools', 1, 'fail'],
      ['invalid_token_rate', 0, 'pass'],
    ]);
    expect(r).toMatchObject({ verdict: 'fail', exit_code: 1, counts: { not_evaluated: 1 } });
    expect(r.bounds[1]).toMatchObject({ source: 'proxy', successes: 7, trials: 19 });
    expect(r.notes.join(' ')).toMatch(/proxy evidence only/);
    // where the baseline and the window run past the fixture's 20 s of events, the notes say so
    // (an imported log ending a minute into the window judged the deploy on that minute, unsaid: a newcomer pass)
    expect(r.notes.slice(1)).toEqual([
      "The store's first event in scope is at 2026-11-30T04:00:00.000000Z, 906.400 s after the baseline begins: that part of the baseline holds no events.",
      "The store's last event in scope is at 2026-11-30T04:00:20.000000Z, 897.200 s before the deploy window ends: that part of the window holds no events (a log that ends there, or no traffic).",
    ]);
    // (events within a minute of both ends: nothing to say)
    expect((await canary('proxyonly', 'latest', { afterS: 30 })).notes.join(' ')).not.toMatch(/The store's (first|last) event/);
  });
});

describe('configured MCP endpoint paths that match no proxy line (CONTINUITY_MCP_PATHS)', () => {
  const WARNING =
    "the proxy log's MCP endpoint looks like /mcp. The proxy-derived numbers count nothing: correct CONTINUITY_MCP_PATHS (or the mcp_paths parameter), or leave it unset to infer the endpoint.";

  it('proxy evidence only: cannot evaluate (exit 2), saying why in the reason and the first note, and where to look', async () => {
    const r = await canary('proxyonly', 'latest', { mcpPaths: ['/mcp/'] });
    expect(r).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2, deploy: null });
    expect(r.reason).toBe(
      `no restart found for service "proxyonly" in the store at ${t.store.location}: no server boot follows an earlier boot, and the proxy log was not read: CONTINUITY_MCP_PATHS matches none of its lines (see the notes)`,
    );
    expect(r.notes[0]).toBe(`CONTINUITY_MCP_PATHS (/mcp/) matches no proxy line in the store for service "proxyonly"; ${WARNING}`);
    expect(r.next[0]!.command).toBe('continuity query restarts --param service=proxyonly --param mcp_paths=/mcp');
    expect(renderCanaryMarkdown(r)).toContain('## Notes\n\n- CONTINUITY_MCP_PATHS (/mcp/) matches no proxy line');
  });

  it('a server restart with no server arrivals: cannot evaluate, rather than pass on no evidence', async () => {
    expect((await canary('bootsonly')).verdict).not.toBe('cannot_evaluate'); // the proxy log holds the evidence
    const r = await canary('bootsonly', 'latest', { mcpPaths: ['/mcp/'] });
    expect(r).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2, deploy: { boot_id: 'boot-bootsonly-27' } });
    expect(r.reason).toMatch(/^CONTINUITY_MCP_PATHS matches no proxy line in the deploy window \S+ \.\. \S+ \(see the notes\) and the window holds no server arrivals: no evidence to judge this deploy on$/);
    expect(r.notes[0]).toBe(`CONTINUITY_MCP_PATHS (/mcp/) matches no proxy line in the deploy window; ${WARNING}`);
  });

  it('with server evidence: judged on it, the proxy gate not evaluated and saying why, the warning the first note', async () => {
    const right = await canary('pass');
    const r = await canary('pass', 'latest', { mcpPaths: ['/mcp/'] });
    expect(r).toMatchObject({ verdict: 'pass', exit_code: 0, counts: { passed: 4, failed: 0, not_evaluated: 1 } });
    expect(gate(r, 'proxy_5xx_in_gap')).toMatchObject({ verdict: 'not_evaluated', value: null });
    expect(gate(r, 'proxy_5xx_in_gap').summary).toMatch(/^no proxy line in the deploy window is on the configured MCP endpoint paths \(CONTINUITY_MCP_PATHS; see the notes\)/);
    expect(r.gates.slice(1)).toEqual(right.gates.slice(1).map((g) => ({ ...g, queries: g.queries.map((q) => ({ ...q, params: { ...q.params, mcp_paths: '/mcp/' } })) })));
    expect(r.notes[0]).toBe(`CONTINUITY_MCP_PATHS (/mcp/) matches no proxy line in the deploy window; ${WARNING}`);
    expect(r.notes.join(' ')).not.toMatch(/No proxy access lines in the deploy window/);
  });

  it('some configured paths match: judged as without the others, with a milder note', async () => {
    const right = await canary('proxyonly', 'latest', { mcpPaths: ['/mcp'] });
    const r = await canary('proxyonly', 'latest', { mcpPaths: ['/v2/mcp', '/mcp'] });
    expect(r.gates.map((g) => [g.id, g.value, g.verdict])).toEqual(right.gates.map((g) => [g.id, g.value, g.verdict]));
    expect(r.notes[0]).toBe('CONTINUITY_MCP_PATHS: /v2/mcp matches no proxy line in the deploy window (/mcp does); the proxy-derived numbers count only /mcp.');
    expect(right.notes.join(' ')).not.toMatch(/CONTINUITY_MCP_PATHS/);
  });
});

describe('cannot evaluate (exit code 2)', () => {
  it('an empty scope: no restart at all', async () => {
    const r = await canary('nothing');
    expect(r).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2, deploy: null, gates: [], bounds: [] });
    // (no event of that service at all: said as such, with the services there are)
    expect(r.reason).toMatch(/holds no events for service "nothing"; its services: /);
  });

  it('an unknown release names the releases that have a restart', async () => {
    const r = await canary('pass', 'v9');
    expect(r).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2 });
    expect(r.reason).toMatch(/unknown deploy "v9".*releases with a restart: v2.*A time \(ISO-8601/);
  });

  it('a time names the last restart up at or before it, a proxy-inferred one too; none before it cannot be evaluated', async () => {
    // stalebefore: two proxy-inferred restarts, up at 04:00:20 (A broken) and 04:01:00 (the latest)
    const latest = await canary('stalebefore');
    const first = await canary('stalebefore', '2026-11-30T04:00:59Z');
    expect(first.deploy).toMatchObject({ source: 'proxy', requested: '2026-11-30T04:00:59Z' });
    expect(Date.parse(first.deploy!.up_at!)).toBeLessThan(Date.parse(latest.deploy!.up_at!));
    expect((await canary('stalebefore', latest.deploy!.up_at!)).deploy).toEqual({ ...latest.deploy, requested: latest.deploy!.up_at });
    const none = await canary('stalebefore', '2026-11-30T03:00:00Z');
    expect(none).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2 });
    expect(none.reason).toMatch(/^no restart up at or before 2026-11-30T03:00:00\.000000Z \(the first is up at 2026-11-30T04:00/);
  });

  it('the example time an unknown deploy is given names the latest restart (it was cut to the second, before it: a newcomer pass)', async () => {
    const latest = await canary('stalebefore');
    const unknown = await canary('stalebefore', 'nope');
    const example = /e\.g\. (\S+), just after the latest restart/.exec(unknown.reason ?? '')?.[1];
    expect(example).toMatch(/^2026-11-30T04:01:\d\dZ$/);
    expect((await canary('stalebefore', example)).deploy).toEqual({ ...latest.deploy, requested: example });
  });

  it('a time may be a date alone or epoch seconds, as the other commands take; a bad date is said to be one', async () => {
    const latest = await canary('stalebefore');
    const epoch = String(Math.ceil(Date.parse(latest.deploy!.up_at!) / 1000));
    expect((await canary('stalebefore', epoch)).deploy).toEqual({ ...latest.deploy, requested: epoch });
    // (every restart of the scope is up after midnight)
    expect((await canary('stalebefore', '2026-11-30')).reason).toMatch(/^no restart up at or before 2026-11-30T00:00:00\.000000Z /);
    const bad = await canary('stalebefore', '2026-13-01');
    expect(bad).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2 });
    expect(bad.reason).toMatch(/^"2026-13-01" is not a valid time, and no boot has that boot_id or release: a time is ISO-8601 /);
    // epoch milliseconds are no time (the 1900–2200 bound of every time parameter): they named the latest restart
    expect((await buildCanaryReport(t.store, { deploy: '1764475501796' })).reason).toMatch(/^"1764475501796" is not a valid time/);
    // a boot named by a release or boot_id that reads like a time is that boot, here a first
    // boot, in any scope (another service's restart before that time was judged: a break-it pass)
    for (const deploy of ['2026-12-05', '123456789']) {
      const named = await buildCanaryReport(t.store, { deploy });
      expect(named, deploy).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2, deploy: null });
      expect(named.reason, deploy).toMatch(/^"[\d-]+" is the first boot of service "timey" \(boot_id 123456789, release 2026-12-05\)/);
    }
  });

  it('a first boot is not a deploy', async () => {
    const r = await canary('pass', 'v1');
    expect(r.exit_code).toBe(2);
    // said as such, not as an unknown deploy; the example time is the store's latest restart
    expect(r.reason).toMatch(/^"v1" is the first boot of service "pass" \(boot_id \S+, release v1\) in the store: a service's first boot is not a deploy, .*A time \(ISO-8601 or epoch seconds, e\.g\. \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, just after the latest restart\)/);
    expect(r.reason).not.toMatch(/unknown deploy/);
  });

  it('the boot before was still serving past the deploy window (overlapping instances): says so and how to widen it', async () => {
    const r = await canary('overlap', 'v2', { afterS: 60 });
    expect(r).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2, deploy: { boot_id: 'boot-overlap-100', release: 'v2' } });
    expect(r.reason).toMatch(/still active until 2026-11-30T04:05:30\.000000Z, 230\.000 s after the new boot .* --after longer than 230 s/);
    // with a window long enough the deploy is judged
    expect((await canary('overlap', 'v2', { afterS: 600 })).verdict).not.toBe('cannot_evaluate');
  });

  it('restarts at the same moment in two services: latest is the last by service name, whatever order the store returns', async () => {
    // (tiedDeploys, in the store: zeta and mid restart at the same microsecond, after every other deploy)
    const r = await buildCanaryReport(t.store, { deploy: 'latest' });
    expect(r.deploy).toMatchObject({ boot_id: 'boot-zeta-9100', service: 'zeta' });
    expect((await buildCanaryReport(t.store, { deploy: 'tie2', service: 'mid' })).deploy).toMatchObject({ boot_id: 'boot-mid-9100' });
  });

  it('a release deployed to two services, with no --service: cannot evaluate, naming each service’s latest restart of it', async () => {
    const r = await buildCanaryReport(t.store, { deploy: 'tie2' });
    expect(r).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2, deploy: null });
    expect(r.reason).toBe('release "tie2" was deployed to several services (mid, zeta): name one with --service, or the restart by its boot_id (latest of each: mid boot-mid-9100, zeta boot-zeta-9100)');
  });

  it('a release deployed, rolled back and deployed again: the latest restart of it, the others in a note', async () => {
    const r = await canary('roll', 'r2');
    expect(r.deploy).toMatchObject({ boot_id: 'boot-roll-300', release: 'r2', previous_release: 'r1', previous_boot_id: 'boot-roll-200' });
    expect(r.notes).toContain('Release "r2" was deployed 2 times (boot-roll-100, boot-roll-300, oldest first): this report judges the latest; name another by its boot_id.');
    // the earlier one by its boot_id
    expect((await canary('roll', 'boot-roll-100')).deploy).toMatchObject({ boot_id: 'boot-roll-100', release: 'r2', previous_boot_id: 'boot-roll-0' });
    // r1's first boot is no deploy; its second is
    expect((await canary('roll', 'r1')).deploy).toMatchObject({ boot_id: 'boot-roll-200' });
    expect((await canary('roll', 'r1')).notes.some((n) => n.startsWith('Release "r1"'))).toBe(false);
  });

  it('the next restart of the service within --after ends the deploy window at its down_from, with a note; the last deploy keeps the whole window', async () => {
    const rows = (await runQuery<Record<string, unknown>>(t.store, 'restarts', { service: 'roll' })).filter((x) => x.source === 'server');
    const iso = (v: unknown) => isoMicros(parseTimeMicros(String(v))!);
    const nextDown = iso(rows.find((x) => x.boot_id === 'boot-roll-200')!.down_from);
    const r = await canary('roll', 'boot-roll-100');
    // (1 µs past it: the old instance's last response, at down_from, is in the window)
    expect(r.window).toMatchObject({ from: r.deploy!.down_from, to: isoMicros(parseTimeMicros(nextDown)! + 1), after_s: 900, next_restart_at: nextDown });
    // the header says why the window is short, not "plus 900 s"
    expect(renderCanary(r, 'md')).toMatch(/Deploy window: .* s: the restart until the service's next restart, before --after's 900 s after the boot ended\)/);
    expect(r.notes).toContainEqual(expect.stringMatching(new RegExp(`^The service restarted again [\\d.]+ s after this boot \\(boot-roll-200\\), before --after ended: the deploy window ends with that restart's down_from, ${nextDown.replace(/\./g, '\\.')} \\(the last response before it, included\\)\\.$`)));
    // every read of the window stops there
    const windowReads = r.gates.flatMap((g) => g.queries).filter((q) => q.params.t_from !== undefined && Date.parse(String(q.params.t_from)) === Date.parse(r.window!.from));
    expect(windowReads.length).toBeGreaterThan(3);
    for (const q of windowReads) expect(Date.parse(String(q.params.t_to)), q.name).toBe(Date.parse(r.window!.to));
    const last = await canary('roll', 'latest');
    expect(last.deploy).toMatchObject({ boot_id: 'boot-roll-300' });
    expect(Date.parse(last.window!.to) - Date.parse(last.deploy!.up_at!)).toBe(900_000);
    expect(last.window!.next_restart_at).toBeNull();
    expect(renderCanary(last, 'md')).toMatch(/Deploy window: .* s: the restart plus 900 s after the boot\)/);
    expect(last.notes.some((n) => n.startsWith('The service restarted again'))).toBe(false);
  });

  it('a service the store has no events of is named, with the services it has', async () => {
    const r = await canary('nosuch');
    expect(r).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2 });
    expect(r.reason).toMatch(/^the store at .* holds no events for service "nosuch"; its services: .*"roll"/);
  });

  it('an environment the store has no events of is named, with the environments it has', async () => {
    const r = await canary('roll', 'latest', { environment: 'nosuch-env' });
    expect(r).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2 });
    expect(r.reason).toMatch(/^the store at .* holds no events for environment "nosuch-env"; its environments: /);
  });

  it('a deploy window without a single request', async () => {
    const r = await canary('quiet');
    expect(r).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2, deploy: { boot_id: 'boot-quiet-7200' } });
    expect(r.reason).toMatch(/no requests recorded in the deploy window/);
  });
});

describe('the invalid_token rate against the baseline', () => {
  it('fails when the rate jumps from ~2% to ~19% (limit max(2 × baseline, baseline + 1 pp))', async () => {
    const r = await canary('auth');
    const g = gate(r, 'invalid_token_rate');
    expect(g.verdict).toBe('fail');
    expect(g.numbers).toMatchObject({ deploy_challenges: 5, deploy_requests: 26, baseline_challenges: 1, baseline_requests: 42 });
    expect(g.value).toBeCloseTo(5 / 26, 12);
    expect(g.numbers.limit).toBeCloseTo(2 / 42, 12);
    expect(g.rows).toEqual([expect.objectContaining({ user_agent: HOSTILE_UA, challenge_class: 'invalid_token', challenges: 5 })]);
    expect(r).toMatchObject({ verdict: 'fail', exit_code: 1 });
  });

  it('counts the baseline’s challenges as auth_challenges does, by class and status (the challenge_counts check)', async () => {
    const r = await canary('auth');
    const byClass = (rows: Array<Record<string, unknown>>) => {
      const out = new Map<string, number>();
      for (const x of rows) out.set(`${x.challenge_class} ${x.http_status}`, (out.get(`${x.challenge_class} ${x.http_status}`) ?? 0) + Number(x.challenges));
      return [...out].sort();
    };
    const ranges = [{}, { t_from: r.baseline!.from, t_to: r.baseline!.to }, { t_from: r.window!.from, t_to: r.window!.to }];
    let seen = 0;
    for (const range of ranges) {
      for (const service of ['', 'auth', 'proxyonly', 'fail']) {
        const params = { ...range, service };
        const counts = await countChallenges(t.store, params);
        expect(byClass(counts.map((c) => ({ ...c }))), JSON.stringify(params)).toEqual(byClass(await runQuery(t.store, 'auth_challenges', params)));
        seen += counts.length;
      }
    }
    expect(seen).toBeGreaterThan(0);
    // the gate's baseline count is the check's, and names auth_challenges over the baseline
    const g = gate(r, 'invalid_token_rate');
    const baselineQuery = g.queries[1]!;
    expect(baselineQuery).toEqual({ name: 'auth_challenges', params: expect.objectContaining({ t_from: r.baseline!.from, t_to: r.baseline!.to, service: 'auth' }) });
  });
});

describe('the invalid_token rate at its limit', () => {
  it('passes at exactly the limit and fails one challenge above it, compared on the counts (rateAboveLimit)', () => {
    // 3 in 17 against 1 in 17 with ratio 3: 3 × (1/17) < 3/17 in floating point, and it failed
    expect(3 * (1 / 17) < 3 / 17).toBe(true);
    // [deploy challenges, requests, baseline challenges, requests, ratio, margin_pp] → above the limit
    const cases: Array<[string, [number, number, number, number, number, number], boolean]> = [
      ['exactly 3 times', [3, 17, 1, 17, 3, 0], false],
      ['one above 3 times', [4, 17, 1, 17, 3, 0], true],
      ['a decimal ratio, exactly 1.1 times', [11, 100, 10, 100, 1.1, 0], false],
      ['a decimal ratio, above', [12, 100, 10, 100, 1.1, 0], true],
      ['1 pp over a 0% baseline (the margin is the larger limit)', [1, 100, 0, 100, 2, 1], false],
      ['2 pp over a 0% baseline', [2, 100, 0, 100, 2, 1], true],
      ['0.5 pp over 2%: 2.5% is the limit', [5, 200, 2, 100, 1, 0.5], false],
      ['above 2.5%', [6, 200, 2, 100, 1, 0.5], true],
      ['no baseline requests (rate 0), at the margin', [1, 100, 0, 0, 2, 1], false],
      ['no baseline requests, above the margin', [2, 100, 0, 0, 2, 1], true],
      ['no baseline requests, no margin, one challenge', [1, 100, 0, 0, 2, 0], true],
      ['no challenge at all', [0, 100, 0, 0, 2, 0], false],
    ];
    for (const [why, args, above] of cases) expect(rateAboveLimit(...args), why).toBe(above);
  });
});

describe('gates files', () => {
  it('override thresholds; what a file leaves out keeps its default', async () => {
    const gates = parseGates('proxy_5xx_in_gap: { max: 10 }\nrefused_after_boot:\n  max: 3\nunsettled_at_shutdown: { enabled: false }\nsessions_lost_tools: { max: 1 }\n', 'relaxed.yaml');
    expect(gates.invalid_token_rate).toEqual(DEFAULT_GATES.invalid_token_rate);
    const r = await canary('fail', 'v2', { gates });
    expect(r).toMatchObject({ verdict: 'pass', exit_code: 0 });
    expect(gate(r, 'proxy_5xx_in_gap')).toMatchObject({ value: 9, verdict: 'pass', threshold: 'at most 10' });
    expect(gate(r, 'unsettled_at_shutdown')).toMatchObject({ value: 1, verdict: 'not_evaluated' });
    expect(gate(r, 'unsettled_at_shutdown').summary).toMatch(/^disabled by the gates file/);
    expect(gate(r, 'unsettled_at_shutdown').threshold).toBe('none: disabled by the gates file (when enabled: at most 0)');

    const rate = parseGates(JSON.stringify({ invalid_token_rate: { ratio: 20, margin_pp: 50 } }), 'rate.json');
    const auth = await canary('auth', 'latest', { gates: rate });
    expect(gate(auth, 'invalid_token_rate')).toMatchObject({ verdict: 'pass', limits: { ratio: 20, margin_pp: 50 } });
  });

  it.each([
    ['unknown gate', 'proxy_5xx: { max: 1 }', 'x.yaml', ['proxy_5xx']],
    ['unknown field', 'refused_after_boot: { maximum: 1 }', 'x.yaml', ['refused_after_boot.maximum']],
    ['negative count', '{"sessions_lost_tools": {"max": -1}}', 'x.json', ['sessions_lost_tools.max']],
    ['ratio below 1', 'invalid_token_rate: { ratio: 0.5, margin_pp: "1" }', 'x.yml', ['invalid_token_rate.ratio', 'invalid_token_rate.margin_pp']],
    ['not YAML', 'proxy_5xx_in_gap: { max: [', 'x.yaml', []],
    ['not JSON', '{ "proxy_5xx_in_gap": ', 'x.json', []],
    // YAML's flow mapping takes a trailing comma; a .json file is held to JSON
    ['a trailing comma (JSON)', '{"proxy_5xx_in_gap": {"max": 3},}', 'x.json', []],
    // JSON.parse keeps the last of a repeated key silently: which threshold was meant is unknown
    ['a repeated gate (JSON)', '{"refused_after_boot": {"max": 3}, "refused_after_boot": {"max": 50}}', 'x.json', []],
    ['a repeated gate (YAML)', 'refused_after_boot: { max: 3 }\nrefused_after_boot: { max: 50 }', 'x.yaml', []],
    // a YAML tag makes a Buffer or a Date: one field named, not every method of a Buffer
    ['a !!binary gate (YAML)', 'proxy_5xx_in_gap: !!binary aGVsbG8=', 'x.yaml', ['proxy_5xx_in_gap']],
    ['a !!timestamp threshold (YAML)', 'proxy_5xx_in_gap:\n  max: !!timestamp 2001-12-14', 'x.yaml', ['proxy_5xx_in_gap.max']],
    // an unknown tag was a Node warning printed raw, and the value kept as a string
    ['an unknown tag (YAML)', 'proxy_5xx_in_gap:\n  max: !foo 3', 'x.yaml', []],
  ])('refuses a file with %s: CONT_ERR_CONFIG naming the file and field', (_, text, file, fields) => {
    let err: unknown;
    try {
      parseGates(text, `/etc/canary/${file}`);
    } catch (e) {
      err = e;
    }
    expect(isContinuityError(err, 'CONT_ERR_CONFIG')).toBe(true);
    const e = err as Error & { details: { file: string; fields: string[] } };
    expect(e.message).toContain(`gates file /etc/canary/${file}`);
    expect(e.details.file).toBe(`/etc/canary/${file}`);
    expect(e.details.fields).toEqual(fields);
    for (const f of fields) expect(e.message).toContain(`field ${f}`);
  });

  it('says which is unknown, a gate or a gate\'s field (listing its fields), and ends a YAML error without a dangling colon', () => {
    // (both were "unknown field", and a tab's message ended "… at line 2, column 1:": a newcomer pass)
    const message = (text: string, file: string): string => {
      try {
        parseGates(text, file);
      } catch (e) {
        return (e as Error).message;
      }
      return '';
    };
    expect(message('nosuch_gate:\n  max: 1\n', 'g.yaml')).toBe(
      'invalid configuration: gates file g.yaml: field nosuch_gate: unknown gate; the gates: proxy_5xx_in_gap, refused_after_boot, unsettled_at_shutdown, sessions_lost_tools, invalid_token_rate',
    );
    expect(message('{"proxy_5xx_in_gap": {"maxx": 1}}', 'g.json')).toBe('invalid configuration: gates file g.json: field proxy_5xx_in_gap.maxx: unknown field of gate proxy_5xx_in_gap (its fields: enabled, max)');
    expect(message('gates:\n\t- x: 1\n', 'g.yaml')).toBe('invalid configuration: gates file g.yaml: not valid YAML: Tabs are not allowed as indentation at line 2, column 1');
  });

  it('reads a .json file that starts with a byte order mark (RFC 8259 §8.1)', () => {
    expect(parseGates('\uFEFF{"proxy_5xx_in_gap": {"max": 3}}', 'bom.json').proxy_5xx_in_gap.max).toBe(3);
  });

  it('refuses a file with no gates (empty, null, only comments: a template that rendered to nothing); {} keeps every default', () => {
    for (const [text, file] of [['', 'empty.yaml'], ['null\n', 'null.yaml'], ['# thresholds: TODO\n', 'comment.yaml'], ['null', 'null.json'], ['  \n', 'blank.yml']] as const) {
      expect(() => parseGates(text, file), file).toThrow(/holds no gates/);
    }
    expect(parseGates('{}', 'defaults.json')).toEqual(DEFAULT_GATES);
    expect(parseGates('{}\n', 'defaults.yaml')).toEqual(DEFAULT_GATES);
  });
});

describe('durations', () => {
  it('reads s, m, h, d and bare seconds; refuses the rest with the flag named', () => {
    expect(parseDuration('90s', '--after')).toBe(90);
    expect(parseDuration('15m', '--after')).toBe(900);
    expect(parseDuration('1.5h', '--baseline')).toBe(5400);
    expect(parseDuration('2d', '--baseline')).toBe(172_800);
    expect(parseDuration('30', '--after')).toBe(30);
    expect(parseDuration('1ms', '--after')).toBe(0.001);
    // below a millisecond a window rounds to nothing (a break-it pass got a query
    // parameter error the user never passed)
    for (const bad of ['', '0m', '-5m', '1w', 'soon', '31d', '0.0000001s', '0.5ms']) {
      expect(() => parseDuration(bad, '--baseline')).toThrow(/--baseline/);
    }
  });
});

describe('formats', () => {
  it('json is the whole object', async () => {
    const r = await canary('fail', 'v2');
    expect(JSON.parse(renderCanary(r, 'json'))).toEqual(JSON.parse(JSON.stringify(r)));
  });

  it('markdown: the summary line first, then gates with threshold, value, verdict and evidence, bounds, next steps', async () => {
    const md = renderCanaryMarkdown(await canary('fail', 'v2'));
    const first = md.split('\n')[0]!;
    expect(first).toMatch(/^# FAIL · deploy boot-fail-16\.9 \(service fail, release v2, was v1\) · window 2026-11-30T04:00:08\.410000Z → 2026-11-30T04:15:16\.900000Z · 4 of 5 gates failed$/);
    const order = ['## Gates', '### 1. proxy-generated 5xx', 'Threshold: at most 0. Value: 9.', 'Evidence: 9 proxy-generated 5xx', '## Success proportions', '## What to look at next'];
    const positions = order.map((s) => md.indexOf(s));
    expect(positions.every((p) => p >= 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    expect(md).toMatch(/\| sessions active before the deploy that kept working after it \| 2 \/ 3 \| 66\.7% \| 13\.5% \| \d+ \|/);
    expect(md).toContain('`continuity query refused_misses --param t_to=');
    // each query read is named with its range
    expect(md).toContain('Read from: `auth_challenges` (deploy window), `auth_challenges` (baseline), `settlements` (deploy window), `settlements` (baseline).');
    expect(md).toContain('Read from: `refused_misses` (life of the boot that ended).');
  });

  it('markdown: a number a gate could not evaluate reads n/a, not blank', async () => {
    const md = renderCanaryMarkdown(await canary('proxyonly'));
    expect(md).toMatch(/unsettled_at_shutdown = n\/a, arrivals = 0/);
  });

  it('a deploy that fails no gate but whose shares are below the target says so first in the next steps', async () => {
    const lenient = parseGates('proxy_5xx_in_gap: { max: 100 }\nrefused_after_boot: { max: 100 }\nunsettled_at_shutdown: { max: 100 }\nsessions_lost_tools: { max: 100 }\n', 'lenient.yaml');
    const r = await canary('fail', 'v2', { gates: lenient });
    expect(r.verdict).toBe('pass');
    expect(r.next.map((n) => n.why).slice(0, 2)).toEqual([
      'No gate failed, but sessions active before the deploy that kept working after it: 2 of 3 (66.67%), below the 99% target. Find those that did not',
      'No gate failed, but requests in the deploy window that succeeded: 6 of 10 (60.00%), below the 99% target. Find those that did not',
    ]);
    expect(r.next[1]!.command).toMatch(/^continuity query settlements /);
    // a share at the target is not reported as low
    expect((await canary('pass')).next.some((n) => n.why.startsWith('No gate failed, but'))).toBe(false);
  });

  it('html reads like the markdown: summary line as the heading, each gate with threshold and evidence, bounds, next steps', async () => {
    const r = await canary('fail', 'v2');
    const html = renderCanaryHtml(r);
    const h1 = /<h1 class="fail">([^<]*)<\/h1>/.exec(html);
    expect(h1?.[1]).toMatch(/^FAIL · deploy boot-fail-16\.9 \(service fail, release v2, was v1\) · window .+ · 4 of 5 gates failed$/);
    expect(html.indexOf('<h1')).toBeLessThan(html.indexOf('<h2>Gates</h2>'));
    for (const g of r.gates) {
      const section = new RegExp(`<section id="gate-${g.id}">[\\s\\S]*?</section>`).exec(html)?.[0] ?? '';
      expect(section, g.id).toContain(`Threshold: ${escapeHtml(g.threshold)}.`);
      expect(section, g.id).toContain('Evidence: ');
      expect(section, g.id).toMatch(/Read from: <code>\w+<\/code>/);
    }
    const order = ['<h2>Gates</h2>', '<section id="gate-proxy_5xx_in_gap">', '<h2>Success proportions', '<h2>What to look at next</h2>'];
    const positions = order.map((x) => html.indexOf(x));
    expect(positions.every((p) => p >= 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    expect(html).toMatch(/<td>sessions active before the deploy that kept working after it<\/td><td>2 \/ 3<\/td><td>66\.7%<\/td><td>13\.5%<\/td>/);
    const next = /<h2>What to look at next<\/h2><ol>([\s\S]*?)<\/ol>/.exec(html)?.[1] ?? '';
    expect((next.match(/<li>/g) ?? []).length).toBe(r.next.length);
    expect(next).toContain('<code>continuity query refused_misses --param t_to=');
  });

  it('markdown: text from the store cannot start a line, and controls and bidi overrides show as escapes', async () => {
    const r = await canary('pass');
    const hostile = 'svc\r| x | y |\r# INJECTED HEADING \u001b[2J \u202eevil \u0085# NEL';
    const md = renderCanaryMarkdown({
      ...r,
      deploy: { ...r.deploy!, service: hostile },
      notes: [hostile],
      next: [{ why: hostile, command: `continuity report --service ${hostile}` }],
    });
    // CommonMark's line endings: LF, CR LF, a bare CR; NEL, LS and PS shown as breaks by some viewers
    const lines = md.split(/\r\n|[\r\n\u0085\u2028\u2029]/);
    expect(lines.filter((l) => l.includes('INJECTED'))).not.toHaveLength(0);
    expect(lines.some((l) => /^#+ INJECTED|^# NEL|^\| x/.test(l))).toBe(false);
    expect(md).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
    expect(md).toContain('\\\\x1B\\[2J \\\\u202Eevil');
    // inline code (the next steps' commands): escapes, not backslash-escaped
    expect(md).toContain('`continuity report --service svc | x | y | # INJECTED HEADING \\x1B[2J \\u202Eevil  # NEL`');
  });

  it('html: controls and bidi overrides from the store show as escapes, not act', async () => {
    const r = await canary('pass');
    const hostile = 'svc \u001b]0;PWNED\u0007\u001b[31mevil\u202e rev';
    const html = renderCanaryHtml({ ...r, deploy: { ...r.deploy!, service: hostile }, notes: [hostile] });
    expect(html).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
    expect(html).toContain('svc \\x1B]0;PWNED\\x07\\x1B[31mevil\\u202E rev');
  });

  it('CANNOT EVALUATE leads the summary line and says why', async () => {
    const md = renderCanaryMarkdown(await canary('pass', 'v9'));
    expect(md.split('\n')[0]).toMatch(/^# CANNOT EVALUATE · deploy v9 not resolved · unknown deploy "v9"/);
  });

  it('html is self-contained and escapes a hostile user agent everywhere', async () => {
    const r = await canary('auth');
    const html = renderCanaryHtml(r);
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(html).toContain('&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;&lt;img src=x onerror=&#39;alert(1)&#39;&gt;/6.6');
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/<img/i);
    expect(html).not.toMatch(/onerror=['"]/i);
    // no external assets: no tag loads anything or links out of the page
    const tagsText = html.match(/<[a-z][^>]*>/gi) ?? [];
    expect(tagsText.filter((tag) => /\ssrc=|\shref="(?!#)/i.test(tag))).toEqual([]);
    expect(html).toContain("default-src 'none'");
    // every tag in the page is one the renderer writes
    const tags = new Set([...html.matchAll(/<\/?([a-z0-9]+)/gi)].map((m) => m[1]!.toLowerCase()));
    expect([...tags].filter((x) => !['html', 'head', 'meta', 'title', 'style', 'body', 'h1', 'h2', 'h3', 'ul', 'ol', 'li', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'a', 'section', 'span', 'p', 'code', 'br'].includes(x))).toEqual([]);
    // the markdown keeps the same value inert
    const md = renderCanaryMarkdown(r);
    expect(md).not.toMatch(/<script|<img/i);
    expect(md).toContain('&lt;script>alert("pwned")&lt;/script>');
  });
});

describe('a deploy after an earlier one had already broken a session (proxy evidence)', () => {
  it('counts against it only the misses of sessions the boot that ended served, and names the others', async () => {
    const r = await canary('stalebefore');
    // the deploy is restart 2 (B refused at 60 s); A, refused since restart 1, resends its id 21 more times after it
    expect(r.deploy).toMatchObject({ source: 'proxy', up_at: '2026-11-30T04:01:00.000000Z' });
    const g = gate(r, 'refused_after_boot');
    expect(g).toMatchObject({ value: 1, verdict: 'fail' });
    expect(g.numbers).toMatchObject({ refused_misses: 1, not_counted_stale_before: 21, next_initialize: 1 });
    // the inferred restart is named by its time, not by its ordinal within the life range
    expect(g.rows.length).toBeGreaterThan(0);
    for (const row of g.rows) expect(row).toMatchObject({ source: 'proxy', boot: 'inferred', boot_at: expect.stringMatching(/^2026-11-30 04:01:00/) });
    expect(g.summary).toBe(
      '1 refused miss(es) with reason unknown_after_boot after the boot (what the session sent next: initialize 1); 21 more on session(s) already stale before the boot that ended (refused since an earlier restart), not counted',
    );
    // B re-initialized; A lost its tools at restart 1, not at this deploy
    const lost = gate(r, 'sessions_lost_tools');
    expect(lost).toMatchObject({ value: 0, verdict: 'pass' });
    expect(lost.summary).toBe(
      '0 session(s) refused in the deploy window for the first time never recovered (no re-mint, no re-initialize); 2 refused in it in all, 1 of them recovered; 1 more already refused before the window (an earlier restart broke them), not counted',
    );
    // nor is A one of this deploy's trials in the sessions bound: B, refused and recovered
    expect(r.bounds[0]).toMatchObject({ id: 'sessions_kept_working', successes: 1, trials: 1 });
    // the gate's numbers name what its rows name: 1 unrecovered in all, 0 new
    expect(lost.numbers).toMatchObject({ unrecovered_new: 0, unrecovered_stale: 1, not_counted_refused_before: 1, recovered: 1 });
  });
});

describe('gate 4 reads session_continuity’s rows from the session_outcomes check', () => {
  it('counts every family and origin as session_continuity does, without survived_1/2, over windows, scopes and window_s', async () => {
    const [fail, stale] = [await canary('fail', 'v2'), await canary('stalebefore')];
    const windowOf = (r: CanaryReport) => ({ t_from: r.window!.from, t_to: r.window!.to });
    const cases = [
      { service: '' },
      { service: '', window_s: 0.5 },
      { ...windowOf(fail), service: 'fail' },
      { ...windowOf(fail), service: '' },
      { ...windowOf(stale), service: 'stalebefore' },
      { ...windowOf(stale), service: 'stalebefore', window_s: 0.5 },
      { service: 'proxyonly' },
    ];
    const counted = (rows: Array<Record<string, unknown>>) =>
      rows
        .map(({ survived_1: _1, survived_2: _2, ...r }) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'string' && k !== 'ua_family' && k !== 'origin' ? Number(v) : v])))
        .sort((a, b) => `${a.ua_family} ${a.origin}`.localeCompare(`${b.ua_family} ${b.origin}`));
    let stale_seen = 0;
    for (const params of cases) {
      const rows = await countSessionOutcomes(t.store, params);
      expect(counted(rows), JSON.stringify(params)).toEqual(counted(await runQuery(t.store, 'session_continuity', params)));
      stale_seen += rows.reduce((n, r) => n + r.stale, 0);
    }
    expect(stale_seen).toBeGreaterThan(0);
    // the gate names session_continuity over the window as the query to rerun
    expect(gate(fail, 'sessions_lost_tools').queries).toEqual([{ name: 'session_continuity', params: expect.objectContaining({ t_from: fail.window!.from, t_to: fail.window!.to, service: 'fail' }) }]);
  });
});

describe('the sessions that kept working across the deploy (the sessions_across check)', () => {
  const SERVICES = ['pass', 'fail', 'third', 'first', 'auth', 'proxyonly', 'stalebefore', 'overlap'] as const;
  const spanOf = (r: CanaryReport): RestartSpan => ({ from: r.deploy!.down_from, to: r.deploy!.up_at ?? r.deploy!.down_from, service: r.deploy!.service, source: r.deploy!.source });

  it("is session_continuity's survived_1 over the boot's life, where that range holds this one restart", async () => {
    const seen: Array<[string, number]> = [];
    for (const service of SERVICES) {
      const r = await canary(service);
      const q = r.bounds[0]!.queries.find((x) => x.name === 'check:sessions_across')!;
      expect(q.params, service).toMatchObject({ service, span_from: r.deploy!.down_from, span_service: service });
      const { span_from: _from, span_to: _to, span_service: _service, span_source: _source, ...common } = q.params;
      const rows = await runQuery<{ survived_1: number }>(t.store, 'session_continuity', common);
      const survived = rows.reduce((a, x) => a + Number(x.survived_1), 0);
      const across = await countSessionsAcross(t.store, q.params, spanOf(r));
      expect(across, service).toBe(survived);
      seen.push([service, across]);
    }
    // not all zero: the comparison has sessions in it
    expect(seen.filter(([, n]) => n > 0).length).toBeGreaterThanOrEqual(2);
  });

  it('counts the deploy’s service only, in a report with no --service: another service’s sessions did not survive this restart', async () => {
    const scoped = await canary('pass');
    const unscoped = await buildCanaryReport(t.store, { deploy: 'boot-pass-27' });
    // several services restart in this store: the report is scoped to the deploy's service, and says so
    expect(unscoped.scope).toEqual({ service: 'pass', environment: '' });
    expect(unscoped.notes.filter((n) => n.startsWith('The store holds events of several services'))).toEqual([
      expect.stringContaining('and no --service was given: the gates count the deploy\'s service, "pass" (--service names another scope).'),
    ]);
    const q = unscoped.bounds[0]!.queries.find((x) => x.name === 'check:sessions_across')!;
    expect(q.params).toMatchObject({ service: 'pass', span_service: 'pass', span_source: 'server' });
    // the check itself keeps to the span's service over a range of every service
    const all = { ...q.params, service: '' };
    expect(await countSessionsAcross(t.store, all, spanOf(unscoped))).toBe(2);
    expect(scoped.bounds[0]).toMatchObject({ successes: 2, trials: 2 });
    // every service here runs at the same moments: session_continuity over the same
    // range counts the sessions across any restart, of any service (what the bound read before)
    const { span_from: _from, span_to: _to, span_service: _service, span_source: _source, ...common } = all as typeof q.params;
    const rows = await runQuery<{ survived_1: number }>(t.store, 'session_continuity', common);
    expect(rows.reduce((a, x) => a + Number(x.survived_1), 0)).toBeGreaterThan(2);
  });

  it('judges a deploy with no --service by its own service’s events: the gates and bounds are the scoped report’s (another service’s 401s and misses in the same minutes once failed it)', async () => {
    for (const [service, boot] of [['pass', 'boot-pass-27'], ['fail', 'latest']] as const) {
      const scoped = await canary(service, boot);
      const unscoped = await buildCanaryReport(t.store, { deploy: boot === 'latest' ? (scoped.deploy!.boot_id || 'latest') : boot });
      expect({ ...unscoped.deploy, requested: '' }, service).toEqual({ ...scoped.deploy, requested: '' });
      expect(unscoped.gates.map((g) => [g.id, g.value, g.verdict]), service).toEqual(scoped.gates.map((g) => [g.id, g.value, g.verdict]));
      expect(unscoped.bounds.map((b) => [b.successes, b.trials]), service).toEqual(scoped.bounds.map((b) => [b.successes, b.trials]));
      expect(unscoped.verdict, service).toBe(scoped.verdict);
    }
  });

  it('reads the same from the hourly rollups (hours the range covers whole) as from the rows (hours it cuts)', async () => {
    const at = (s: number) => isoMicros(T0_MICROS + Math.round(s * 1e6));
    // T0 is on the hour and every event here is within its first 3 hours
    const whole = { t_from: at(-3600), t_to: at(4 * 3600) };
    const cut = { t_from: at(-1800), t_to: at(3 * 3600 - 1) };
    for (const service of SERVICES) {
      const span = spanOf(await canary(service));
      for (const scope of [{ service: '' }, { service }]) {
        const a = await countSessionsAcross(t.store, { ...whole, ...scope }, span);
        const b = await countSessionsAcross(t.store, { ...cut, ...scope }, span);
        expect(b, `${service} ${JSON.stringify(scope)}`).toBe(a);
      }
    }
  });
});

describe('escapeMarkdown', () => {
  it('escapes what CommonMark reads as markup, and no more (a newcomer pass read proxy\\_5xx\\_gap and &gt; on a terminal)', () => {
    expect(escapeMarkdown('proxy_5xx_gap > 0 & rate')).toBe('proxy_5xx_gap > 0 & rate');
    expect(escapeMarkdown('_lead trail_ *b* `c` [l](u) a|b ~~s~~ \\')).toBe('\\_lead trail\\_ \\*b\\* \\`c\\` \\[l\\](u) a\\|b \\~\\~s\\~\\~ \\\\');
    expect(escapeMarkdown('<b>&amp;&#60;</b>')).toBe('&lt;b>&amp;amp;&amp;#60;&lt;/b>');
    for (const [lead, out] of [['> q', '\\> q'], ['# h', '\\# h'], ['- l', '\\- l'], ['+ l', '\\+ l'], ['12. n', '12\\. n'], ['3) n', '3\\) n'], ['---', '\\---'], ['0.00%', '0.00%'], ['   # h', '   \\# h'], ['  2. n', '  2\\. n']]) {
      expect(escapeMarkdown(lead!)).toBe(out);
    }
    expect(escapeMarkdown('a\nb')).toBe('a b');
  });
});
