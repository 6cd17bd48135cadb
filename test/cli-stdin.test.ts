// Input edge cases through the real CLI: `… | continuity import caddy -` (the launcher
// hands stdin to the CLI on fd 3, so the embedded engine never sees it on fd 0); data
// waiting on stdin when the command does not read it (left alone: the launcher gives
// such a command /dev/null); and a log older than the retention TTL (a warning, not a silent nothing).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';

const BIN = new URL('../bin/continuity.mjs', import.meta.url).pathname;
const ACCESS = new URL('./fixtures/captures/caddy-sdk-restart/caddy-access.log', import.meta.url).pathname;
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const freshDir = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'continuity-stdin-'));
  dirs.push(d);
  return d;
};

/** Runs `command` with `input` written to its standard input (none: stdin is /dev/null) and collects its output. */
function run(command: string, args: string[], input?: Buffer | string, env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    if (input !== undefined) child.stdin!.end(input);
  });
}

/** Runs the CLI with `input` written to its standard input. */
const continuity = (args: string[], input: Buffer | string, env: NodeJS.ProcessEnv = {}) => run(process.execPath, [BIN, ...args], input, env);

const count = async (dataDir: string, env: NodeJS.ProcessEnv = {}): Promise<string> =>
  (await continuity(['sql', 'SELECT count(), uniqExact(event_id) FROM events', '--format', 'csv', '--data-dir', dataDir], '', env)).stdout.trim();

describe('standard input', () => {
  it('imports a log piped to `import caddy -`, plain and gzip, storing nothing twice', async () => {
    const dir = freshDir();
    const plain = await continuity(['import', 'caddy', '-', '--data-dir', dir], readFileSync(ACCESS));
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout + plain.stderr).toContain('imported 47 of 47 lines');
    const gz = await continuity(['import', 'caddy', '-', '--data-dir', dir], gzipSync(readFileSync(ACCESS)));
    expect(gz.code, gz.stderr).toBe(0);
    expect(await count(dir)).toMatch(/\n47,47$/);
  });

  it('analyzes a piped log with `analyze -` and prints the report', async () => {
    const dir = freshDir();
    const r = await continuity(['analyze', '-', '--json', '--data-dir', dir], readFileSync(ACCESS));
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ refused_misses: { total: 25 }, restarts: { inferred: 2 } });
  });

  it('leaves data waiting on stdin alone when the command does not read it (the launcher gives it /dev/null)', async () => {
    const dir = freshDir();
    const r = await continuity(['import', 'caddy', ACCESS, '--data-dir', dir], 'hello\n');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('imported 47 of 47 lines');
    expect(await count(dir)).toMatch(/\n47,47$/);
  });

  it('runs in a shell loop that reads file names from a pipe, without eating the loop\'s input', async () => {
    const dir = freshDir();
    // (before the launcher gave such a command /dev/null, the engine refused the first
    // import with CONT_ERR_STORE_STDIN and swallowed the second name)
    const script = `printf '%s\\n' one two | while read -r name; do "$0" "$1" import caddy "$2" --data-dir "$3" > /dev/null || exit 1; echo "done $name"; done`;
    const r = await run('bash', ['-c', script, process.execPath, BIN, ACCESS, dir]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('done one\ndone two\n');
    expect(await count(dir)).toMatch(/\n47,47$/);
  });
});

describe('signals', () => {
  it('ends `import caddy -` the way its child ended when a signal stops it (not exit 0)', async () => {
    // (the launcher forwards the signal to the child that reads stdin on fd 3; its own
    // forwarding handler swallowed the signal it re-raised, and it exited 0: a break-it pass)
    const launcher = spawn(process.execPath, [BIN, 'import', 'caddy', '-', '--data-dir', freshDir()], { stdio: ['pipe', 'ignore', 'ignore'] });
    const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => launcher.on('close', (code, signal) => resolve({ code, signal })));
    // the handlers are installed in the same tick as the child is spawned
    const children = `/proc/${launcher.pid}/task/${launcher.pid}/children`;
    await expect.poll(() => readFileSync(children, 'utf8').trim(), { timeout: 30_000, interval: 50 }).not.toBe('');
    launcher.kill('SIGTERM');
    expect(await ended).toEqual({ code: null, signal: 'SIGTERM' });
    launcher.stdin!.destroy();
  });
});

