import { execFile, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authDeploy, failingDeploy, HOSTILE_UA, passingDeploy } from './fixtures/canary-scenarios.ts';
import { invokedAs } from '../cli/commands/canary.ts';
import { stepCommand } from '../reports/index.ts';

// `continuity canary` as a pipeline runs it: a real process through bin/continuity.mjs,
// a fresh data directory loaded with the fixture builders' events, the exit code
// as the verdict (0 pass, 1 fail, 2 cannot evaluate).

const run = promisify(execFile);
const BIN = new URL('../bin/continuity.mjs', import.meta.url).pathname;
const LOADER = new URL('./helpers/load-events.ts', import.meta.url).pathname;
const dirs: string[] = [];
const freshDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'continuity-canary-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function continuity(args: string[], dataDir: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CLICKHOUSE_URL;
  delete env.KAFKA_BROKERS;
  delete env.CONTINUITY_DATA_DIR;
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, '--data-dir', dataDir, ...args], { env, maxBuffer: 64 << 20 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

let store = '';
let files = '';
beforeAll(async () => {
  store = freshDir();
  files = freshDir();
  const events = join(files, 'events.jsonl');
  writeFileSync(events, [...passingDeploy(), ...failingDeploy(), ...authDeploy()].map((e) => JSON.stringify(e)).join('\n') + '\n');
  await run(process.execPath, ['--import', 'tsx', LOADER, store, events]);
});

describe('continuity canary, break-it cases', () => {
  it('--url: a 200 without the canary headers is no report (exit 2, not a pass); a report it could not write is exit 2, not 1', async () => {
    const { createServer } = await import('node:http');
    const fake = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/markdown' });
      res.end('# PASS whatever\n');
    });
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
    try {
      const port = (fake.address() as { port: number }).port;
      const r = await continuity(['canary', '--deploy', 'latest', '--url', `http://127.0.0.1:${port}`], store);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('CONT_ERR_API_UNAVAILABLE');
      expect(r.stderr).toContain('without a canary report');
    } finally {
      await new Promise<void>((resolve) => fake.close(() => resolve()));
    }
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.CLICKHOUSE_URL;
    delete env.CONTINUITY_DATA_DIR;
    const full = openSync('/dev/full', 'w');
    try {
      const passing = spawnSync(process.execPath, [BIN, '--data-dir', store, 'canary', '--deploy', 'v2', '--service', 'pass'], { env, stdio: ['ignore', full, 'pipe'], encoding: 'utf8', timeout: 120_000 });
      expect(passing.status, passing.stderr).toBe(2);
      expect(passing.stderr).toContain('the output could not be written (ENOSPC)');
    } finally {
      closeSync(full);
    }
  });

  it('without --service, a store of two services, one of them never restarting: the deploy’s service only (newcomer pass: another’s 401s failed it)', async () => {
    const dir = freshDir();
    const CAPTURES = new URL('./fixtures/captures/', import.meta.url).pathname;
    for (const [name, service] of [['caddy-sdk-restart', 'svc-a'], ['caddy-sdk-auth', 'svc-b']] as const) {
      const imported = await continuity(['import', 'caddy', `${CAPTURES}${name}/caddy-access.log`, '--errors', `${CAPTURES}${name}/caddy-error.log`, '--service', service], dir);
      expect(imported.code, imported.stderr).toBe(0);
    }
    const r = await continuity(['canary', '--deploy', 'latest', '--format', 'json'], dir);
    const report = JSON.parse(r.stdout) as { scope: { service: string }; notes: string[]; gates: Array<{ id: string; value: number | null }> };
    expect(report.scope.service).toBe('svc-a');
    expect(report.notes).toContain('The store holds events of several services (svc-a, svc-b) and no --service was given: the gates count the deploy\'s service, "svc-a" (--service names another scope).');
    expect(report.gates.find((g) => g.id === 'invalid_token_rate')!.value).toBe(0);
  });

  it('the real capture’s first restart: its window holds the last refused miss before the next restart, at that restart’s down_from (a break-it pass: in no canary)', async () => {
    // Ground truth (captures/caddy-sdk-restart, orchestrator-events.jsonl): the first
    // restarted server refused 13 POSTs, 04:04:45.699 to 04:04:57.773, before its kill at
    // 04:04:57.956; the proxy log's next gap starts after the 13th, its last response.
    const dir = freshDir();
    const CAPTURES = new URL('./fixtures/captures/caddy-sdk-restart/', import.meta.url).pathname;
    const imported = await continuity(['import', 'caddy', `${CAPTURES}caddy-access.log`, '--errors', `${CAPTURES}caddy-error.log`], dir);
    expect(imported.code, imported.stderr).toBe(0);
    const r = await continuity(['canary', '--deploy', '2026-11-30T04:05:00Z', '--format', 'json'], dir);
    const report = JSON.parse(r.stdout) as {
      window: { to: string; next_restart_at: string };
      gates: Array<{ id: string; numbers: Record<string, number> }>;
      bounds: Array<{ id: string; successes: number; trials: number }>;
    };
    expect(report.window).toMatchObject({ next_restart_at: '2026-11-30T04:04:57.773209Z', to: '2026-11-30T04:04:57.773210Z' });
    // (the 13th's next request is past the window: "nothing" within it)
    expect(report.gates.find((g) => g.id === 'refused_after_boot')!.numbers).toMatchObject({ refused_misses: 13, next_same_session_again: 12, next_nothing: 1 });
    // no request of the window succeeded: its one 200, the GET stream at its start, was cut
    // when the server died (upstream_error incomplete_response; a break-it pass counted it)
    expect(report.bounds.find((b) => b.id === 'requests_succeeded')).toMatchObject({ successes: 0, trials: 19 });
  });
});

