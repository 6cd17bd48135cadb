/**
 * Collector overhead benchmark:
 * `npm run bench:collector [-- --pairs 30 --round-s 1 --clients 8 --sink null|gateway --body host|sdk --cpu-prof <dir>]`.
 *
 * `--body host` (default): each server parses a POST body once and hands it to the
 * SDK transport pre-parsed, as the SDK's Express examples do (`express.json()` then
 * `handleRequest(req, res, req.body)`), and the collector uses that parse; `--body
 * sdk`: the transport parses the body itself and the collector parses its own copy.
 *
 * Two SDK MCP servers run as child processes (bench/collector-server.ts): one bare,
 * one instrumented by collectors/mcp exporting OTLP/HTTP to a sink on loopback —
 * `null` (bench/collector-sink.ts, its own process: reads the body, answers `{}`; the
 * collector's own cost only) or `gateway` (the real ingest gateway in this process:
 * decode, map, validate; events then discarded). `--clients` SDK `Client`s per server (each one session, one call at a
 * time) call `tools/call echo` as fast as they can. Rounds alternate between the
 * two servers (order swapped every pair, after one warm-up round each), so drift
 * hits both alike; many short rounds rather than a few long ones, because on a
 * shared machine the load of other processes changes within seconds and the
 * median over many adjacent pairs shrugs off the pairs it hit unevenly.
 *
 * Per round: calls/s, the server process's CPU µs per call (user + system, from
 * `process.cpuUsage`), and collector records and contract events per call. Printed
 * at the end: `ratio` = median over pairs of (instrumented calls/s ÷ bare calls/s)
 * — the goal is ≥ 0.97 — beside the CPU view of the same pairs: `cpu_us_per_call`
 * = median over pairs of (instrumented − bare server CPU µs per call), `cpu_ratio`
 * = median over pairs of (bare ÷ instrumented CPU per call), and `per_event_us` =
 * `cpu_us_per_call` ÷ contract events per call (arrival + settlement: 2),
 * `per_record_us` the same per log record. The last line is one JSON object with
 * those figures. `--cpu-prof <dir>` writes V8 CPU profiles of each server to `<dir>/bare` and `<dir>/collector` (to see
 * where the time goes; profiling slows both servers alike).
 *
 * On a shared machine the calls/s of a round swing with other load; the CPU µs per
 * call of the server process are steadier, so both are printed.
 */
import { fork, type ChildProcess } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FastifyInstance } from 'fastify';
import { createGateway, mapOtlpRecord } from '../ingest/index.ts';
import { median } from './median.ts';

const GOAL = 0.97;
const SERVER = fileURLToPath(new URL('./collector-server.ts', import.meta.url));
const SINK = fileURLToPath(new URL('./collector-sink.ts', import.meta.url));

const { values: args } = parseArgs({
  options: {
    pairs: { type: 'string', default: '30' },
    'round-s': { type: 'string', default: '1' },
    clients: { type: 'string', default: '8' },
    sink: { type: 'string', default: 'null' },
    body: { type: 'string', default: 'host' },
    'cpu-prof': { type: 'string' },
  },
});
const pairs = Math.max(5, Number(args.pairs));
const roundMs = Number(args['round-s']) * 1000;
const clientCount = Number(args.clients);
if (args.sink !== 'null' && args.sink !== 'gateway') throw new Error('--sink must be null or gateway');
if (args.body !== 'host' && args.body !== 'sdk') throw new Error('--body must be host or sdk');

interface Stats {
  cpu_us: number;
  gc_us: number;
  emitted: number;
  events: number;
  exported: number;
  dropped: number;
  failed: number;
}

interface Target {
  name: 'bare' | 'collector';
  child: ChildProcess;
  clients: Client[];
  stats(): Promise<Stats>;
}

interface Round {
  target: 'bare' | 'collector';
  calls: number;
  rps: number;
  cpu_us_per_call: number;
  gc_us_per_call: number;
  records_per_call: number;
  events_per_call: number;
}

