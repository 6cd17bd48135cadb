/**
 * The Kafka → ClickHouse consumer: a kafkajs consumer group that feeds contiguous
 * offset ranges of one partition through the pipeline (pipeline.ts) and commits
 * offsets only after the store confirmed the write (DESIGN §5).
 *
 * Exactly-once effect, and why it survives a crash at any point. Per partition, at
 * most one range is ever written but not committed, and the group's committed record
 * names it:
 *   1. before writing `[a, b]`, commit offset `a` with metadata `continuity/1 intent a-b`;
 *   2. insert with `insert_deduplication_token = topic:partition:a-b:content` (a digest of the records);
 *   3. commit offset `b + 1` with metadata `continuity/1 done a-b`.
 * Whoever consumes the partition next (this process after a restart, another member
 * after a rebalance) reads the committed record first. If it holds an intent, its first
 * batch is cut at exactly `[a, b]` whatever the fetch sizes are, so it carries the same
 * token and the store drops it if step 2 had happened (the table keeps a deduplication
 * window, `non_replicated_deduplication_window`). Everything before `a` is committed and
 * never read again; nothing after `b` was written. Offsets are commits of the group's
 * current generation, so a member that lost the partition cannot move them.
 */
import type { Admin, Batch, Consumer, EachBatchPayload, Kafka, KafkaMessage, Producer } from 'kafkajs';
import { CompressionTypes } from 'kafkajs';
import type { KafkaConfig } from '../../core/config.ts';
import { retry } from '../../core/retry.ts';
import { readRetention, type Retention, type Store } from '../../store/index.ts';
import { createKafka, ensureTopics, kafkaUnavailable, type KafkaLogLevel } from '../transport/kafka.ts';
import { refusedAsData, stablePartitioner } from '../transport/kafka-producer.ts';
import {
  deadLetterTopicUnavailable,
  runBatch,
  type BatchReport,
  type DeadLetter,
  type DeadLetterReason,
  type DropReason,
  type InputMessage,
  type MessageRange,
  type PipelineContext,
} from './pipeline.ts';

import { DEFAULT_FETCH_MAX_WAIT_MS, DEFAULT_FETCH_MIN_BYTES, DEFAULT_LAG_CHECK_MS } from './defaults.ts';
import { fetchConsumerLag } from './lag.ts';

/** Options of {@link createKafkaConsumer}. */
export interface KafkaConsumerOptions {
  kafka: KafkaConfig;
  /** The store the events go to; the caller opens and closes it. */
  store: Store;
  /**
   * The store's retention (default: read from `store` by `start`, store/retention.ts):
   * rows older than it when written are dead-lettered as `expired`.
   */
  retention?: Retention;
  /** Default `continuity-consumer`. */
  clientId?: string;
  logLevel?: KafkaLogLevel;
  log?: (line: string) => void;
  /** Group session timeout, ms (default 30,000; the broker's minimum is 6,000). A killed member's partitions move after this. */
  sessionTimeoutMs?: number;
  /** Heartbeat interval, ms (default 3,000). */
  heartbeatIntervalMs?: number;
  /** Rows per write at most (default 10,000). */
  maxBatchRows?: number;
  /** Message-value bytes per write at most (default 16 MiB). */
  maxBatchBytes?: number;
  /**
   * The time bound of a batch: the broker answers a fetch after this long even with
   * less than `fetchMinBytes` waiting, ms (default {@link DEFAULT_FETCH_MAX_WAIT_MS}).
   */
  fetchMaxWaitMs?: number;
  /** Bytes a fetch waits for (default {@link DEFAULT_FETCH_MIN_BYTES}, compressed as stored). */
  fetchMinBytes?: number;
  /**
   * Bytes one fetch returns per partition (default 1 MiB) and in all (default 4 MiB), as
   * stored (compressed). A fetch is decoded whole, so these bound the consumer's memory.
   */
  maxBytesPerPartition?: number;
  maxBytes?: number;
  /**
   * Partitions processed at the same time (default 3; each partition stays sequential).
   * Lets one partition's decode and validation run while another's INSERT runs in the
   * engine's threads.
   */
  partitionsConsumedConcurrently?: number;
  /**
   * How often the assigned partitions' lag is read from the cluster between fetches, ms
   * (default {@link DEFAULT_LAG_CHECK_MS}; 0: never). A paused consumer fetches nothing,
   * so without it the lag kept the value of the last batch while records waited.
   */
  lagCheckMs?: number;
  /** Backoff while the store or Kafka is unavailable: first and ceiling, ms (defaults 200 and 5000). */
  retryInitialDelayMs?: number;
  retryMaxDelayMs?: number;
  /**
   * Lifecycle and progress: `joined`, `written` (the store confirmed a range, not yet
   * committed), `batch` (one per committed write), `paused`,
   * `resumed`, `crash`, `fatal`. Must not throw.
   */
  onEvent?: (event: ConsumerEvent) => void;
  /**
   * Fault injection for tests: wait this long between the store's confirmation of a
   * write and its offset commit, ms (default 0). Widens the window in which a crash
   * leaves a written but uncommitted range behind, the case the intent protocol covers.
   */
  faultCommitDelayMs?: number;
}

