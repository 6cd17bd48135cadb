import { execFile, spawnSync } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { ServerScenario } from './fixtures/server-scenario.ts';

// The CLI as a user runs it: a real process, the README's entry point, a fresh
// data directory per test. These are the acceptance numbers of the captures.

const run = promisify(execFile);
const BIN = new URL('../bin/continuity.mjs', import.meta.url).pathname;
const CAPTURES = new URL('./fixtures/captures/', import.meta.url).pathname;
const dirs: string[] = [];
const freshDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'continuity-cli-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function continuity(args: string[], dataDir: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, CONTINUITY_DATA_DIR: dataDir };
  delete env.CLICKHOUSE_URL;
  delete env.KAFKA_BROKERS;
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env, maxBuffer: 64 << 20 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('continuity analyze on the real captures (README command 1)', () => {
  it('caddy-sdk-restart: 2 restarts, 8 proxy-generated 5xx, 25 refused misses on 1 session, 0 pairs, 1 unrecovered', async () => {
    const dir = freshDir();
    const r = await continuity(
      ['analyze', `${CAPTURES}caddy-sdk-restart/caddy-access.log`, '--errors', `${CAPTURES}caddy-sdk-restart/caddy-error.log`, '--json'],
      dir,
    );
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.restarts.inferred).toBe(2);
    expect(report.proxy_errors.proxy_generated).toBe(8);
    expect(report.refused_misses.total).toBe(25);
    expect(report.refused_misses.sessions).toBe(1);
    expect(report.refused_misses.by_reason).toEqual({ unknown_after_boot: 25 });
    expect(report.remint_pairs.distinct).toBe(0);
    expect(report.remint_pairs.adopted).toBe(0);
    expect(report.sessions.unrecovered_stale).toBe(1);
    expect(report.auth_challenges.missing_credential).toBe(0);
    expect(report.auth_challenges.invalid_token).toBe(0);
    expect(report.lines.rejected).toBe(0);
    expect(report.lines.parsed).toBeGreaterThanOrEqual(47);

    // Importing the same files again stores nothing twice and reports the same.
    const again = await continuity(
      ['analyze', `${CAPTURES}caddy-sdk-restart/caddy-access.log`, '--errors', `${CAPTURES}caddy-sdk-restart/caddy-error.log`, '--json'],
      dir,
    );
    expect(JSON.parse(again.stdout).refused_misses.total).toBe(25);
    // the same content again is no other input: the report is this log's
    expect(report.lines.others).toEqual({ lines: 0, server_events: 0 });
    // the store's retention, as `report --json` gives it
    const stored = JSON.parse((await continuity(['report', '--json'], dir)).stdout) as { lines: { retention_days: number } };
    expect(report.lines.retention_days).toBe(stored.lines.retention_days);
    expect(Number.isInteger(report.lines.retention_days)).toBe(true);
    expect(JSON.parse(again.stdout).lines.others).toEqual({ lines: 0, server_events: 0 });
    expect(JSON.parse(again.stdout).findings.filter((f: string) => f.includes('whole store'))).toEqual([]);
    const count = await continuity(['sql', 'SELECT count() AS n, uniqExact(event_id) AS u FROM events', '--format', 'json'], dir);
    expect(JSON.parse(count.stdout)).toEqual({ n: '47', u: '47' }); // (64-bit integers quoted, as a server writes them)
    // another log into the same store: its report is the store's, and says so (a
    // newcomer pass: the auth capture's report showed the restart capture's 2 restarts)
    const other = await continuity(['analyze', `${CAPTURES}caddy-sdk-auth/caddy-access.log`, '--errors', `${CAPTURES}caddy-sdk-auth/caddy-error.log`], dir);
    expect(other.code, other.stderr).toBe(0);
    expect(other.stdout).toContain(
      `  - The numbers above are the whole store's, which also holds ${report.lines.read} line(s) of other imported logs besides this input: to judge this input alone, analyze it with --data-dir naming a new directory.`,
    );
  });

  it('caddy-sdk-auth: 1 missing_credential, 2 invalid_token, and the discovery 404s are not refused misses', async () => {
    const r = await continuity(
      ['analyze', `${CAPTURES}caddy-sdk-auth/caddy-access.log`, '--errors', `${CAPTURES}caddy-sdk-auth/caddy-error.log`, '--json'],
      freshDir(),
    );
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.auth_challenges.missing_credential).toBe(1);
    expect(report.auth_challenges.invalid_token).toBe(2);
    expect(report.refused_misses.total).toBe(0);
    expect(report.restarts.inferred).toBe(0);
  });

  it('prints a readable report without --json', async () => {
    const r = await continuity(['analyze', `${CAPTURES}caddy-sdk-restart/caddy-access.log`, '--errors', `${CAPTURES}caddy-sdk-restart/caddy-error.log`], freshDir());
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/restarts \(inferred from proxy\)\s+2/);
    expect(r.stdout).toMatch(/never re-initialized/);
  });
});

