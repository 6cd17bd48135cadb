import { CompressionTypes, Partitioners, type Admin, type ICustomPartitioner, type Kafka, type Message, type Producer } from 'kafkajs';
import type { KafkaConfig } from '../../core/config.ts';
import { ContinuityError } from '../../core/errors.ts';
import type { ContinuityEvent } from '../../schema/index.ts';
import type { EventSink } from '../gateway/app.ts';
import { createKafka, ensureTopics, type KafkaLogLevel } from './kafka.ts';

/** Options of {@link createKafkaProducerSink}. */
export interface KafkaProducerSinkOptions {
  kafka: KafkaConfig;
  /** Default `continuity-gateway`. */
  clientId?: string;
  logLevel?: KafkaLogLevel;
  log?: (line: string) => void;
  /** Record compression (default gzip, which kafkajs implements natively). */
  compression?: 'gzip' | 'none';
  /** Events accepted but not yet acknowledged by Kafka before `accept` refuses with 503 (default 100,000). */
  maxQueuedEvents?: number;
  /** Events per produce request (default 10,000); queued requests are coalesced up to this. */
  maxBatchEvents?: number;
  /** Value bytes per produce request (default 4 MiB). */
  maxBatchBytes?: number;
  /**
   * Retries of one produce request inside kafkajs (default 5: about 8 s of backoff),
   * which is how long a request may wait through a broker restart before it fails.
   */
  sendRetries?: number;
  /** After a failed send, how long `ready()` is false and `accept` refuses at once, ms (default 5000, the gateway's Retry-After). */
  retryAfterMs?: number;
  /** Create the topics when missing (default true). */
  provisionTopics?: boolean;
}

/** Counters of a {@link KafkaProducerSink}. */
export interface KafkaProducerStats {
  /** Events Kafka acknowledged (acks=all). */
  sentEvents: number;
  /** Produce requests that succeeded / failed. */
  sends: number;
  failedSends: number;
  /** Events refused with 503 without being sent (Kafka down recently, or the queue full). */
  refusedEvents: number;
  /** Events accepted and waiting for Kafka's acknowledgement. */
  queuedEvents: number;
  /** The last send or connect error, for /readyz and logs. */
  lastError: string | undefined;
}

/** The gateway's Kafka transport: an {@link EventSink} with lifecycle and counters. */
export interface KafkaProducerSink extends EventSink {
  /**
   * Connects and provisions the topics. A Kafka that cannot be reached is not fatal:
   * the sink stays not-ready and tries again on the next `accept` after `retryAfterMs`.
   * @throws ContinuityError CONT_ERR_INGEST_UNAVAILABLE naming the cause (the sink is usable afterwards).
   */
  start(): Promise<void>;
  /** Resolves when every accepted event was acknowledged or refused. Never rejects. */
  flush(): Promise<void>;
  /** Flushes, refuses further events (CONT_ERR_SHUTDOWN) and disconnects. Idempotent. */
  shutdown(): Promise<void>;
  readonly stats: Readonly<KafkaProducerStats>;
}

