import { afterEach, describe, expect, it, vi } from 'vitest';
import { untilSignal } from '../cli/signals.ts';

// untilSignal's second signal: the forced exit says what it leaves undone (serve:
// the accepted events not yet written). The signals are emitted on `process`
// (the listeners run as for a real signal) and process.exit is stubbed.
describe('untilSignal', () => {
  const before = { SIGINT: process.listeners('SIGINT'), SIGTERM: process.listeners('SIGTERM'), SIGHUP: process.listeners('SIGHUP') };
  afterEach(() => {
    vi.restoreAllMocks();
    for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) for (const l of process.listeners(s)) if (!before[s].includes(l)) process.off(s, l);
  });

  function stubs() {
    const exit = vi.spyOn(process, 'exit').mockImplementation((() => undefined) as never);
    const lines: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation(((s: string) => (lines.push(String(s)), true)) as never);
    return { exit, lines };
  }

  it('resolves with the first signal and exits 130 at the second, saying what is abandoned', async () => {
    const { exit, lines } = stubs();
    let left = 3;
    const signal = untilSignal(() => `accepted events not yet written are lost: ${left} buffered`);
    process.emit('SIGTERM', 'SIGTERM');
    await expect(signal).resolves.toBe('SIGTERM');
    expect(exit).not.toHaveBeenCalled();
    left = 2;
    process.emit('SIGINT', 'SIGINT');
    expect(exit).toHaveBeenCalledWith(130);
    expect(lines.join('')).toBe('SIGINT again: exiting without finishing the shutdown; accepted events not yet written are lost: 2 buffered\n');
  });

  it('exits even when the report of what is abandoned throws, and without one says only that it exits', async () => {
    const { exit, lines } = stubs();
    const signal = untilSignal(() => {
      throw new Error('stats unavailable');
    });
    process.emit('SIGINT', 'SIGINT');
    await signal;
    process.emit('SIGINT', 'SIGINT');
    expect(exit).toHaveBeenCalledWith(130);
    expect(lines.join('')).toBe('SIGINT again: exiting without finishing the shutdown\n');
  });

  it('takes SIGHUP (a closed terminal) as a shutdown too, so serve flushes instead of dying', async () => {
    const { exit } = stubs();
    const signal = untilSignal();
    process.emit('SIGHUP', 'SIGHUP');
    await expect(signal).resolves.toBe('SIGHUP');
    expect(exit).not.toHaveBeenCalled();
  });
});
