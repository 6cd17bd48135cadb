import kafkajs, { CompressionTypes, Partitioners, type Admin, type ICustomPartitioner, type Kafka, type Message, type Producer } from 'kafkajs';
import type { KafkaConfig } from '../../core/config.ts';
import { ContinuityError } from '../../core/errors.ts';
import type { ContinuityEvent, EventIssue } from '../../schema/index.ts';
import type { EventRefusal, EventSink } from '../gateway/app.ts';
import { createKafka, ensureTopics, type KafkaLogLevel } from './kafka.ts';

/** Options of {@link createKafkaProducerSink}. */
export interface KafkaProducerSinkOptions {
  /** The cluster and topic; `kafka.maxMessageBytes` (KAFKA_MAX_MESSAGE_BYTES) is the largest event it takes, as JSON bytes. */
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
  /**
   * Bytes per produce request before compression, counted as the records' encoded
   * size (value, key and {@link RECORD_FRAMING_BYTES}) (default 4 MiB). A request is
   * also kept within what one record batch of the topic may hold
   * (`maxRecordBatchBytes`, less the batch header and the most gzip can add), so no
   * partition's batch can be over the broker's limit; an event larger than that goes
   * in a request of its own.
   */
  maxBatchBytes?: number;
  /**
   * The largest record batch the broker takes on the topic, bytes: the topic's
   * `max.message.bytes` (the broker's `message.max.bytes` unless the topic sets its
   * own). Default: read from the broker each time the producer connects; Kafka's
   * default, 1,048,588, until then or when it cannot be read.
   */
  maxRecordBatchBytes?: number;
  /**
   * Retries of one produce request inside kafkajs (default 5: about 8 s of backoff),
   * which is how long a request may wait through a broker restart before it fails.
   */
  sendRetries?: number;
  /**
   * The longest a produce request (with its connect and kafkajs's retries) may wait for
   * the acknowledgement, ms (default {@link DEFAULT_SEND_TIMEOUT_MS}); then it fails as a
   * failed send does (503, `ready()` false). A broker that accepts connections but
   * answers nothing (stopped, not dead) held each request 57-98 s before.
   */
  sendTimeoutMs?: number;
  /** After a failed send, how long `ready()` is false and `accept` refuses at once, ms (default 5000, the gateway's Retry-After). */
  retryAfterMs?: number;
  /** Create the topics when missing (default true). */
  provisionTopics?: boolean;
}

/**
 * Default {@link KafkaProducerSinkOptions.sendTimeoutMs}, ms: below the 10 s an OTLP
 * exporter waits for an answer by default (OpenTelemetry specification, OTLP exporter
 * configuration: `OTEL_EXPORTER_OTLP_TIMEOUT`), so the gateway's 503 reaches the exporter
 * before it gives up, and above the backoff of kafkajs's default 5 retries (about 8 s in
 * all with the requests), so a send that rides through a leader election succeeds.
 */
export const DEFAULT_SEND_TIMEOUT_MS = 9000;

/** Counters of a {@link KafkaProducerSink}. */
export interface KafkaProducerStats {
  /** Events Kafka acknowledged (acks=all). */
  sentEvents: number;
  /** Produce requests that succeeded / failed. */
  sends: number;
  failedSends: number;
  /**
   * Events refused with a retriable 503: Kafka failed recently, the queue was full,
   * or their send failed (those may be in Kafka all the same).
   */
  refusedEvents: number;
  /**
   * Events refused for good: over `kafka.maxMessageBytes` as JSON (never sent), or
   * refused by the broker when sent alone (too large, or an invalid record).
   */
  rejectedEvents: number;
  /** Produce requests the broker refused as data and the sink split in two to find the events it refuses. */
  splits: number;
  /** Events accepted and waiting for Kafka's acknowledgement. */
  queuedEvents: number;
  /** The topic's `max.message.bytes` the requests are cut to (see `maxRecordBatchBytes`). */
  brokerMaxMessageBytes: number;
  /** The last send or connect error, for /readyz and logs. */
  lastError: string | undefined;
}

