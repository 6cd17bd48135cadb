import { readFileSync } from 'node:fs';

/**
 * Samples this process's anonymous RSS (`RssAnon` in /proc/self/status) every 50 ms
 * until `stop()`, which also reads the kernel's peak RSS (`maxRSS`, which counts the
 * embedded engine's mapped library pages).
 * @returns at `stop()`: `{ peakRssMb, peakAnonMb }` in MiB; off Linux, peakAnonMb is 0.
 */
export function rssSampler(): { stop(): { peakRssMb: number; peakAnonMb: number } } {
  let peakAnon = 0;
  const read = (): void => {
    try {
      const m = /RssAnon:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'));
      if (m) peakAnon = Math.max(peakAnon, Number(m[1]));
    } catch {
      // Not Linux: maxRSS only.
    }
  };
  read();
  const timer = setInterval(read, 50);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      read();
      return { peakRssMb: process.resourceUsage().maxRSS / 1024, peakAnonMb: peakAnon / 1024 };
    },
  };
}
