import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { ContinuityError } from '../core/index.ts';

/**
 * Polls `predicate` every `intervalMs` (default 20) until it returns true; an
 * error thrown by the predicate ends the wait with that error.
 * @throws ContinuityError CONT_ERR_DRILL_SETUP naming `what` when `timeoutMs` passes first.
 */
export async function waitFor(
  predicate: () => boolean | Promise<boolean>,
  options: { timeoutMs: number; what: string; intervalMs?: number },
): Promise<void> {
  const deadline = performance.now() + options.timeoutMs;
  for (;;) {
    if (await predicate()) return;
    if (performance.now() >= deadline) throw new ContinuityError('CONT_ERR_DRILL_SETUP', `timed out after ${options.timeoutMs} ms waiting for ${options.what}`);
    await delay(options.intervalMs ?? 20);
  }
}

/** Resolves true once `child` has exited, false when `timeoutMs` passes first. */
export async function waitForExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  let timer: NodeJS.Timeout | undefined;
  const exited = await Promise.race([
    new Promise<boolean>((resolve) => child.once('exit', () => resolve(true))),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
  ]);
  clearTimeout(timer);
  return exited;
}

/** A TCP port that was free on the loopback interface a moment ago (bind to 0, read, close). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