/** The gateway's Kafka transport: an {@link EventSink} with lifecycle and counters. */
export interface KafkaProducerSink extends EventSink {
  /** {@link EventSink.accept}; resolves with the events refused for good (`[]` when none), in index order. */
  accept(events: readonly ContinuityEvent[]): Promise<readonly EventRefusal[]>;
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

/** Kafka's default `message.max.bytes` (1 MiB and the 12 bytes of a legacy message's header). */
export const KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588;

/**
 * The most a v2 record adds to its key and value: length (varint, 5), attributes (1),
 * timestamp delta (varlong, 10), offset delta (5), key and value lengths (5 each) and
 * the header count (1) (Kafka's `DefaultRecord`).
 */
export const RECORD_FRAMING_BYTES = 32;

/** Header of a v2 record batch; only the records after it are compressed. */
const RECORD_BATCH_HEADER_BYTES = 61;

/**
 * How many record bytes one batch may hold and still be at most `maxBatchBytes` on
 * the wire, however the records compress: the header, plus zlib's bound for data it
 * cannot shrink (`deflateBound`: n + n/4096 + n/16384 + … + 13, and 18 bytes of gzip
 * wrapper), rounded up.
 */
export function recordBytesPerBatch(maxBatchBytes: number): number {
  return Math.max(0, Math.floor(((maxBatchBytes - RECORD_BATCH_HEADER_BYTES - 32) * 3000) / 3001));
}

/** Broker errors that refuse the records of a request, not the cluster: sending other records works. */
const REFUSED_AS_DATA: ReadonlySet<string> = new Set(['MESSAGE_TOO_LARGE', 'RECORD_LIST_TOO_LARGE', 'INVALID_RECORD', 'CORRUPT_MESSAGE']);
const REFUSED_AS_TOO_LARGE: ReadonlySet<string> = new Set(['MESSAGE_TOO_LARGE', 'RECORD_LIST_TOO_LARGE']);

/**
 * The Kafka error type of a refusal as data (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE,
 * INVALID_RECORD, CORRUPT_MESSAGE: Kafka protocol error codes 10, 18, 87, 2), on the
 * error or its causes (kafkajs wraps an error it gave up retrying); undefined for any
 * other failure.
 */
export function refusedAsData(err: unknown): string | undefined {
  for (let e = err, depth = 0; e && typeof e === 'object' && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const type = (e as { type?: unknown }).type;
    if (typeof type === 'string' && REFUSED_AS_DATA.has(type)) return type;
  }
  return undefined;
}

/** An accepted request: its events as records, waiting to be acknowledged. */
interface Pending {
  readonly messages: Message[];
  /** Encoded size of each record (value, key, framing), bytes. */
  readonly sizes: number[];
  /** The index in the `accept` call of each record's event; absent when no event was refused there (record i is event i). */
  readonly eventIndex: number[] | undefined;
  /** First record not yet in a produce request. */
  next: number;
  /** Records neither acknowledged nor refused yet. */
  open: number;
  readonly refusals: EventRefusal[];
  /** Set when some of its records failed with Kafka unavailable: the request is then refused with it. */
  failure: ContinuityError | undefined;
  resolve: (refusals: readonly EventRefusal[]) => void;
  reject: (err: Error) => void;
}

/** Records [from, to) of one accepted request, inside a produce request. */
interface Part {
  readonly owner: Pending;
  readonly from: number;
  readonly to: number;
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
 * Sizes: an event over `kafka.maxMessageBytes` as JSON (KAFKA_MAX_MESSAGE_BYTES, which
 * the consumer dead-letters as `too_large`) is never sent: `accept` resolves with it as
 * an {@link EventRefusal} (`too_large`), and takes the others. A produce request holds
 * at most one record batch's worth of the topic's `max.message.bytes` before
 * compression, so no partition's batch can be over it. Should the broker still
 * refuse a request as data (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_RECORD,
 * CORRUPT_MESSAGE: the limit was lowered since it was read, or an event too large
 * even alone), the request is split in halves, sent in order, until the events the
 * broker refuses alone are found; they are refused for good (`too_large` or
 * `kafka_refused`), the others are sent, and `ready()` stays true. A refusal every
 * record meets ends the search after 2·log2(n) + 2 splits and counts as Kafka failing.
 *
 * Nothing is buffered without bound: when Kafka cannot be reached, or a send fails
 * after `sendRetries`, `accept` rejects with a retriable CONT_ERR_INGEST_UNAVAILABLE
 * (the gateway answers 503 with Retry-After) and `ready()` is false for
 * `retryAfterMs`; more than `maxQueuedEvents` unacknowledged events are refused the
 * same way. A failed send's producer is replaced (a refused one's too), because
 * kafkajs rolls the sequence numbers of every partition in the request back after
 * giving up, while the broker may have stored some partitions' batches; a reused
 * sequence would make the broker drop a later, different batch as a "duplicate". A
 * refused request may still have reached Kafka (the acknowledgement was lost, or
 * another partition's batch was stored before a split); the resend then stores those
 * events twice in the topic, and the table keeps one per `event_id`
 * (ReplacingMergeTree; read with FINAL).
 */
export function createKafkaProducerSink(options: KafkaProducerSinkOptions): KafkaProducerSink {
  const kafkaConfig = options.kafka;
  const maxQueued = options.maxQueuedEvents ?? 100_000;
  const maxBatchEvents = options.maxBatchEvents ?? 10_000;
  const maxBatchBytes = options.maxBatchBytes ?? 4 << 20;
  const maxEventBytes = kafkaConfig.maxMessageBytes;
  const retryAfterMs = options.retryAfterMs ?? 5000;
  const sendTimeoutMs = options.sendTimeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
  const compression = options.compression === 'none' ? CompressionTypes.None : CompressionTypes.GZIP;
  // Few client-level retries: connecting to a dead cluster should fail in about a second.
  const kafka: Kafka = createKafka(kafkaConfig, {
    clientId: options.clientId ?? 'continuity-gateway',
    ...(options.logLevel ? { logLevel: options.logLevel } : {}),
    ...(options.log ? { log: options.log } : {}),
    retries: 2,
  });
  const stats: KafkaProducerStats = {
    sentEvents: 0,
    sends: 0,
    failedSends: 0,
    refusedEvents: 0,
    rejectedEvents: 0,
    splits: 0,
    queuedEvents: 0,
    brokerMaxMessageBytes: options.maxRecordBatchBytes ?? KAFKA_DEFAULT_MAX_MESSAGE_BYTES,
    lastError: undefined,
  };
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

  /** The topic's max.message.bytes, or undefined when the broker does not say. */
  const readTopicLimit = async (admin: Admin): Promise<number | undefined> => {
    try {
      const { resources } = await admin.describeConfigs({
        includeSynonyms: false,
        // Through the default export: Node's ESM loader does not see this one as a named export of kafkajs (CommonJS).
        resources: [{ type: kafkajs.ConfigResourceTypes.TOPIC, name: kafkaConfig.topic, configNames: ['max.message.bytes'] }],
      });
      const value = Number(resources[0]?.configEntries.find((c) => c.configName === 'max.message.bytes')?.configValue);
      return Number.isInteger(value) && value > 0 ? value : undefined;
    } catch {
      return undefined;
    }
  };

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
        if (!provisioned || options.maxRecordBatchBytes === undefined) {
          const admin: Admin = kafka.admin();
          await admin.connect();
          try {
            if (!provisioned) {
              await ensureTopics(admin, kafkaConfig);
              provisioned = true;
            }
            // Read on every connect: a producer is replaced after a failure, which is
            // when a lowered limit would have shown.
            if (options.maxRecordBatchBytes === undefined) stats.brokerMaxMessageBytes = (await readTopicLimit(admin)) ?? stats.brokerMaxMessageBytes;
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

  /** Counts `n` records of `p` as done; the request settles with its last record. */
  const settle = (p: Pending, n: number): void => {
    p.open -= n;
    stats.queuedEvents -= n;
    if (p.open > 0) return;
    if (p.failure) p.reject(p.failure);
    else p.resolve(p.refusals.length > 1 ? p.refusals.sort((a, b) => a.index - b.index) : p.refusals);
  };

  const failPart = (part: Part, error: ContinuityError): void => {
    const n = part.to - part.from;
    if (n <= 0) return;
    part.owner.failure ??= error;
    stats.refusedEvents += n;
    settle(part.owner, n);
  };

  /** Refuses `parts` and everything queued with a retriable 503, and the sink turns unready for `retryAfterMs`. */
  const failAll = (parts: readonly Part[], err: unknown): ContinuityError => {
    fail(err);
    const error = unavailable((err as Error)?.message ?? String(err), err);
    for (const part of parts) failPart(part, error);
    // What was queued behind would meet the same broken cluster: refuse it now.
    for (const p of queue.splice(0)) {
      failPart({ owner: p, from: p.next, to: p.messages.length }, error);
      p.next = p.messages.length;
    }
    return error;
  };

  /** The next produce request: queued records in order, within the event and byte bounds; a record over the byte bound goes alone. */
  const take = (): Part[] => {
    const maxBytes = Math.min(maxBatchBytes, recordBytesPerBatch(stats.brokerMaxMessageBytes));
    const parts: Part[] = [];
    let n = 0;
    let bytes = 0;
    while (queue.length > 0) {
      const p = queue[0]!;
      const from = p.next;
      let i = from;
      for (; i < p.messages.length; i++) {
        const size = p.sizes[i]!;
        if (n > 0 && (n >= maxBatchEvents || bytes + size > maxBytes)) break;
        n++;
        bytes += size;
      }
      if (i > from) parts.push({ owner: p, from, to: i });
      p.next = i;
      if (i < p.messages.length) break;
      queue.shift();
    }
    return parts;
  };

  const messagesOf = (parts: readonly Part[]): Message[] => {
    const first = parts[0]!;
    if (parts.length === 1 && first.from === 0 && first.to === first.owner.messages.length) return first.owner.messages;
    const out: Message[] = [];
    for (const { owner, from, to } of parts) for (let i = from; i < to; i++) out.push(owner.messages[i]!);
    return out;
  };

  const countOf = (parts: readonly Part[]): number => parts.reduce((n, p) => n + p.to - p.from, 0);

  /** `parts` cut after `k` records: the first k, and the rest. */
  const cut = (parts: readonly Part[], k: number): [Part[], Part[]] => {
    const a: Part[] = [];
    const b: Part[] = [];
    let left = k;
    for (const part of parts) {
      const n = part.to - part.from;
      if (left >= n) a.push(part);
      else if (left <= 0) b.push(part);
      else {
        a.push({ owner: part.owner, from: part.from, to: part.from + left });
        b.push({ owner: part.owner, from: part.from + left, to: part.to });
      }
      left -= n;
    }
    return [a, b];
  };

  /** The lone record of `part` that the broker refused as data: refused for good. */
  const refuseForGood = (part: Part, type: string, err: unknown): void => {
    const value = part.owner.messages[part.from]!.value;
    const bytes = value === null ? 0 : Buffer.byteLength(value);
    const issue: EventIssue = REFUSED_AS_TOO_LARGE.has(type)
      ? {
          path: '',
          code: 'too_large',
          message: `Kafka refused the event as too large (${type}): the event is ${bytes} bytes as JSON, and its record batch is over the topic's max.message.bytes (${stats.brokerMaxMessageBytes} when last read)`,
        }
      : { path: '', code: 'kafka_refused', message: `Kafka refused the event (${type}): ${(err as Error)?.message ?? String(err)}` };
    part.owner.refusals.push({ index: part.owner.eventIndex?.[part.from] ?? part.from, issue });
    stats.rejectedEvents++;
    settle(part.owner, 1);
  };

  /**
   * Runs `work` (a connect and a send), rejecting after `sendTimeoutMs` with an error
   * that says the broker did not answer. The work itself goes on in kafkajs until it
   * gives up; its outcome is then ignored (its producer is dropped by the caller).
   */
  const withinSendTimeout = async (work: () => Promise<void>): Promise<void> => {
    let timer: NodeJS.Timeout | undefined;
    const running = work();
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no acknowledgement within ${sendTimeoutMs} ms: the broker does not answer`)), sendTimeoutMs);
    });
    try {
      await Promise.race([running, expired]);
    } finally {
      clearTimeout(timer);
      running.catch(() => undefined);
    }
  };

  /**
   * Sends `parts` as one produce request. When the broker refuses it as data, sends
   * its two halves in turn (so the order within each partition holds), down to the
   * single records it refuses, within `search.splitsLeft`.
   * @returns the 503 everything left was refused with when Kafka failed, else undefined.
   */
  const send = async (parts: readonly Part[], search: { splitsLeft: number }): Promise<ContinuityError | undefined> => {
    const n = countOf(parts);
    try {
      await withinSendTimeout(async () => {
        const p = await connect();
        await p.send({ topic: kafkaConfig.topic, acks: -1, compression, messages: messagesOf(parts) });
      });
      stats.sends++;
      stats.sentEvents += n;
      for (const part of parts) settle(part.owner, part.to - part.from);
      return undefined;
    } catch (err) {
      stats.failedSends++;
      stats.lastError = (err as Error)?.message ?? String(err);
      // Whatever the error, this producer's sequence numbers were rolled back: replace it.
      await dropProducer();
      const type = refusedAsData(err);
      if (type !== undefined && n === 1) {
        refuseForGood(parts[0]!, type, err);
        return undefined;
      }
      if (type === undefined || search.splitsLeft <= 0) return failAll(parts, err);
      search.splitsLeft--;
      stats.splits++;
      const [a, b] = cut(parts, Math.floor(n / 2));
      const failed = await send(a, search);
      if (failed) {
        for (const part of b) failPart(part, failed);
        return failed;
      }
      return send(b, search);
    }
  };

  const pump = async (): Promise<void> => {
    if (sending) return;
    sending = true;
    try {
      while (queue.length > 0) {
        const parts = take();
        await send(parts, { splitsLeft: 2 * Math.ceil(Math.log2(countOf(parts))) + 2 });
      }
    } finally {
      sending = false;
      const waiters = idleWaiters;
      idleWaiters = [];
      for (const w of waiters) w();
    }
  };

  const tooLarge = (bytes: number): EventIssue => ({
    path: '',
    code: 'too_large',
    message: `the event is ${bytes} bytes as JSON; the limit is ${maxEventBytes} (KAFKA_MAX_MESSAGE_BYTES, which the consumer applies)`,
  });

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
    accept(events: readonly ContinuityEvent[]): Promise<readonly EventRefusal[]> {
      if (closed) return Promise.reject(new ContinuityError('CONT_ERR_SHUTDOWN'));
      if (events.length === 0) return Promise.resolve([]);
      if (Date.now() < unavailableUntil) {
        stats.refusedEvents += events.length;
        return Promise.reject(unavailable(`unavailable (${stats.lastError ?? 'recent failure'})`));
      }
      if (stats.queuedEvents + events.length > maxQueued) {
        stats.refusedEvents += events.length;
        return Promise.reject(unavailable(`${stats.queuedEvents} events already wait for acknowledgement (max ${maxQueued})`));
      }
      const messages: Message[] = [];
      const sizes: number[] = [];
      const refusals: EventRefusal[] = [];
      let eventIndex: number[] | undefined;
      for (let i = 0; i < events.length; i++) {
        const e = events[i]!;
        const value = JSON.stringify(e);
        // The consumer measures the record value in bytes (UTF-8), so this does too.
        const bytes = Buffer.byteLength(value);
        if (bytes > maxEventBytes) {
          refusals.push({ index: i, issue: tooLarge(bytes) });
          eventIndex ??= Array.from({ length: i }, (_, j) => j);
          continue;
        }
        const key = e.session_key !== '' ? e.session_key : e.event_id;
        messages.push({ key, value });
        sizes.push(bytes + Buffer.byteLength(key) + RECORD_FRAMING_BYTES);
        eventIndex?.push(i);
      }
      stats.rejectedEvents += refusals.length;
      if (messages.length === 0) return Promise.resolve(refusals);
      stats.queuedEvents += messages.length;
      return new Promise<readonly EventRefusal[]>((resolve, reject) => {
        queue.push({ messages, sizes, eventIndex, next: 0, open: messages.length, refusals, failure: undefined, resolve, reject });
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
