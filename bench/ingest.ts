/**
 * Ingest benchmark: `npm run bench:ingest [-- --events N --rate R --latency-seconds S]`.
 *
 * Against the real broker (KAFKA_BROKERS, or `scripts/kafka.sh start`) and the embedded
 * engine, in one run:
 *  (a) `raw`: the store's own rate — N events (default 1,000,000) as JSONEachRow
 *      inserted straight into a fresh store's `events`, 10,000 rows per INSERT with a
 *      deduplication token, as the consumer writes them (child process; the rows are
 *      made before the clock starts);
 *  (b) end to end: the gateway's Kafka producer sink sends the same N events (this
 *      process; made before the clock starts) → Kafka (6 partitions) → the consumer
 *      (child process, fresh store) → committed; events/s from the first send to the
 *      last commit, and the consumer's peak RSS (maxRSS, and the anonymous part: the
 *      engine's library pages count in maxRSS);
 *  (b2) the consumer alone: a second group drains the full topic of (b) into another
 *      fresh store (events/s, peak RSS) — the consumer's own rate, without the producer
 *      and the consumer sharing the machine's cores;
 *  (b3) as (b) with `@platformatic/kafka` producing in place of kafkajs, side by side
 *      (the consumer unchanged; `--no-platformatic` skips it);
 *  (c) latency: R events/s (default 10,000) for S seconds (default 30) through the same
 *      path; event→queryable = `ingested_at` (set by the store on insert) − the send
 *      time the producer puts in `attrs['bench.sent_ms']`; p50/p99/max.
 * The last line printed is one JSON object: `{ ratio, peak_rss_mb, p99_ms, … }` with
 * `ratio` = (b) ÷ (a). Goals: ratio ≥ 0.5, peak_rss_mb ≤ 300, p99_ms ≤ 2000.
 * `cpu_us_per_event` splits the two cores: CPU µs per event of the producer, the broker
 * (when scripts/kafka.sh runs it here), the consumer (its engine threads included) and the
 * raw insert. `--fetch-max-wait-ms W` sets the consumer's batch time bound and `--fetch-min-bytes B`
 * the bytes a fetch waits for (defaults as the CLI).
 * `--partitions P` provisions the topics with P partitions (default 6, as KAFKA_PARTITIONS);
 * `--concurrency C` runs the consumer with C partitions in flight (default 3, as the CLI);
 * `--consumer-heap-mb M` starts it with `--max-old-space-size=M` (default 0: no cap).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { loadConfig, type Config } from '../core/index.ts';
import { Producer as PlatformaticProducer, stringSerializers } from '@platformatic/kafka';
import { createKafka, createKafkaConsumer, createKafkaProducerSink, DEFAULT_FETCH_MAX_WAIT_MS, DEFAULT_FETCH_MIN_BYTES, ensureTopics, fetchConsumerLag } from '../ingest/index.ts';
import type { ContinuityEvent } from '../schema/index.ts';
import { openMigratedStore } from '../store/index.ts';
import { ensureKafka, uniqueTopicName } from '../test/services/kafka.ts';
import { rssSampler } from './rss.ts';

const SELF = fileURLToPath(import.meta.url);
const REPO = fileURLToPath(new URL('../', import.meta.url));
const GOALS = { ratio: 0.5, peak_rss_mb: 300, p99_ms: 2000 };
const HASH_KEY = '00112233445566778899aabbccddeeff';
const WRITE_ROWS = 10_000;

/**
 * The i-th benchmark event of run `seed`: the same object in every process. Built
 * from one flat literal per event type with the run's strings made once: the
 * paced latency phase makes its events on the clock, and a spread of a common
 * part made each event cost about 25 µs of CPU (its GC included) on this machine,
 * work that is the benchmark's, not the pipeline's.
 */
