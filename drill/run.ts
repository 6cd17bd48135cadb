import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { importCaddyLogs } from '../collectors/index.ts';
import { createKeyedHasher, isContinuityError } from '../core/index.ts';
import { createGateway, createInProcessTransport, mapOtlpRecord } from '../ingest/index.ts';
import { runQuery } from '../queries/index.ts';
import { buildContinuityReport, type ContinuityReport } from '../reports/index.ts';
import type { Store } from '../store/index.ts';
import { ensureCaddy, startCaddy, type CaddyProcess } from './caddy.ts';
import { DrillClient, type RequestRecord } from './client.ts';
import { spawnMcpServer, type McpServerProcess } from './server-process.ts';
import {
  compareWithReport,
  deriveTruth,
  drillPreconditions,
  type BootTruth,
  type DrillCheck,
  type DrillVariant,
  type GroundTruth,
  type RestartTruth,
  type SettlementsRows,
} from './truth.ts';
import { freePort, waitFor } from './wait.ts';

/** Options of {@link runDrill}. */
export interface DrillOptions {
  variant: DrillVariant;
  /** A migrated store the drill writes into (its own temporary one: the drill adds events under `service`). */
  store: Store;
  /** The store's deployment hash key (hex): the server's collector and the Caddy import hash session ids with it, so proxy and server events relate. */
  hashKeyHex: string;
  /** `service` of every event, server and proxy alike (default `drill-<variant>`). */
  service?: string;
  /** The Caddy binary (default: found on this machine, see drill/caddy.ts). */
  caddyBin?: string;
  /** How long the slow restart keeps the server down, ms (default 3 000). */
  slowDownMs?: number;
  /** Regular calls between the drill's steps (default 8: a phase of about 3 s). */
  callsPerPhase?: number;
  /** How long the in-flight call waits before the client gives up, ms (default 1 500). */
  slowCallTimeoutMs?: number;
  /** Parent of the temporary directory (default the OS temp dir). */
  workDir?: string;
  /** Keep the temporary directory (Caddyfile, access and error logs) and name it in the result. */
  keepFiles?: boolean;
  /** Progress lines (`+12.345s what happened`). */
  log?: (line: string) => void;
  /** Aborting kills every child process at once; the run then fails (e.g. wired to SIGINT by the CLI). */
  signal?: AbortSignal;
}

/** One thing the drill did, at epoch ms `at` (`t`: seconds since the drill started). */
export interface TimelineEntry {
  at: number;
  t: number;
  what: string;
}

/** Outcome of one drill run. */
export interface DrillResult {
  variant: DrillVariant;
  service: string;
  /** True when every check (the report's numbers and the drill's own preconditions) holds. */
  ok: boolean;
  duration_s: number;
  truth: GroundTruth;
  checks: DrillCheck[];
  timeline: TimelineEntry[];
  /** What the queries said: the continuity report and the `settlements` rows. */
  reported: { report: ContinuityReport; settlements: SettlementsRows };
  /** What the Caddy import read. */
  proxy_import: { lines_read: number; proxy_access: number; joined_upstream_errors: number; rejected: number };
  /** The temporary directory, when kept. */
  files?: { dir: string; accessLog: string; errorLog: string };
}

/**
 * The restart drill (DESIGN §1, SCENARIOS S1/S13/S15): Caddy in front of a real
 * SDK MCP server (a child process, instrumented by collectors/mcp, exporting
 * OTLP/HTTP to a gateway the drill runs in-process on `store`), the SDK's own
 * client calling `echo` through Caddy every 200–500 ms, and two real restarts:
 *
 * 1. kill -9 with a call in flight and the GET stream open, about 3 s down (Caddy
 *    answers 502), restart;
 * 2. kill -9 and restart from a warm standby in well under 0.5 s: invisible to the
 *    proxy (no request fails at the proxy), visible to the server (a new boot).
 *
 * Variant `stale`: the SDK client, as it really behaves, keeps sending the dead
 * session id (1 unrecovered session). Variant `reinit`: the client application
 * makes a new Client + transport after a 404 (two adopted stale → replacement
 * pairs, 0 unrecovered).
 *
 * The drill kills at a quiescent point: the call loop is paused, the in-flight
 * call is held by the server, and the collector has exported everything it
 * emitted — so the store holds the evidence the server produced (a real crash can
 * lose up to the collector's export interval; that is not what this measures).
 * At the end the client and the server stop gracefully, Caddy stops, and Caddy's
 * logs are imported with the same `service`. Every reported number is read
 * through `buildContinuityReport` and `runQuery` and compared with the drill's
 * own ground truth (client statuses, server traces, kill and start times).
 *
 * Every child process is killed and the temporary directory removed on every path.
 * @throws ContinuityError CONT_ERR_DRILL_SETUP when a program cannot be started or a step times out.
 */
