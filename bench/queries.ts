/**
 * Query benchmark: `npm run bench:queries [-- --events N] [--fresh] [--runs R] [--no-compact]`.
 *
 * Generates N (default 10,000,000) contract events with bench/generate-events.ts
 * (≥ 50,000 sessions, 40 principals, 24 boots over 2 services, server and proxy
 * sources) into an embedded store under `bench/out/queries-<N>/` — kept for the next
 * run unless `--fresh` — then times every named query with its default parameters
 * (the whole range) and the canary report for the latest deploy.
 * Each is run once cold (first run after the store opened) and R (default 5) times warm;
 * the figure is the median of the warm runs, printed with every warm run and the cold
 * one. (Default 3 until 2026-12-03, when the engine compiled a query's expressions,
 * aggregates and sorts to machine code the fourth time it ran them, so the third warm
 * run was the slow one. Since 2026-12-05 the named queries and checks run with
 * compilation off, queries/registry.ts NO_COMPILATION: no warm run pays for it.)
 * Goals (issue: full query set at 10M events): each query ≤ 1 s, the canary report ≤ 3 s.
 * The last line printed is one JSON object:
 * `{ events, max_query_ms, canary_ms, queries: { name: ms, … }, cold: { … }, fixed: { … }, … }`
 * (`fixed`: each query's statement timed the same way on an empty store, in a child
 * process, bench/query-fixed-cost.ts: what parsing, analysis and planning cost whatever
 * the data)
 * (`events_parts`: the parts of `events` when timed). Before timing, the closed days
 * are merged into one part each (store/compact.ts, what `serve` and `consumer` do every
 * 15 minutes; `compacted_partitions`, `compact_ms`); `--no-compact` times the store as
 * loaded, whose days are in several parts that every FINAL read merges again.
 * `--load-only` stops after generating the store.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../core/index.ts';
import { bindParams, NAMED_QUERIES, resolveQuerySql, runQuery } from '../queries/index.ts';
import { buildCanaryReport } from '../reports/canary.ts';
import { ContinuityEvent } from '../schema/index.ts';
import { compactClosedDays, openMigratedStore, type Store } from '../store/index.ts';
import { generateEvents } from './generate-events.ts';
import { median } from './median.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const GOALS = { query_ms: 1000, canary_ms: 3000 };

function arg(args: string[], name: string, fallback: number): number {
  const at = args.indexOf(name);
  if (at < 0) return fallback;
  const v = Number(args[at + 1]);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} takes a positive number`);
  return v;
}

async function load(store: Store, events: number): Promise<number> {
  let rows = 0;
  let batch = 0;
  const t0 = performance.now();
  let pending: Promise<void> = Promise.resolve();
  for (const chunk of generateEvents({ events })) {
    if (batch === 0) {
      // The generator writes contract shape directly; hold it to the contract.
      const sample = chunk.body.split('\n', 5000);
      for (const line of sample) ContinuityEvent.parse(JSON.parse(line));
    }
    await pending;
    pending = store.insertJsonEachRow('events', chunk.body, { dedupToken: `bench-queries:${batch++}` });
    rows += chunk.rows;
    if (batch % 10 === 0) process.stderr.write(`  ${rows.toLocaleString('en')} events, ${Math.round(rows / ((performance.now() - t0) / 1000)).toLocaleString('en')}/s\n`);
  }
  await pending;
  return rows;
}

async function time<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t = performance.now();
  const value = await fn();
  return { ms: performance.now() - t, value };
}

/**
 * The median ms of each statement in `statements` on an empty store, R = `runs` times
 * after one untimed run (bench/query-fixed-cost.ts, in a child process: the embedded
 * engine opens one data directory per process). The statements pass through a file in
 * `dir`, removed afterwards.
 * @throws Error when the child fails or prints no result.
 */