function benchEvent(seed: string, i: number, nowMicros: number): ContinuityEvent {
  const k = keysOf(seed);
  // A v4-shaped UUID: 20 hex digits of the run's seed, 12 of the index (cheap, unique, equal everywhere).
  const n = i.toString(16).padStart(12, '0');
  const eventId = k.idPrefix + n;
  const arrivalId = k.arrivalPrefix + n;
  const session = i % 10 === 9 ? '' : k.sessions[i % 997]!;
  const ts = nowMicros + i;
  const event =
    i % 2 === 0
      ? {
          event_id: eventId, ts, source: 'server', service: 'bench-mcp', instance: k.instances[i % 4]!, boot_id: seed, release: '2.4.1',
          environment: 'bench', protocol_version: '2025-11-25', session_key: session, principal_key: k.principals[i % 61]!,
          client_name: 'claude-ai', client_version: '0.1.0', user_agent: 'claude-user (external, cli)', attrs: { 'bench.i': String(i) },
          event_type: 'arrival', arrival_id: arrivalId, http_method: 'POST', mcp_method: 'tools/call', jsonrpc_id: String(i), tool_name: 'search',
          has_credential: true,
        }
      : {
          event_id: eventId, ts, source: 'server', service: 'bench-mcp', instance: k.instances[i % 4]!, boot_id: seed, release: '2.4.1',
          environment: 'bench', protocol_version: '2025-11-25', session_key: session, principal_key: k.principals[i % 61]!,
          client_name: 'claude-ai', client_version: '0.1.0', user_agent: 'claude-user (external, cli)', attrs: { 'bench.i': String(i) },
          event_type: 'settlement', arrival_id: arrivalId, http_status: 200, outcome: 'ok', error_type: '', rpc_status_code: '',
          duration_ms: (i % 500) / 7, session_resolution: 'known', minted_session_key: '',
        };
  return event as unknown as ContinuityEvent;
}

/** The strings every event of run `seed` shares, made once per run. */
interface RunKeys {
  idPrefix: string;
  arrivalPrefix: string;
  sessions: string[];
  principals: string[];
  instances: string[];
}

const runKeys = new Map<string, RunKeys>();
function keysOf(seed: string): RunKeys {
  let k = runKeys.get(seed);
  if (k === undefined) {
    const h = createHash('sha256').update(seed).digest('hex');
    k = {
      idPrefix: `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(12, 15)}-a${h.slice(15, 18)}-`,
      arrivalPrefix: `${h.slice(0, 8)}-`,
      sessions: Array.from({ length: 997 }, (_, j) => j.toString(16).padStart(32, 'c')),
      principals: Array.from({ length: 61 }, (_, j) => j.toString(16).padStart(32, 'd')),
      instances: Array.from({ length: 4 }, (_, j) => `i-${j}`),
    };
    runKeys.set(seed, k);
  }
  return k;
}

/** The topics' partition count: `--partitions P` (default 6); the children inherit it through the environment. */
function benchPartitions(): number {
  return Number(process.env.CONTINUITY_BENCH_PARTITIONS ?? 6);
}

function configFor(brokers: string[], topic: string, dataDir: string, group = `${topic}-writer`): Config {
  return loadConfig(
    { CONTINUITY_HASH_KEY: HASH_KEY, KAFKA_BROKERS: brokers.join(','), KAFKA_TOPIC: topic, KAFKA_GROUP: group, KAFKA_PARTITIONS: String(benchPartitions()) },
    { dataDir },
  );
}