describe('a signal during `import caddy -`', () => {
  it('stops the import, records what it read, says so, and exits 128 + the signal', async () => {
    const dataDir = freshDir();
    const launcher = spawn(process.execPath, [BIN, 'import', 'caddy', '-', '--data-dir', dataDir], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    launcher.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    launcher.stdout!.resume();
    const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => launcher.on('close', (code, signal) => resolve({ code, signal })));
    // the child (the launcher's, reading stdin on fd 3) stops the import on a signal
    // from before it opens the store: wait until it holds the engine's status file
    const children = `/proc/${launcher.pid}/task/${launcher.pid}/children`;
    await expect.poll(() => readFileSync(children, 'utf8').trim(), { timeout: 30_000, interval: 50 }).not.toBe('');
    const child = readFileSync(children, 'utf8').trim().split(/\s+/)[0]!;
    const holdsStore = () =>
      readdirSync(`/proc/${child}/fd`).some((fd) => {
        try {
          const target = readlinkSync(`/proc/${child}/fd/${fd}`);
          return target.startsWith(realpathSync(dataDir)) && target.endsWith('/status');
        } catch {
          return false;
        }
      });
    await expect.poll(holdsStore, { timeout: 60_000, interval: 50 }).toBe(true);
    launcher.kill('SIGTERM');
    expect(await ended).toEqual({ code: 143, signal: null });
    launcher.stdin!.destroy();
    expect(stderr).toContain('interrupted by SIGTERM: - was read to line 0; the lines read are stored and recorded');
    const runs = await continuity(['sql', "SELECT origin, lines_read FROM import_runs", '--format', 'csv', '--data-dir', dataDir], '');
    expect(runs.stdout.trim()).toBe('"origin","lines_read"\n"-",0');
  });
});