describe('labels', () => {
  it("counts blank lines as skipped in analyze's report, as the store's report does: the four counts add up", async () => {
    // (analyze's report left them out of skipped while counting them in read; the
    // store's report, from import_runs, counted them in skipped: a break-it pass)
    const dir = freshDir();
    const lines = readFileSync(`${CAPTURES}caddy-sdk-restart/caddy-access.log`, 'utf8').trimEnd().split('\n');
    const log = join(dir, 'blank-lines.log');
    writeFileSync(log, [lines.slice(0, 10).join('\n'), '', '   ', lines.slice(10).join('\n'), ''].join('\n'));
    const analyzed = await continuity(['analyze', log, '--json'], dir);
    expect(analyzed.code).toBe(0);
    const want = { read: 49, parsed: 47, rejected: 0, skipped: 2 };
    expect(JSON.parse(analyzed.stdout).lines).toMatchObject({ ...want, scope: 'import' });
    const report = await continuity(['report', '--json'], dir);
    expect(JSON.parse(report.stdout).lines).toMatchObject({ ...want, scope: 'store' });
  });

  it('analyze --environment labels the imported lines as it filters by it: the proxy evidence stays (it was all dropped)', async () => {
    const dir = freshDir();
    const log = [`${CAPTURES}caddy-sdk-restart/caddy-access.log`, '--errors', `${CAPTURES}caddy-sdk-restart/caddy-error.log`];
    const r = await continuity(['analyze', ...log, '--environment', 'prod', '--service', 'mcp', '--json'], dir);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.refused_misses.total).toBe(25);
    expect(report.restarts.inferred).toBe(2);
    const labels = await continuity(['sql', 'SELECT DISTINCT service, environment FROM events FINAL', '--format', 'csv'], dir);
    expect(labels.stdout.trim().split('\n')).toEqual(['"service","environment"', '"mcp","prod"']);
    // import caddy takes it too; a label longer than the queries take is refused, not cut
    const long = await continuity(['import', 'caddy', log[0]!, '--environment', 'e'.repeat(257)], dir);
    expect(long.code).toBe(2);
    expect(long.stderr).toContain('CONT_ERR_CONFIG: invalid configuration: --environment takes at most 256 characters (got 257)');
  });
});

