import type { z } from 'zod';
import type { UpstreamError } from '../../schema/index.ts';

/** An upstream failure class (DESIGN §3 `proxy_access.upstream_error`), never ''. */
export type UpstreamErrorClass = Exclude<z.infer<typeof UpstreamError>, ''>;

/**
 * Classifies a Caddy error-log message (`msg` and `error` joined) into an upstream
 * failure class. Rules, first match wins (the texts are Go's net and net/http errors
 * as Caddy's reverse_proxy reports them):
 * "connection refused" → connection_refused; "i/o timeout", "context deadline
 * exceeded", "timeout" → timeout; "connection reset" → reset; "unexpected EOF",
 * "incomplete response" → incomplete_response; anything else → other.
 */
export function classifyUpstreamError(text: string): UpstreamErrorClass {
  if (/connection refused/i.test(text)) return 'connection_refused';
  if (/i\/o timeout|context deadline exceeded|timeout/i.test(text)) return 'timeout';
  if (/connection reset/i.test(text)) return 'reset';
  if (/unexpected EOF|incomplete response/i.test(text)) return 'incomplete_response';
  return 'other';
}

/** The join window: an error-log entry and its access entry are at most 1 s apart (µs). */
export const JOIN_WINDOW_MICROS = 1_000_000;

interface KeyedFailure {
  readonly ip: string;
  readonly port: number;
  readonly ts: number;
  readonly cls: UpstreamErrorClass;
  used: boolean;
  next: KeyedFailure | undefined;
}

/** A request-less upstream failure (a stream cut) and the access entry it holds so far. */
export interface StreamCut<T> {
  readonly ts: number;
  readonly cls: UpstreamErrorClass;
  /** When the error line named the client, only that client's entries qualify. */
  readonly ip: string;
  readonly port: number;
  /** The nearest access entry seen so far, held back until the window closes. */
  held: T | undefined;
  heldDistance: number;
  /** Another line of the same cut was merged into this one. */
  merged: boolean;
}

/** Counters of {@link UpstreamJoin}. */
export interface UpstreamJoinStats {
  /** Error entries kept for the join. */
  keyed: number;
  streamCuts: number;
  /** Entries not kept because the cap was reached. */
  dropped: number;
}

/**
 * The upstream-error join (DESIGN §3 `proxy_access.upstream_error`).
 *
 * Keyed: an error-log entry with a request (`http.log.error*`, e.g. "dial tcp …:
 * connect: connection refused" for a 502 Caddy produced) joins the access entry with the
 * same client address and port and an equal `duration` (Caddy logs both from one
 * request), at most 1 s apart; each error joins one access entry.
 *
 * Stream cuts: request-less `http.handlers.reverse_proxy` errors ("reading from
 * backend", "aborting with incomplete response": the upstream died while streaming)
 * join best-effort the not-yet-joined access entry nearest in time within 1 s. Because
 * the access log streams, the best candidate so far is held back (see
 * {@link UpstreamJoin.offer}) and released when the stream passes the window.
 *
 * Bounded: at most `cap` entries are kept in memory; later ones are counted as dropped.
 */
export class UpstreamJoin<T> {
  private readonly byDuration = new Map<number, KeyedFailure>();
  private readonly cuts: StreamCut<T>[] = [];
  /** Cuts before this index are closed. */
  private firstOpen = 0;
  readonly stats: UpstreamJoinStats = { keyed: 0, streamCuts: 0, dropped: 0 };

  constructor(private readonly cap = 1_000_000) {}

  /** True when no failure was recorded (the join can be skipped). */
  get empty(): boolean {
    return this.stats.keyed === 0 && this.stats.streamCuts === 0;
  }

  /** Records an error-log entry with a request. `duration` in seconds as logged, `ts` in µs. */
  addKeyed(ip: string, port: number, duration: number, ts: number, cls: UpstreamErrorClass): void {
    if (this.stats.keyed + this.stats.streamCuts >= this.cap) {
      this.stats.dropped++;
      return;
    }
    this.stats.keyed++;
    const head = this.byDuration.get(duration);
    this.byDuration.set(duration, { ip, port, ts, cls, used: false, next: head });
  }

