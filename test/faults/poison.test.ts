// Fault 4: poison records (invalid JSON, contract violations, a valid event with an unknown
// field nested 100,000 arrays deep, a lone UTF-16 surrogate, events older than the store's
// retention, oversized, invalid UTF-8, empty) among valid events. Each lands in the
// dead-letter topic AND the dead_letters table with its reason and its original payload;
// every valid event is stored once.
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { Partitioners, type Admin, type Message, type Producer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafka, createKafkaConsumer, type KafkaConsumer } from '../../ingest/index.ts';
import { openMigratedStore, type Store } from '../../store/index.ts';
import { createTopicsAndWait, ensureKafka, uniqueTopicName } from '../services/kafka.ts';
import { connectAdmin, countEvents, kafkaEnv, makeEvents, tempDir, testConfig, waitFor, waitForCaughtUp } from './support.ts';

const VALID = 6000;
// Room for the 200 KB deeply nested record, which must be judged as an event, not as too large.
const MAX_MESSAGE_BYTES = 262_144;

interface Poison {
  reason: string;
  message: Message;
}

function poisonRecords(tag: string): Poison[] {
  const valid = () => ({ ...makeEvents(1, tag)[0]! }) as Record<string, unknown>;
  const out: Poison[] = [];
  for (let i = 0; i < 5; i++) out.push({ reason: 'not_json', message: { key: `p${i}`, value: `{"event_id": "oops ${i}",` } });
  const violations: unknown[] = [
    { event_type: 'boot', ts: Date.now() * 1000, source: 'server' }, // no event_id
    { ...valid(), event_type: 'reboot' }, // unknown type
    { ...valid(), session_key: 'raw-session-id-not-a-keyed-hash' }, // a raw id is never stored
    { ...valid(), ts: 'yesterday' },
    [1, 2, 3], // not an object
  ];
  violations.forEach((v, i) => out.push({ reason: 'invalid_event', message: { key: `v${i}`, value: JSON.stringify(v) } }));
  // Serialising it recurses once per level: it used to throw out of the pipeline and stop the consumer for good.
  const deep = 100_000;
  out.push({ reason: 'invalid_event', message: { key: 'deep', value: `${JSON.stringify(valid()).slice(0, -1)},"deep":${'['.repeat(deep)}${']'.repeat(deep)}}` } });
  for (let i = 0; i < 3; i++) {
    out.push({ reason: 'too_large', message: { key: `big${i}`, value: JSON.stringify({ ...valid(), attrs: { blob: 'x'.repeat(MAX_MESSAGE_BYTES + 100 * i) } }) } });
  }
  for (let i = 0; i < 2; i++) out.push({ reason: 'not_utf8', message: { key: `u${i}`, value: Buffer.from([0x7b, 0xc3, 0x28, 0x7d, i]) } });
  for (let i = 0; i < 2; i++) out.push({ reason: 'empty', message: { key: `e${i}`, value: null } });
  // Older than the store's retention (90 days): the TTL would drop them unseen at insert.
  out.push({ reason: 'expired', message: { key: 'old0', value: JSON.stringify({ ...valid(), ts: 978_307_200_001_000 }) } });
  out.push({ reason: 'expired', message: { key: 'old1', value: JSON.stringify({ ...valid(), ts: Date.now() * 1000 - 100 * 86_400e6 }) } });
  // A lone UTF-16 surrogate (JSON "\ud800" escape): refused by validation, naming the field, not by the store.
  out.push({ reason: 'invalid_event', message: { key: 'lone0', value: JSON.stringify({ ...valid(), service: 'PLACEHOLDER' }).replace('"PLACEHOLDER"', '"lone\\ud800surrogate"') } });
  return out;
}