describe('retention', () => {
  // the store's own default (90 days when created): vitest.config.ts sets 0 for every test
  const dflt = { CONTINUITY_RETENTION_DAYS: undefined };
  it('warns when the input is older than the retention, and keeps it with CONTINUITY_RETENTION_DAYS=0', async () => {
    const old = readFileSync(ACCESS, 'utf8')
      .trim()
      .split('\n')
      .map((l) => {
        const e = JSON.parse(l) as { ts: number };
        return JSON.stringify({ ...e, ts: e.ts - 200 * 86_400 });
      })
      .join('\n');
    const dir = freshDir();
    // analyze says why there is nothing to judge (a newcomer pass: it pointed at --from/--to)
    const analyzed = await continuity(['analyze', '-', '--json', '--data-dir', freshDir()], old, dflt);
    expect(analyzed.code, analyzed.stderr).toBe(0);
    const report = JSON.parse(analyzed.stdout) as { lines: Record<string, unknown>; findings: string[] };
    expect(report.lines).toMatchObject({ parsed: 47, expired: 'all', retention_days: 90 });
    // (first, and alone once the engine has dropped the lines, which it does in a merge right after the write)
    expect(report.findings[0]).toBe(
      "Every line of this input is older than the store's 90-day retention: the store drops them (numbers above 0 here are lines it has not dropped yet), so there is nothing to judge; import it again with CONTINUITY_RETENTION_DAYS=0 (keep events for ever) or enough days.",
    );
    expect(report.findings).not.toContain('No continuity problems found in this range.');
    // part of the input expired: said first, and the rest is judged
    // (moved to end a minute ago, so the rest stays within the retention whatever the date)
    const lines = readFileSync(ACCESS, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { ts: number });
    const shift = Date.now() / 1000 - 60 - lines.at(-1)!.ts;
    const mixed = lines.map((e, i) => JSON.stringify({ ...e, ts: e.ts + shift - (i < 5 ? 200 * 86_400 : 0) })).join('\n');
    const part = await continuity(['analyze', '-', '--json', '--data-dir', freshDir()], mixed, dflt);
    expect(part.code, part.stderr).toBe(0);
    const partReport = JSON.parse(part.stdout) as { lines: Record<string, unknown>; findings: string[]; refused_misses: { total: number } };
    expect(partReport.lines).toMatchObject({ expired: 'some', retention_days: 90 });
    expect(partReport.findings[0]).toMatch(/^Some lines of this input are older than the store's 90-day retention: /);
    expect(partReport.refused_misses.total).toBe(25);
    const r = await continuity(['import', 'caddy', '-', '--data-dir', dir], old, dflt);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/every entry of this input .* is older than the 90-day retention/);
    // The engine drops expired rows in a merge it schedules right after the write (the
    // new part holds only expired rows), not in the write itself: a count straight after
    // the import can still see them for a moment (1 of 40 tries on a loaded machine).
    await expect.poll(() => count(dir, dflt), { timeout: 30_000, interval: 500 }).toMatch(/\n0,0$/);
    // a later report says the retention dropped them (it blamed the filters: a newcomer pass)
    const later = await continuity(['report', '--json', '--data-dir', dir], '', dflt);
    expect(later.code, later.stderr).toBe(0);
    const laterReport = JSON.parse(later.stdout) as { lines: Record<string, unknown>; findings: string[] };
    expect(laterReport.lines).toMatchObject({ parsed: 47, scope: 'store', retention_days: 90 });
    expect(laterReport.findings).toEqual([
      "Nothing to judge: 47 line(s) imported into this store were parsed, but it holds none of their events: its 90-day retention dropped them; import the files again with CONTINUITY_RETENTION_DAYS=0 (keep events for ever) or enough days to keep them.",
    ]);
    // The warning's advice, in the same store: the same lines again with the retention
    // raised are stored (they were taken as a duplicate of the dropped batch, while the
    // report said 47 written: a newcomer pass)
    const again = await continuity(['import', 'caddy', '-', '--data-dir', dir], old, { CONTINUITY_RETENTION_DAYS: '0' });
    expect(again.code, again.stderr).toBe(0);
    expect(await count(dir, dflt)).toMatch(/\n47,47$/);

    const keep = freshDir();
    const k = await continuity(['import', 'caddy', '-', '--data-dir', keep], old, { CONTINUITY_RETENTION_DAYS: '0' });
    expect(k.stderr).not.toContain('retention');
    // A command run later without the variable keeps the store's retention as it is: it
    // once re-applied the 90-day default on every open, and the next merge dropped the rows.
    expect(await count(keep, { CONTINUITY_RETENTION_DAYS: undefined })).toMatch(/\n47,47$/);
    const ttl = await continuity(
      ['sql', "SELECT countIf(create_table_query LIKE '%TTL%') FROM system.tables WHERE database = currentDatabase() AND name = 'events'", '--format', 'csv', '--data-dir', keep],
      '',
      { CONTINUITY_RETENTION_DAYS: undefined },
    );
    expect(ttl.stdout.trim(), ttl.stderr).toMatch(/\n0$/);
    expect(await count(keep, dflt)).toMatch(/\n47,47$/);
    // any command that opens the store with the variable set applies it, a read too: it
    // says so on stderr (a store created by the command says nothing: above)
    const shorter = await continuity(['sql', 'SELECT 1', '--format', 'csv', '--data-dir', keep], '', { CONTINUITY_RETENTION_DAYS: '30' });
    expect(shorter.code, shorter.stderr).toBe(0);
    expect(shorter.stderr).toBe(
      "note: CONTINUITY_RETENTION_DAYS=30 changed this store's retention from none (kept forever) to 30 days: events older than 30 days were dropped; every command that opens the store with it set applies it\n",
    );
    const same = await continuity(['sql', 'SELECT 1', '--format', 'csv', '--data-dir', keep], '', { CONTINUITY_RETENTION_DAYS: '30' });
    expect(same.stderr).toBe('');
  });
});

describe('data directory', () => {
  it('answers a --data-dir that is a file with CONT_ERR_CONFIG naming it', async () => {
    const file = join(freshDir(), 'not-a-dir');
    writeFileSync(file, 'x');
    const r = await continuity(['sql', 'SELECT 1', '--data-dir', file], '');
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('CONT_ERR_CONFIG');
    expect(r.stderr).toContain(file);
    expect(r.stderr).not.toContain('unexpected error');
  });

  // /proc/self is a directory, but nothing can be created in it: the engine failed to
  // open <dir>/clickhouse and the answer was CONT_ERR_STORE_UNAVAILABLE, whose fix
  // sends an embedded user to check CLICKHOUSE_URL.
  it.runIf(existsSync('/proc/self'))('answers a --data-dir nothing can be created in (/proc/self) with CONT_ERR_CONFIG naming the directory, not CLICKHOUSE_URL', async () => {
    const r = await continuity(['query', 'restarts', '--data-dir', '/proc/self'], '', { CLICKHOUSE_URL: undefined });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/error CONT_ERR_CONFIG: .*data directory \/proc\/self cannot be used/);
    expect(r.stderr).toContain('--data-dir');
    expect(r.stderr).not.toContain('CLICKHOUSE_URL');
    expect(r.stderr).not.toContain('unexpected error');
  });
});
