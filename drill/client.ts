import { setTimeout as delay } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

/**
 * One HTTP request the SDK client sent, as the client saw it (the drill's ground
 * truth). Raw session ids stay in memory: the drill prints labels, never ids.
 * Times are epoch ms.
 */
export interface RequestRecord {
  /** 1-based, in send order; also sent as the `x-drill-req` header so the server's trace names it. */
  n: number;
  /** Which SDK `Client` instance sent it (1-based; a re-initialize makes a new one). */
  client: number;
  http_method: string;
  /** JSON-RPC method of a POST ('' for GET/DELETE). */
  rpc_method: string;
  /** The `Mcp-Session-Id` sent ('' for none). */
  session: string;
  sent_at: number;
  /** HTTP status, once response headers arrived; undefined when none came (network error, abort). */
  status?: number;
  /** `Mcp-Session-Id` set by the response when it differs from the one sent (initialize). */
  minted?: string;
  /** When the response body ended, failed or was cancelled. */
  ended_at?: number;
  end?: 'complete' | 'error' | 'cancelled' | 'no_response';
  /** Why there was no response or the body failed. */
  error?: string;
  /** A deliberately slow call (in flight when the drill kills the server). */
  slow?: boolean;
}

const NULL_BODY_STATUS = new Set([101, 103, 204, 205, 304]);

/**
 * A `fetch` for `StreamableHTTPClientTransport` that records every request and
 * what happened to it (status, body end), and tags it with `x-drill-req: <n>`.
 */
export function createRecordingFetch(
  records: RequestRecord[],
  clientIndex: () => number,
  isSlow: (body: string) => boolean = () => false,
  holdStreams: () => Promise<void> | undefined = () => undefined,
): typeof fetch {
  return async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    // The SDK reopens its standalone GET stream on its own (after 1 s, then backing
    // off) when a kill cuts it; while the drill holds the client, so does the reopen:
    // on a loaded machine the standby took over 1 s to listen and the reopen got the
    // proxy's 502 in a restart meant to be invisible to it (a newcomer pass).
    if ((init?.method ?? 'GET').toUpperCase() === 'GET') await holdStreams();
    const headers = new Headers(init?.headers);
    const body = typeof init?.body === 'string' ? init.body : '';
    let rpcMethod = '';
    if (body) {
      try {
        const message = JSON.parse(body) as { method?: unknown } | Array<{ method?: unknown }>;
        rpcMethod = String((Array.isArray(message) ? message[0]?.method : message.method) ?? '');
      } catch {
        rpcMethod = '';
      }
    }
    const rec: RequestRecord = {
      n: records.length + 1,
      client: clientIndex(),
      http_method: (init?.method ?? 'GET').toUpperCase(),
      rpc_method: rpcMethod,
      session: headers.get('mcp-session-id') ?? '',
      sent_at: Date.now(),
      ...(body && isSlow(body) ? { slow: true } : {}),
    };
    records.push(rec);
    headers.set('x-drill-req', String(rec.n));
    let res: Response;
    try {
      res = await fetch(input, { ...init, headers });
    } catch (err) {
      rec.ended_at = Date.now();
      rec.end = 'no_response';
      rec.error = errorText(err);
      throw err;
    }
    rec.status = res.status;
    const minted = res.headers.get('mcp-session-id');
    if (minted && minted !== rec.session) rec.minted = minted;
    if (!res.body || NULL_BODY_STATUS.has(res.status)) {
      rec.ended_at = Date.now();
      rec.end = 'complete';
      return res;
    }
    const reader = res.body.getReader();
    const finish = (end: RequestRecord['end'], error?: unknown) => {
      if (rec.end) return;
      rec.ended_at = Date.now();
      rec.end = end;
      if (error !== undefined) rec.error = errorText(error);
    };
    const tapped = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            finish('complete');
            controller.close();
          } else controller.enqueue(value);
        } catch (err) {
          finish('error', err);
          controller.error(err);
        }
      },
      async cancel(reason) {
        finish('cancelled');
        await reader.cancel(reason).catch(() => {});
      },
    });
    return new Response(tapped, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

function errorText(err: unknown): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  return `${e.name ?? 'Error'}: ${e.message ?? String(err)}${e.cause?.code ? ` (${e.cause.code})` : ''}`.slice(0, 300);
}

/** Options of {@link DrillClient}. */
export interface DrillClientOptions {
  /** The MCP endpoint (through the proxy). */
  url: URL;
  /** After a 404 to its own call, make a new Client + transport (a client application that re-initializes). The SDK alone never does. */
  reinitOn404: boolean;
  /** Pause between calls, ms: uniformly random in [min, max] (default 200–500). */
  intervalMs?: [number, number];
  /** Timeout of each regular call, ms (default 5 000). */
  callTimeoutMs?: number;
  log?: (line: string) => void;
}

/** A re-initialization by the client application after a 404. */
export interface Reinit {
  at: number;
  /** Session the 404 refused (raw; kept in memory only). */
  stale: string;
  /** Session the new initialize minted ('' when it failed). */
  replacement: string;
}

interface Current {
  index: number;
  client: Client;
  transport: StreamableHTTPClientTransport;
}

