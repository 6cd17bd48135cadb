import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Socket } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor, waitForExit } from '../../drill/index.ts';

// `continuity serve` as a real process: it owns the embedded data directory, takes
// events over HTTP, answers reads through /api while other commands are locked
// out, and on SIGTERM writes what it accepted and releases the directory.

const BIN = fileURLToPath(new URL('../../bin/continuity.mjs', import.meta.url));
const TOKEN = 'serve-e2e-token-0123456789';
const KEY = '00112233445566778899aabbccddeeff';
let dataDir: string;
let serve: ChildProcess;
let base = '';
let stdout = '';
let stderr = '';

function cli(...args: string[]) {
  return spawnSync(process.execPath, [BIN, '--data-dir', dataDir, ...args], {
    encoding: 'utf8',
    env: { ...process.env, CONTINUITY_HASH_KEY: KEY, CLICKHOUSE_URL: '' },
    timeout: 60_000,
  });
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'continuity-serve-e2e-'));
  serve = spawn(process.execPath, [BIN, '--data-dir', dataDir, 'serve', '--port', '0', '--token', TOKEN], {
    env: { ...process.env, CONTINUITY_HASH_KEY: KEY, CLICKHOUSE_URL: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  createInterface({ input: serve.stdout! }).on('line', (line) => {
    stdout += line + '\n';
    const m = /^listening on (http:\/\/\S+)$/.exec(line);
    if (m) base = m[1]!;
  });
  serve.stderr!.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  await waitFor(() => base !== '' || serve.exitCode !== null, { timeoutMs: 60_000, what: 'continuity serve to listen' });
  expect(base, stderr).not.toBe('');
}, 90_000);
afterAll(async () => {
  if (serve && serve.exitCode === null) {
    serve.kill('SIGKILL');
    await waitForExit(serve, 10_000);
  }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

describe('continuity serve', () => {
  it('prints where to send events, including the OTLP exporter variable', () => {
    expect(stdout).toContain(`POST ${base}/v1/logs`);
    expect(stdout).toContain(`POST ${base}/v1/events`);
    expect(stdout).toContain(`OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=${base}/v1/logs`);
    expect(stdout).not.toContain(TOKEN);
  });

  it('takes OTLP/HTTP and JSON events and serves them back through the read API', async () => {
    const now = Date.now();
    const boot = { event_id: randomUUID(), event_type: 'boot', ts: now * 1000, source: 'server', service: 'serve-e2e', boot_id: 'boot-serve-e2e', pid: 7 };
    const events = await fetch(`${base}/v1/events`, { method: 'POST', headers: auth, body: JSON.stringify([boot]) });
    expect(await events.json()).toEqual({ accepted: 1 });
    const otlp = {
      resourceLogs: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'serve-e2e' } }, { key: 'continuity.boot_id', value: { stringValue: 'boot-serve-e2e' } }] },
          scopeLogs: [{ logRecords: [{ timeUnixNano: String(now * 1_000_000), eventName: 'boot', attributes: [{ key: 'process.pid', value: { intValue: '8' } }] }] }],
        },
      ],
    };
    const logs = await fetch(`${base}/v1/logs`, { method: 'POST', headers: auth, body: JSON.stringify(otlp) });
    expect(logs.status).toBe(200);

    let rows: Array<{ n: string }> = [];
    await waitFor(
      async () => {
        const res = await fetch(`${base}/api/sql`, { method: 'POST', headers: auth, body: JSON.stringify({ sql: "SELECT count() AS n FROM events WHERE service = 'serve-e2e'", format: 'jsonl' }) });
        rows = (await res.text()).trim().split('\n').map((l) => JSON.parse(l) as { n: string });
        return Number(rows[0]?.n) === 2;
      },
      { timeoutMs: 10_000, what: 'the events to be written' },
    );
    const q = await fetch(`${base}/api/queries/restarts?service=serve-e2e`, { headers: auth });
    expect(q.status).toBe(200);
    expect(((await q.json()) as { query: string }).query).toBe('restarts');
  });

  it('locks other commands out of the data directory while it owns it', () => {
    const r = cli('query', 'restarts');
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('CONT_ERR_STORE_LOCKED');
  });

  it('judges a deploy for a pipeline while it owns the store: canary --url asks its /api/canary', () => {
    const r = cli('canary', '--deploy', 'latest', '--format', 'json', '--url', base, '--token', TOKEN);
    const report = JSON.parse(r.stdout) as { verdict: string; exit_code: number; reason: string | null };
    expect(r.status, r.stderr).toBe(report.exit_code);
    expect(report, r.stderr).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2, reason: expect.stringMatching(/^no restart found in the store at /) });
    // the store's own words, not the lock's
    expect(r.stderr).not.toContain('CONT_ERR_STORE_LOCKED');
    // its next steps are requests to this server, run as pasted (a `continuity query` would meet the lock)
    const { next } = report as unknown as { next: Array<{ command: string }> };
    expect(next.length).toBeGreaterThan(0);
    for (const { command } of next) {
      expect(command.startsWith(`curl -s --fail-with-body -H "authorization: Bearer $CONTINUITY_INGEST_TOKEN" `), command).toBe(true);
      const pasted = spawnSync('bash', ['-c', `${command} -w '\n%{http_code}'`], { encoding: 'utf8', env: { ...process.env, CONTINUITY_INGEST_TOKEN: TOKEN }, timeout: 60_000 });
      expect(pasted.status, `${command}: ${pasted.stderr}`).toBe(0);
      expect(pasted.stdout.trim().split('\n').at(-1), `${command}: ${pasted.stdout}`).toBe('200');
    }
    const wrongToken = cli('canary', '--deploy', 'latest', '--url', base, '--token', 'wrong-token-0123456789');
    expect(wrongToken.status).toBe(2);
    expect(wrongToken.stderr).toContain('CONT_ERR_UNAUTHORIZED');
    const nobody = cli('canary', '--deploy', 'latest', '--url', 'http://127.0.0.1:9');
    expect(nobody.status).toBe(2);
    expect(nobody.stderr).toContain('CONT_ERR_API_UNAVAILABLE');
  });

  it('shuts down gracefully on SIGTERM, and what it accepted is in the store afterwards', async () => {
    serve.kill('SIGTERM');
    expect(await waitForExit(serve, 30_000)).toBe(true);
    expect(serve.exitCode, stderr).toBe(0);
    expect(stderr).toMatch(/stopped: \d+ event\(s\) written/);
    const r = cli('sql', "SELECT count() AS n FROM events WHERE service = 'serve-e2e'", '--format', 'csv');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim().split(/\r?\n/)).toEqual(['"n"', '2']);
  });
});