describe('continuity canary', () => {
  it('a passing deploy exits 0 and prints the summary line first (md by default)', async () => {
    const r = await continuity(['canary', '--deploy', 'v2', '--service', 'pass'], store);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n')[0]).toMatch(/^# PASS · deploy boot-pass-27 \(service pass, release v2, was v1\) · window .+ · 0 of 5 gates failed$/);
    expect(r.stdout).toContain('## What to look at next');
  });

  it('a failing deploy exits 1; --format json carries the whole report', async () => {
    const r = await continuity(['canary', '--deploy', 'latest', '--service', 'fail', '--format', 'json'], store);
    expect(r.code, r.stderr).toBe(1);
    const report = JSON.parse(r.stdout);
    expect(report).toMatchObject({ verdict: 'fail', exit_code: 1, deploy: { boot_id: 'boot-fail-16.9' } });
    expect(report.gates.map((g: { id: string; value: number }) => [g.id, g.value])).toEqual([
      ['proxy_5xx_in_gap', 9],
      ['refused_after_boot', 3],
      ['unsettled_at_shutdown', 1],
      ['sessions_lost_tools', 1],
      ['invalid_token_rate', 0],
    ]);
    expect(report.bounds[0]).toMatchObject({ successes: 2, trials: 3 });
    // each next step names the store the canary read, so it runs as pasted
    expect(report.next.length).toBeGreaterThan(0);
    // (and by the name the CLI was started by: the tests run bin/continuity.mjs from the clone's root)
    for (const n of report.next as Array<{ command: string }>) expect(n.command.startsWith(`./bin/continuity.mjs --data-dir=${store} `), n.command).toBe(true);
    const query = (report.next as Array<{ command: string }>).find((n) => n.command.includes(' query restarts '))!.command;
    const pasted = await continuity(query.replace(/^\.\/bin\/continuity\.mjs --data-dir=\S+ /, '').split(' ').concat('--format', 'json'), store);
    expect(pasted.code, pasted.stderr).toBe(0);
  });

  it('--url with user info is a configuration error that does not print it', async () => {
    const r = await continuity(['canary', '--deploy', 'latest', '--format', 'json', '--url', 'http://user:hunter2pass@127.0.0.1:9'], store);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('CONT_ERR_CONFIG');
    expect(r.stderr + r.stdout).not.toContain('hunter2pass');
    for (const url of ['ftp://user:hunter2pass@127.0.0.1:9', 'user:hunter2pass@127.0.0.1:9', 'http://user:hunter2pass/x@127.0.0.1:9', 'http://user:hunter2pass#x@127.0.0.1:9']) {
      const bad = await continuity(['canary', '--deploy', 'latest', '--format', 'json', '--url', url], store);
      expect(bad.code, url).toBe(2);
      expect(bad.stderr + bad.stdout, url).not.toContain('hunter2pass');
    }
  });

  it('writes a next step\'s values as --flag=value: a service named like a flag stays a value when pasted', async () => {
    const step = stepCommand({ kind: 'report', params: { t_to: '2200-01-01T00:00:00.000000Z', service: '--data-dir=/tmp/elsewhere', environment: '-x' } }, {});
    expect(step).toBe('continuity report --to=2200-01-01T00:00:00.000000Z --service=--data-dir=/tmp/elsewhere --environment=-x');
    const pasted = await continuity(step.split(' ').slice(1).concat('--json'), store);
    expect(pasted.code, pasted.stderr).toBe(0);
    expect(JSON.parse(pasted.stdout).range).toMatchObject({ service: '--data-dir=/tmp/elsewhere', environment: '-x' });
  });

  it('names itself in next steps as a reader can run it: continuity where the PATH has this launcher, else bin/continuity.mjs, ./-relative under the working directory', () => {
    const root = new URL('..', import.meta.url).pathname.replace(/\/$/, '');
    const launcher = join(root, 'bin', 'continuity.mjs');
    expect(invokedAs(root, '', launcher)).toBe('./bin/continuity.mjs');
    expect(invokedAs('/nowhere/else', '', launcher)).toBe(launcher.includes(' ') ? `"${launcher}"` : launcher);
    // npm link / a global install: `continuity` on the PATH is this launcher
    const linked = mkdtempSync(join(tmpdir(), 'continuity-path-'));
    const other = mkdtempSync(join(tmpdir(), 'continuity-path-'));
    try {
      symlinkSync(launcher, join(linked, 'continuity'));
      writeFileSync(join(other, 'continuity'), '#!/bin/sh\n', { mode: 0o755 });
      expect(invokedAs('/nowhere/else', `${linked}:/usr/bin`, launcher)).toBe('continuity');
      // another program of that name first on the PATH is not this one
      expect(invokedAs(root, `${other}:${linked}`, launcher)).toBe('./bin/continuity.mjs');
    } finally {
      rmSync(linked, { recursive: true, force: true });
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('cannot evaluate exits 2: an unknown release, and an empty store', async () => {
    const unknown = await continuity(['canary', '--deploy', 'v9', '--service', 'pass'], store);
    expect(unknown.code).toBe(2);
    expect(unknown.stdout.split('\n')[0]).toMatch(/^# CANNOT EVALUATE · deploy v9 not resolved · unknown deploy "v9"/);

    const empty = await continuity(['canary', '--deploy', 'latest', '--format', 'json'], freshDir());
    expect(empty.code).toBe(2);
    expect(JSON.parse(empty.stdout)).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2, reason: expect.stringMatching(/^no restart found in the store at .+: /) });
  });

  it('a usage error exits 2, not 1 (which a pipeline reads as a failed gate), and help exits 0', async () => {
    for (const args of [['--deploy', 'v2', '--bogus'], ['--deploy'], ['--deploy', 'v2', 'extra'], ['--deploy', 'v2', '--format'], ['--deploy', ' ']]) {
      const r = await continuity(['canary', ...args], store);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(/^error(: | CONT_ERR_CONFIG)/m);
    }
    expect((await continuity(['canary', '--help'], store)).code).toBe(0);
    // --token is --url's: alone it was ignored unsaid (a newcomer pass)
    const token = await continuity(['canary', '--deploy', 'v2', '--token', 'abc'], store);
    expect(token.code).toBe(2);
    expect(token.stderr).toMatch(/CONT_ERR_CONFIG: .*--token is the bearer token of --url/);
  });

  it('a gates file overrides a threshold; an invalid one is refused with CONT_ERR_CONFIG naming the file and field (exit 2)', async () => {
    const failing = await continuity(['canary', '--deploy', 'latest', '--service', 'auth', '--format', 'json'], store);
    expect(failing.code, failing.stderr).toBe(1);
    expect(JSON.parse(failing.stdout).gates.find((g: { id: string }) => g.id === 'invalid_token_rate').verdict).toBe('fail');

    const relaxed = join(files, 'gates.yaml');
    writeFileSync(relaxed, '# a noisy auth provider\ninvalid_token_rate:\n  ratio: 20\n  margin_pp: 50\n');
    const passing = await continuity(['canary', '--deploy', 'latest', '--service', 'auth', '--gates', relaxed, '--format', 'json'], store);
    expect(passing.code, passing.stderr).toBe(0);
    expect(JSON.parse(passing.stdout).gates.find((g: { id: string }) => g.id === 'invalid_token_rate')).toMatchObject({
      verdict: 'pass',
      limits: { ratio: 20, margin_pp: 50 },
    });

    // the same from standard input (`--gates -`); /dev/stdin is refused, not read as empty
    // (the command's fd 0 is /dev/null: it gave the defaults silently, a break-it pass)
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.CLICKHOUSE_URL;
    delete env.CONTINUITY_DATA_DIR;
    const piped = spawnSync(process.execPath, [BIN, '--data-dir', store, 'canary', '--deploy', 'latest', '--service', 'auth', '--gates', '-', '--format', 'json'], {
      input: 'invalid_token_rate: { ratio: 20, margin_pp: 50 }\n',
      encoding: 'utf8',
      env,
      timeout: 120_000,
    });
    expect(piped.status, piped.stderr).toBe(0);
    expect(JSON.parse(piped.stdout).gates.find((g: { id: string }) => g.id === 'invalid_token_rate')).toMatchObject({ verdict: 'pass', limits: { ratio: 20, margin_pp: 50 } });
    const devStdin = spawnSync(process.execPath, [BIN, '--data-dir', store, 'canary', '--deploy', 'latest', '--service', 'auth', '--gates', '/dev/stdin'], {
      input: 'invalid_token_rate: { ratio: 20 }\n',
      encoding: 'utf8',
      env,
      timeout: 120_000,
    });
    expect(devStdin.status).toBe(2);
    expect(devStdin.stderr).toContain('gates file /dev/stdin: standard input is not open to this command by that name; give --gates - to read the gates from standard input');
    // a file that refers to itself, one far too large for a gates file, two documents, and
    // standard input by another name: coded errors, no crash, no silent defaults
    const cyclic = join(files, 'cyclic.yaml');
    writeFileSync(cyclic, 'a: &a [*a]\n');
    const twoDocs = join(files, 'two-docs.yaml');
    writeFileSync(twoDocs, 'proxy_5xx_in_gap: { max: 3 }\n---\nproxy_5xx_in_gap: { max: 0 }\n');
    for (const [path, words] of [
      [cyclic, 'field a.0: not a number, boolean or mapping'],
      ['/dev/zero', 'over 65536 bytes'],
      [twoDocs, '2 documents (separated by ---); a gates file is one'],
      ['/dev//stdin', "this is the command's standard input"],
    ] as const) {
      const r = await continuity(['canary', '--deploy', 'latest', '--service', 'auth', '--gates', path, '--format', 'json'], store);
      expect(r.code, path).toBe(2);
      expect(JSON.parse(r.stdout), path).toMatchObject({ error: { code: 'CONT_ERR_CONFIG', message: expect.stringContaining(words) } });
    }

    const bad = join(files, 'bad-gates.json');
    writeFileSync(bad, JSON.stringify({ invalid_token_rate: { ratio: 'twice' } }));
    const refused = await continuity(['canary', '--deploy', 'latest', '--service', 'auth', '--gates', bad], store);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toContain('error CONT_ERR_CONFIG');
    expect(refused.stderr).toContain(`gates file ${bad}`);
    expect(refused.stderr).toContain('field invalid_token_rate.ratio');
    // with --format json the pipeline still gets a document to read
    const refusedJson = await continuity(['canary', '--deploy', 'latest', '--service', 'auth', '--gates', bad, '--format', 'json'], store);
    expect(refusedJson.code).toBe(2);
    expect(JSON.parse(refusedJson.stdout)).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2, error: { code: 'CONT_ERR_CONFIG' } });

    // every gate disabled: nothing was judged, which is no pass
    const off = join(files, 'all-off.yaml');
    writeFileSync(off, ['proxy_5xx_in_gap', 'refused_after_boot', 'unsettled_at_shutdown', 'sessions_lost_tools', 'invalid_token_rate'].map((g) => `${g}: { enabled: false }`).join('\n'));
    const none = await continuity(['canary', '--deploy', 'latest', '--service', 'pass', '--gates', off, '--format', 'json'], store);
    expect(none.code, none.stderr).toBe(2);
    expect(JSON.parse(none.stdout)).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2, reason: expect.stringMatching(/^no gate was evaluated/), counts: { passed: 0, failed: 0, not_evaluated: 5 } });
  });

  it('--format html escapes a hostile user agent', async () => {
    const r = await continuity(['canary', '--deploy', 'latest', '--service', 'auth', '--format', 'html'], store);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout.startsWith('<!doctype html>')).toBe(true);
    expect(r.stdout).not.toContain(HOSTILE_UA);
    expect(r.stdout).not.toMatch(/<script|<img/i);
    expect(r.stdout).toContain('&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;');
  });

  it('bad flags exit 2 with a coded error; --help lists the gates with their defaults', async () => {
    const r = await continuity(['canary', '--deploy', 'latest', '--after', 'soon'], store);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/CONT_ERR_CONFIG.*--after/);
    const missing = await continuity(['canary'], store);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--deploy is required/);
    const help = await continuity(['canary', '--help'], store);
    expect(help.stdout).toContain('1. proxy_5xx_in_gap: proxy-generated 5xx in the restart gap; at most 0');
    expect(help.stdout).toContain('5. invalid_token_rate: invalid_token rate against the baseline; fail when the deploy rate > max(2 × baseline, baseline + 1 pp)');
  });
});