/**
 * The drill's MCP client: the SDK's own `Client` + `StreamableHTTPClientTransport`
 * calling `echo` about every 200–500 ms through the proxy, one call at a time,
 * recording every HTTP request in `records`. The drill pauses it around each kill
 * so that a kill happens between calls, with only the requests it chose in flight.
 */
export class DrillClient {
  /** Every HTTP request any of this driver's SDK clients sent. */
  readonly records: RequestRecord[] = [];
  /** Re-initializations after a 404 (variant `reinit`). */
  readonly reinits: Reinit[] = [];
  private current: Current | undefined;
  private clients = 0;
  private running = false;
  /** Set while paused (the call loop waits; so do GET stream reopens): settles at the next resume. */
  private hold: { resumed: Promise<void>; release: () => void } | undefined;
  private busy = false;
  private wake: (() => void) | undefined;
  private loopDone: Promise<void> | undefined;
  private calls = 0;
  private lastStatus = 0;
  private readonly fetch: typeof fetch;

  constructor(private readonly options: DrillClientOptions) {
    this.fetch = createRecordingFetch(
      this.records,
      () => this.clients,
      (body) => body.includes('"delay_ms"'),
      () => this.hold?.resumed,
    );
  }

  /** Regular calls made so far (any outcome). */
  get loopCalls(): number {
    return this.calls;
  }

  /** Status of the last regular call (200, 404, 502 …; 0 when it failed without one). */
  get lastCallStatus(): number {
    return this.lastStatus;
  }

  /** Connects the first SDK client (initialize) and starts the call loop. */
  async start(): Promise<void> {
    this.current = await this.connect();
    this.running = true;
    this.loopDone = this.loop();
  }

  /** Stops issuing calls; resolves once the call (or re-initialize) in progress finished. */
  async pause(): Promise<void> {
    if (!this.hold) {
      let release!: () => void;
      const resumed = new Promise<void>((resolve) => (release = resolve));
      this.hold = { resumed, release };
    }
    this.wake?.();
    while (this.busy) await delay(5);
  }

  private unhold(): void {
    this.hold?.release();
    this.hold = undefined;
  }

  /** Resumes the call loop. */
  resume(): void {
    this.unhold();
    this.wake?.();
  }

  /**
   * Starts a call that the server holds (echo with `delay_ms`), not awaited by the
   * loop: it is in flight when the drill kills the server. The client gives up
   * after `timeoutMs` (the SDK then sends `notifications/cancelled`).
   * @returns the call's settlement (never rejects).
   */
  slowCall(text: string, timeoutMs: number): Promise<string> {
    const c = this.current;
    if (!c) return Promise.resolve('no client');
    return c.client
      .callTool({ name: 'echo', arguments: { text, delay_ms: 600_000 } }, undefined, { timeout: timeoutMs })
      .then(
        () => 'answered',
        (err: unknown) => errorText(err),
      );
  }

  /** Stops the loop and closes the SDK client (which aborts its GET stream). */
  async stop(): Promise<void> {
    this.running = false;
    this.unhold();
    this.wake?.();
    await this.loopDone;
    await this.current?.client.close().catch(() => {});
    this.current = undefined;
  }

  private async connect(): Promise<Current> {
    this.clients += 1;
    const index = this.clients;
    const transport = new StreamableHTTPClientTransport(this.options.url, { fetch: this.fetch });
    const client = new Client({ name: 'continuity-drill', version: '1.0.0' });
    // The SDK reports background failures (GET stream reconnects, cancellations) here.
    client.onerror = () => {};
    await client.connect(transport);
    this.options.log?.(`client ${index} initialized`);
    return { index, client, transport };
  }

  private async loop(): Promise<void> {
    const [min, max] = this.options.intervalMs ?? [200, 500];
    while (this.running) {
      if (this.hold) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        continue;
      }
      this.busy = true;
      try {
        await this.step();
      } finally {
        this.busy = false;
      }
      if (!this.running) break;
      const pause = min + Math.random() * (max - min);
      await Promise.race([delay(pause), new Promise<void>((resolve) => (this.wake = resolve))]);
    }
  }

  /** One loop step: a call, and a re-initialize when it was refused with 404 and the variant asks for one. */
  private async step(): Promise<void> {
    if (!this.current) {
      // A re-initialize that failed (server down): try again.
      this.current = await this.connect().catch(() => undefined);
      return;
    }
    this.calls += 1;
    this.lastStatus = await this.current.client
      .callTool({ name: 'echo', arguments: { text: `call-${this.calls}` } }, undefined, { timeout: this.options.callTimeoutMs ?? 5000 })
      .then(
        () => 200,
        (err: unknown) => (err instanceof StreamableHTTPError && typeof err.code === 'number' ? err.code : 0),
      );
    if (this.lastStatus === 404 && this.options.reinitOn404) {
      const stale = this.current.transport.sessionId ?? '';
      await this.current.client.close().catch(() => {});
      this.current = await this.connect().catch(() => undefined);
      this.reinits.push({ at: Date.now(), stale, replacement: this.current?.transport.sessionId ?? '' });
    }
  }
}
