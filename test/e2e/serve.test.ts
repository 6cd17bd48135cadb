import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
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
    const boot = { event_id: randomUUID(), event_type: 'boot', ts: now * 1000, source: 'server', service: 'serve-e2e', pid: 7 };
    const events = await fetch(`${base}/v1/events`, { method: 'POST', headers: auth, body: JSON.stringify([boot]) });
    expect(await events.json()).toEqual({ accepted: 1 });
    const otlp = {
      resourceLogs: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'serve-e2e' } }] },
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