describe('bad input through the CLI', () => {
  it('a read (or compact) of a data directory that does not exist is refused, and creates nothing', async () => {
    // (a mistyped --data-dir made a new, empty store and the reads answered 0: a newcomer pass)
    const typo = join(freshDir(), 'typo');
    // (compact made one too, and said it merged nothing: a break-it pass)
    for (const args of [['report', '--json'], ['sql', 'SELECT 1'], ['query', 'restarts'], ['compact', '--json']]) {
      const r = await continuity(args, typo);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain(`error CONT_ERR_CONFIG: invalid configuration: no store at ${typo} (--data-dir, CONTINUITY_DATA_DIR)`);
    }
    expect(existsSync(typo)).toBe(false);
  });

  it('a report on an empty store says there is nothing to judge, not that no problem was found', async () => {
    const r = await continuity(['report', '--json'], freshDir());
    expect(r.code, r.stderr).toBe(0);
    const findings = (JSON.parse(r.stdout) as { findings: string[] }).findings;
    expect(findings).toEqual([expect.stringMatching(/^Nothing to judge: no proxy log was ever imported into this store, and it holds no server events in this range \(check --data-dir/)]);
  });

  it('a scope that matches nothing, or a store of rejected lines, says there is nothing to judge too', async () => {
    const dir = freshDir();
    const access = `${CAPTURES}caddy-sdk-restart/caddy-access.log`;
    expect((await continuity(['import', 'caddy', access], dir)).code).toBe(0);
    const findings = async (...args: string[]) => {
      const r = await continuity(['report', '--json', ...args], dir);
      expect(r.code, r.stderr).toBe(0);
      return (JSON.parse(r.stdout) as { findings: string[] }).findings;
    };
    expect(await findings('--service', 'nosuch')).toEqual([
      expect.stringMatching(/^Nothing to judge: no session, server arrival, restart, refused miss or challenge in the whole store for service "nosuch" \(check --from\/--to, --service and --environment\)\.$/),
    ]);
    // the same store unscoped has findings (the restarts)
    expect((await findings()).some((f) => f.startsWith('Nothing to judge'))).toBe(false);

    const junkDir = freshDir();
    const junk = join(junkDir, 'junk.log');
    writeFileSync(junk, 'this is not a Caddy JSON line\n');
    const imported = await continuity(['import', 'caddy', junk], junkDir);
    expect(imported.code).toBe(1);
    expect(imported.stdout + imported.stderr).toMatch(/rejected/);
    // a failed import records no run (it counted in every later report for good: a
    // break-it and a newcomer pass), so the store holds no proxy log
    const r = await continuity(['report', '--json'], junkDir);
    expect((JSON.parse(r.stdout) as { findings: string[]; lines: { read: number } })).toMatchObject({
      lines: { read: 0 },
      findings: [expect.stringMatching(/^Nothing to judge: no proxy log was ever imported into this store/)],
    });
  });

  it('an access log imported again without --errors warns that its lines lose the upstream errors joined before', async () => {
    const dir = freshDir();
    const access = `${CAPTURES}caddy-sdk-restart/caddy-access.log`;
    const errors = `${CAPTURES}caddy-sdk-restart/caddy-error.log`;
    const joined = await continuity(['import', 'caddy', access, '--errors', errors], dir);
    expect(joined.stdout).toMatch(/9 joined to upstream errors/);
    expect(joined.stderr).not.toMatch(/warning/);
    const again = await continuity(['import', 'caddy', access], dir);
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/^warning: 1 of these access log\(s\) was imported before, and this import has no --errors: .* may lose their upstream_error; import them again with --errors <error\.log> to keep it\.$/m);
    const stored = await continuity(['sql', "SELECT countIf(upstream_error != '') AS n FROM proxy_access FINAL", '--format', 'json'], dir);
    expect(JSON.parse(stored.stdout)).toEqual({ n: '0' });
    // imported again under other labels: the warning names both, a label dropped too
    const relabelled = await continuity(['import', 'caddy', access, '--errors', errors, '--service', 'mcp-b'], dir);
    expect(relabelled.stderr).toMatch(/was imported before with no --service and no --environment; its lines now carry --service "mcp-b" and no --environment \(/);
    // the same log imported twice with its error log keeps them, and says nothing
    const fresh = freshDir();
    expect((await continuity(['import', 'caddy', access, '--errors', errors], fresh)).stderr).not.toMatch(/warning/);
    expect((await continuity(['import', 'caddy', access, '--errors', errors], fresh)).stderr).not.toMatch(/warning/);
  });

  it('serve on a port in use is a coded configuration error, not a stack trace', async () => {
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    try {
      const port = (busy.address() as AddressInfo).port;
      const r = await continuity(['serve', '--port', String(port)], freshDir());
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`CONT_ERR_CONFIG.*--port ${port}: 127\\.0\\.0\\.1:${port} is already in use by another process`));
      expect(r.stderr).not.toMatch(/unexpected error|at .*\.ts:\d+/);
    } finally {
      busy.close();
    }
  });

  it('serve on a --host that is no address and does not resolve is a coded configuration error', async () => {
    // (.invalid never resolves: RFC 2606 §2)
    for (const host of ['no-such-host.invalid', '256.1.1.1']) {
      const r = await continuity(['serve', '--host', host, '--port', '0'], freshDir());
      expect(r.code, host).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`CONT_ERR_CONFIG.*--host ${host.replace(/\./g, '\\.')}: not an address or a name this machine resolves`));
      expect(r.stderr).not.toMatch(/unexpected error|at .*\.ts:\d+/);
    }
  });

  it('refuses an option whose value is missing and would take the next option as it (exit 2)', async () => {
    // (`report --service --json` filtered on a service named "--json": a break-it pass)
    const dir = freshDir();
    for (const args of [['report', '--service', '--json'], ['query', 'restarts', '--format', '--list'], ['canary', '--deploy', '--format=json']]) {
      const r = await continuity(args, dir);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain(`error CONT_ERR_CONFIG: invalid configuration: ${args.at(-2)} took ${args.at(-1)} as its value: give ${args.at(-2)} a value of its own`);
    }
  });

  it('refuses an empty option value (an unset shell variable) instead of taking it as none (exit 2)', async () => {
    // (`report --from ""` reported over all time and `serve --host ""` listened on every
    // address: a break-it pass)
    const dir = freshDir();
    for (const args of [['report', '--from', ''], ['report', '--to=', '--json'], ['serve', '--host', '', '--port', '0'], ['canary', '--deploy', 'latest', '--service', '']]) {
      const r = await continuity(args, dir);
      expect(r.code, args.join(' ')).toBe(2);
      const flag = args.find((a) => a.startsWith('--') && (a.endsWith('=') || args[args.indexOf(a) + 1] === ''))!.replace(/=$/, '');
      expect(r.stderr).toContain(`error CONT_ERR_CONFIG: invalid configuration: ${flag} is empty: give it a value, or leave it out`);
    }
  });

  it('exits non-zero only when nothing could be read, with a coded error', async () => {
    const dir = freshDir();
    const junk = join(dir, 'junk.log');
    writeFileSync(junk, Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) % 256)));
    const r = await continuity(['import', 'caddy', junk], dir);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/CONT_ERR_NOTHING_IMPORTED/);
    const empty = join(dir, 'empty.log');
    writeFileSync(empty, '');
    expect((await continuity(['import', 'caddy', empty], dir)).code).toBe(1);
  });

  it('keeps the good lines of a partly bad file and exits 0, naming rejected lines', async () => {
    const dir = freshDir();
    const mixed = join(dir, 'mixed.log');
    const good = (await import('node:fs')).readFileSync(`${CAPTURES}caddy-sdk-restart/caddy-access.log`, 'utf8').trim().split('\n');
    writeFileSync(mixed, [good[0], '{"truncated": ', good[1], 'not json at all', good[2]].join('\n') + '\n');
    const r = await continuity(['import', 'caddy', mixed], dir);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/imported 3 of 5 lines \(2 rejected/);
    expect(r.stderr).toMatch(/mixed\.log:2: not_json/);
    expect(r.stderr).toMatch(/mixed\.log:4: not_json/);
  });

  it('warns when upstream error entries were read and none joined (a combined log with its error lines last)', async () => {
    // (`cat access.log error.log` joined nothing, silently: a break-it pass)
    const dir = freshDir();
    const combined = join(dir, 'combined.log');
    writeFileSync(combined, readFileSync(`${CAPTURES}caddy-sdk-restart/caddy-access.log`, 'utf8') + readFileSync(`${CAPTURES}caddy-sdk-restart/caddy-error.log`, 'utf8'));
    const last = await continuity(['import', 'caddy', combined], dir);
    expect(last.code).toBe(0);
    expect(last.stderr).toContain('warning: 10 upstream error entries were read and none joined an access line');
    const apart = await continuity(['import', 'caddy', `${CAPTURES}caddy-sdk-restart/caddy-access.log`, '--errors', `${CAPTURES}caddy-sdk-restart/caddy-error.log`], freshDir());
    expect(apart.stdout).toContain('9 joined to upstream errors');
    expect(apart.stderr).not.toContain('none joined');
  });

  it('a missing file is CONT_ERR_INPUT_UNREADABLE, and no store is created for it', async () => {
    const dir = join(freshDir(), 'new-store');
    const r = await continuity(['import', 'caddy', '/nonexistent/access.log'], dir);
    expect(r.code).toBe(1);
    // (an empty store was left behind, which a later report took for a store: a newcomer pass)
    expect(existsSync(dir)).toBe(false);
    const analyzed = await continuity(['analyze', `${CAPTURES}caddy-sdk-restart/caddy-access.log`, '--errors', '/nonexistent/error.log'], dir);
    expect(analyzed.stderr).toMatch(/CONT_ERR_INPUT_UNREADABLE: .*\/nonexistent\/error\.log: ENOENT/);
    expect(existsSync(dir)).toBe(false);
    expect(r.stderr).toMatch(/CONT_ERR_INPUT_UNREADABLE/);
    // the code once: Node's message starts with it already
    expect(r.stderr).toContain("/nonexistent/access.log: ENOENT: no such file or directory, access '/nonexistent/access.log'");
  });
});