  /**
   * Records a request-less stream cut at `ts` (µs). `ip`/`port` restrict it to one
   * client when the line named it ('' / 0 otherwise).
   *
   * Caddy logs "reading from backend" and then "aborting with incomplete response" for
   * one cut stream: two cuts of the same client and class within 50 ms merge into one,
   * so a single cut does not claim two access entries (each cut merges at most once,
   * so two streams cut together stay two).
   */
  addStreamCut(ts: number, cls: UpstreamErrorClass, ip = '', port = 0): void {
    if (this.stats.keyed + this.stats.streamCuts >= this.cap) {
      this.stats.dropped++;
      return;
    }
    const cuts = this.cuts;
    // Insert in time order; cuts are rare and arrive nearly sorted.
    let i = cuts.length;
    while (i > this.firstOpen && cuts[i - 1]!.ts > ts) i--;
    const prev = i > this.firstOpen ? cuts[i - 1] : undefined;
    if (prev && prev.merged === false && prev.held === undefined && ts - prev.ts <= 50_000 && prev.ip === ip && prev.port === port && prev.cls === cls) {
      prev.merged = true;
      return;
    }
    this.stats.streamCuts++;
    cuts.splice(i, 0, { ts, cls, ip, port, held: undefined, heldDistance: Infinity, merged: false });
  }

  /**
   * Keyed lookup for an access entry. Returns the failure class and marks the error
   * entry used, or undefined.
   */
  takeKeyed(ip: string, port: number, duration: number, ts: number): UpstreamErrorClass | undefined {
    let best: KeyedFailure | undefined;
    let bestDistance = Infinity;
    for (let f = this.byDuration.get(duration); f !== undefined; f = f.next) {
      if (f.used || f.port !== port || f.ip !== ip) continue;
      const d = Math.abs(f.ts - ts);
      if (d <= JOIN_WINDOW_MICROS && d < bestDistance) {
        best = f;
        bestDistance = d;
      }
    }
    if (!best) return undefined;
    best.used = true;
    return best.cls;
  }

  /**
   * Offers a not-yet-joined access entry (`ts` µs, client `ip`/`port`) to the open
   * stream cuts. Returns:
   * - `undefined`: no cut wants it, emit it now;
   * - the entry itself: a cut holds it, do not emit it now;
   * and calls `release(entry, undefined)` for an entry a nearer one displaced.
   */
  offer(entry: T, ts: number, ip: string, port: number, release: (entry: T, cls: UpstreamErrorClass | undefined) => void): T | undefined {
    const cuts = this.cuts;
    let chosen: StreamCut<T> | undefined;
    let chosenDistance = Infinity;
    for (let i = this.firstOpen; i < cuts.length; i++) {
      const c = cuts[i]!;
      if (c.ts > ts + JOIN_WINDOW_MICROS) break;
      const d = Math.abs(c.ts - ts);
      if (d > JOIN_WINDOW_MICROS || d >= c.heldDistance || d >= chosenDistance) continue;
      if (c.ip !== '' && (c.ip !== ip || c.port !== port)) continue;
      chosen = c;
      chosenDistance = d;
    }
    if (!chosen) return undefined;
    if (chosen.held !== undefined) release(chosen.held, undefined);
    chosen.held = entry;
    chosen.heldDistance = chosenDistance;
    return entry;
  }

  /**
   * Closes the cuts whose window the stream has passed (`ts` µs is the current access
   * entry's time; `slackMicros` tolerates slightly out-of-order lines) and releases
   * their held entries joined with the cut's class.
   */
  advance(ts: number, release: (entry: T, cls: UpstreamErrorClass | undefined) => void, slackMicros = JOIN_WINDOW_MICROS): void {
    const cuts = this.cuts;
    while (this.firstOpen < cuts.length) {
      const c = cuts[this.firstOpen]!;
      if (c.ts + JOIN_WINDOW_MICROS + slackMicros >= ts) break;
      this.firstOpen++;
      if (c.held !== undefined) {
        const held = c.held;
        c.held = undefined;
        release(held, c.cls);
      }
    }
  }

  /** True when some cut is still open (the stream may still be held back by it). */
  get hasOpenCuts(): boolean {
    return this.firstOpen < this.cuts.length;
  }

  /** Releases every held entry (end of input). Returns the number of cuts that joined an entry. */
  finish(release: (entry: T, cls: UpstreamErrorClass | undefined) => void): void {
    this.advance(Infinity, release, 0);
  }
}
