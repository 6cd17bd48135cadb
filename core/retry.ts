import { setTimeout as delay } from 'node:timers/promises';

/** Options of {@link retry}. */
export interface RetryOptions {
  /** Attempts in all, including the first (default 5). */
  attempts?: number;
  /** First backoff, ms (default 100); doubles each time up to `maxDelayMs`. */
  initialDelayMs?: number;
  /** Backoff ceiling, ms (default 5000). */
  maxDelayMs?: number;
  /** Decides whether an error is worth another attempt (default: its `retriable` flag). */
  isRetriable?: (err: unknown) => boolean;
  signal?: AbortSignal;
}

/**
 * Runs `fn` until it succeeds, retrying only retriable errors with full-jitter
 * exponential backoff (AWS Architecture Blog, "Exponential Backoff and Jitter")
 * and a limit on attempts. Programming errors (not retriable) are rethrown at once,
 * like kafkajs's `retry`.
 * @throws the last error when attempts run out, or the first non-retriable one.
 */
export async function retry<T>(fn: (attempt: number) => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const attempts = options.attempts ?? 5;
  const initial = options.initialDelayMs ?? 100;
  const ceiling = options.maxDelayMs ?? 5000;
  const retriable = options.isRetriable ?? ((err: unknown) => (err as { retriable?: unknown })?.retriable === true);
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (err) {
      if (attempt >= attempts || !retriable(err) || options.signal?.aborted) throw err;
      const cap = Math.min(ceiling, initial * 2 ** (attempt - 1));
      await delay(Math.random() * cap, undefined, options.signal ? { signal: options.signal } : undefined);
    }
  }
}