describe('sql, query and hash', () => {
  it('compact merges the closed days two imports left in several parts, and the report stays the same', async () => {
    const dir = freshDir();
    for (const c of ['caddy-sdk-restart', 'caddy-sdk-auth']) {
      const r = await continuity(['import', 'caddy', `${CAPTURES}${c}/caddy-access.log`], dir);
      expect(r.code, r.stderr).toBe(0);
    }
    const before = await continuity(['report', '--json'], dir);
    const r = await continuity(['compact', '--quiet', '0', '--json'], dir);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const merged = lines.slice(0, -1) as Array<{ table: string; parts: number; skipped?: string }>;
    expect(merged.map((p) => p.table)).toContain('events');
    expect(merged.every((p) => p.parts > 1 && p.skipped === undefined)).toBe(true);
    expect(lines.at(-1)).toEqual({ merged: merged.length, open: 0, recent: 0, disk: 0, ms: expect.any(Number) });
    expect((await continuity(['report', '--json'], dir)).stdout).toBe(before.stdout);
    expect((await continuity(['compact', '--quiet', '0'], dir)).stdout).toMatch(/^0 partition\(s\) merged in \d+ ms: every day is one part already\n$/);
    // right after an import, the default quiet time leaves the day alone and says so
    await continuity(['import', 'caddy', `${CAPTURES}caddy-sdk-auth/caddy-access.log`, '--service', 'again'], dir);
    expect((await continuity(['compact'], dir)).stdout).toMatch(/left alone \(written to within --quiet\)\n[^]*0 partition\(s\) merged in \d+ ms; \d+ written to in the last 10 minute\(s\) left alone \(--quiet 0 merges them now\)\n$/);
    const bad = await continuity(['compact', '--quiet', 'soon'], dir);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/CONT_ERR_CONFIG.*--quiet/);
  });

  it('sql refuses a write with a clear error and exit 1', async () => {
    const r = await continuity(['sql', 'DROP TABLE events'], freshDir());
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/CONT_ERR_READONLY/);
  });
  it('query validates parameters (exit 2) and prints csv', async () => {
    const dir = freshDir();
    const bad = await continuity(['query', 'restarts', '--param', 't_from=yesterday-ish'], dir);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/CONT_ERR_QUERY_PARAM/);
    const unknown = await continuity(['query', 'nope'], dir);
    expect(unknown.code).toBe(2);
    const csv = await continuity(['query', 'restarts', '--format', 'csv'], dir);
    expect(csv.code, csv.stderr).toBe(0);
    expect(csv.stdout.split('\r\n')[0]).toBe('service,source,evidence,boot_id,release,prev_boot_id,prev_release,down_from,up_at,downtime_s,proxy_5xx,proxy_5xx_post,proxy_5xx_get,sessions_refused');
  });
  it('sql --format table shows stored values inert (an escape sequence as text), NULL as ᴺᵁᴸᴸ, and 64-bit numbers exactly', async () => {
    const dir = freshDir();
    const r = await continuity(['sql', "SELECT concat('ua', char(27), '[2J', char(7)) AS ua, NULL AS n, 18446744073709551615 AS big, 'back\\\\slash' AS bs"], dir);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toMatch(/[\u001b\u0007]/);
    expect(r.stdout).toContain('ua\\x1B[2J\\x07');
    expect(r.stdout).toMatch(/│ ua\s+│ n\s+│ big\s+│ bs\s+│/);
    expect(r.stdout).toContain('ᴺᵁᴸᴸ');
    expect(r.stdout).toContain('18446744073709551615');
    expect(r.stdout).toContain('back\\slash');
    expect((await continuity(['sql', 'SELECT 1 WHERE 0'], dir)).stdout).toBe('(no rows)\n');
  });

  it('hash prints the keyed hash the store uses for a raw id', async () => {
    const dir = freshDir();
    await continuity(['import', 'caddy', `${CAPTURES}caddy-sdk-restart/caddy-access.log`], dir);
    const h = await continuity(['hash', '4f2b62a4-4517-4309-8dd1-da4057041770'], dir);
    expect(h.stdout.trim()).toMatch(/^[0-9a-f]{32}$/);
    const found = await continuity(['sql', `SELECT count() AS n FROM events WHERE request_session_key = '${h.stdout.trim()}'`, '--format', 'json'], dir);
    expect(JSON.parse(found.stdout).n).toBe('46'); // every line but the initialize
    // a data directory without a key (a mistyped --data-dir) mints none: its hash would match nothing
    const typo = join(dir, 'typo');
    const none = await continuity(['hash', '4f2b62a4-4517-4309-8dd1-da4057041770'], typo);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/CONT_ERR_CONFIG: .*typo\/hash\.key does not exist: nothing was hashed into a store at .*typo yet/);
    expect(existsSync(join(typo, 'hash.key'))).toBe(false);
    // an empty id is refused, not hashed
    const empty = await continuity(['hash', ''], dir);
    expect(empty.code).toBe(2);
    expect(empty.stdout).toBe('');
    expect(empty.stderr).toMatch(/CONT_ERR_CONFIG: .*non-empty raw id/);
  });
});