/** What {@link KafkaConsumerOptions.onEvent} receives. */
export type ConsumerEvent =
  | { type: 'joined'; memberId: string; partitions: number[] }
  | { type: 'written'; partition: number; first: string; last: string }
  | { type: 'batch'; partition: number; first: string; last: string; rows: number; messages: number; replay: boolean; deadLetters: number; dropped: number; retries: number }
  | { type: 'paused'; error: string }
  /** The dead-letter topic refused a letter as data: `omitted` its copy went without the value, `skipped` not even that went (the table keeps it whole). */
  | { type: 'dead_letter_refused'; origin: string; refusal: string; outcome: 'omitted' | 'skipped' }
  | { type: 'resumed'; pausedMs: number }
  | { type: 'crash'; error: string; restart: boolean }
  | { type: 'fatal'; error: string };

/** Per-partition position of this consumer, as of its last fetch and commit. */
export interface PartitionProgress {
  /** Next offset to write (the committed offset). */
  committed: string;
  /** Partition end seen in the last fetch or the last lag check ({@link KafkaConsumerOptions.lagCheckMs}), whichever is later. */
  highWatermark: string;
  /** highWatermark − committed. */
  lag: number;
}

/** Counters of the consumer (DESIGN: components report on themselves). */
export interface ConsumerMetrics {
  batches: number;
  /** Rows written to `events` (confirmed). */
  rows: number;
  messages: number;
  deadLetters: Partial<Record<DeadLetterReason, number>>;
  /**
   * Dead letters the dead-letter topic refused as data (too large with the dead-letter
   * headers, or invalid there): sent without their value, or not sent at all; the
   * dead_letters table keeps each with its payload.
   */
  deadLettersRefusedByTopic: number;
  drops: Partial<Record<DropReason, number>>;
  /** Batches cut at a recorded intent (a write that may have happened before is repeated, and deduplicated). */
  replays: number;
  /** Write attempts that answered retry; pauses of consumption because of them. */
  writeRetries: number;
  pauses: number;
  paused: boolean;
  crashes: number;
  /** Set once the consumer stopped for good (a non-retriable error). */
  fatal: string | undefined;
  partitions: Record<number, PartitionProgress>;
  /** Sum of the partitions' lag. */
  lag(): number;
}

/** The running consumer returned by {@link createKafkaConsumer}. */
export interface KafkaConsumer {
  /**
   * Reads the store's retention (unless given), provisions the topics, connects, joins
   * the group and starts consuming (returns once consumption started; progress arrives
   * through `onEvent` and `metrics`).
   * @throws ContinuityError CONT_ERR_KAFKA_UNAVAILABLE when Kafka cannot be reached
   *   (nothing stays connected; `start` may be called again); the store's coded error
   *   when its retention cannot be read.
   */
  start(): Promise<void>;
  /** Resolves when no batch is being processed. */
  flush(): Promise<void>;
  /**
   * Stops consuming: a batch being written finishes and is committed; a batch waiting
   * for the store is abandoned uncommitted (its intent makes the next owner repeat it).
   * Then leaves the group and disconnects. Does not close the store. Idempotent.
   */
  shutdown(): Promise<void>;
  readonly metrics: Readonly<ConsumerMetrics>;
}

