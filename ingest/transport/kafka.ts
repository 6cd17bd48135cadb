import { Kafka, logLevel, type Admin, type LogEntry, type logCreator } from 'kafkajs';
import type { KafkaConfig } from '../../core/config.ts';
import { ContinuityError } from '../../core/errors.ts';

/**
 * What the Kafka transport shares between the producer (gateway side), the consumer
 * and `continuity status`: one way to build a kafkajs client, and topic provisioning.
 * kafkajs 2.2.4 against Kafka 4.x is checked in docs/kafka.md.
 */

/** How much of kafkajs's own logging reaches `log` (kafkajs logs every retried request at ERROR). */
export type KafkaLogLevel = 'nothing' | 'error' | 'warn' | 'info' | 'debug';

/** Options of {@link createKafka}. */
export interface KafkaClientOptions {
  /** `client.id` the broker sees in its logs and quotas. */
  clientId: string;
  /** Default `'nothing'`. */
  logLevel?: KafkaLogLevel;
  /** Receives one line per kafkajs log entry at or above `logLevel` (default: stderr). */
  log?: (line: string) => void;
  /** TCP connect timeout, ms (default 3000). */
  connectionTimeoutMs?: number;
  /** Per-request timeout, ms (default 15000). */
  requestTimeoutMs?: number;
  /**
   * Retries of metadata/admin/connect requests (kafkajs `retry.retries`, default 5,
   * with 200 ms initial backoff). Producers and consumers set their own on top.
   */
  retries?: number;
}

const LEVELS: Record<KafkaLogLevel, logLevel> = {
  nothing: logLevel.NOTHING,
  error: logLevel.ERROR,
  warn: logLevel.WARN,
  info: logLevel.INFO,
  debug: logLevel.DEBUG,
};

/**
 * Builds a kafkajs client for `kafka.brokers`. Nothing connects until a producer,
 * consumer or admin made from it does.
 */
export function createKafka(kafka: KafkaConfig, options: KafkaClientOptions): Kafka {
  const write = options.log ?? ((line: string) => process.stderr.write(line + '\n'));
  const creator: logCreator =
    () =>
    ({ namespace, level, label, log }: LogEntry) => {
      const { message, ...extra } = log;
      write(JSON.stringify({ level: label, source: `kafkajs:${namespace}`, message, ...pick(extra), kafkaLevel: level }));
    };
  return new Kafka({
    clientId: options.clientId,
    brokers: [...kafka.brokers],
    logLevel: LEVELS[options.logLevel ?? 'nothing'],
    logCreator: creator,
    connectionTimeout: options.connectionTimeoutMs ?? 3000,
    requestTimeout: options.requestTimeoutMs ?? 15_000,
    retry: { retries: options.retries ?? 5, initialRetryTime: 200, maxRetryTime: 5000 },
  });
}

function pick(extra: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ['error', 'retryCount', 'retryTime', 'groupId', 'topic', 'partition', 'broker']) if (extra[k] !== undefined) out[k] = extra[k];
  return out;
}

/**
 * Creates the event topic (with `kafka.partitions` partitions) and the dead-letter
 * topic (same count) when missing; existing topics are left as they are, because
 * adding partitions later moves keys (a session's events would change partition).
 * Replication follows the broker's `default.replication.factor`.
 * @returns the topics this call created.
 * @throws ContinuityError CONT_ERR_KAFKA_UNAVAILABLE when the cluster cannot be reached.
 */
export async function ensureTopics(admin: Admin, kafka: KafkaConfig): Promise<string[]> {
  try {
    const existing = new Set(await admin.listTopics());
    const missing = [kafka.topic, kafka.dlqTopic].filter((t) => !existing.has(t));
    if (missing.length === 0) return [];
    await admin.createTopics({
      waitForLeaders: true,
      topics: missing.map((topic) => ({ topic, numPartitions: kafka.partitions })),
    });
    return missing;
  } catch (err) {
    // Two processes provisioning at once: the loser sees "already exists".
    if (/already exists/i.test((err as Error).message ?? '')) return [];
    throw kafkaUnavailable(kafka, err);
  }
}

/** Wraps a kafkajs failure to reach the cluster as a coded, retriable error. */
export function kafkaUnavailable(kafka: KafkaConfig, err: unknown): ContinuityError {
  if (err instanceof ContinuityError) return err;
  return new ContinuityError('CONT_ERR_KAFKA_UNAVAILABLE', `${kafka.brokers.join(',')}: ${(err as Error)?.message ?? String(err)}`, {
    cause: err,
  });
}
