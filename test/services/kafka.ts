/**
 * A real Apache Kafka broker for tests (see scripts/kafka.sh and docs/kafka.md).
 *
 * - `ensureKafka()` uses KAFKA_BROKERS when it is set (CI starts the broker before
 *   `npm test` and exports it); otherwise it runs `scripts/kafka.sh start`, which
 *   fetches the jars on first use, and starts a single-node KRaft broker on
 *   127.0.0.1:39092 (KAFKA_PORT) with its data in `<repo>/.kafka` (KAFKA_DATA_DIR).
 *   Safe to call from several test files at once: the script serialises starts.
 * - The broker is shared by every test file: test files must not stop it. Give
 *   each test its own topics and groups (`uniqueTopicName`) instead.
 * - `stopKafka()` is for a global teardown or a script: it stops the broker only
 *   if this process started it (or when `force` is set), never one named by
 *   KAFKA_BROKERS.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Admin, ITopicConfig } from 'kafkajs';
import { waitFor } from '../../drill/wait.ts';

const execFileAsync = promisify(execFile);

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const script = fileURLToPath(new URL('../../scripts/kafka.sh', import.meta.url));

/** Enough for a cold fetch of the jars (about a minute) plus the broker's start. */
const START_TIMEOUT_MS = 10 * 60_000;
const STOP_TIMEOUT_MS = 2 * 60_000;

export interface KafkaService {
  /** Bootstrap addresses, `host:port`. */
  readonly brokers: string[];
}

let startedHere = false;

function brokersFromEnv(): string[] | undefined {
  const raw = process.env.KAFKA_BROKERS?.trim();
  if (!raw) return undefined;
  const brokers = raw
    .split(',')
    .map((b) => b.trim())
    .filter((b) => b.length > 0);
  return brokers.length > 0 ? brokers : undefined;
}

async function runScript(args: string[], timeoutMs: number): Promise<{ stdout: string; stderr: string }> {
  try {
    return await execFileAsync('bash', [script, ...args], {
      cwd: repoRoot,
      env: process.env,
      timeout: timeoutMs,
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (err) {
    const e = err as Error & { stdout?: string; stderr?: string; code?: number | string };
    const detail = [e.stderr, e.stdout].filter((s) => s && s.trim()).join('\n').trim();
    throw new Error(`scripts/kafka.sh ${args.join(' ')} failed (${e.code ?? e.message})${detail ? `:\n${detail}` : ''}`, {
      cause: err,
    });
  }
}

/** The broker to test against: KAFKA_BROKERS, or the local one (started when needed). */
export async function ensureKafka(): Promise<KafkaService> {
  const fromEnv = brokersFromEnv();
  if (fromEnv) return { brokers: fromEnv };
  const { stdout, stderr } = await runScript(['start'], START_TIMEOUT_MS);
  const bootstrap = stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length > 0)
    .at(-1);
  if (!bootstrap || !/^[\w.-]+:\d+$/.test(bootstrap)) {
    throw new Error(`scripts/kafka.sh start printed no bootstrap address:\n${stdout}\n${stderr}`);
  }
  if (/starting Kafka /.test(stderr)) startedHere = true;
  return { brokers: [bootstrap] };
}

/**
 * Stops the local broker if this process started it (`force`: whoever started it).
 * Does nothing when KAFKA_BROKERS names the broker: whoever set it owns it.
 */
export async function stopKafka(options: { force?: boolean } = {}): Promise<void> {
  if (brokersFromEnv()) return;
  if (!startedHere && !options.force) return;
  await runScript(['stop'], STOP_TIMEOUT_MS);
  startedHere = false;
}

/** A topic name no other test, run or worker uses: `<prefix>-<pid>-<time>-<random>`. */
export function uniqueTopicName(prefix: string): string {
  const clean = prefix.replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 120) || 'test';
  return `${clean}-${process.pid}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

/**
 * Creates `topics` and waits until the broker hosts every partition of them with a
 * leader. kafkajs's `waitForLeaders` retries only LEADER_NOT_AVAILABLE, and a KRaft
 * broker can answer UNKNOWN_TOPIC_OR_PARTITION ("This server does not host this
 * topic-partition") for a moment after the creation: a test's setup failed on it (CI,
 * 2026-12-02). Here the metadata is asked again until it holds, for up to `timeoutMs`.
 * @throws ContinuityError (drill/wait.ts waitFor) when the partitions have no leaders within `timeoutMs`.
 */
export async function createTopicsAndWait(admin: Admin, topics: ITopicConfig[], timeoutMs = 30_000): Promise<void> {
  await admin.createTopics({ topics, waitForLeaders: false });
  const names = topics.map((t) => t.topic);
  const ready = async (): Promise<boolean> => {
    const meta = await admin.fetchTopicMetadata({ topics: names }).catch(() => undefined);
    return (
      meta !== undefined &&
      topics.every((t) => {
        const parts = meta.topics.find((m) => m.name === t.topic)?.partitions ?? [];
        return parts.length > 0 && parts.length === (t.numPartitions ?? parts.length) && parts.every((p) => p.leader >= 0);
      })
    );
  };
  await waitFor(ready, { timeoutMs, what: `a leader for every partition of ${names.join(', ')}`, intervalMs: 100 });
}