export async function runDrill(options: DrillOptions): Promise<DrillResult> {
  const t0 = Date.now();
  const variant = options.variant;
  const service = options.service ?? `drill-${variant}`;
  const slowDownMs = options.slowDownMs ?? 3000;
  const callsPerPhase = options.callsPerPhase ?? 8;
  const caddyBin = options.caddyBin ?? ensureCaddy({ install: false });
  const dir = mkdtempSync(join(options.workDir ?? tmpdir(), 'continuity-drill-'));
  const timeline: TimelineEntry[] = [];
  const mark = (what: string, at = Date.now()) => {
    timeline.push({ at, t: Math.round(at - t0) / 1000, what });
    options.log?.(`+${((at - t0) / 1000).toFixed(3)}s ${what}`);
  };

  const transport = createInProcessTransport(options.store, { flushIntervalMs: 100 });
  const { app: gateway, stats: gatewayStats } = await createGateway({ sink: transport, mapOtlpRecord });
  const servers: McpServerProcess[] = [];
  let caddy: CaddyProcess | undefined;
  let client: DrillClient | undefined;
  let clientStopped = false;
  let standby: Promise<McpServerProcess> | undefined;
  const abort = () => {
    for (const s of servers) s.dispose();
    void caddy?.stop(0);
  };
  options.signal?.addEventListener('abort', abort, { once: true });
  try {
    options.signal?.throwIfAborted();
    await gateway.listen({ host: '127.0.0.1', port: 0 });
    const otlpUrl = `http://127.0.0.1:${(gateway.server.address() as AddressInfo).port}/v1/logs`;
    const upstreamPort = await freePort();
    let proxyPort = await freePort();
    while (proxyPort === upstreamPort) proxyPort = await freePort();

    const spawnServer = async (label: number) => {
      const s = await spawnMcpServer({ label, port: upstreamPort, otlpUrl, service, hashKeyHex: options.hashKeyHex, standby: true });
      servers.push(s);
      return s;
    };
    const boots: BootTruth[] = [];
    const restarts: Array<Omit<RestartTruth, 'proxy_502' | 'down_ms'>> = [];

    let current = await spawnServer(1);
    const up1 = await current.go();
    mark(`server boot 1 up (pid ${current.pid}, standby start)`, up1.t);
    // The next incarnation loads while this one serves (a warm standby).
    standby = spawnServer(2);
    caddy = await startCaddy({ bin: caddyBin, dir, listenPort: proxyPort, upstreamPort });
    mark(`caddy up on 127.0.0.1:${proxyPort} → 127.0.0.1:${upstreamPort}`);
    const c = new DrillClient({ url: new URL('/mcp', caddy.url), reinitOn404: variant === 'reinit', log: (l) => mark(l) });
    client = c;
    await c.start();

    const phase = async (what: string) => {
      const from = c.loopCalls;
      await waitFor(() => c.loopCalls >= from + callsPerPhase, { timeoutMs: callsPerPhase * 2000 + 10_000, what, intervalMs: 20 });
    };

    /** The HTTP method of the current boot's request `n` (its trace line). */
    const methodOf = (n: number) => current.lines.find((l) => l.ev === 'req' && l.n === n)?.method;

    /** Ends the current boot with `signal` after a collector flush, and records what was open. */
    const endBoot = async (signal: 'kill -9' | 'SIGTERM'): Promise<number> => {
      const flushed = await current.flush();
      const flushIndex = current.lines.indexOf(flushed);
      const at = signal === 'kill -9' ? await current.kill9() : await current.stop();
      const final = signal === 'SIGTERM' ? current.lines.find((l) => l.ev === 'stopped') : undefined;
      const afterFlush = current.lines.slice(flushIndex + 1).filter((l) => l.ev === 'req' || l.ev === 'res' || l.ev === 'tool').length;
      boots.push({
        label: current.label,
        boot_id: String(current.ready!.boot_id),
        pid: current.pid,
        up_at: current.ready!.t,
        ended_by: signal,
        ended_at: at,
        // kill -9: everything it printed came before the kill; SIGTERM: what was open at the signal.
        // Standalone GET streams are no request in flight (settlements.sql counts them apart).
        open_at_end: current
          .openRequests(signal === 'kill -9' ? undefined : flushIndex + 1)
          .filter((n) => methodOf(n) !== 'GET')
          .map((n) => describeRequest(c.records, n)),
        lines_after_flush: signal === 'kill -9' ? afterFlush : 0,
        counters: (final ?? flushed).counters ?? {},
      });
      return at;
    };

    const restart = async (k: number, kind: 'slow' | 'fast') => {
      await phase(`phase ${k}: ${callsPerPhase} calls`);
      await c.pause();
      const slowText = `slow-${k}`;
      let slowDone = false;
      if (c.lastCallStatus === 200) {
        const from = current.lines.length;
        void c.slowCall(slowText, options.slowCallTimeoutMs ?? 1500).then((outcome) => {
          slowDone = true;
          mark(`client: in-flight call ${slowText} ended: ${outcome}`);
        });
        await waitFor(() => slowDone || current.lines.slice(from).some((l) => l.ev === 'tool' && l.text === slowText), {
          timeoutMs: 5000,
          what: `the server to hold ${slowText}`,
        });
      }
      const inFlight = clientInFlight(c.records);
      const killedLabel = current.label;
      const killedAt = await endBoot('kill -9');
      mark(`kill -9 boot ${killedLabel} (client in flight: ${inFlight.join(', ') || 'none'})`, killedAt);
      const next = await standby!;
      if (kind === 'slow') {
        c.resume();
        await waitFor(() => Date.now() >= killedAt + slowDownMs, { timeoutMs: slowDownMs + 1000, what: 'the slow restart gap', intervalMs: 10 });
      }
      const up = await next.go();
      if (kind === 'fast') c.resume();
      current = next;
      mark(`server boot ${next.label} up (down ${up.t - killedAt} ms)`, up.t);
      restarts.push({ k, kind, killed_boot: killedLabel, new_boot: next.label, new_boot_id: String(up.boot_id), killed_at: killedAt, up_at: up.t, client_in_flight: inFlight });
      if (k === 1) standby = spawnServer(3);
    };

    await restart(1, 'slow');
    await restart(2, 'fast');
    await phase(`phase 3: ${callsPerPhase} calls`);

    await c.stop();
    clientStopped = true;
    mark('client stopped (SDK client closed)');
    // Calls settle; an open GET stream may not: Caddy keeps the upstream stream
    // open after the client went away (it notices only when it next writes), so
    // the server still has it open at the SIGTERM. A standalone stream is no request
    // in flight: settlements.sql counts it in streams_open, not unsettled_at_shutdown.
    await waitFor(() => current.openRequests().every((n) => methodOf(n) === 'GET'), { timeoutMs: 5000, what: 'the server to answer every call' });
    const stoppedAt = await endBoot('SIGTERM');
    mark(`server boot ${current.label} stopped gracefully (SIGTERM)`, stoppedAt);
    await caddy.stop();
    mark('caddy stopped');

    await gateway.close();
    await transport.shutdown();
    if (transport.writer.error) throw transport.writer.error;
    const imported = await importCaddyLogs(options.store, {
      access: [caddy.accessLog],
      errors: [caddy.errorLog],
      hasher: createKeyedHasher(Buffer.from(options.hashKeyHex, 'hex')),
      service,
    });
    mark(`imported caddy logs: ${imported.proxy_access} proxy_access events, ${imported.joined_upstream_errors} joined to upstream errors`);

    const truth = deriveTruth({ variant, records: c.records, reinits: c.reinits, boots, restarts, serverLines: servers.map((s) => s.lines) });
    const report = await buildContinuityReport(options.store, { service });
    const settlements: SettlementsRows = await runQuery(options.store, 'settlements', { service }).then(
      (rows) => ({ rows }),
      (err: unknown) => ({
        error: isContinuityError(err, 'CONT_ERR_QUERY_UNKNOWN') ? 'query settlements not available yet' : `query settlements failed: ${(err as Error).message}`,
      }),
    );
    const checks = [...drillPreconditions(truth, gatewayStats.rejected), ...compareWithReport(truth, report, settlements)];
    const result: DrillResult = {
      variant,
      service,
      ok: checks.every((x) => x.ok),
      duration_s: Math.round(Date.now() - t0) / 1000,
      truth,
      checks,
      timeline,
      reported: { report, settlements },
      proxy_import: {
        lines_read: imported.lines.read,
        proxy_access: imported.proxy_access,
        joined_upstream_errors: imported.joined_upstream_errors,
        rejected: imported.lines.rejected,
      },
    };
    if (options.keepFiles) result.files = { dir, accessLog: caddy.accessLog, errorLog: caddy.errorLog };
    return result;
  } finally {
    options.signal?.removeEventListener('abort', abort);
    if (client && !clientStopped) await client.stop().catch(() => undefined);
    await standby?.catch(() => undefined);
    for (const s of servers) s.dispose();
    await caddy?.stop().catch(() => undefined);
    await gateway.close().catch(() => undefined);
    await transport.shutdown().catch(() => undefined);
    if (!options.keepFiles) rmSync(dir, { recursive: true, force: true });
  }
}

/** `#n METHOD rpc` for the client's request number `n`. */
function describeRequest(records: readonly RequestRecord[], n: number): string {
  const r = records[n - 1];
  if (!r) return `#${n}`;
  return `#${n} ${r.http_method}${r.rpc_method ? ` ${r.rpc_method}` : r.http_method === 'GET' ? ' (SSE stream)' : ''}${r.slow ? ' (held)' : ''}`;
}

/** Requests the client had sent and not finished: `#n METHOD rpc (waiting|streaming)`. */
function clientInFlight(records: readonly RequestRecord[]): string[] {
  return records.filter((r) => r.end === undefined).map((r) => `${describeRequest(records, r.n)} ${r.status === undefined ? 'waiting' : `${r.status} streaming`}`);
}
