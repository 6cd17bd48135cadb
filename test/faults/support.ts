/**
 * Shared pieces of the fault tests (test/faults/*.test.ts): event fixtures, a polling
 * helper with a deadline, lag waiting, a consumer child process, a broker of a test's
 * own, and a store wrapper that injects failures. Everything runs against the real
 * broker and the real embedded engine.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Admin } from 'kafkajs';
import { loadConfig, type Config } from '../../core/config.ts';
import { ContinuityError } from '../../core/errors.ts';
import { createKafka, createKafkaConsumer, createKafkaProducerSink, fetchConsumerLag, type ConsumerEvent, type ConsumerLag, type KafkaConsumer, type KafkaProducerSink } from '../../ingest/index.ts';
import type { ContinuityEvent } from '../../schema/index.ts';
import { openMigratedStore, type Store } from '../../store/index.ts';
import { ensureKafka, uniqueTopicName } from '../services/kafka.ts';

const execFileAsync = promisify(execFile);
export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const kafkaScript = fileURLToPath(new URL('../../scripts/kafka.sh', import.meta.url));

/** Test key for keyed hashes (same as test/helpers/store.ts). */
const HASH_KEY = '00112233445566778899aabbccddeeff';

/** The environment a test's consumer/gateway runs with: explicit, never this process's. */
export function kafkaEnv(brokers: string[], topic: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    CONTINUITY_HASH_KEY: HASH_KEY,
    KAFKA_BROKERS: brokers.join(','),
    KAFKA_TOPIC: topic,
    KAFKA_GROUP: `${topic}-writer`,
    KAFKA_PARTITIONS: '6',
    ...extra,
  };
}

/** A config built from {@link kafkaEnv} and a data directory (explicit: .ci/run exports KAFKA_BROKERS for everything). */
export function testConfig(env: NodeJS.ProcessEnv, dataDir: string): Config {
  return loadConfig(env, { dataDir });
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `continuity-${prefix}-`));
}

/**
 * `n` arrival events with unique ids: two of three belong to one of 64 sessions
 * (keyed to a partition by session_key), the rest have no session (keyed by event_id).
 */
export function makeEvents(n: number, tag: string): ContinuityEvent[] {
  const nowMicros = Date.now() * 1000;
  const out: ContinuityEvent[] = new Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = {
      event_id: randomUUID(),
      event_type: 'arrival',
      ts: nowMicros - (n - i),
      source: 'server',
      service: 'fault-test',
      instance: 'i-1',
      boot_id: tag,
      release: '1.0.0',
      environment: 'test',
      protocol_version: '2025-11-25',
      session_key: i % 3 === 2 ? '' : (i % 64).toString(16).padStart(32, 'a'),
      principal_key: '',
      client_name: 'fault-test',
      client_version: '1',
      user_agent: 'vitest',
      attrs: { seq: String(i) },
      arrival_id: randomUUID(),
      http_method: 'POST',
      mcp_method: 'tools/call',
      jsonrpc_id: String(i),
      tool_name: 'echo',
      has_credential: true,
    } as ContinuityEvent;
  }
  return out;
}

/** Polls `check` every `intervalMs` until it returns a value other than undefined; fails at the deadline naming `what`. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs: number, intervalMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** An admin client on `brokers` (logs off). */
export async function connectAdmin(brokers: string[]): Promise<Admin> {
  const kafkaCfg = testConfig(kafkaEnv(brokers, 'unused'), tmpdir()).kafka!;
  const admin = createKafka(kafkaCfg, { clientId: 'fault-test-admin', retries: 3 }).admin();
  await admin.connect();
  return admin;
}

/** Records in a topic (sum of high − low over its partitions). */
export async function topicRecords(admin: Admin, topic: string): Promise<number> {
  const offsets = await admin.fetchTopicOffsets(topic);
  return offsets.reduce((n, p) => n + Number(BigInt(p.high) - BigInt(p.low)), 0);
}

/** Waits until the topic holds at least `records` records and the group has committed all of them. */
export async function waitForCaughtUp(admin: Admin, group: string, topic: string, records: number, timeoutMs: number): Promise<ConsumerLag> {
  return waitFor(
    `group ${group} to commit ${records} records of ${topic}`,
    async () => {
      if ((await topicRecords(admin, topic)) < records) return undefined;
      const lag = await fetchConsumerLag(admin, group, topic);
      return lag.total === 0 && lag.partitions.every((p) => p.committed !== null || p.high === p.low) ? lag : undefined;
    },
    timeoutMs,
    300,
  );
}