/** A loopback OTLP/HTTP logs endpoint that reads and discards every body, in its own process (bench/collector-sink.ts). */
async function startNullSink(): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  const child = fork(SINK, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let requests = 0;
  const port = await new Promise<number>((resolve, reject) => {
    child.on('message', (m: { ready?: number; requests?: number }) => {
      if (m.ready) resolve(m.ready);
      if (m.requests !== undefined) requests = m.requests;
    });
    child.once('exit', (code) => reject(new Error(`sink exited (${code})`)));
  });
  return {
    url: `http://127.0.0.1:${port}/v1/logs`,
    requests: () => requests,
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.disconnect();
      await exited;
    },
  };
}

/** The real ingest gateway with a sink that discards the validated events. */
async function startGatewaySink(): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  const { app, stats }: { app: FastifyInstance; stats: { requests: number } } = await createGateway({
    sink: { accept: async () => {}, ready: () => true },
    mapOtlpRecord,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1/logs`, requests: () => stats.requests, close: () => app.close() };
}

async function startTarget(name: Target['name'], otlpUrl: string): Promise<Target> {
  const child = fork(SERVER, ['--collector', name === 'collector' ? 'on' : 'off', '--otlp', otlpUrl, '--body', args.body!], {
    // One directory per server: each process writes one profile per thread (tsx's loader runs in a worker).
    execArgv: ['--import', 'tsx', ...(args['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', join(args['cpu-prof'], name)] : [])],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: { ready?: number }) => (m.ready ? resolve(m.ready) : reject(new Error(`unexpected ${JSON.stringify(m)}`))));
    child.once('exit', (code) => reject(new Error(`${name} server exited (${code})`)));
  });
  const clients: Client[] = [];
  for (let i = 0; i < clientCount; i++) {
    const client = new Client({ name: `bench-${i}`, version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
    clients.push(client);
  }
  return {
    name,
    child,
    clients,
    stats: () =>
      new Promise<Stats>((resolve) => {
        const on = (m: { stats?: Stats }) => {
          if (!m.stats) return;
          child.off('message', on);
          resolve(m.stats);
        };
        child.on('message', on);
        child.send({ cmd: 'stats' });
      }),
  };
}

async function round(target: Target, ms: number): Promise<Round> {
  const before = await target.stats();
  let calls = 0;
  let running = true;
  const started = performance.now();
  const stop = setTimeout(() => (running = false), ms);
  await Promise.all(
    target.clients.map(async (client, i) => {
      let k = 0;
      while (running) {
        await client.callTool({ name: 'echo', arguments: { text: `c${i}-${k++}` } });
        calls += 1;
      }
    }),
  );
  clearTimeout(stop);
  const seconds = (performance.now() - started) / 1000;
  const after = await target.stats();
  return {
    target: target.name,
    calls,
    rps: calls / seconds,
    cpu_us_per_call: (after.cpu_us - before.cpu_us) / calls,
    gc_us_per_call: (after.gc_us - before.gc_us) / calls,
    records_per_call: (after.emitted - before.emitted) / calls,
    events_per_call: ((after.events ?? 0) - (before.events ?? 0)) / calls,
  };
}

const fmt = (x: number, d = 1) => x.toFixed(d);

const sink = args.sink === 'gateway' ? await startGatewaySink() : await startNullSink();
const targets: Target[] = [];
try {
  const bare = await startTarget('bare', sink.url);
  targets.push(bare);
  const instrumented = await startTarget('collector', sink.url);
  targets.push(instrumented);
  console.log(`collector bench: ${clientCount} SDK clients per server, ${pairs} pairs of ${roundMs / 1000} s rounds, sink ${args.sink}, bodies parsed by the ${args.body}`);
  for (const t of [bare, instrumented]) {
    const w = await round(t, 2000);
    console.log(`warm-up ${t.name.padEnd(9)} ${fmt(w.rps, 0)} calls/s`);
  }
  const rounds: Round[] = [];
  const ratios: number[] = [];
  const cpuDelta: number[] = [];
  const cpuRatios: number[] = [];
  for (let p = 0; p < pairs; p++) {
    const order = p % 2 === 0 ? [bare, instrumented] : [instrumented, bare];
    const result: Partial<Record<Target['name'], Round>> = {};
    for (const t of order) {
      const r = await round(t, roundMs);
      rounds.push(r);
      result[t.name] = r;
      console.log(`pair ${p + 1} ${r.target.padEnd(9)} ${fmt(r.rps, 0).padStart(6)} calls/s  ${fmt(r.cpu_us_per_call).padStart(7)} µs CPU/call  ${fmt(r.gc_us_per_call).padStart(6)} µs GC/call  ${fmt(r.records_per_call, 2)} records/call  ${fmt(r.events_per_call, 2)} events/call`);
    }
    const b = result.bare!;
    const c = result.collector!;
    ratios.push(c.rps / b.rps);
    cpuDelta.push(c.cpu_us_per_call - b.cpu_us_per_call);
    cpuRatios.push(b.cpu_us_per_call / c.cpu_us_per_call);
  }
  const of = (name: Target['name'], key: 'rps' | 'cpu_us_per_call' | 'gc_us_per_call' | 'records_per_call' | 'events_per_call') => median(rounds.filter((r) => r.target === name).map((r) => r[key]));
  const final = await instrumented.stats();
  const summary = {
    ratio: Number(fmt(median(ratios), 3)),
    ratio_min: Number(fmt(Math.min(...ratios), 3)),
    ratio_max: Number(fmt(Math.max(...ratios), 3)),
    goal: GOAL,
    pass: median(ratios) >= GOAL,
    bare_calls_per_s: Number(fmt(of('bare', 'rps'), 0)),
    collector_calls_per_s: Number(fmt(of('collector', 'rps'), 0)),
    bare_cpu_us_per_call: Number(fmt(of('bare', 'cpu_us_per_call'))),
    collector_cpu_us_per_call: Number(fmt(of('collector', 'cpu_us_per_call'))),
    bare_gc_us_per_call: Number(fmt(of('bare', 'gc_us_per_call'))),
    collector_gc_us_per_call: Number(fmt(of('collector', 'gc_us_per_call'))),
    cpu_ratio: Number(fmt(median(cpuRatios), 3)),
    cpu_us_per_call: Number(fmt(median(cpuDelta))),
    records_per_call: Number(fmt(of('collector', 'records_per_call'), 2)),
    events_per_call: Number(fmt(of('collector', 'events_per_call'), 2)),
    per_event_us: Number(fmt(median(cpuDelta) / Math.max(1e-9, of('collector', 'events_per_call')), 2)),
    per_record_us: Number(fmt(median(cpuDelta) / Math.max(1e-9, of('collector', 'records_per_call')), 2)),
    records_exported: final.exported,
    records_dropped: final.dropped,
    records_failed: final.failed,
    sink: args.sink,
    body: args.body,
    sink_requests: sink.requests(),
    clients: clientCount,
    pairs,
    round_s: roundMs / 1000,
  };
  console.log(
    `median ratio ${summary.ratio} (goal ≥ ${GOAL}: ${summary.pass ? 'met' : 'missed'}); ` +
      `server CPU per call ${summary.bare_cpu_us_per_call} → ${summary.collector_cpu_us_per_call} µs (median pair difference ${summary.cpu_us_per_call} µs: ${summary.per_event_us} µs per event, ${summary.per_record_us} µs per record)`,
  );
  console.log(JSON.stringify(summary));
} finally {
  for (const t of targets) {
    await Promise.all(t.clients.map((c) => c.close().catch(() => {})));
    if (t.child.exitCode !== null || t.child.signalCode !== null) continue;
    // A disconnected server exits by itself (writing its CPU profile); kill it if it does not.
    const exited = new Promise<void>((resolve) => t.child.once('exit', () => resolve()));
    t.child.disconnect();
    const timer = setTimeout(() => t.child.kill(), 5000);
    await exited;
    clearTimeout(timer);
  }
  await sink.close();
}
