// A round trip through the real broker (scripts/kafka.sh, or KAFKA_BROKERS): the
// client features the ingest path relies on, checked against Kafka itself.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CompressionTypes,
  Kafka,
  Partitioners,
  logLevel,
  type Admin,
  type Consumer,
  type PartitionMetadata,
  type Producer,
} from 'kafkajs';
import { ensureKafka, uniqueTopicName } from '../services/kafka.ts';

const PARTITIONS = 3;
const SESSIONS = 8;
const PER_SESSION = 25;
const TOTAL = SESSIONS * PER_SESSION;

interface Received {
  partition: number;
  offset: string;
  key: string;
  seq: number;
  header: string;
}

describe('kafka broker round trip (kafkajs)', () => {
  let kafka: Kafka;
  let admin: Admin;
  let producer: Producer;
  const consumers: Consumer[] = [];
  const topic = uniqueTopicName('it-kafka-broker');
  const groupId = `${topic}-group`;

  beforeAll(async () => {
    const { brokers } = await ensureKafka();
    kafka = new Kafka({
      clientId: 'continuity-it',
      brokers,
      // The first use of the group and producer-id coordinators is answered with
      // retriable "coordinator loading" errors that kafkajs logs at ERROR and retries.
      logLevel: logLevel.NOTHING,
      retry: { retries: 8, initialRetryTime: 100 },
    });
    admin = kafka.admin();
    await admin.connect();
    producer = kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    await producer.connect();
  }, 600_000);

  afterAll(async () => {
    for (const c of consumers) await c.disconnect().catch(() => undefined);
    await producer?.disconnect().catch(() => undefined);
    if (admin) {
      await admin.deleteGroups([groupId]).catch(() => undefined);
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.disconnect().catch(() => undefined);
    }
  });

  function newConsumer(): Consumer {
    const c = kafka.consumer({ groupId, sessionTimeout: 10_000, heartbeatInterval: 1_000, maxWaitTimeInMs: 200 });
    consumers.push(c);
    return c;
  }

  /** Runs a consumer of the group until `want` messages arrived; commits after each batch is "written". */
  async function consume(consumer: Consumer, want: number, timeoutMs: number): Promise<Received[]> {
    const got: Received[] = [];
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`received ${got.length} of ${want} messages`)), timeoutMs);
      consumer
        .run({
          autoCommit: false,
          eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
            for (const m of batch.messages) {
              const value = JSON.parse(m.value?.toString() ?? 'null') as { key: string; seq: number };
              got.push({
                partition: batch.partition,
                offset: m.offset,
                key: m.key?.toString() ?? '',
                seq: value.seq,
                header: m.headers?.['event-id']?.toString() ?? '',
              });
              resolveOffset(m.offset);
            }
            // Commit only after the batch is processed (DESIGN §5): next offset = last + 1.
            await consumer.commitOffsets([
              { topic: batch.topic, partition: batch.partition, offset: (BigInt(batch.lastOffset()) + 1n).toString() },
            ]);
            await heartbeat();
            if (got.length >= want) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
    return got;
  }

  it('creates a topic with 3 partitions', async () => {
    expect(await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS }], waitForLeaders: true })).toBe(true);
    const meta = await admin.fetchTopicMetadata({ topics: [topic] });
    expect(meta.topics[0]?.partitions).toHaveLength(PARTITIONS);
  });

  it('produces idempotently (acks=all, gzip), partitions by key, and a group reads everything back', async () => {
    const messages = [];
    for (let seq = 0; seq < PER_SESSION; seq++) {
      for (let s = 0; s < SESSIONS; s++) {
        const key = `session-${s}`;
        messages.push({ key, value: JSON.stringify({ key, seq }), headers: { 'event-id': `${key}/${seq}` } });
      }
    }
    const records = await producer.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages });
    expect(records.every((r) => r.errorCode === 0)).toBe(true);

    // Offsets on the broker add up to what was sent.
    const ends = await admin.fetchTopicOffsets(topic);
    expect(ends.reduce((n, p) => n + Number(p.high) - Number(p.low), 0)).toBe(TOTAL);

    const got = await consume(newConsumer(), TOTAL, 20_000);
    expect(got).toHaveLength(TOTAL);
    expect(new Set(got.map((m) => m.header)).size).toBe(TOTAL);

    // Key-based partitioning: one partition per key, the Java client's murmur2 choice,
    // and each key's messages in the order they were sent.
    const partitionMetadata: PartitionMetadata[] = (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0]!
      .partitions;
    const partitioner = Partitioners.DefaultPartitioner();
    const byKey = new Map<string, Received[]>();
    for (const m of got) byKey.set(m.key, [...(byKey.get(m.key) ?? []), m]);
    expect(byKey.size).toBe(SESSIONS);
    for (const [key, list] of byKey) {
      expect(new Set(list.map((m) => m.partition)).size).toBe(1);
      expect(list[0]!.partition).toBe(partitioner({ topic, partitionMetadata, message: { key, value: null } }));
      expect(list.map((m) => m.seq)).toEqual([...Array(PER_SESSION).keys()]);
    }
    expect(new Set(got.map((m) => m.partition)).size).toBeGreaterThan(1);

    // The group's committed offsets are the end of every partition.
    await consumers[0]!.disconnect();
    const committed = await admin.fetchOffsets({ groupId, topics: [topic] });
    const committedBy = new Map(committed[0]!.partitions.map((p) => [p.partition, p.offset]));
    for (const p of ends) expect(committedBy.get(p.partition)).toBe(p.high);
  });

  it('a restarted member of the group resumes after the committed offsets', async () => {
    const key = 'session-late';
    await producer.send({
      topic,
      acks: -1,
      compression: CompressionTypes.GZIP,
      messages: [{ key, value: JSON.stringify({ key, seq: 0 }), headers: { 'event-id': `${key}/0` } }],
    });
    const got = await consume(newConsumer(), 1, 20_000);
    expect(got.map((m) => m.header)).toEqual([`${key}/0`]);
  });
});