describe('continuity serve with a request still arriving at SIGTERM', () => {
  it('answers that request 503 after its grace (10 s) and exits, rather than wait for the client', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'continuity-serve-slow-'));
    const s = spawnServe(dir);
    const { proc } = s;
    let drip: NodeJS.Timeout | undefined;
    const socket = new Socket();
    try {
      await waitFor(() => s.url !== '' || proc.exitCode !== null, { timeoutMs: 60_000, what: 'continuity serve to listen' });
      expect(s.url, s.err).not.toBe('');
      socket.on('error', () => {}); // EPIPE once serve has cut it off: expected
      const cut = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      await new Promise<void>((resolve) => socket.connect(Number(new URL(s.url).port), '127.0.0.1', resolve));
      // the head of a 100,000-byte body; serve answers 100 Continue once it has read it
      // (Node's server, RFC 9110 §10.1.1), so the request is in flight when the signal comes
      let received = '';
      socket.on('data', (c: Buffer) => (received += c.toString('latin1')));
      socket.write('POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n');
      await waitFor(() => received.startsWith('HTTP/1.1 100 Continue'), { timeoutMs: 10_000, what: 'serve to read the request head' });
      // then a byte a second: the request never completes while the client lives (it outlives the test)
      socket.write('[');
      drip = setInterval(() => socket.writable && socket.write(' '), 1000);
      proc.kill('SIGTERM');
      // before the fix serve exited only when the client went away
      expect(await waitForExit(proc, 40_000), s.err).toBe(true);
      expect(proc.exitCode, s.err).toBe(0);
      await cut;
      // answered, not just cut off: 503 CONT_ERR_SHUTDOWN, so the client knows to send it again
      expect(received).toMatch(/HTTP\/1\.1 503 Service Unavailable\r\n/);
      expect(received).toContain('"code":"CONT_ERR_SHUTDOWN"');
    } finally {
      clearInterval(drip);
      socket.destroy();
      if (proc.exitCode === null) {
        proc.kill('SIGKILL');
        await waitForExit(proc, 10_000);
      }
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('continuity serve started with data waiting on its stdin', () => {
  it('writes what it accepts (the engine took that data as INSERT input and refused every write: all lost under 200s)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'continuity-serve-stdin-'));
    const s = spawnServe(dir, 'x\n');
    const { proc } = s;
    try {
      await waitFor(() => s.url !== '' || proc.exitCode !== null, { timeoutMs: 60_000, what: 'continuity serve to listen' });
      expect(s.url, s.err).not.toBe('');
      const boot = { event_id: randomUUID(), event_type: 'boot', ts: Date.now() * 1000, source: 'server', service: 'stdin-e2e', boot_id: 'boot-stdin-e2e', pid: 9 };
      const res = await fetch(`${s.url}/v1/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([boot]) });
      expect(await res.json()).toEqual({ accepted: 1 });
      const stored = async (): Promise<boolean> => {
        const r = await fetch(`${s.url}/api/sql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sql: "SELECT count() AS n FROM events WHERE service = 'stdin-e2e'", format: 'jsonl' }) });
        return r.ok && Number((JSON.parse(await r.text()) as { n: string }).n) === 1;
      };
      await waitFor(stored, { timeoutMs: 20_000, what: 'the event to be written' });
      proc.kill('SIGTERM');
      expect(await waitForExit(proc, 30_000), s.err).toBe(true);
      expect(proc.exitCode, s.err).toBe(0);
      expect(s.err).toContain('stopped: 1 event(s) written this run; store closed');
      expect(s.err).not.toContain('CONT_ERR_STORE_STDIN');
    } finally {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGKILL');
        await waitForExit(proc, 10_000);
      }
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('continuity serve whose stderr reader has gone', () => {
  it('writes every event it acknowledged at SIGTERM, and exits 0 (a break-it pass: EPIPE on the shutdown line lost them all)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'continuity-serve-stderr-'));
    const s = spawnServe(dir);
    try {
      await waitFor(() => s.url !== '' || s.proc.exitCode !== null, { timeoutMs: 60_000, what: 'continuity serve to listen' });
      expect(s.url, s.err).not.toBe('');
      // the reader of serve's stderr goes away (a dead `| tee`, a closed terminal)
      s.proc.stderr!.destroy();
      const now = Date.now();
      const events = Array.from({ length: 3 }, (_, i) => ({ event_id: randomUUID(), event_type: 'boot', ts: (now + i) * 1000, source: 'server', service: 'stderr-gone', boot_id: `boot-${i}`, pid: i }));
      for (const e of events) {
        const res = await fetch(`${s.url}/v1/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([e]) });
        expect(res.status).toBe(200);
      }
      s.proc.kill('SIGTERM');
      expect(await waitForExit(s.proc, 30_000)).toBe(true);
      expect(s.proc.exitCode).toBe(0);
      const r = spawnSync(process.execPath, [BIN, '--data-dir', dir, 'sql', "SELECT count() AS n FROM events FINAL WHERE service = 'stderr-gone'", '--format', 'csv'], {
        encoding: 'utf8',
        env: { ...process.env, CONTINUITY_HASH_KEY: KEY, CLICKHOUSE_URL: '' },
        timeout: 60_000,
      });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout.trim().split(/\r?\n/)).toEqual(['"n"', '3']);
    } finally {
      await killAndRemove(s.proc, dir);
    }
  }, 120_000);
});

describe('continuity serve --host 0.0.0.0', () => {
  it('says it listens on every address, and gives the loopback URL that reaches it from this machine', async () => {
    // (it printed only "listening on http://127.0.0.1:…", not the address it bound: a newcomer pass)
    const dir = mkdtempSync(join(tmpdir(), 'continuity-serve-any-'));
    const s = spawnServe(dir, undefined, KEY, ['--host', '0.0.0.0', '--token', TOKEN]);
    try {
      await waitFor(() => s.url !== '' || s.proc.exitCode !== null, { timeoutMs: 60_000, what: 'continuity serve to listen' });
      const port = new URL(s.url).port;
      expect(s.out.split('\n')).toContain(`listening on every address (0.0.0.0, port ${port}); from this machine http://127.0.0.1:${port}`);
      const res = await fetch(`${s.url}/api/queries`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(200);
    } finally {
      await killAndRemove(s.proc, dir);
    }
  }, 120_000);
});

describe('continuity serve on a new data directory without CONTINUITY_HASH_KEY', () => {
  it('creates <data-dir>/hash.key at start and says so, so a collector can be given it before any import (newcomer pass: ENOENT)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'continuity-serve-key-'));
    const s = spawnServe(dir, undefined, null);
    try {
      await waitFor(() => s.url !== '' || s.proc.exitCode !== null, { timeoutMs: 60_000, what: 'continuity serve to listen' });
      expect(s.url, s.err).not.toBe('');
      await waitFor(() => s.out.includes('stop with Ctrl-C'), { timeoutMs: 10_000, what: 'the rest of what serve prints at start' });
      expect(s.out.split('\n').find((l) => l.startsWith('deployment hash key'))).toBe(`deployment hash key: ${dir}/hash.key (give the MCP collector its contents as hashKey; imports into this directory use it)`);
      const key = readFileSync(join(dir, 'hash.key'), 'utf8').trim();
      expect(key).toMatch(/^[0-9a-f]{64}$/);
      // tokenless on loopback: a request addressed to another name (DNS rebinding) is refused, loopback's answered
      const withHost = (host: string) =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const u = new URL(`${s.url}/api/queries`);
          const req = httpRequest({ host: u.hostname, port: u.port, path: u.pathname, headers: { host } }, (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c.toString('utf8')));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          });
          req.on('error', reject);
          req.end();
        });
      const foreign = await withHost('rebound.example:80');
      expect(foreign.status).toBe(421);
      expect(JSON.parse(foreign.body)).toMatchObject({ code: 'CONT_ERR_HOST_REFUSED' });
      expect((await withHost(new URL(s.url).host)).status).toBe(200);
      expect((await withHost(`localhost:${new URL(s.url).port}`)).status).toBe(200);
      s.proc.kill('SIGTERM');
      expect(await waitForExit(s.proc, 30_000), s.err).toBe(true);
      // `continuity hash` (which never makes a key) now hashes with that one
      const env: NodeJS.ProcessEnv = { ...process.env, CLICKHOUSE_URL: '' };
      delete env.CONTINUITY_HASH_KEY;
      const hashed = spawnSync(process.execPath, [BIN, '--data-dir', dir, 'hash', 'raw-session-id'], { encoding: 'utf8', env, timeout: 60_000 });
      expect(hashed.status, hashed.stderr).toBe(0);
      expect(hashed.stdout.trim()).toBe(createHmac('sha256', Buffer.from(key, 'hex')).update('raw-session-id').digest('hex').slice(0, 32));
    } finally {
      await killAndRemove(s.proc, dir);
    }
  }, 120_000);
});