describe('time parameters are UTC whatever the host time zone', () => {
  it('query proxy_traffic with a zone-less t_from gives the same rows under TZ=UTC and TZ=America/New_York', async () => {
    const dir = freshDir();
    const imported = await continuity(['import', 'caddy', `${CAPTURES}caddy-sdk-restart/caddy-access.log`], dir);
    expect(imported.code, imported.stderr).toBe(0);
    const env = process.env.TZ;
    const traffic = async (tz: string, from: string) => {
      process.env.TZ = tz;
      try {
        const r = await continuity(['query', 'proxy_traffic', '--param', `t_from=${from}`, '--format', 'json'], dir);
        expect(r.code, r.stderr).toBe(0);
        return (JSON.parse(r.stdout) as Array<{ requests: number }>).reduce((n, row) => n + Number(row.requests), 0);
      } finally {
        if (env === undefined) delete process.env.TZ;
        else process.env.TZ = env;
      }
    };
    // The capture's 47 lines run 04:04:32–04:04:59 UTC on 2026-11-30; 36 of them from 04:04:40.
    expect(await traffic('UTC', '2026-11-30 04:04:40')).toBe(36);
    expect(await traffic('America/New_York', '2026-11-30 04:04:40')).toBe(36);
    expect(await traffic('America/New_York', '2026-11-30T04:04:40')).toBe(36);
    expect(await traffic('Asia/Tokyo', '2026-11-30T13:04:40+09:00')).toBe(36);
  });
});

