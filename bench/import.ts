/**
 * Import benchmark: `npm run bench:import [-- --lines N]`.
 *
 * Generates `bench/out/caddy-access-<N>.log` (N = 1,000,000 by default) when missing,
 * then measures, each in a child process of its own (one embedded engine per process
 * and data directory; separate peak RSS):
 *  (a) `import`: importCaddyLogs into a fresh embedded store — lines/s, peak RSS;
 *  (b) `parse`: plain node readline + JSON.parse over the same file — lines/s;
 *  (c) `engine`: the embedded engine alone reading the file with
 *      `file(path, LineAsString)` and JSONExtract of comparable fields, INSERT … SELECT
 *      into (c1) the real `events` table (same sorting key, codecs and indexes our rows
 *      go to; keyed hashes stand-in: SHA256) and (c2) a plain 16-column MergeTree table.
 * The last line printed is one JSON object:
 * `{ import_lines_per_s, json_parse_lines_per_s, engine_lines_per_s, ratio, peak_rss_mb, … }`
 * where `engine_lines_per_s` is (c1) and `ratio` = import ÷ engine; the (c2) figures and
 * the RSS of an idle opened store are printed alongside for context.
 *
 * CPU: each child also reports its CPU seconds split by thread (Linux `/proc/self/task`):
 * the import's JS main thread, the engine's threads, and of those the background merges
 * (`MergeMutate`). On a 2-core machine both paths are CPU-bound, so
 * ratio ≈ engine CPU per line ÷ import CPU per line; the split says which side to work on.
 *
 * Peak RSS (goal ≤ 300 MB) is not reachable in-process, and the figures printed say why:
 * measured with chdb 3.4.0 on Node 20 (2 cores), an opened, migrated, idle embedded store
 * already holds ~311 MB RSS before any import (`/proc/self/smaps`: libchdb.so file-backed
 * pages ~181 MB, the node binary ~42 MB, anonymous ~96 MB) — `idle_store_rss_mb`. What the
 * import adds is `peak_anon_rss_mb` minus that anonymous baseline: the batches in flight
 * (each body is the bytes the batch writer encoded, handed to the engine as they are),
 * plus the engine's insert and merge memory, which grows with the rows per insert and
 * with the inserts in flight (1,000,000 lines, peak RSS: 670 MB at 10,000 rows per
 * insert one at a time, 838 MB at 20,000, 909 MB at 30,000; with two inserts in flight
 * ~800 MB at 10,000 and ~1,050 MB at 20,000). Nothing in the import grows with the file:
 * batches are bounded by rows and bytes, at most two are written and one more is sealed,
 * lines are read in 1 MiB chunks. Inline INSERT settings that shrink the engine's buffers
 * did not move the peak (max_compress_block_size = 65536: same peak within noise).
 *
 * Where the time goes (1,000,000 lines, 2 cores, chdb 3.4.0, schema with the
 * proxy_access materialized view): the JS main thread ~17–19 CPU-s (the line scanner
 * ~40%, the event ids' SHA-256 ~13%, row building, the batches' UTF-8 encode and token);
 * the engine's inserts ~25–30 CPU-s; its background merges of the 100 parts per table
 * ~8–14 CPU-s. The insert of a batch runs on one engine thread, so the import writes two
 * batches at once (insertConcurrency); it is then CPU-bound on both cores, and each insert
 * parses its rows on one thread (input_format_parallel_parsing = 0: a few % less CPU,
 * within noise). Two inserts at once cost ~10% more CPU in all; paired whole-bench runs
 * against one at a time, same schema: 24.3k vs 17.2k lines/s on a busy machine, 28.6k vs
 * 30.4k on a quieter one, so the gain shows mainly when other processes compete for the
 * cores. Measured and not kept:
 * JSONCompactEachRow or TabSeparated bodies (the engine parses our JSONEachRow rows at
 * ~2.7 µs each, the compact forms with every column were no cheaper); 20,000 rows per
 * insert (~10% less CPU from fewer merges, +250 MB peak RSS). Not tried: converting in a
 * worker_threads worker — with two inserts in flight both cores are already busy, and a
 * worker would move the conversion's CPU to another thread, not remove it.
 */
import { spawnSync } from 'node:child_process';
import { createReadStream, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { importCaddyLogs } from '../collectors/index.ts';
import { createKeyedHasher, loadConfig } from '../core/index.ts';
import { openMigratedStore } from '../store/index.ts';
import { defaultBenchLogPath, generateCaddyAccessLog } from './generate-caddy.ts';
import { rssSampler } from './rss.ts';

const SELF = fileURLToPath(import.meta.url);
const GOALS = { ratio: 0.5, peak_rss_mb: 300 };

/**
 * CPU seconds of this process by thread: the JS main thread (tid = pid), the engine's
 * threads (everything else: libuv workers running queries, the engine's pools, V8's GC
 * helpers), and of those the background merges (`MergeMutate*`). Zeros where /proc is missing.
 */
function threadCpu(): { main: number; other: number; merges: number } {
  const out = { main: 0, other: 0, merges: 0 };
  let tids: string[];
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return out;
  }
  const hz = 100; // USER_HZ: clock ticks per second in /proc stat files on Linux
  for (const tid of tids) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    const close = stat.lastIndexOf(')');
    const name = stat.slice(stat.indexOf('(') + 1, close);
    const fields = stat.slice(close + 2).split(' ');
    // Fields 14 and 15 of proc(5) (utime, stime) are at 11 and 12 after the name.
    const seconds = (Number(fields[11]) + Number(fields[12])) / hz;
    if (Number(tid) === process.pid) out.main += seconds;
    else {
      out.other += seconds;
      if (name.startsWith('MergeMutate')) out.merges += seconds;
    }
  }
  return out;
}

