import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

// The embedded engine installs its own SIGABRT handler, which never returned: a
// process.abort(), and so every fatal error of Node (a V8 heap out-of-memory), hung
// the process for good, holding the store's lock (a break-it pass: `serve` at 4.8 GB,
// ignoring SIGTERM). store/client.ts keepAbortFatal gives the signal its ending back.

const CHILD = new URL('./helpers/engine-abort.ts', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'continuity-abort-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A guard, not a measurement: a child still running this long has hung. */
const HUNG_AFTER_MS = 45_000;

/**
 * Runs the child with `how`, on a data directory of its own, and resolves with how it
 * ended (`hung` when it was still running after {@link HUNG_AFTER_MS}, then killed).
 * @param onReady called once the child has opened the store and run a statement.
 */
function runChild(how: string, nodeFlags: string[] = [], onReady?: (pid: number) => void): Promise<{ signal: string | null; code: number | null; hung: boolean; ready: boolean }> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CLICKHOUSE_URL;
  const child = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', CHILD, join(dir, how), how], { env, stdio: ['ignore', 'pipe', 'ignore'] });
  let ready = false;
  let hung = false;
  child.stdout.on('data', (chunk: Buffer) => {
    if (!ready && chunk.toString().includes('ready')) {
      ready = true;
      onReady?.(child.pid!);
    }
  });
  const guard = setTimeout(() => {
    hung = true;
    child.kill('SIGKILL');
  }, HUNG_AFTER_MS);
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      clearTimeout(guard);
      resolve({ signal, code, hung, ready });
    });
  });
}

describe('a fatal error ends a process that has the embedded engine open', () => {
  it('process.abort() ends it with SIGABRT', async () => {
    expect(await runChild('abort')).toEqual({ signal: 'SIGABRT', code: null, hung: false, ready: true });
  }, 60_000);

  it("Node's fatal heap out-of-memory error ends it with SIGABRT", async () => {
    expect(await runChild('oom', ['--max-old-space-size=96'])).toEqual({ signal: 'SIGABRT', code: null, hung: false, ready: true });
  }, 60_000);

  it('a SIGABRT sent from outside ends it', async () => {
    const ended = await runChild('wait', [], (pid) => process.kill(pid, 'SIGABRT'));
    expect(ended).toEqual({ signal: 'SIGABRT', code: null, hung: false, ready: true });
  }, 60_000);
});