/** (a) The store alone: N events as JSONEachRow, WRITE_ROWS per INSERT with a token. */
async function childRaw(seed: string, n: number): Promise<Record<string, number>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'continuity-bench-raw-'));
  try {
    const store = await openMigratedStore(loadConfig({ CONTINUITY_HASH_KEY: HASH_KEY }, { dataDir }));
    const nowMicros = Date.now() * 1000;
    // The rows are made before the clock starts: only the store's work is timed.
    const bodies: string[] = [];
    for (let from = 0; from < n; from += WRITE_ROWS) {
      const rows: string[] = [];
      for (let i = from; i < Math.min(n, from + WRITE_ROWS); i++) rows.push(JSON.stringify(benchEvent(seed, i, nowMicros)));
      bodies.push(rows.join('\n'));
    }
    const cpu0 = process.cpuUsage();
    const t = performance.now();
    for (let b = 0; b < bodies.length; b++) await store.insertJsonEachRow('events', bodies[b]!, { dedupToken: `bench-raw:${b * WRITE_ROWS}` });
    const insertMs = performance.now() - t;
    const cpu = process.cpuUsage(cpu0);
    const [row] = await store.query<{ c: number }>('SELECT count() AS c FROM events');
    await store.close();
    // cpu_s: this process during the inserts (the engine's threads: parsing, writing, merging).
    return { events: row?.c ?? 0, seconds: insertMs / 1000, events_per_s: (row?.c ?? 0) / (insertMs / 1000), cpu_s: (cpu.user + cpu.system) / 1e6 };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** (b)/(c) consumer side: runs the consumer until SIGTERM, then reports its counters and memory. */
async function childConsumer(brokers: string[], topic: string, dataDir: string, concurrency: number, group: string, fetchMaxWaitMs: number, fetchMinBytes: number): Promise<Record<string, number>> {
  const config = configFor(brokers, topic, dataDir, group);
  const sampler = rssSampler();
  const store = await openMigratedStore(config);
  const idleRssMb = process.resourceUsage().maxRSS / 1024;
  // Ready once the group has assigned the partitions (not merely started), so no event
  // waits for the first join.
  let joined: () => void = () => undefined;
  let firstBatchAt = 0;
  let lastBatchAt = 0;
  const join = new Promise<void>((r) => (joined = r));
  const consumer = createKafkaConsumer({
    kafka: config.kafka!,
    store,
    maxBatchRows: WRITE_ROWS,
    partitionsConsumedConcurrently: concurrency,
    fetchMaxWaitMs,
    fetchMinBytes,
    onEvent: (e) => {
      if (e.type === 'joined' && e.partitions.length > 0) joined();
      if (e.type === 'batch') {
        lastBatchAt = Date.now();
        if (firstBatchAt === 0) firstBatchAt = lastBatchAt;
      }
    },
  });
  await consumer.start();
  await join;
  const readyAt = Date.now();
  process.stdout.write(JSON.stringify({ event: 'started' }) + '\n');
  const cpu0 = process.cpuUsage();
  await new Promise<void>((resolve) => process.once('SIGTERM', () => resolve()));
  await consumer.shutdown();
  await store.close();
  const cpu = process.cpuUsage(cpu0);
  const { peakRssMb, peakAnonMb } = sampler.stop();
  const m = consumer.metrics;
  return { rows: m.rows, first_batch_ms: firstBatchAt - readyAt, last_batch_ms: lastBatchAt - readyAt, batches: m.batches, peak_rss_mb: peakRssMb, peak_anon_mb: peakAnonMb, idle_store_rss_mb: idleRssMb, cpu_s: (cpu.user + cpu.system) / 1e6 };
}

interface Child {
  result: Promise<Record<string, number>>;
  ready: Promise<void>;
  stop(): void;
}

/** Children still running, stopped if the benchmark fails half way. */
const running = new Set<ChildProcess>();

function startChild(args: string[], nodeFlags: string[] = []): Child {
  const child = spawn(process.execPath, [...nodeFlags, ...process.execArgv, SELF, '--child', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  running.add(child);
  child.on('exit', () => running.delete(child));
  let last = '{}';
  let onReady: () => void = () => undefined;
  const ready = new Promise<void>((r) => (onReady = r));
  createInterface({ input: child.stdout! }).on('line', (l) => {
    last = l;
    if (l.includes('"started"')) onReady();
  });
  const result = new Promise<Record<string, number>>((resolve, reject) => {
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(last) as Record<string, number>) : reject(new Error(`bench child ${args[0]} exited ${code}`))));
  });
  return { result, ready, stop: () => child.kill('SIGTERM') };
}