async function childImport(file: string): Promise<Record<string, number>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'continuity-bench-'));
  try {
    const config = loadConfig({}, { dataDir });
    const store = await openMigratedStore(config);
    const idleRssMb = process.resourceUsage().maxRSS / 1024;
    const hasher = createKeyedHasher(Buffer.from('00112233445566778899aabbccddeeff', 'hex'));
    const sampler = rssSampler();
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    const threads0 = threadCpu();
    // (with a signal, as the CLI imports: a leak on that path alone went unseen here; 2026-12-04)
    const report = await importCaddyLogs(store, { access: [file], hasher, service: 'bench', signal: new AbortController().signal });
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const threads1 = threadCpu();
    const { peakRssMb, peakAnonMb } = sampler.stop();
    const [row] = await store.query<{ c: number }>('SELECT count() AS c FROM events');
    await store.close();
    return {
      lines: report.lines.read,
      events_written: report.events_written,
      events_in_store: row?.c ?? 0,
      rejected: report.lines.rejected,
      seconds,
      lines_per_s: report.lines.read / seconds,
      cpu_s: (cpu.user + cpu.system) / 1e6,
      main_thread_cpu_s: threads1.main - threads0.main,
      other_threads_cpu_s: threads1.other - threads0.other,
      merge_cpu_s: threads1.merges - threads0.merges,
      peak_rss_mb: peakRssMb,
      peak_anon_mb: peakAnonMb,
      idle_store_rss_mb: idleRssMb,
    };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function childParse(file: string): Promise<Record<string, number>> {
  const t0 = performance.now();
  let lines = 0;
  let statusSum = 0;
  const rl = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  for await (const line of rl) {
    if (line.length === 0) continue;
    const entry = JSON.parse(line) as { status?: number };
    statusSum += entry.status ?? 0;
    lines++;
  }
  const seconds = (performance.now() - t0) / 1000;
  return { lines, seconds, lines_per_s: lines / seconds, peak_rss_mb: process.resourceUsage().maxRSS / 1024, checksum: statusSum };
}

/** One JSONExtract per line into a typed tuple (the engine's fastest way to read these lines). */
const ENTRY_TUPLE =
  'Tuple(ts Float64, logger String, request Tuple(remote_ip String, remote_port String, method String, host String, uri String, ' +
  'headers Map(String, Array(String))), user_id String, duration Float64, size UInt64, status UInt16, resp_headers Map(String, Array(String)))';

async function childEngine(file: string): Promise<Record<string, number>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'continuity-bench-'));
  try {
    const store = await openMigratedStore(loadConfig({}, { dataDir }));
    // The path is the benchmark's own file, checked to be a plain absolute path: the
    // table function takes no bound parameter for it.
    if (!/^\/[\w./-]+$/.test(file)) throw new Error(`unexpected bench file path: ${file}`);
    const source = `(SELECT line, JSONExtract(line, '${ENTRY_TUPLE}') AS j FROM file('${file}', LineAsString))`;
    const sid = `j.request.headers['Mcp-Session-Id'][1]`;
    const rsid = `j.resp_headers['Mcp-Session-Id'][1]`;
    const key = (x: string): string => `if(${x} = '', '', lower(hex(substring(SHA256(${x}), 1, 16))))`;
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    await store.command(
      `INSERT INTO events (event_id, event_type, ts, source, service, protocol_version, session_key, principal_key, user_agent, attrs,
         http_method, url_path, http_status, duration_ms, bytes, request_session_key, response_session_key, has_credential,
         proxy_generated, client_address, client_port)
       SELECT reinterpretAsUUID(substring(SHA256(concat('proxy_access\\n', line)), 1, 16)), 'proxy_access',
         fromUnixTimestamp64Micro(toInt64(round(j.ts * 1000000)), 'UTC'), 'proxy', 'bench',
         j.request.headers['Mcp-Protocol-Version'][1], ${key(`if(${sid} != '', ${sid}, ${rsid})`)}, ${key('j.user_id')},
         j.request.headers['User-Agent'][1],
         map('http.host', j.request.host, 'caddy.logger', j.logger),
         j.request.method, splitByChar('?', j.request.uri)[1], j.status, j.duration * 1000, j.size,
         ${key(sid)}, ${key(rsid)}, mapContains(j.request.headers, 'Authorization'),
         j.status >= 500 AND mapKeys(j.resp_headers) = ['Server'], j.request.remote_ip, toUInt16OrZero(j.request.remote_port)
       FROM ${source}`,
    );
    const eventsSeconds = (performance.now() - t0) / 1000;
    const eventsCpu = process.cpuUsage(cpu0);
    const [row] = await store.query<{ c: number }>('SELECT count() AS c FROM events');
    await store.command(
      `CREATE TABLE plain (ts DateTime64(6, 'UTC'), method LowCardinality(String), uri String, status UInt16, duration Float64,
         size UInt64, remote_ip LowCardinality(String), remote_port UInt16, ua LowCardinality(String), sid String, rsid String,
         pv LowCardinality(String), auth Bool, host LowCardinality(String), logger LowCardinality(String), user_id String)
       ENGINE = MergeTree ORDER BY ts`,
    );
    const t1 = performance.now();
    await store.command(
      `INSERT INTO plain SELECT j.ts, j.request.method, j.request.uri, j.status, j.duration, j.size, j.request.remote_ip,
         toUInt16OrZero(j.request.remote_port), j.request.headers['User-Agent'][1], ${sid}, ${rsid},
         j.request.headers['Mcp-Protocol-Version'][1], mapContains(j.request.headers, 'Authorization'), j.request.host, j.logger, j.user_id
       FROM ${source}`,
    );
    const plainSeconds = (performance.now() - t1) / 1000;
    await store.close();
    const lines = row?.c ?? 0;
    return {
      lines,
      events_seconds: eventsSeconds,
      events_lines_per_s: lines / eventsSeconds,
      events_cpu_s: (eventsCpu.user + eventsCpu.system) / 1e6,
      plain_seconds: plainSeconds,
      plain_lines_per_s: lines / plainSeconds,
      peak_rss_mb: process.resourceUsage().maxRSS / 1024,
    };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function runChild(mode: string, file: string): Record<string, number> {
  const res = spawnSync(process.execPath, [...process.execArgv, SELF, '--child', mode, file], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    maxBuffer: 16 << 20,
  });
  if (res.status !== 0) throw new Error(`bench child ${mode} failed with status ${res.status}`);
  const last = res.stdout.trim().split('\n').pop() ?? '{}';
  return JSON.parse(last) as Record<string, number>;
}