describe('the deployment’s query settings (CONTINUITY_MCP_PATHS, CONTINUITY_REMINT_WINDOW_S)', () => {
  /** `continuity args` on `dir` with the variables `vars` set for it. */
  const withEnvIn = async (dir: string, vars: Record<string, string>, args: string[]) => {
    const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
    Object.assign(process.env, vars);
    try {
      return await continuity(args, dir);
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  };

  it('reach query and report, a --param wins over them, and a bad value names the variable', async () => {
    const dir = freshDir();
    const imported = await continuity(['import', 'caddy', `${CAPTURES}caddy-sdk-restart/caddy-access.log`], dir);
    expect(imported.code, imported.stderr).toBe(0);
    const misses = (r: { stdout: string }) => (JSON.parse(r.stdout) as Array<{ misses: number }>).reduce((n, row) => n + Number(row.misses), 0);
    const withEnv = (vars: Record<string, string>, args: string[]) => withEnvIn(dir, vars, args);
    const query = ['query', 'refused_misses', '--format', 'json'];
    expect(misses(await continuity(query, dir))).toBe(25);
    // the capture's MCP endpoint is /mcp: naming another path leaves no MCP traffic to judge
    const elsewhere = await withEnv({ CONTINUITY_MCP_PATHS: '/elsewhere' }, query);
    expect(misses(elsewhere)).toBe(0);
    // and says why on stderr, as the report does ("(no rows)" alone: a newcomer pass)
    expect(elsewhere.stderr).toMatch(/^warning: CONTINUITY_MCP_PATHS \(\/elsewhere\) matches no proxy line in this range; the proxy log's MCP endpoint looks like \/mcp\. /);
    const right = await withEnv({ CONTINUITY_MCP_PATHS: '/elsewhere' }, [...query, '--param', 'mcp_paths=/mcp']);
    expect(misses(right)).toBe(25);
    expect(right.stderr).toBe('');
    const report = await withEnv({ CONTINUITY_MCP_PATHS: '/elsewhere' }, ['report', '--json']);
    expect(report.code, report.stderr).toBe(0);
    const judged = JSON.parse(report.stdout) as { refused_misses: { total: number }; findings: string[] };
    expect(judged.refused_misses.total).toBe(0);
    // …and the report says why, instead of finding no problem
    expect(judged.findings[0]).toMatch(/^CONTINUITY_MCP_PATHS \(\/elsewhere\) matches no proxy line in this range; the proxy log's MCP endpoint looks like \/mcp\. /);
    expect(judged.findings).not.toContain('No continuity problems found in this range.');
    // the canary has no other evidence (the capture is a proxy log): it cannot evaluate, and says why
    const canary = await withEnv({ CONTINUITY_MCP_PATHS: '/elsewhere' }, ['canary', '--deploy', 'latest', '--format', 'json']);
    expect(canary.code, canary.stderr).toBe(2);
    const verdict = JSON.parse(canary.stdout) as { reason: string; notes: string[] };
    expect(verdict.reason).toMatch(/CONTINUITY_MCP_PATHS matches none of its lines \(see the notes\)$/);
    expect(verdict.notes[0]).toMatch(/^CONTINUITY_MCP_PATHS \(\/elsewhere\) matches no proxy line in the store; the proxy log's MCP endpoint looks like \/mcp\. /);
    // query --list gives each parameter's default, these settings included
    const listed = await withEnv({ CONTINUITY_REMINT_WINDOW_S: '4.5', CONTINUITY_MCP_PATHS: '/mcp' }, ['query', '--list']);
    expect(listed.code, listed.stderr).toBe(0);
    const params = (name: string) => listed.stdout.split('\n')[listed.stdout.split('\n').findIndex((l) => l.startsWith(`${name}: `)) + 1];
    expect(params('session_continuity')).toContain('window_s Float64 = 4.5');
    expect(params('session_continuity')).toContain('mcp_paths Array(String) = ["/mcp"]');
    expect(params('auth_challenges')).toContain('auth_window_s Float64 = 60');
    expect(params('restarts')).toBe(`  params: t_from DateTime64(6, 'UTC') = "1970-01-01 00:00:00", t_to DateTime64(6, 'UTC') = "2200-01-01 00:00:00", service String = "", environment String = "", mcp_paths Array(String) = ["/mcp"]`);
    // --format json: the document GET /api/queries answers, the same defaults (a break-it pass: --format was ignored)
    const listedJson = await withEnv({ CONTINUITY_REMINT_WINDOW_S: '4.5', CONTINUITY_MCP_PATHS: '/mcp' }, ['query', '--list', '--format', 'json']);
    expect(listedJson.code, listedJson.stderr).toBe(0);
    const doc = JSON.parse(listedJson.stdout) as { queries: Array<{ name: string; params: Record<string, string>; defaults: Record<string, unknown>; columns: Record<string, string> }> };
    expect(doc.queries.map((q) => q.name)).toEqual(listed.stdout.split('\n').filter((l) => /^\w+: /.test(l)).map((l) => l.split(':')[0]));
    expect(doc.queries.find((q) => q.name === 'session_continuity')!.defaults).toMatchObject({ window_s: 4.5, mcp_paths: ['/mcp'] });
    expect((await withEnv({}, ['query', '--list', '--format', 'csv'])).stderr).toContain('--list prints a table or json (got --format "csv")');
    // a name lists that query alone (it listed every one: a newcomer pass)
    const one = await withEnv({}, ['query', '--list', 'refused_misses']);
    expect(one.stdout.split('\n').filter((l) => /^\w+: /.test(l)).map((l) => l.split(':')[0])).toEqual(['refused_misses']);
    expect((await withEnv({}, ['query', '--list', 'nope'])).code).toBe(2);
    const bad = await withEnv({ CONTINUITY_REMINT_WINDOW_S: '-1' }, ['report']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('CONT_ERR_CONFIG');
    expect(bad.stderr).toContain('CONTINUITY_REMINT_WINDOW_S');
    expect(bad.stderr).not.toContain('--remint-window');
    // a value that is no number, and a window of 0, in words (zod's were "expected number, received NaN"
    // and "Too small: expected number to be >0": a newcomer pass)
    const nan = await withEnv({ CONTINUITY_REMINT_WINDOW_S: 'x' }, ['report']);
    expect(nan.stderr.split('\n')[0]).toBe('error CONT_ERR_CONFIG: invalid configuration: CONTINUITY_REMINT_WINDOW_S: a number of seconds');
    const zero = await continuity(['report', '--window', '0'], freshDir());
    expect(zero.code).toBe(2);
    expect(zero.stderr.split('\n')[0]).toBe('error CONT_ERR_CONFIG: invalid configuration: --window: more than 0 seconds');
  });

  it('the canary says the paths missed the proxy log when only server restarts are left to name a deploy by', async () => {
    // (it answered "no restart up at or before …" naming only a server boot a day later,
    // with no word of the paths: a newcomer pass)
    const dir = freshDir();
    expect((await continuity(['import', 'caddy', `${CAPTURES}caddy-sdk-restart/caddy-access.log`], dir)).code).toBe(0);
    const demo = new ServerScenario('demo');
    demo.boot(86_400, 'r1');
    demo.boot(86_409, 'r2');
    const events = join(freshDir(), 'boots.jsonl');
    writeFileSync(events, demo.events.map((e) => JSON.stringify(e)).join('\n') + '\n');
    await run(process.execPath, ['--import', 'tsx', new URL('./helpers/load-events.ts', import.meta.url).pathname, dir, events]);
    const canary = await withEnvIn(dir, { CONTINUITY_MCP_PATHS: '/elsewhere' }, ['canary', '--deploy', '2026-11-30T04:05:05Z', '--format', 'json']);
    expect(canary.code, canary.stderr).toBe(2);
    const verdict = JSON.parse(canary.stdout) as { reason: string; notes: string[] };
    expect(verdict.reason).toBe(
      'no restart up at or before 2026-11-30T04:05:05.000000Z (the first is up at 2026-12-01T04:00:09.000000Z); the proxy log was not read: CONTINUITY_MCP_PATHS matches none of its lines (see the notes)',
    );
    expect(verdict.notes[0]).toMatch(/^CONTINUITY_MCP_PATHS \(\/elsewhere\) matches no proxy line in the store; the proxy log's MCP endpoint looks like \/mcp\. /);
    // with the paths right, the proxy's restart before that time is the deploy
    const right = await continuity(['canary', '--deploy', '2026-11-30T04:05:05Z', '--format', 'json'], dir);
    expect((JSON.parse(right.stdout) as { deploy: { source: string } }).deploy.source).toBe('proxy');
  });
});

describe.runIf(spawnSync('script', ['--version']).status === 0)('sql --format arrow on a terminal', () => {
  it('is refused with CONT_ERR_CONFIG (binary on a terminal), and written to a pipe', () => {
    const dir = freshDir();
    const env: NodeJS.ProcessEnv = { ...process.env, CONTINUITY_DATA_DIR: dir };
    delete env.CLICKHOUSE_URL;
    // (script(1) gives the command a terminal as its standard output)
    const tty = spawnSync('script', ['-qec', `${process.execPath} ${BIN} sql 'SELECT 1' --format arrow`, '/dev/null'], { env, encoding: 'utf8', timeout: 60_000 });
    expect(tty.status).toBe(2);
    expect(tty.stdout).toContain('error CONT_ERR_CONFIG: invalid configuration: --format arrow writes binary Arrow IPC, and standard output is a terminal');
    const piped = spawnSync(process.execPath, [BIN, 'sql', 'SELECT 1', '--format', 'arrow'], { env, timeout: 60_000 });
    expect(piped.status).toBe(0);
    expect(piped.stdout.subarray(0, 4)).toEqual(Buffer.from([0xff, 0xff, 0xff, 0xff]));
  });
});

describe('bad flags and closed pipes', () => {
  it('an import whose stderr cannot be written stores its lines and exits 0; a full stdout is exit 1 with one line, not a crash', () => {
    const dir = freshDir();
    const log = join(dir, 'some-bad.log');
    writeFileSync(log, readFileSync(`${CAPTURES}caddy-sdk-restart/caddy-access.log`, 'utf8') + 'not json\n');
    const env: NodeJS.ProcessEnv = { ...process.env, CONTINUITY_DATA_DIR: dir };
    delete env.CLICKHOUSE_URL;
    const full = openSync('/dev/full', 'w');
    try {
      // the rejected line's report goes to stderr, which is full (a break-it pass: exit 139, a segfault)
      const imported = spawnSync(process.execPath, [BIN, 'import', 'caddy', log], { env, stdio: ['ignore', 'pipe', full], encoding: 'utf8', timeout: 120_000 });
      expect(imported.status).toBe(0);
      const count = spawnSync(process.execPath, [BIN, 'sql', 'SELECT count() AS n FROM proxy_access FINAL', '--format', 'csv'], { env, encoding: 'utf8', timeout: 60_000 });
      expect(count.stdout.trim().split('\n')).toEqual(['"n"', '47']);
      const out = spawnSync(process.execPath, [BIN, 'sql', 'SELECT 1'], { env, stdio: ['ignore', full, 'pipe'], encoding: 'utf8', timeout: 60_000 });
      expect(out.status).toBe(1);
      expect(out.stderr).toBe('continuity: the output could not be written (ENOSPC)\n');
    } finally {
      closeSync(full);
    }
  });

  it('sql says on stderr when its output stops at --max-rows, and only then', async () => {
    const dir = freshDir();
    const cut = await continuity(['sql', 'SELECT number FROM numbers(20)', '--format', 'csv', '--max-rows', '5'], dir);
    expect(cut.code).toBe(0);
    expect(cut.stdout.trim().split('\n')).toEqual(['"number"', '0', '1', '2', '3', '4']);
    expect(cut.stderr).toBe('note: the output stops at --max-rows 5 rows; the result may have more (raise --max-rows)\n');
    const whole = await continuity(['sql', 'SELECT number FROM numbers(4)', '--format', 'json', '--max-rows', '5'], dir);
    expect(whole.stdout.trim().split('\n')).toHaveLength(4);
    expect(whole.stderr).toBe('');
  });

  it('answers a bad --format, --max-rows or --timeout with CONT_ERR_CONFIG naming the flag, not a stack trace', async () => {
    const dir = freshDir();
    for (const [args, flag] of [
      [['sql', 'SELECT 1', '-f', 'xml'], '--format'],
      [['sql', 'SELECT 1', '--max-rows', 'abc'], '--max-rows'],
      [['sql', 'SELECT 1', '--max-rows', '-5'], '--max-rows'],
      // (as POST /api/sql: 100,000,000 narrow rows took 6.6 GB before the result bound stopped them)
      [['sql', 'SELECT 1', '--max-rows', '1000001'], '--max-rows'],
      [['sql', 'SELECT 1', '--timeout', 'abc'], '--timeout'],
      [['sql', 'SELECT 1', '--timeout', '0.5'], '--timeout takes a positive whole number'],
      [['sql', 'SELECT 1', '--timeout', '700'], '--timeout takes at most 600 seconds'],
      [['query', 'restarts', '-f', 'arrow'], '--format'],
      // the report's flags by their own names, not the parameters of the query that bound them first
      [['report', '--from', 'yesterday'], '--from: a time from 1900 to 2200'],
      [['report', '--from', '2026-11-30', '--to', '2026-11-29'], '--from (2026-11-30 00:00:00.000000) must be before --to (2026-11-29 00:00:00.000000)'],
      [['report', '--window', 'abc'], '--window: '],
      [['analyze', `${CAPTURES}caddy-sdk-restart/caddy-access.log`, '--to', 'soon'], '--to: a time'],
    ] as const) {
      const r = await continuity([...args], dir);
      expect(r.code, args.join(' ')).not.toBe(0);
      expect(r.stderr, args.join(' ')).toContain('CONT_ERR_CONFIG');
      expect(r.stderr, args.join(' ')).toContain(flag);
      expect(r.stderr, args.join(' ')).not.toMatch(/unexpected|\n\s+at /);
      expect(r.stderr, args.join(' ')).not.toMatch(/restarts:|t_from|t_to|window_s|continuity query/);
    }
    // analyze checked its flags before importing anything
    expect((await continuity(['sql', 'SELECT count() AS n FROM events', '-f', 'json'], dir)).stdout.trim()).toBe('{"n":"0"}');
  });

  it('exits 2 on a usage error (a missing argument, an unknown flag or command), coded as any error, 0 for --help', async () => {
    const dir = freshDir();
    // (commander printed "error: missing required argument 'statement'" with no code: a newcomer pass)
    for (const [args, message] of [
      [['sql'], "missing required argument 'statement'"],
      [['query', 'restarts', 'extra'], "too many arguments for 'query'. Expected 1 argument but got 2."],
      [['report', '--bogus'], "unknown option '--bogus'"],
      [['nope'], "unknown command 'nope'"],
    ] as const) {
      const r = await continuity([...args], dir);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr.split('\n')[0], args.join(' ')).toBe(`error CONT_ERR_CONFIG: ${message}`);
    }
    expect((await continuity(['sql', '--help'], dir)).code).toBe(0);
  });

  it('a ClickHouse server that cannot be reached is one coded error, without the client library\'s warnings and stack trace', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, CLICKHOUSE_URL: 'http://127.0.0.1:1' };
    delete env.KAFKA_BROKERS;
    const r = await run(process.execPath, [BIN, 'query', 'restarts'], { env }).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => err,
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/^error CONT_ERR_STORE_UNAVAILABLE: .*http:\/\/127\.0\.0\.1:1: connect ECONNREFUSED/);
    expect(r.stderr).not.toMatch(/\[WARN\]|\n\s+at /);
  });

  it('exits quietly when the reader of its output stops early (| head)', async () => {
    const dir = freshDir();
    const { stdout, stderr } = await run(
      'bash',
      ['-c', `"${process.execPath}" "${BIN}" sql "SELECT number FROM numbers(1000000)" -f csv --max-rows 1000000 | head -2`],
      { env: { ...process.env, CONTINUITY_DATA_DIR: dir }, maxBuffer: 64 << 20 },
    );
    expect(stdout).toBe('"number"\n0\n');
    expect(stderr).not.toMatch(/EPIPE|\n\s+at /);
  });
});