/**
 * Feeds `events` through the gateway's Kafka sink in chunks, at most `perSecond`
 * events a second; a chunk refused with 503 (Kafka unavailable) is offered again after
 * a short wait, as a client honouring Retry-After would. Returns the number of refusals.
 */
export async function feed(sink: KafkaProducerSink, events: ContinuityEvent[], options: { chunk?: number; perSecond?: number; signal?: AbortSignal } = {}): Promise<{ refusals: number }> {
  const chunk = options.chunk ?? 1000;
  const perSecond = options.perSecond ?? Number.POSITIVE_INFINITY;
  const t0 = Date.now();
  let refusals = 0;
  for (let i = 0; i < events.length; i += chunk) {
    if (options.signal?.aborted) break;
    const part = events.slice(i, i + chunk);
    for (;;) {
      try {
        await sink.accept(part);
        break;
      } catch (err) {
        if (!(err instanceof ContinuityError) || !err.retriable) throw err;
        refusals++;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
    const due = t0 + ((i + part.length) / perSecond) * 1000;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  return { refusals };
}

/** A consumer child process (`continuity consumer --progress`) and its JSON-line output. */
export interface ConsumerChild {
  readonly child: ChildProcess;
  /** Lines printed so far, parsed. */
  readonly lines: Array<Record<string, unknown>>;
  /** Resolves with the first line whose `event` is `event` (and that passes `where`). */
  waitForLine(event: string, timeoutMs: number, where?: (l: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  /** Resolves with the exit code (null after a signal) and signal. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly stderr: () => string;
}

/** Starts the real consumer (`node --import tsx cli/main.ts consumer`) on `dataDir` with `env` only. */
export function spawnConsumer(env: NodeJS.ProcessEnv, dataDir: string, args: string[] = []): ConsumerChild {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'cli/main.ts', '--data-dir', dataDir, 'consumer', '--progress', '--log-level', 'nothing', ...args],
    { cwd: repoRoot, env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const lines: Array<Record<string, unknown>> = [];
  let err = '';
  const waiters: Array<() => void> = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      lines.push({ event: 'text', text: line });
    }
    for (const w of waiters.splice(0)) w();
  });
  child.stderr!.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-20_000);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      for (const w of waiters.splice(0)) w();
      resolve({ code, signal });
    });
  });
  return {
    child,
    lines,
    exited,
    stderr: () => err,
    async waitForLine(event, timeoutMs, where = () => true) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const hit = lines.find((l) => l.event === event && where(l));
        if (hit) return hit;
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`consumer exited before '${event}': ${err.slice(-2000)}`);
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no '${event}' line from the consumer within ${timeoutMs} ms; stderr: ${err.slice(-2000)}`);
        await new Promise<void>((r) => {
          const t = setTimeout(r, Math.min(left, 1000));
          waiters.push(() => {
            clearTimeout(t);
            r();
          });
        });
      }
    },
  };
}

/** Two consecutive free TCP ports on 127.0.0.1 (a broker uses port and port + 1). */
export async function freePortPair(): Promise<number> {
  const probe = (port: number) =>
    new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 40_000 + Math.floor(Math.random() * 20_000);
    if ((await probe(port)) && (await probe(port + 1))) return port;
  }
  throw new Error('no two consecutive free ports found');
}

/** A Kafka broker of the test's own (scripts/kafka.sh with its own port and data directory). */
export interface OwnBroker {
  readonly brokers: string[];
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Sends the broker's JVM a signal (SIGSTOP: it keeps its connections and answers nothing; SIGCONT). */
  signal(signal: 'SIGSTOP' | 'SIGCONT'): void;
  /** Stops it and deletes its data directory. */
  destroy(): Promise<void>;
}

/** Starts a second single-node broker for a test that restarts it. */
export async function startOwnBroker(): Promise<OwnBroker> {
  const port = await freePortPair();
  const dataDir = tempDir('kafka');
  const env = { ...process.env, KAFKA_PORT: String(port), KAFKA_DATA_DIR: dataDir, KAFKA_HEAP_OPTS: '-Xms128m -Xmx384m' };
  const run = async (action: string) => {
    try {
      await execFileAsync('bash', [kafkaScript, action], { cwd: repoRoot, env, timeout: 300_000, maxBuffer: 8 << 20 });
    } catch (err) {
      const e = err as Error & { stderr?: string };
      throw new Error(`scripts/kafka.sh ${action} (port ${port}) failed: ${e.stderr ?? e.message}`, { cause: err });
    }
  };
  const signalBroker = (signal: NodeJS.Signals) => process.kill(Number(readFileSync(join(dataDir, 'broker.pid'), 'utf8').trim()), signal);
  await run('start');
  return {
    brokers: [`127.0.0.1:${port}`],
    start: () => run('start'),
    stop: () => run('stop'),
    signal: (signal) => signalBroker(signal),
    async destroy() {
      try {
        signalBroker('SIGCONT');
      } catch {
        // not running
      }
      await run('stop').catch(() => undefined);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A fault-injecting wrapper over a real store: `insertJsonEachRow` fails while `down` is true. */
export interface FaultyStore extends Store {
  /** Makes inserts fail with a retriable CONT_ERR_STORE_UNAVAILABLE for `ms`, from now. */
  failFor(ms: number): void;
  readonly failedInserts: number;
}

/** Wraps `store` (the real engine underneath); reads and all other calls go straight through. */
export function faultyStore(store: Store): FaultyStore {
  let downUntil = 0;
  let failed = 0;
  return {
    mode: store.mode,
    location: store.location,
    client: store.client,
    query: (sql, params) => store.query(sql, params),
    command: (sql, params) => store.command(sql, params),
    readOnly: (sql, options) => store.readOnly(sql, options),
    maintain: (sql) => store.maintain(sql),
    get statements() {
      return store.statements;
    },
    close: () => store.close(),
    async insertJsonEachRow(table, body, options) {
      if (Date.now() < downUntil) {
        failed++;
        throw new ContinuityError('CONT_ERR_STORE_UNAVAILABLE', `${table}: injected outage`);
      }
      return store.insertJsonEachRow(table, body, options);
    },
    failFor(ms: number) {
      downUntil = Date.now() + ms;
    },
    get failedInserts() {
      return failed;
    },
  };
}

/** `count()`, `uniqExact(event_id)` and `count()` with FINAL of a boot_id tag. */
export async function countEvents(store: Store, tag: string): Promise<{ rows: number; unique: number; final: number }> {
  const [a] = await store.query<{ rows: number; unique: number }>(
    'SELECT count() AS rows, uniqExact(event_id) AS unique FROM events WHERE boot_id = {tag:String}',
    { tag },
  );
  const [b] = await store.query<{ final: number }>('SELECT count() AS final FROM events FINAL WHERE boot_id = {tag:String}', { tag });
  return { rows: a!.rows, unique: a!.unique, final: b!.final };
}

/** A producer, a consumer and a store of one fault test, on a topic and data directory of its own. */
export interface IngestRig {
  readonly topic: string;
  /** The store's data directory. */
  readonly dataDir: string;
  readonly admin: Admin;
  /** The store as opened (not the wrapper the consumer may write through). */
  readonly store: Store;
  readonly sink: KafkaProducerSink;
  readonly consumer: KafkaConsumer;
  /** Every event the consumer reported, in order. */
  readonly events: ConsumerEvent[];
  /** Stops the consumer and the producer, closes the store, deletes the topics and the data directory. */
  close(): Promise<void>;
}

/**
 * Starts the real broker (if needed), a topic named after `name`, a migrated embedded
 * store in a temporary directory, a producer sink and a started consumer that writes
 * through `wrap(store)` (default: the store itself), with a 10 s session and 1 s heartbeats.
 */
export async function startIngestRig(name: string, options: { retryMaxDelayMs: number; wrap?: (store: Store) => Store }): Promise<IngestRig> {
  const topic = uniqueTopicName(name);
  const dataDir = tempDir(name);
  const { brokers } = await ensureKafka();
  const config = testConfig(kafkaEnv(brokers, topic), dataDir);
  const admin = await connectAdmin(brokers);
  const store = await openMigratedStore(config);
  const sink = createKafkaProducerSink({ kafka: config.kafka! });
  await sink.start();
  const events: ConsumerEvent[] = [];
  const consumer = createKafkaConsumer({
    kafka: config.kafka!,
    store: options.wrap ? options.wrap(store) : store,
    sessionTimeoutMs: 10_000,
    heartbeatIntervalMs: 1000,
    retryInitialDelayMs: 200,
    retryMaxDelayMs: options.retryMaxDelayMs,
    onEvent: (e) => events.push(e),
  });
  await consumer.start();
  return {
    topic,
    dataDir,
    admin,
    store,
    sink,
    consumer,
    events,
    async close() {
      await consumer.shutdown();
      await sink.shutdown();
      await store.close();
      await admin.deleteTopics({ topics: [topic, `${topic}.dlq`] }).catch(() => undefined);
      await admin.disconnect();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