/** Closes what a describe below opened, deletes its topics and group, removes its data directory (any part may be missing). */
async function tearDown(parts: {
  dlqReader?: { disconnect(): Promise<void> } | undefined;
  consumer?: KafkaConsumer | undefined;
  producer?: Producer | undefined;
  store?: Store | undefined;
  admin?: Admin | undefined;
  topic: string;
  dataDir: string;
}): Promise<void> {
  await parts.dlqReader?.disconnect().catch(() => undefined);
  await parts.consumer?.shutdown();
  await parts.producer?.disconnect().catch(() => undefined);
  await parts.store?.close();
  if (parts.admin) {
    await parts.admin.deleteGroups([`${parts.topic}-dlq-reader`]).catch(() => undefined);
    await parts.admin.deleteTopics({ topics: [parts.topic, `${parts.topic}.dlq`] }).catch(() => undefined);
    await parts.admin.disconnect();
  }
  rmSync(parts.dataDir, { recursive: true, force: true });
}

describe('poison records', () => {
  const topic = uniqueTopicName('fault-poison');
  const dlqTopic = `${topic}.dlq`;
  const dataDir = tempDir('fault-poison');
  let admin: Admin;
  let store: Store;
  let producer: Producer;
  let consumer: KafkaConsumer;
  let dlqReader: ReturnType<ReturnType<typeof createKafka>['consumer']> | undefined;
  let kafka: NonNullable<ReturnType<typeof testConfig>['kafka']>;

  beforeAll(async () => {
    const { brokers } = await ensureKafka();
    const config = testConfig(kafkaEnv(brokers, topic, { KAFKA_MAX_MESSAGE_BYTES: String(MAX_MESSAGE_BYTES) }), dataDir);
    kafka = config.kafka!;
    admin = await connectAdmin(brokers);
    store = await openMigratedStore(config);
    consumer = createKafkaConsumer({ kafka, store, sessionTimeoutMs: 10_000, maxBatchRows: 1000 });
    await consumer.start(); // provisions both topics
    producer = createKafka(kafka, { clientId: 'fault-poison' }).producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
  }, 600_000);

  afterAll(() => tearDown({ dlqReader, consumer, producer, store, admin, topic, dataDir }));

  it('sends each poison record to the dead-letter topic and table with its reason while the rest flows', async () => {
    const poison = poisonRecords(topic);
    const valid = makeEvents(VALID, topic).map((e): Message => ({ key: e.session_key || e.event_id, value: JSON.stringify(e) }));
    // Poison spread evenly through the stream, sent in many produce requests (many batches).
    const at = new Map(poison.map((p, k) => [Math.floor(((k + 1) * VALID) / (poison.length + 1)), p.message]));
    const stream: Message[] = [];
    valid.forEach((m, i) => {
      stream.push(m);
      const bad = at.get(i);
      if (bad) stream.push(bad);
    });
    expect(stream).toHaveLength(VALID + poison.length);
    for (let i = 0; i < stream.length; i += 500) await producer.send({ topic, acks: -1, messages: stream.slice(i, i + 500) });

    await waitForCaughtUp(admin, `${topic}-writer`, topic, stream.length, 120_000);

    // Every valid event once.
    expect(await countEvents(store, topic)).toEqual({ rows: VALID, unique: VALID, final: VALID });

    // The table: one row per poison record, with reason, original payload and size.
    const rows = await store.query<{ origin: string; position: number; reason: string; detail: string; payload: string; payload_bytes: number }>(
      `SELECT origin, position, reason, detail, payload, payload_bytes FROM dead_letters WHERE source = 'kafka' AND startsWith(origin, {p:String}) ORDER BY origin, position`,
      { p: `${topic}:` },
    );
    expect(rows).toHaveLength(poison.length);
    const byReason = (list: Array<{ reason: string }>) => list.reduce<Record<string, number>>((m, r) => ({ ...m, [r.reason]: (m[r.reason] ?? 0) + 1 }), {});
    expect(byReason(rows)).toEqual(byReason(poison));
    expect(consumer.metrics.deadLetters).toEqual(byReason(poison));
    for (const p of poison) {
      const value = p.message.value;
      const bytes = value === null ? Buffer.alloc(0) : Buffer.isBuffer(value) ? value : Buffer.from(value);
      const row = rows.find((r) => r.reason === p.reason && r.payload_bytes === bytes.length && (p.reason === 'not_utf8' ? r.payload === bytes.toString('base64') : r.payload === bytes.toString('utf8')));
      expect(row, `${p.reason} ${String(p.message.key)}`).toBeDefined();
    }
    expect(rows.find((r) => r.detail.includes('session_key'))?.reason).toBe('invalid_event');
    expect(rows.find((r) => r.detail.includes('too_deep'))).toMatchObject({ reason: 'invalid_event', detail: expect.stringContaining('nested deeper than 64 levels') });
    expect(rows.filter((r) => r.reason === 'too_large').every((r) => r.detail.includes(`max ${MAX_MESSAGE_BYTES}`))).toBe(true);
    expect(rows.find((r) => r.payload.includes('lone\\ud800surrogate'))?.detail).toMatch(/^service lone_surrogate: /);
    expect(rows.filter((r) => r.reason === 'expired').map((r) => r.detail)).toEqual([
      expect.stringMatching(/older than the store's 90-day retention/),
      expect.stringMatching(/older than the store's 90-day retention/),
    ]);

    // The topic: the original records, headed with reason and origin.
    dlqReader = createKafka(kafka, { clientId: 'fault-poison-dlq' }).consumer({ groupId: `${topic}-dlq-reader`, maxWaitTimeInMs: 200 });
    const got: Array<{ reason: string; origin: string; value: Buffer | null; key: string }> = [];
    await dlqReader.connect();
    await dlqReader.subscribe({ topic: dlqTopic, fromBeginning: true });
    await dlqReader.run({
      eachMessage: async ({ message }) => {
        got.push({
          reason: String(message.headers?.['continuity.dlq.reason'] ?? ''),
          origin: String(message.headers?.['continuity.dlq.origin'] ?? ''),
          value: message.value,
          key: message.key?.toString() ?? '',
        });
      },
    });
    await waitFor('the dead-letter topic', () => (got.length >= poison.length ? true : undefined), 60_000);
    expect(got).toHaveLength(poison.length);
    expect(byReason(got)).toEqual(byReason(poison));
    for (const p of poison) {
      const hit = got.find((g) => g.key === String(p.message.key));
      expect(hit?.reason).toBe(p.reason);
      const original = p.message.value === null ? null : Buffer.isBuffer(p.message.value) ? p.message.value : Buffer.from(p.message.value);
      if (original === null) expect(hit?.value === null || hit?.value?.length === 0).toBe(true);
      else expect(hit?.value?.equals(original)).toBe(true);
      expect(hit?.origin).toMatch(new RegExp(`^${topic}:\\d+:\\d+$`));
    }
  }, 240_000);
});

describe('a dead letter the dead-letter topic refuses', () => {
  const topic = uniqueTopicName('fault-dlq-refuses');
  const dlqTopic = `${topic}.dlq`;
  const dataDir = tempDir('fault-dlq-refuses');
  const DLQ_MAX_BYTES = 16_384;
  let admin: Admin;
  let store: Store;
  let producer: Producer;
  let consumer: KafkaConsumer;
  let dlqReader: ReturnType<ReturnType<typeof createKafka>['consumer']> | undefined;
  let kafka: NonNullable<ReturnType<typeof testConfig>['kafka']>;
  const refusals: Array<{ origin: string; refusal: string; outcome: string }> = [];

  beforeAll(async () => {
    const { brokers } = await ensureKafka();
    const config = testConfig(kafkaEnv(brokers, topic, { KAFKA_MAX_MESSAGE_BYTES: String(MAX_MESSAGE_BYTES) }), dataDir);
    kafka = config.kafka!;
    admin = await connectAdmin(brokers);
    // the dead-letter topic exists already, with a smaller max.message.bytes than the topic's
    await createTopicsAndWait(admin, [{ topic: dlqTopic, numPartitions: 1, configEntries: [{ name: 'max.message.bytes', value: String(DLQ_MAX_BYTES) }] }]);
    store = await openMigratedStore(config);
    consumer = createKafkaConsumer({
      kafka,
      store,
      sessionTimeoutMs: 10_000,
      maxBatchRows: 1000,
      onEvent: (e) => void (e.type === 'dead_letter_refused' && refusals.push(e)),
    });
    await consumer.start();
    producer = createKafka(kafka, { clientId: 'fault-dlq-refuses' }).producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
  }, 600_000);

  afterAll(() => tearDown({ dlqReader, consumer, producer, store, admin, topic, dataDir }));

  it('sends it without its value, keeps it whole in the table, and goes on: the events after it are stored', async () => {
    // not UTF-8 and incompressible: under the topic's limit, over the dead-letter topic's
    const big = randomBytes(40_000);
    big[0] = 0xff;
    const small = Buffer.from([0x7b, 0xc3, 0x28, 0x7d]);
    const valid = makeEvents(300, topic).map((e): Message => ({ key: 'one-partition', value: JSON.stringify(e) }));
    // one key: one partition, so every valid event after the refused letter waits for it
    await producer.send({ topic, acks: -1, messages: [valid[0]!, { key: 'one-partition', value: big }, { key: 'one-partition', value: small }, ...valid.slice(1)] });
    await waitForCaughtUp(admin, `${topic}-writer`, topic, valid.length + 2, 120_000);
    expect(await countEvents(store, topic)).toEqual({ rows: valid.length, unique: valid.length, final: valid.length });
    expect(consumer.metrics.paused).toBe(false);
    expect(consumer.metrics.deadLettersRefusedByTopic).toBe(1);
    expect(refusals).toEqual([{ type: 'dead_letter_refused', origin: expect.stringMatching(new RegExp(`^${topic}:\\d+:1$`)), refusal: 'MESSAGE_TOO_LARGE', outcome: 'omitted' }]);
    // the table keeps both letters with their payloads
    const rows = await store.query<{ position: number; reason: string; payload: string; payload_bytes: number }>(
      `SELECT position, reason, payload, payload_bytes FROM dead_letters WHERE source = 'kafka' AND startsWith(origin, {p:String}) ORDER BY position`,
      { p: `${topic}:` },
    );
    expect(rows.map((r) => [Number(r.position), r.reason, Number(r.payload_bytes)])).toEqual([
      [1, 'not_utf8', big.length],
      [2, 'not_utf8', small.length],
    ]);
    expect(rows[0]!.payload).toBe(big.toString('base64'));
    // the topic: the small one as it was, the big one without its value
    dlqReader = createKafka(kafka, { clientId: 'fault-dlq-refuses-reader' }).consumer({ groupId: `${topic}-dlq-reader`, maxWaitTimeInMs: 200 });
    const got: Array<{ origin: string; omitted: string; value: Buffer | null }> = [];
    await dlqReader.connect();
    await dlqReader.subscribe({ topic: dlqTopic, fromBeginning: true });
    await dlqReader.run({
      eachMessage: async ({ message }) =>
        void got.push({
          origin: String(message.headers?.['continuity.dlq.origin'] ?? ''),
          omitted: String(message.headers?.['continuity.dlq.value-omitted'] ?? ''),
          value: message.value,
        }),
    });
    await waitFor('the dead-letter topic', () => (got.length >= 2 ? true : undefined), 60_000);
    const bigCopy = got.find((g) => g.origin.endsWith(':1'));
    expect(bigCopy?.omitted).toBe('MESSAGE_TOO_LARGE');
    expect(bigCopy?.value?.toString()).toMatch(/^value omitted: the dead-letter topic refused the record with its 40000 bytes \(MESSAGE_TOO_LARGE\); the dead_letters table keeps it/);
    expect(got.find((g) => g.origin.endsWith(':2'))?.value?.equals(small)).toBe(true);
  }, 240_000);
});