interface Pending {
  messages: Message[];
  bytes: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * The gateway → Kafka transport (DESIGN §2). `accept(events)` resolves once Kafka has
 * acknowledged every event with acks=all from an idempotent producer (so a 200 from
 * the gateway means "in Kafka"), gzip-compressed:
 * - key = `session_key` (a session's events stay in order in one partition, chosen
 *   by the Java client's murmur2, kafkajs `DefaultPartitioner`), or `event_id` for
 *   events without a session, which are spread evenly by the UUID's random bits
 *   ({@link stablePartitioner}: a retry must put the same records in the same partition);
 * - value = the validated event as JSON (contract v1, DESIGN §3).
 * Requests are sent one at a time, with the requests that queued meanwhile coalesced
 * into the next one (sequence numbers of the idempotent producer stay in order).
 *
 * Nothing is buffered without bound: when Kafka cannot be reached, or a send fails
 * after `sendRetries`, `accept` rejects with a retriable CONT_ERR_INGEST_UNAVAILABLE
 * (the gateway answers 503 with Retry-After) and `ready()` is false for
 * `retryAfterMs`; more than `maxQueuedEvents` unacknowledged events are refused the
 * same way. A failed send's producer is replaced, because kafkajs rolls its sequence
 * numbers back after giving up, and a reused sequence would make the broker drop a
 * later request as a "duplicate". A refused request may still have reached Kafka (the
 * acknowledgement was lost); the client's resend then stores the events twice in the
 * topic, and the table keeps one per `event_id` (ReplacingMergeTree; read with FINAL).
 */
export function createKafkaProducerSink(options: KafkaProducerSinkOptions): KafkaProducerSink {
  const kafkaConfig = options.kafka;
  const maxQueued = options.maxQueuedEvents ?? 100_000;
  const maxBatchEvents = options.maxBatchEvents ?? 10_000;
  const maxBatchBytes = options.maxBatchBytes ?? 4 << 20;
  const retryAfterMs = options.retryAfterMs ?? 5000;
  const compression = options.compression === 'none' ? CompressionTypes.None : CompressionTypes.GZIP;
  // Few client-level retries: connecting to a dead cluster should fail in about a second.
  const kafka: Kafka = createKafka(kafkaConfig, {
    clientId: options.clientId ?? 'continuity-gateway',
    ...(options.logLevel ? { logLevel: options.logLevel } : {}),
    ...(options.log ? { log: options.log } : {}),
    retries: 2,
  });
  const stats: KafkaProducerStats = { sentEvents: 0, sends: 0, failedSends: 0, refusedEvents: 0, queuedEvents: 0, lastError: undefined };
  const queue: Pending[] = [];
  let producer: Producer | undefined;
  let connecting: Promise<Producer> | undefined;
  let provisioned = !(options.provisionTopics ?? true);
  let unavailableUntil = 0;
  let sending = false;
  let closed = false;
  let idleWaiters: Array<() => void> = [];

  const unavailable = (detail: string, cause?: unknown): ContinuityError =>
    new ContinuityError('CONT_ERR_INGEST_UNAVAILABLE', `Kafka: ${detail}`, {
      cause,
      details: { retryAfterS: Math.ceil(retryAfterMs / 1000), brokers: kafkaConfig.brokers.join(',') },
    });

  const connect = async (): Promise<Producer> => {
    if (producer) return producer;
    connecting ??= (async () => {
      const p = kafka.producer({
        idempotent: true,
        maxInFlightRequests: 1,
        createPartitioner: stablePartitioner,
        retry: { retries: Math.max(1, options.sendRetries ?? 5), initialRetryTime: 250, maxRetryTime: 4000 },
      });
      try {
        await p.connect();
        if (!provisioned) {
          const admin: Admin = kafka.admin();
          await admin.connect();
          try {
            await ensureTopics(admin, kafkaConfig);
            provisioned = true;
          } finally {
            await admin.disconnect().catch(() => undefined);
          }
        }
      } catch (err) {
        await p.disconnect().catch(() => undefined);
        throw err;
      }
      producer = p;
      return p;
    })().finally(() => {
      connecting = undefined;
    });
    return connecting;
  };

  const dropProducer = async (): Promise<void> => {
    const p = producer;
    producer = undefined;
    if (p) await Promise.race([p.disconnect().catch(() => undefined), new Promise((r) => setTimeout(r, 2000).unref())]);
  };

  const fail = (err: unknown): void => {
    stats.lastError = (err as Error)?.message ?? String(err);
    unavailableUntil = Date.now() + retryAfterMs;
  };

  const pump = async (): Promise<void> => {
    if (sending) return;
    sending = true;
    try {
      while (queue.length > 0) {
        const take: Pending[] = [];
        let n = 0;
        let bytes = 0;
        while (queue.length > 0) {
          const next = queue[0]!;
          if (take.length > 0 && (n + next.messages.length > maxBatchEvents || bytes + next.bytes > maxBatchBytes)) break;
          take.push(queue.shift()!);
          n += next.messages.length;
          bytes += next.bytes;
        }
        try {
          const p = await connect();
          await p.send({
            topic: kafkaConfig.topic,
            acks: -1,
            compression,
            messages: take.length === 1 ? take[0]!.messages : take.flatMap((t) => t.messages),
          });
          stats.sends++;
          stats.sentEvents += n;
          stats.queuedEvents -= n;
          for (const t of take) t.resolve();
        } catch (err) {
          stats.failedSends++;
          fail(err);
          // What was queued behind would meet the same broken cluster: refuse it now.
          const refused = [...take, ...queue.splice(0)];
          for (const t of refused) {
            stats.queuedEvents -= t.messages.length;
            t.reject(unavailable((err as Error)?.message ?? String(err), err));
          }
          await dropProducer();
        }
      }
    } finally {
      sending = false;
      const waiters = idleWaiters;
      idleWaiters = [];
      for (const w of waiters) w();
    }
  };

  return {
    stats,
    ready: () => !closed && Date.now() >= unavailableUntil,
    async start(): Promise<void> {
      try {
        await connect();
      } catch (err) {
        fail(err);
        throw unavailable((err as Error)?.message ?? String(err), err);
      }
    },
    accept(events: readonly ContinuityEvent[]): Promise<void> {
      if (closed) return Promise.reject(new ContinuityError('CONT_ERR_SHUTDOWN'));
      if (events.length === 0) return Promise.resolve();
      if (Date.now() < unavailableUntil) {
        stats.refusedEvents += events.length;
        return Promise.reject(unavailable(`unavailable (${stats.lastError ?? 'recent failure'})`));
      }
      if (stats.queuedEvents + events.length > maxQueued) {
        stats.refusedEvents += events.length;
        return Promise.reject(unavailable(`${stats.queuedEvents} events already wait for acknowledgement (max ${maxQueued})`));
      }
      const messages: Message[] = new Array(events.length);
      let bytes = 0;
      for (let i = 0; i < events.length; i++) {
        const e = events[i]!;
        const value = JSON.stringify(e);
        bytes += value.length;
        messages[i] = { key: e.session_key !== '' ? e.session_key : e.event_id, value };
      }
      stats.queuedEvents += events.length;
      return new Promise<void>((resolve, reject) => {
        queue.push({ messages, bytes, resolve, reject });
        void pump();
      });
    },
    async flush(): Promise<void> {
      if (!sending && queue.length === 0) return;
      await new Promise<void>((r) => idleWaiters.push(r));
    },
    async shutdown(): Promise<void> {
      if (closed) return;
      closed = true;
      await this.flush();
      await dropProducer();
    },
  };
}

const UUID_KEY = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The partitioner of both producers (the gateway's, and the consumer's dead letters in
 * ingest/consumer/runner.ts). A record goes by
 * - a session key: kafkajs's murmur2 (Java-compatible), remembered per key (a bounded
 *   cache: the hash is computed with 64-bit emulation per record otherwise);
 * - an `event_id` key, which needs no affinity: the UUID's last 32 bits modulo the
 *   partition count, random bits in UUIDv4 and UUIDv7 (RFC 9562 §5.4, §5.7), so an even
 *   spread at the cost of one `parseInt`;
 * - no key (a dead letter whose record had none): murmur2 of its `continuity.dlq.origin`
 *   header (`topic:partition:offset`), else of its value.
 *
 * Every choice is a function of the record and the partition count. kafkajs groups a
 * request's records again on every retry and rolls all the partitions' sequence numbers
 * back when any partition failed, so a partition whose batch the broker had already
 * stored gets it again with the same first sequence; the broker recognises a duplicate
 * only if the batch is the same records. A choice that depends on call order (kafkajs
 * places keyless records round-robin; this placed `event_id` keys so before 2026-11-30)
 * put other records there on the retry, and the idempotent broker answered
 * OUT_OF_ORDER_SEQUENCE_NUMBER (seen on the first send to a new topic).
 */
export const stablePartitioner: ICustomPartitioner = () => {
  const murmur2 = Partitioners.DefaultPartitioner();
  const cache = new Map<string, number>();
  let cachedFor = -1;
  return ({ topic, partitionMetadata, message }) => {
    const n = partitionMetadata.length;
    if (message.partition !== undefined && message.partition !== null) return message.partition;
    if (message.key === undefined || message.key === null) {
      const origin = message.headers?.['continuity.dlq.origin'];
      const key = (Array.isArray(origin) ? origin[0] : origin) ?? message.value;
      return murmur2({ topic, partitionMetadata, message: { ...message, key: key ?? '' } });
    }
    const key = message.key;
    if (typeof key !== 'string' || n === 0) return murmur2({ topic, partitionMetadata, message });
    if (UUID_KEY.test(key)) return partitionMetadata[Number.parseInt(key.slice(-8), 16) % n]!.partitionId;
    if (cachedFor !== n || cache.size >= 100_000) {
      cache.clear();
      cachedFor = n;
    }
    let p = cache.get(key);
    if (p === undefined) {
      p = murmur2({ topic, partitionMetadata, message });
      cache.set(key, p);
    }
    return p;
  };
};