/** Offset-commit metadata of the intent protocol (see the file comment). */
export interface CommitRecord {
  kind: 'intent' | 'done';
  first: bigint;
  last: bigint;
}

const METADATA = /^continuity\/1 (intent|done) (\d+)-(\d+)$/;

/** `continuity/1 intent a-b` / `continuity/1 done a-b`. */
export function encodeCommitMetadata(record: CommitRecord): string {
  return `continuity/1 ${record.kind} ${record.first}-${record.last}`;
}

/** Parses {@link encodeCommitMetadata}'s text; anything else (other tools' commits) is undefined. */
export function parseCommitMetadata(metadata: string | null | undefined): CommitRecord | undefined {
  const m = METADATA.exec(metadata ?? '');
  if (!m) return undefined;
  const first = BigInt(m[2]!);
  const last = BigInt(m[3]!);
  return last >= first ? { kind: m[1] as CommitRecord['kind'], first, last } : undefined;
}

/** Consumption state of one partition within one group generation. */
interface Cursor {
  join: number;
  /** Next offset to write; records before it are written and committed (−1: nothing committed). */
  committed: bigint;
  /** A range that may have been written without its commit: the next batch is exactly it. */
  intent: { first: bigint; last: bigint } | undefined;
  /** Records taken (offsets resolved) but not yet written: a replayed range still incomplete, or mid-batch. */
  open: InputMessage[];
  openBytes: number;
  /** Where reading must start again if the records taken are abandoned (−1: unknown yet). */
  rewindTo: bigint;
}

/**
 * Builds the consumer (DESIGN §2 "ingest consumer"): group `kafka.group`, topic
 * `kafka.topic` from the beginning for a new group, autoCommit off, offsets resolved as
 * records are taken and committed after each write (intent protocol above). Batches
 * are contiguous ranges of one partition, cut by `maxBatchRows`/`maxBatchBytes` and at
 * the end of each fetch (the fetch waits at most `fetchMaxWaitMs`: the time bound).
 * While the store is down the topic's partitions are paused and the write is retried
 * with jittered backoff, with heartbeats so the group keeps the partitions; then they
 * resume. Dead letters go to `kafka.dlqTopic` (idempotent producer) and `dead_letters`.
 */