function fixedCost(statements: Record<string, { sql: string; params: Record<string, unknown> }>, runs: number, dir: string): Record<string, number> {
  const input = join(dir, 'fixed-cost-input.json');
  writeFileSync(input, JSON.stringify(statements));
  try {
    const child = spawnSync(process.execPath, [...process.execArgv, join(HERE, 'query-fixed-cost.ts'), input, '--runs', String(runs)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    const last = child.stdout.trim().split('\n').at(-1);
    if (child.status !== 0 || last === undefined || last === '') throw new Error(`bench/query-fixed-cost.ts failed (status ${child.status})`);
    return JSON.parse(last) as Record<string, number>;
  } finally {
    rmSync(input, { force: true });
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const events = arg(args, '--events', 10_000_000);
  const runs = arg(args, '--runs', 5);
  const dataDir = resolve(HERE, 'out', `queries-${events}`);
  const marker = join(dataDir, 'bench-complete.json');
  if (args.includes('--fresh')) rmSync(dataDir, { recursive: true, force: true });
  const reuse = existsSync(marker);
  if (!reuse) rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });
  const store = await openMigratedStore(loadConfig({}, { dataDir }));
  const loadAt = loadavg()[0] ?? 0;
  try {
    let loadS = 0;
    if (!reuse) {
      console.error(`generating ${events.toLocaleString('en')} events into ${dataDir}`);
      const t = performance.now();
      const rows = await load(store, events);
      loadS = (performance.now() - t) / 1000;
      writeFileSync(marker, JSON.stringify({ rows, load_s: loadS }));
      console.error(`loaded ${rows.toLocaleString('en')} events in ${loadS.toFixed(1)} s`);
    } else {
      console.error(`reusing ${dataDir} (${readFileSync(marker, 'utf8')}); --fresh regenerates`);
    }
    if (args.includes('--load-only')) return;
    // The closed days merged into one part each, as `serve` and `consumer` do every 15
    // minutes and `continuity compact` does on demand (store/compact.ts): a day left in
    // several parts is merged again by every FINAL read (`--no-compact` times the store
    // as it is). A no-op on a store compacted before.
    let compacted = 0;
    let compactMs = 0;
    if (!args.includes('--no-compact')) {
      const t = performance.now();
      compacted = (await compactClosedDays(store, { quietMs: 0 })).filter((p) => !p.skipped).length;
      compactMs = Math.round(performance.now() - t);
      console.error(`compacted ${compacted} partition(s) of closed days in ${(compactMs / 1000).toFixed(1)} s`);
    }
    const [mix] = await store.query<Record<string, number>>(
      `SELECT count() AS events, uniqExact(session_key) AS sessions, uniqExact(principal_key) AS principals,
              uniqExactIf(boot_id, event_type = 'boot') AS boots, uniqExact(source) AS sources,
              countIf(source = 'server') AS server_events, countIf(source = 'proxy') AS proxy_events,
              count(DISTINCT _partition_id) AS partitions, count(DISTINCT _part) AS parts
       FROM events`,
    );
    const byType = await store.query<{ event_type: string; n: number }>('SELECT event_type, count() AS n FROM events GROUP BY event_type ORDER BY n DESC');
    console.error(`mix: ${JSON.stringify(mix)}`);
    console.error(`by type: ${byType.map((r) => `${r.event_type} ${r.n}`).join(', ')}`);

    const warm: Record<string, number> = {};
    const cold: Record<string, number> = {};
    const rowsOut: Record<string, number> = {};
    const statements: Record<string, { sql: string; params: Record<string, unknown> }> = {};
    for (const name of Object.keys(NAMED_QUERIES)) {
      const first = await time(() => runQuery(store, name, {}));
      cold[name] = Math.round(first.ms);
      rowsOut[name] = first.value.length;
      const times: number[] = [];
      for (let i = 0; i < runs; i++) times.push((await time(() => runQuery(store, name, {}))).ms);
      warm[name] = Math.round(median(times));
      console.error(`${name.padEnd(20)} ${String(warm[name]).padStart(6)} ms (warm runs ${times.map(Math.round).join(' ')}; cold ${cold[name]} ms, ${rowsOut[name]} rows)`);
      // the statement runQuery sent (its form, SQL and bound parameters), for the fixed cost below
      const bound = bindParams(name, {});
      statements[name] = { sql: (await resolveQuerySql(store, name, bound)).sql, params: bound };
    }
    const fixed = fixedCost(statements, runs, dataDir);
    console.error(`fixed cost (the same statements on an empty store, ms): ${Object.entries(fixed).map(([n, ms]) => `${n} ${ms}`).join(', ')}`);
    const canaryFirst = await time(() => buildCanaryReport(store, { deploy: 'latest' }));
    const canaryTimes: number[] = [];
    for (let i = 0; i < runs; i++) canaryTimes.push((await time(() => buildCanaryReport(store, { deploy: 'latest' }))).ms);
    const canaryMs = Math.round(median(canaryTimes));
    console.error(`${'canary (latest)'.padEnd(20)} ${String(canaryMs).padStart(6)} ms (warm runs ${canaryTimes.map(Math.round).join(' ')}; cold ${Math.round(canaryFirst.ms)} ms, verdict ${canaryFirst.value.verdict})`);

    const maxQueryMs = Math.max(...Object.values(warm));
    const result = {
      events: mix?.events,
      sessions: mix?.sessions,
      principals: mix?.principals,
      boots: mix?.boots,
      server_events: mix?.server_events,
      proxy_events: mix?.proxy_events,
      // parts of `events` when timed: every FINAL read pays for parts not yet merged,
      // so a store timed right after loading is slower than the same store later
      events_parts: mix?.parts,
      // partitions merged before timing (0: already one part a day, or --no-compact)
      compacted_partitions: compacted,
      compact_ms: compactMs,
      max_query_ms: maxQueryMs,
      canary_ms: canaryMs,
      queries: warm,
      cold,
      // each query's statement (without the checks runQuery runs before it) on an empty
      // store: the part of its time that does not grow with the data
      fixed,
      canary_cold_ms: Math.round(canaryFirst.ms),
      runs,
      load_s: reuse ? null : Math.round(loadS),
      goals: GOALS,
      goals_met: maxQueryMs <= GOALS.query_ms && canaryMs <= GOALS.canary_ms,
      loadavg_at_start: Math.round(loadAt * 100) / 100,
    };
    console.log(JSON.stringify(result));
  } finally {
    await store.close();
  }
}

await main();