const round = (x: number | undefined, digits = 0): number => {
  const f = 10 ** digits;
  return Math.round((x ?? 0) * f) / f;
};

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === '--child') {
    const [, mode, file] = args;
    const run = mode === 'import' ? childImport : mode === 'parse' ? childParse : mode === 'engine' ? childEngine : undefined;
    if (!run || !file) throw new Error(`unknown child mode ${mode}`);
    console.log(JSON.stringify(await run(file)));
    return;
  }
  const linesArg = args.indexOf('--lines');
  const lines = linesArg >= 0 ? Number(args[linesArg + 1]) : 1_000_000;
  if (!Number.isInteger(lines) || lines <= 0) throw new Error('--lines takes a positive integer');
  const file = resolve(defaultBenchLogPath(lines));
  if (!existsSync(file)) {
    console.error(`generating ${file} (${lines} lines)…`);
    const g = await generateCaddyAccessLog({ lines, path: file });
    console.error(`generated ${g.bytes} bytes: ${JSON.stringify(g.byStatus)}`);
  }
  // Other work on the machine skews every figure: the load average says how busy it was.
  const loadAtStart = loadavg()[0] ?? 0;
  const imp = runChild('import', file);
  console.error(`import: ${JSON.stringify(imp)}`);
  const parse = runChild('parse', file);
  console.error(`readline+JSON.parse: ${JSON.stringify(parse)}`);
  const engine = runChild('engine', file);
  console.error(`engine: ${JSON.stringify(engine)}`);
  const result = {
    lines,
    import_lines_per_s: round(imp.lines_per_s),
    json_parse_lines_per_s: round(parse.lines_per_s),
    engine_lines_per_s: round(engine.events_lines_per_s),
    ratio: round((imp.lines_per_s ?? 0) / (engine.events_lines_per_s ?? 1), 3),
    peak_rss_mb: round(imp.peak_rss_mb),
    import_cpu_s: round(imp.cpu_s, 1),
    import_main_thread_cpu_s: round(imp.main_thread_cpu_s, 1),
    import_other_threads_cpu_s: round(imp.other_threads_cpu_s, 1),
    import_merge_cpu_s: round(imp.merge_cpu_s, 1),
    engine_cpu_s: round(engine.events_cpu_s, 1),
    import_cpu_us_per_line: round(((imp.cpu_s ?? 0) * 1e6) / lines, 1),
    engine_cpu_us_per_line: round(((engine.events_cpu_s ?? 0) * 1e6) / lines, 1),
    import_seconds: round(imp.seconds, 1),
    peak_anon_rss_mb: round(imp.peak_anon_mb),
    idle_store_rss_mb: round(imp.idle_store_rss_mb),
    engine_plain_table_lines_per_s: round(engine.plain_lines_per_s),
    ratio_vs_plain_table: round((imp.lines_per_s ?? 0) / (engine.plain_lines_per_s ?? 1), 3),
    load_average_at_start: round(loadAtStart, 2),
    goals: GOALS,
  };
  console.log(JSON.stringify(result));
}

await main();