async function waitCommitted(brokers: string[], topic: string, total: number, group = `${topic}-writer`): Promise<number> {
  const admin = createKafka(configFor(brokers, topic, tmpdir()).kafka!, { clientId: 'bench-lag' }).admin();
  await admin.connect();
  try {
    for (;;) {
      const lag = await fetchConsumerLag(admin, group, topic);
      const committed = lag.partitions.reduce((n, p) => n + (p.committed === null ? 0 : Number(BigInt(p.committed) - BigInt(p.low))), 0);
      if (committed >= total && lag.total === 0) return Date.now();
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await admin.disconnect();
  }
}

/** Events [0, n) of run `seed` in chunks of `chunk`, made now (before a clock starts). */
function makeChunks(seed: string, n: number, chunk: number): ContinuityEvent[][] {
  const nowMicros = Date.now() * 1000;
  const chunks: ContinuityEvent[][] = [];
  for (let from = 0; from < n; from += chunk) {
    const events: ContinuityEvent[] = [];
    for (let i = from; i < Math.min(n, from + chunk); i++) events.push(benchEvent(seed, i, nowMicros));
    chunks.push(events);
  }
  return chunks;
}

/** When a send started and ended (ms since the epoch) and the CPU it took (s). */
interface Sent {
  t0: number;
  t1: number;
  cpuS: number;
}

/**
 * Sends events [0, n) through the gateway's sink, `chunk` per accept, 8 accepts at a time.
 * Unpaced, every chunk is made before the clock starts (the events' making is not the
 * pipeline's work, and the raw insert does not time it either); paced to `rate`/s, each
 * chunk is made when due and stamped with its send time.
 */
async function produce(brokers: string[], topic: string, seed: string, n: number, options: { rate?: number; stampSend?: boolean }): Promise<Sent> {
  const sink = createKafkaProducerSink({ kafka: configFor(brokers, topic, tmpdir()).kafka!, maxQueuedEvents: 200_000 });
  await sink.start();
  const nowMicros = Date.now() * 1000;
  const chunk = options.rate ? Math.max(1, Math.round(options.rate / 20)) : 5000; // paced: every 50 ms
  const make = (from: number): ContinuityEvent[] => {
    const sentMs = String(Date.now());
    const events: ContinuityEvent[] = [];
    for (let i = from; i < Math.min(n, from + chunk); i++) {
      const e = benchEvent(seed, i, nowMicros);
      if (options.stampSend) e.attrs = { ...e.attrs, 'bench.sent_ms': sentMs };
      events.push(e);
    }
    return events;
  };
  const made = options.rate ? [] : makeChunks(seed, n, chunk);
  const inFlight = new Set<Promise<unknown>>();
  const cpu0 = process.cpuUsage();
  const t0 = Date.now();
  for (let from = 0, k = 0; from < n; from += chunk, k++) {
    if (options.rate) {
      const due = t0 + (from / options.rate) * 1000;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    const events = options.rate ? make(from) : made[k]!;
    made[k] = []; // sent: let it go
    const p = sink.accept(events).finally(() => inFlight.delete(p));
    inFlight.add(p);
    if (inFlight.size >= 8) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  const t1 = Date.now();
  const cpu = process.cpuUsage(cpu0);
  await sink.shutdown();
  return { t0, t1, cpuS: (cpu.user + cpu.system) / 1e6 };
}

/**
 * CPU seconds (user + system) the local broker used so far, from `/proc/<pid>/stat` of the
 * broker that scripts/kafka.sh started (its pid file); undefined for a broker elsewhere.
 */
function brokerCpuSeconds(): number | undefined {
  try {
    const dataDir = process.env.KAFKA_DATA_DIR ?? join(REPO, '.kafka');
    const pid = readFileSync(join(dataDir, 'broker.pid'), 'utf8').trim();
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, in clock ticks of 1/100 s
  } catch {
    return undefined;
  }
}

/**
 * The unpaced send of {@link produce} with `@platformatic/kafka` in place of kafkajs (the
 * issue's side-by-side): the same events made before the clock starts, the same
 * producer settings (idempotent, acks=all, gzip, key = session key or else `event_id`),
 * 10,000 events per produce request, one request in flight, as the gateway's sink sends.
 * Only the producing half is swapped; the consumer is the project's (kafkajs).
 */
async function producePlatformatic(brokers: string[], topic: string, seed: string, n: number): Promise<Sent> {
  const config = configFor(brokers, topic, tmpdir());
  const admin = createKafka(config.kafka!, { clientId: 'bench-provision' }).admin();
  await admin.connect();
  try {
    await ensureTopics(admin, config.kafka!); // the same topic layout as the sink provisions
  } finally {
    await admin.disconnect();
  }
  const producer = new PlatformaticProducer({
    clientId: 'bench-platformatic',
    bootstrapBrokers: brokers,
    serializers: stringSerializers,
    idempotent: true,
    acks: -1,
    compression: 'gzip',
  });
  const made = makeChunks(seed, n, 10_000);
  const cpu0 = process.cpuUsage();
  const t0 = Date.now();
  for (let k = 0; k < made.length; k++) {
    const messages = made[k]!.map((e) => ({ topic, key: e.session_key !== '' ? e.session_key : e.event_id, value: JSON.stringify(e) }));
    made[k] = [];
    await producer.send({ messages });
  }
  const t1 = Date.now();
  const cpu = process.cpuUsage(cpu0);
  await producer.close();
  return { t0, t1, cpuS: (cpu.user + cpu.system) / 1e6 };
}

const round = (x: number | undefined, digits = 0): number => {
  const f = 10 ** digits;
  return Math.round((x ?? 0) * f) / f;
};

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name);
  const v = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} takes a positive number`);
  return v;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === '--child') {
    const [, mode, a, b, c, d] = args;
    const out =
      mode === 'raw'
        ? await childRaw(a!, Number(b))
        : mode === 'consumer'
          ? await childConsumer(a!.split(','), b!, c!, Number(d), args[6]!, Number(args[7]), Number(args[8]))
          : undefined;
    if (!out) throw new Error(`unknown child mode ${mode}`);
    console.log(JSON.stringify(out));
    return;
  }
  const n = arg(args, '--events', 1_000_000);
  const rate = arg(args, '--rate', 10_000);
  const latencySeconds = arg(args, '--latency-seconds', 30);
  const concurrency = arg(args, '--concurrency', 3);
  const fetchMaxWaitMs = arg(args, '--fetch-max-wait-ms', DEFAULT_FETCH_MAX_WAIT_MS);
  const fetchMinBytes = arg(args, '--fetch-min-bytes', DEFAULT_FETCH_MIN_BYTES);
  process.env.CONTINUITY_BENCH_PARTITIONS = String(arg(args, '--partitions', 6));
  // V8 grows its heap lazily up to a limit sized for the machine; the consumer's live
  // set is far smaller, and a deployment may cap it (more GC work, less memory). 0: no cap.
  const heapAt = args.indexOf('--consumer-heap-mb');
  const heapMb = heapAt >= 0 ? Number(args[heapAt + 1]) : 0;
  if (!Number.isInteger(heapMb) || heapMb < 0) throw new Error('--consumer-heap-mb takes a whole number of MB (0: no cap)');
  const heapFlags = heapMb > 0 ? [`--max-old-space-size=${heapMb}`] : [];
  const { brokers } = await ensureKafka();
  const seed = uniqueTopicName('bench-ingest');
  const loadAtStart = loadavg()[0] ?? 0;

  // (a) the store alone
  const raw = await startChild(['raw', seed, String(n)]).result;
  console.error(`raw JSONEachRow insert: ${JSON.stringify(raw)}`);

  // (b) end to end
  const consumerArgs = (t: string, dir: string, group: string): string[] => ['consumer', brokers.join(','), t, dir, String(concurrency), group, String(fetchMaxWaitMs), String(fetchMinBytes)];
  /** A consumer on a fresh store and topic, `send` into it, until every event is committed. */
  const endToEnd = async (t: string, send: () => Promise<Sent>) => {
    const dir = mkdtempSync(join(tmpdir(), 'continuity-bench-e2e-'));
    try {
      const broker0 = brokerCpuSeconds();
      const consumer = startChild(consumerArgs(t, dir, `${t}-writer`), heapFlags);
      await consumer.ready;
      const sent = await send();
      const done = await waitCommitted(brokers, t, n);
      const broker1 = brokerCpuSeconds();
      consumer.stop();
      const consumed = await consumer.result;
      const store = await openMigratedStore(configFor(brokers, t, dir));
      const [count] = await store.query<{ c: number; u: number }>('SELECT count() AS c, uniqExact(event_id) AS u FROM events');
      await store.close();
      const brokerCpuS = broker0 !== undefined && broker1 !== undefined ? broker1 - broker0 : undefined;
      return { sent, seconds: (done - sent.t0) / 1000, consumed, stored: count?.c ?? 0, unique: count?.u ?? 0, brokerCpuS };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const topic = `${seed}-e2e`;
  const e2e = await endToEnd(topic, () => produce(brokers, topic, seed, n, {}));
  const { sent, consumed } = e2e;
  const e2eSeconds = e2e.seconds;
  console.error(
    `end to end: ${n} events in ${e2eSeconds.toFixed(1)} s (producer done after ${((sent.t1 - sent.t0) / 1000).toFixed(1)} s); ` +
      `stored ${e2e.stored} (unique ${e2e.unique}); consumer ${JSON.stringify(consumed)}`,
  );

  // (b2) the consumer alone: a second group drains the now full topic into a fresh store
  const dirD = mkdtempSync(join(tmpdir(), 'continuity-bench-drain-'));
  const drainGroup = `${topic}-drain`;
  const consumerD = startChild(consumerArgs(topic, dirD, drainGroup), heapFlags);
  await consumerD.ready;
  const drainT0 = Date.now();
  await waitCommitted(brokers, topic, n, drainGroup);
  const drainSeconds = (Date.now() - drainT0) / 1000;
  consumerD.stop();
  const drained = await consumerD.result;
  rmSync(dirD, { recursive: true, force: true });
  console.error(`consumer alone (draining a full topic): ${n} events in ${drainSeconds.toFixed(1)} s; consumer ${JSON.stringify(drained)}`);

  // (b3) end to end again with @platformatic/kafka producing (the consumer unchanged)
  let platformatic: Record<string, unknown> | null = null;
  if (!args.includes('--no-platformatic')) {
    const topicP = `${seed}-platformatic`;
    const p = await endToEnd(topicP, () => producePlatformatic(brokers, topicP, `${seed}-pk`, n));
    platformatic = {
      client: '@platformatic/kafka 1.35.0 (producer only; consumer kafkajs)',
      e2e_events_per_s: round(n / p.seconds),
      ratio: round(n / p.seconds / (raw.events_per_s ?? 1), 3),
      producer_cpu_us_per_event: round((p.sent.cpuS * 1e6) / n, 1),
      consumer_cpu_us_per_event: round(((p.consumed.cpu_s ?? 0) * 1e6) / n, 1),
      stored: p.stored,
      stored_unique: p.unique,
    };
    console.error(`end to end, @platformatic/kafka producing: ${JSON.stringify(platformatic)}`);
  }

  // (c) latency at a steady rate
  const topicC = `${seed}-latency`;
  const dirC = mkdtempSync(join(tmpdir(), 'continuity-bench-lat-'));
  const consumerC = startChild(consumerArgs(topicC, dirC, `${topicC}-writer`), heapFlags);
  await consumerC.ready;
  const latN = Math.round(rate * latencySeconds);
  const paced = await produce(brokers, topicC, `${seed}-lat`, latN, { rate, stampSend: true });
  await waitCommitted(brokers, topicC, latN);
  consumerC.stop();
  const consumedC = await consumerC.result;
  const storeC = await openMigratedStore(configFor(brokers, topicC, dirC));
  const [lat] = await storeC.query<{ n: number; p50: number; p99: number; max: number }>(
    `SELECT count() AS n,
            quantileExact(0.5)(d) AS p50, quantileExact(0.99)(d) AS p99, max(d) AS max
     FROM (SELECT toInt64(toUnixTimestamp64Milli(ingested_at)) - toInt64(attrs['bench.sent_ms']) AS d FROM events)`,
  );
  await storeC.close();
  rmSync(dirC, { recursive: true, force: true });
  const achievedRate = latN / ((paced.t1 - paced.t0) / 1000);
  console.error(`latency at ${round(achievedRate)} events/s: ${JSON.stringify(lat)}; consumer ${JSON.stringify(consumedC)}`);

  const e2eRate = n / e2eSeconds;
  const result = {
    events: n,
    e2e_events_per_s: round(e2eRate),
    raw_insert_events_per_s: round(raw.events_per_s),
    ratio: round(e2eRate / (raw.events_per_s ?? 1), 3),
    peak_rss_mb: round(consumed.peak_rss_mb),
    peak_anon_rss_mb: round(consumed.peak_anon_mb),
    idle_store_rss_mb: round(consumed.idle_store_rss_mb),
    consumer_alone_events_per_s: round(n / drainSeconds),
    consumer_alone_ratio: round(n / drainSeconds / (raw.events_per_s ?? 1), 3),
    consumer_alone_peak_rss_mb: round(drained.peak_rss_mb),
    consumer_cpu_s: round(consumed.cpu_s, 1),
    producer_cpu_s: round(sent.cpuS, 1),
    raw_insert_cpu_s: round(raw.cpu_s, 1),
    // CPU µs per event of each part of the end-to-end run (the broker's when it runs here),
    // and of the raw insert: what the two cores are shared between.
    cpu_us_per_event: {
      producer: round((sent.cpuS * 1e6) / n, 1),
      broker: e2e.brokerCpuS !== undefined ? round((e2e.brokerCpuS * 1e6) / n, 1) : null,
      consumer: round(((consumed.cpu_s ?? 0) * 1e6) / n, 1),
      consumer_alone: round(((drained.cpu_s ?? 0) * 1e6) / n, 1),
      raw_insert: round(((raw.cpu_s ?? 0) * 1e6) / n, 1),
    },
    consumer_batches: consumed.batches,
    fetch_max_wait_ms: fetchMaxWaitMs,
    fetch_min_bytes: fetchMinBytes,
    cores: availableParallelism(),
    stored: e2e.stored,
    stored_unique: e2e.unique,
    latency_rate_per_s: round(achievedRate),
    latency_events: lat?.n ?? 0,
    p50_ms: lat?.p50 ?? null,
    p99_ms: lat?.p99 ?? null,
    max_ms: lat?.max ?? null,
    transport: 'kafkajs 2.2.4, gzip, idempotent acks=all',
    platformatic_producer: platformatic,
    partitions: benchPartitions(),
    partitions_consumed_concurrently: concurrency,
    consumer_max_old_space_mb: heapMb || null,
    load_average_at_start: round(loadAtStart, 2),
    goals: GOALS,
  };
  console.log(JSON.stringify(result));
}

try {
  await main();
} finally {
  for (const child of running) child.kill('SIGKILL');
}