describe.runIf(process.platform === 'linux')('continuity serve with an ad hoc statement still running at SIGTERM', () => {
  it('closes the store without waiting for it, says so, and a second signal ends the process (SIGKILL: an exit under it crashes chDB)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'continuity-serve-adhoc-'));
    const s = spawnServe(dir);
    const { proc } = s;
    const client = new AbortController();
    try {
      await waitFor(() => s.url !== '' || proc.exitCode !== null, { timeoutMs: 60_000, what: 'continuity serve to listen' });
      expect(s.url, s.err).not.toBe('');
      // a statement of 600 s (its limit) whose client then goes away: chDB cannot cancel it
      const sent = fetch(`${s.url}/api/sql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ sql: 'SELECT count() FROM numbers(1000000000000000)', timeout_s: 600 }),
        signal: client.signal,
      }).catch(() => undefined);
      // the statement is running once the process has used 1.5 s of CPU more than idle
      // (Linux: utime + stime in /proc/<pid>/stat, clock ticks of 10 ms)
      const cpuTicks = (): number => {
        const fields = readFileSync(`/proc/${proc.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
        return Number(fields[11]) + Number(fields[12]);
      };
      const idle = cpuTicks();
      await waitFor(() => cpuTicks() - idle >= 150, { timeoutMs: 60_000, what: 'the engine to run the statement' });
      client.abort();
      await sent;
      proc.kill('SIGTERM');
      // the store closes (the writer flushed) while the statement still runs
      await waitFor(() => s.err.includes('an ad hoc statement is still running'), { timeoutMs: 60_000, what: 'serve to close its store and say the statement still runs' });
      expect(s.err).toMatch(/stopped: 0 event\(s\) written this run; store closed\n/);
      expect(proc.exitCode).toBeNull();
      proc.kill('SIGTERM');
      expect(await waitForExit(proc, 30_000), s.err).toBe(true);
      expect(proc.signalCode, s.err).toBe('SIGKILL');
      expect(s.err).toContain('SIGTERM again: exiting without finishing the shutdown; every accepted event was written (SIGKILL');
    } finally {
      client.abort();
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGKILL');
        await waitForExit(proc, 10_000);
      }
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

/** Ends `proc` (SIGKILL) if it still runs, and removes `dir`. */
async function killAndRemove(proc: ChildProcess, dir: string): Promise<void> {
  if (proc.exitCode === null && proc.signalCode === null) {
    proc.kill('SIGKILL');
    await waitForExit(proc, 10_000);
  }
  rmSync(dir, { recursive: true, force: true });
}

/**
 * `continuity serve` on `dir`, any free port: the process, and its URL and stderr so far.
 * @param stdin text written to serve's standard input, which stays open (none: /dev/null).
 */
function spawnServe(dir: string, stdin?: string, hashKey: string | null = KEY, args: string[] = []): { proc: ChildProcess; readonly url: string; readonly out: string; readonly err: string } {
  const env: NodeJS.ProcessEnv = { ...process.env, CONTINUITY_HASH_KEY: hashKey ?? undefined, CLICKHOUSE_URL: '' };
  if (hashKey === null) delete env.CONTINUITY_HASH_KEY;
  const proc = spawn(process.execPath, [BIN, '--data-dir', dir, 'serve', '--port', '0', ...args], {
    env,
    stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (stdin !== undefined) proc.stdin!.write(stdin);
  let url = '';
  let out = '';
  let err = '';
  createInterface({ input: proc.stdout! }).on('line', (line) => {
    out += line + '\n';
    const m = /^listening on (?:every address \(.*\); from this machine )?(http:\/\/\S+)$/.exec(line);
    if (m) url = m[1]!;
  });
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString('utf8')));
  return {
    proc,
    get url() {
      return url;
    },
    get out() {
      return out;
    },
    get err() {
      return err;
    },
  };
}