export function createKafkaConsumer(options: KafkaConsumerOptions): KafkaConsumer {
  const cfg = options.kafka;
  const topic = cfg.topic;
  const maxRows = options.maxBatchRows ?? 10_000;
  const maxBytes = options.maxBatchBytes ?? 16 << 20;
  const emit = (e: ConsumerEvent): void => {
    try {
      options.onEvent?.(e);
    } catch {
      // A progress hook must not stop the consumer.
    }
  };
  const kafka: Kafka = createKafka(cfg, {
    clientId: options.clientId ?? 'continuity-consumer',
    // Longer than the session timeout: a SyncGroup waits for the group's leader, and a
    // leader killed mid-rebalance is dropped only when its session times out. At the
    // client's 15 s a follower gave up first, rejoined as a new member and left another
    // member to time out, again and again (a break-it pass: 223 s without consuming after
    // five kills). kafkajs extends JoinGroup's timeout past the session's; not SyncGroup's.
    requestTimeoutMs: (options.sessionTimeoutMs ?? 30_000) + 5_000,
    ...(options.logLevel ? { logLevel: options.logLevel } : {}),
    ...(options.log ? { log: options.log } : {}),
  });
  const metrics: ConsumerMetrics = {
    batches: 0,
    rows: 0,
    messages: 0,
    deadLetters: {},
    deadLettersRefusedByTopic: 0,
    drops: {},
    replays: 0,
    writeRetries: 0,
    pauses: 0,
    paused: false,
    crashes: 0,
    fatal: undefined,
    partitions: {},
    lag() {
      return Object.values(this.partitions).reduce((n, p) => n + p.lag, 0);
    },
  };

  let admin: Admin | undefined;
  let dlqProducer: Producer | undefined;
  let consumer: Consumer | undefined;
  let closed = false;
  const abort = new AbortController();
  let join = 0;
  const cursors = new Map<number, Cursor>();
  let committedCache: Map<number, { offset: bigint; metadata: string | null }> | undefined;
  const pausedBy = new Set<number>();
  let pausedAt = 0;
  let inFlight = 0;
  let idleWaiters: Array<() => void> = [];
  let restartTimer: NodeJS.Timeout | undefined;
  let lagTimer: NodeJS.Timeout | undefined;
  let assigned: number[] = [];

  const newDlqProducer = (): Producer =>
    kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: stablePartitioner, retry: { retries: 5, initialRetryTime: 250, maxRetryTime: 4000 } });
  /**
   * A new producer after a refused send: kafkajs rolls the idempotent producer's
   * sequence numbers back when it gives up, while the broker may have stored another
   * partition's batch (the gateway's sink does the same, transport/kafka-producer.ts).
   */
  const replaceDlqProducer = async (): Promise<void> => {
    const old = dlqProducer;
    const fresh = newDlqProducer();
    await fresh.connect();
    dlqProducer = fresh;
    await old?.disconnect().catch(() => undefined);
  };
  /** Where a letter came from: topic:partition:offset (the `continuity.dlq.origin` header). */
  const originOf = (range: MessageRange, l: DeadLetter): string => `${range.topic}:${range.partition}:${l.message.offset}`;
  const dlqMessage = (range: MessageRange, l: DeadLetter, omitted?: string) => {
    const origin = originOf(range, l);
    const bytes = l.message.value?.length ?? 0;
    return {
      key: l.message.key,
      value: omitted === undefined ? l.message.value : `value omitted: the dead-letter topic refused the record with its ${bytes} bytes (${omitted}); the dead_letters table keeps it (origin ${origin})`,
      timestamp: String(l.message.timestampMs),
      headers: {
        ...(l.message.headers as Record<string, string | Buffer>),
        'continuity.dlq.reason': l.reason,
        'continuity.dlq.detail': l.detail.slice(0, 1000),
        'continuity.dlq.origin': origin,
        ...(omitted === undefined ? {} : { 'continuity.dlq.value-omitted': omitted }),
      },
    };
  };
  const sendDeadLetters = async (messages: ReturnType<typeof dlqMessage>[]): Promise<string | undefined> => {
    try {
      await dlqProducer!.send({ topic: cfg.dlqTopic, acks: -1, compression: CompressionTypes.GZIP, messages });
      return undefined;
    } catch (err) {
      const refusal = refusedAsData(err);
      if (refusal === undefined) throw deadLetterTopicUnavailable(cfg.dlqTopic, err);
      await replaceDlqProducer().catch((e: unknown) => {
        throw deadLetterTopicUnavailable(cfg.dlqTopic, e);
      });
      return refusal;
    }
  };
  /**
   * Publishes dead letters to the dead-letter topic, the originals with their headers.
   * A letter the topic refuses as data (its copy with the dead-letter headers is over
   * the topic's max.message.bytes, or the topic finds it invalid) goes without its
   * value, headed `continuity.dlq.value-omitted`, and if even that is refused, not at
   * all: the dead_letters table keeps every letter with its payload, so retrying a
   * record the broker will never take would only stop the consumer (a break-it pass
   * found one 1 MiB record pausing every partition for good). Copies of letters sent
   * before a refused batch may reach the topic twice (it is at-least-once already).
   * @throws ContinuityError CONT_ERR_KAFKA_UNAVAILABLE (retriable) for any other failure.
   */
  const publishDeadLetters = async (range: MessageRange, letters: readonly DeadLetter[]): Promise<void> => {
    if ((await sendDeadLetters(letters.map((l) => dlqMessage(range, l)))) === undefined) return;
    // refused as data: one at a time, to find the letters the topic will not take
    for (const l of letters) {
      const refusal = await sendDeadLetters([dlqMessage(range, l)]);
      if (refusal === undefined) continue;
      const again = await sendDeadLetters([dlqMessage(range, l, refusal)]);
      metrics.deadLettersRefusedByTopic++;
      emit({ type: 'dead_letter_refused', origin: originOf(range, l), refusal: again ?? refusal, outcome: again === undefined ? 'omitted' : 'skipped' });
    }
  };

  /** Set by `start` once the store's retention is known. */
  let pipeline: PipelineContext | undefined;

  /** The group's committed offsets and metadata, read once per generation. */
  const committedFor = async (partition: number): Promise<{ offset: bigint; metadata: string | null }> => {
    if (!committedCache) {
      const res = await admin!.fetchOffsets({ groupId: cfg.group, topics: [topic] });
      committedCache = new Map(
        (res[0]?.partitions ?? []).map((p) => [p.partition, { offset: BigInt(p.offset), metadata: p.metadata ?? null }]),
      );
    }
    return committedCache.get(partition) ?? { offset: -1n, metadata: null };
  };

  /** Drops a partition's cursor; the next batch reloads the committed record from the group. */
  const forget = (partition: number): void => {
    cursors.delete(partition);
    committedCache = undefined;
  };

  const cursorFor = async (partition: number): Promise<Cursor> => {
    const have = cursors.get(partition);
    if (have && have.join === join) return have;
    const { offset, metadata } = await committedFor(partition);
    const record = parseCommitMetadata(metadata);
    const cursor: Cursor = {
      join,
      committed: offset,
      intent: record?.kind === 'intent' && record.first === offset ? { first: record.first, last: record.last } : undefined,
      open: [],
      openBytes: 0,
      rewindTo: offset,
    };
    cursors.set(partition, cursor);
    return cursor;
  };

  const commit = async (payload: EachBatchPayload, partition: number, offset: bigint, metadata: string): Promise<void> => {
    // The eachBatch payload's commit goes straight to the group coordinator with the
    // metadata, also while the consumer is stopping (consumer.commitOffsets would
    // silently skip it then). Transient failures are retried; a rebalance is not.
    const offsets = { topics: [{ topic, partitions: [{ partition, offset: offset.toString(), metadata }] }] };
    await retry(() => payload.commitOffsetsIfNecessary(offsets as Parameters<EachBatchPayload['commitOffsetsIfNecessary']>[0]), {
      attempts: 4,
      initialDelayMs: 100,
      maxDelayMs: 1000,
      isRetriable: (err) => {
        const e = err as { retriable?: boolean; type?: string };
        return e.retriable === true && !['REBALANCE_IN_PROGRESS', 'ILLEGAL_GENERATION', 'UNKNOWN_MEMBER_ID', 'NOT_COORDINATOR_FOR_GROUP'].includes(e.type ?? '');
      },
    });
  };

  const pauseAll = (partition: number, err: Error): void => {
    if (pausedBy.size === 0) {
      consumer?.pause([{ topic }]);
      metrics.paused = true;
      metrics.pauses++;
      pausedAt = Date.now();
      emit({ type: 'paused', error: err.message });
    }
    pausedBy.add(partition);
  };
  const resumeAll = (partition: number): void => {
    if (!pausedBy.delete(partition) || pausedBy.size > 0) return;
    consumer?.resume([{ topic }]);
    metrics.paused = false;
    emit({ type: 'resumed', pausedMs: Date.now() - pausedAt });
  };

  /** Writes the cursor's open records as one range, then commits past it. */
  const writeOpen = async (payload: EachBatchPayload, cursor: Cursor): Promise<void> => {
    const partition = payload.batch.partition;
    const messages = cursor.open;
    const intent = cursor.intent;
    const first = intent?.first ?? messages[0]!.offset;
    const last = intent?.last ?? messages[messages.length - 1]!.offset;
    cursor.open = [];
    cursor.openBytes = 0;
    const range: MessageRange = { topic, partition, first, last, messages };
    let report: BatchReport;
    try {
      report = await runBatch(range, pipeline!, {
        signal: abort.signal,
        beforeWrite: async () => {
          // A replayed intent is durable already; a new range records its intent first.
          if (!intent) await commit(payload, partition, first, encodeCommitMetadata({ kind: 'intent', first, last }));
        },
        onRetry: async (err) => {
          metrics.writeRetries++;
          pauseAll(partition, err);
          if (closed) throw err;
          await payload.heartbeat();
        },
        onRecovered: async () => resumeAll(partition),
      });
    } finally {
      // Abandoned (shutdown, rebalance) or not: never leave the topic paused behind.
      if (pausedBy.has(partition)) resumeAll(partition);
    }
    emit({ type: 'written', partition, first: first.toString(), last: last.toString() });
    if (options.faultCommitDelayMs) await new Promise((r) => setTimeout(r, options.faultCommitDelayMs));
    await commit(payload, partition, last + 1n, encodeCommitMetadata({ kind: 'done', first, last }));
    cursor.committed = last + 1n;
    cursor.rewindTo = cursor.committed;
    cursor.intent = undefined;
    metrics.batches++;
    metrics.rows += report.rows;
    metrics.messages += report.messages;
    if (intent) metrics.replays++;
    let dead = 0;
    for (const [k, n] of Object.entries(report.deadLetters) as Array<[DeadLetterReason, number]>) {
      metrics.deadLetters[k] = (metrics.deadLetters[k] ?? 0) + n;
      dead += n;
    }
    let dropped = 0;
    for (const [k, n] of Object.entries(report.drops) as Array<[DropReason, number]>) {
      metrics.drops[k] = (metrics.drops[k] ?? 0) + n;
      dropped += n;
    }
    const hw = BigInt(payload.batch.highWatermark);
    metrics.partitions[partition] = {
      committed: cursor.committed.toString(),
      highWatermark: hw.toString(),
      lag: Number(hw > cursor.committed ? hw - cursor.committed : 0n),
    };
    emit({
      type: 'batch',
      partition,
      first: first.toString(),
      last: last.toString(),
      rows: report.rows,
      messages: report.messages,
      replay: intent !== undefined,
      deadLetters: dead,
      dropped,
      retries: report.retries,
    });
    await payload.heartbeat();
  };

  const eachBatch = async (payload: EachBatchPayload): Promise<void> => {
    const { batch, resolveOffset, isRunning, isStale } = payload;
    const partition = batch.partition;
    if (metrics.fatal !== undefined) throw new Error(`the consumer stopped: ${metrics.fatal}`);
    inFlight++;
    let cursor: Cursor | undefined;
    // Every record taken is resolved, but kafkajs's resolveOffset parses offsets into Longs
    // three times (about 0.5 µs a record), and only the last one resolved counts. So the
    // latest record taken waits here and is resolved before anything awaits, returns or
    // throws: kafkajs finds the same resolved offset wherever it can look.
    let unresolved: string | undefined;
    const settle = (): void => {
      if (unresolved === undefined) return;
      const offset = unresolved;
      unresolved = undefined;
      resolveOffset(offset);
    };
    try {
      cursor = await cursorFor(partition);
      if (cursor.rewindTo < 0n && batch.messages.length > 0) cursor.rewindTo = BigInt(batch.messages[0]!.offset);
      for (let i = 0; i < batch.messages.length; i++) {
        const m = batch.messages[i]!;
        // (isStale looks the partition up in a map: not for every record.)
        if (closed || ((i & 255) === 0 && (!isRunning() || isStale()))) {
          settle();
          forget(partition); // records taken but not written are read again
          return;
        }
        const offset = BigInt(m.offset);
        if (offset < cursor.committed) {
          unresolved = m.offset; // written and committed before (a seek back)
          continue;
        }
        // A replayed range whose last records are gone (retention): cut it where it ends.
        if (cursor.intent && offset > cursor.intent.last) {
          settle();
          if (cursor.open.length > 0) await writeOpen(payload, cursor);
          else cursor.intent = undefined;
        }
        cursor.open.push(inputMessage(m, offset));
        cursor.openBytes += m.value?.length ?? 0;
        unresolved = m.offset;
        const full = cursor.intent ? offset >= cursor.intent.last : cursor.open.length >= maxRows || cursor.openBytes >= maxBytes;
        if (full) {
          settle();
          await writeOpen(payload, cursor);
        }
      }
      settle();
      // End of the fetch: write what is open, unless a replayed range is still incomplete.
      if (cursor.open.length > 0 && !cursor.intent && isRunning() && !isStale() && !closed) await writeOpen(payload, cursor);
      updateHighWatermark(batch, cursor);
    } catch (err) {
      settle();
      forget(partition);
      if (closed) return; // shutting down: what was not committed is read again later
      // kafkajs keeps the offsets resolved so far and would fetch after them; records
      // taken but not committed must be read again, so move the fetch position back.
      if (cursor && cursor.rewindTo >= 0n) {
        try {
          consumer?.seek({ topic, partition, offset: cursor.rewindTo.toString() });
        } catch {
          // Not running any more: the next run starts from the committed offsets anyway.
        }
      }
      if (isOwnFatal(err)) {
        metrics.fatal = (err as Error)?.message ?? String(err);
        emit({ type: 'fatal', error: metrics.fatal });
      }
      throw err;
    } finally {
      inFlight--;
      if (inFlight === 0) {
        const w = idleWaiters;
        idleWaiters = [];
        for (const r of w) r();
      }
    }
  };

  const updateHighWatermark = (batch: Batch, cursor: Cursor): void => {
    if (cursor.committed < 0n) return;
    const hw = BigInt(batch.highWatermark);
    metrics.partitions[batch.partition] = {
      committed: cursor.committed.toString(),
      highWatermark: hw.toString(),
      lag: Number(hw > cursor.committed ? hw - cursor.committed : 0n),
    };
  };

  /**
   * Reads the assigned partitions' ends and committed offsets from the cluster
   * ({@link fetchConsumerLag}) into `metrics.partitions`: between fetches, and above all
   * while paused, the last batch's high watermark is old. Neither value moves back
   * (a batch may commit while the check is under way). A failed check changes nothing.
   */
  const checkLag = async (): Promise<void> => {
    if (admin === undefined || assigned.length === 0) return;
    const lag = await fetchConsumerLag(admin, cfg.group, topic);
    for (const p of lag.partitions) {
      if (!assigned.includes(p.partition)) continue;
      const had = metrics.partitions[p.partition];
      const committed = maxOffset(had?.committed, p.committed ?? p.low);
      const hw = maxOffset(had?.highWatermark, p.high);
      metrics.partitions[p.partition] = { committed: committed.toString(), highWatermark: hw.toString(), lag: Number(hw > committed ? hw - committed : 0n) };
    }
  };
  const scheduleLagCheck = (): void => {
    const every = options.lagCheckMs ?? DEFAULT_LAG_CHECK_MS;
    if (every <= 0 || closed) return;
    lagTimer = setTimeout(() => {
      void checkLag()
        .catch(() => undefined)
        .finally(scheduleLagCheck);
    }, every);
    lagTimer.unref?.();
  };

  const runConsumer = async (): Promise<void> => {
    const c = kafka.consumer({
      groupId: cfg.group,
      sessionTimeout: options.sessionTimeoutMs ?? 30_000,
      heartbeatInterval: options.heartbeatIntervalMs ?? 3000,
      maxWaitTimeInMs: options.fetchMaxWaitMs ?? DEFAULT_FETCH_MAX_WAIT_MS,
      minBytes: options.fetchMinBytes ?? DEFAULT_FETCH_MIN_BYTES,
      maxBytesPerPartition: options.maxBytesPerPartition ?? 1 << 20,
      maxBytes: options.maxBytes ?? 4 << 20,
      allowAutoTopicCreation: false,
      retry: {
        retries: 8,
        initialRetryTime: 300,
        maxRetryTime: 5000,
        // A non-retriable error of the pipeline's own (a schema or programming error) stops the consumer.
        restartOnFailure: async () => metrics.fatal === undefined,
      },
    });
    c.on(c.events.GROUP_JOIN, (e) => {
      join++;
      committedCache = undefined;
      const partitions = e.payload.memberAssignment[topic] ?? [];
      assigned = partitions;
      for (const p of Object.keys(metrics.partitions).map(Number)) if (!partitions.includes(p)) delete metrics.partitions[p];
      for (const p of [...cursors.keys()]) if (!partitions.includes(p)) cursors.delete(p);
      emit({ type: 'joined', memberId: e.payload.memberId, partitions });
    });
    c.on(c.events.CRASH, (e) => {
      metrics.crashes++;
      const error = e.payload.error as Error;
      emit({ type: 'crash', error: error?.message ?? String(error), restart: e.payload.restart });
      if (closed || metrics.fatal !== undefined) return;
      // kafkajs restarts itself after retriable crashes; after the others start anew.
      if (!e.payload.restart) {
        restartTimer = setTimeout(() => {
          void restart();
        }, 1000 + Math.random() * 2000);
        restartTimer.unref?.();
      }
    });
    consumer = c;
    join++;
    committedCache = undefined;
    await c.connect();
    await c.subscribe({ topic, fromBeginning: true });
    await c.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: options.partitionsConsumedConcurrently ?? 3,
      eachBatch,
    });
  };

  const restart = async (): Promise<void> => {
    if (closed) return;
    const old = consumer;
    consumer = undefined;
    await old?.disconnect().catch(() => undefined);
    try {
      await runConsumer();
    } catch (err) {
      emit({ type: 'crash', error: (err as Error).message, restart: true });
      if (!closed) {
        restartTimer = setTimeout(() => void restart(), 3000);
        restartTimer.unref?.();
      }
    }
  };

  return {
    metrics,
    async start(): Promise<void> {
      // Read before Kafka is reached: a store error is the store's, not Kafka's.
      pipeline ??= {
        targets: { store: options.store, retention: options.retention ?? (await readRetention(options.store)), publishDeadLetters },
        maxMessageBytes: cfg.maxMessageBytes,
        retryInitialDelayMs: options.retryInitialDelayMs ?? 200,
        retryMaxDelayMs: options.retryMaxDelayMs ?? 5000,
      };
      try {
        admin = kafka.admin();
        await admin.connect();
        await ensureTopics(admin, cfg);
        dlqProducer = newDlqProducer();
        await dlqProducer.connect();
        await runConsumer();
        if (lagTimer === undefined) scheduleLagCheck();
      } catch (err) {
        // Leave nothing half-connected: start may be called again.
        await consumer?.disconnect().catch(() => undefined);
        await dlqProducer?.disconnect().catch(() => undefined);
        await admin?.disconnect().catch(() => undefined);
        consumer = undefined;
        dlqProducer = undefined;
        admin = undefined;
        throw kafkaUnavailable(cfg, err);
      }
    },
    async flush(): Promise<void> {
      if (inFlight === 0) return;
      await new Promise<void>((r) => idleWaiters.push(r));
    },
    async shutdown(): Promise<void> {
      if (closed) return;
      closed = true;
      if (restartTimer) clearTimeout(restartTimer);
      if (lagTimer) clearTimeout(lagTimer);
      abort.abort();
      await consumer?.disconnect().catch(() => undefined);
      await dlqProducer?.disconnect().catch(() => undefined);
      await admin?.disconnect().catch(() => undefined);
    },
  };
}

/** The larger of an offset kept as a decimal string (or none) and another. */
function maxOffset(kept: string | undefined, seen: string): bigint {
  const a = kept === undefined ? -1n : BigInt(kept);
  const b = BigInt(seen);
  return a > b ? a : b;
}

/** The pipeline's view of kafkajs record `m`, whose offset was parsed already (`offset`). */
function inputMessage(m: KafkaMessage, offset: bigint): InputMessage {
  return {
    offset,
    key: m.key,
    value: m.value,
    timestampMs: Number(m.timestamp),
    headers: (m as { headers?: Record<string, unknown> }).headers ?? {},
  };
}

/** Errors the pipeline throws on purpose as non-retriable (not Kafka's, not a rebalance). */
function isOwnFatal(err: unknown): boolean {
  const e = err as { name?: string; retriable?: unknown; code?: unknown };
  if (typeof e?.name === 'string' && e.name.startsWith('KafkaJS')) return false;
  if (e?.name === 'AbortError') return false;
  return e?.retriable !== true;
}
