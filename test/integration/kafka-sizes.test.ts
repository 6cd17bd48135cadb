// Event and request sizes on the gateway → Kafka path, against the real broker: an
// event over KAFKA_MAX_MESSAGE_BYTES is refused for good before it is produced, a
// produce request never holds more than the topic's max.message.bytes, and when the
// broker still refuses a request as too large, only the event it cannot take is
// refused: the others are stored once, and the gateway stays ready for everyone.
import { randomBytes, randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGateway, createKafka, createKafkaProducerSink, mapOtlpRecord, type KafkaProducerSink } from '../../ingest/index.ts';
import type { ContinuityEvent } from '../../schema/index.ts';
import { connectAdmin, kafkaEnv, makeEvents, testConfig, topicRecords, waitFor } from '../faults/support.ts';
import { createTopicsAndWait, ensureKafka, uniqueTopicName } from '../services/kafka.ts';

let brokers: string[];
let admin: Admin;
const topics: string[] = [];
const sinks: KafkaProducerSink[] = [];

beforeAll(async () => {
  brokers = (await ensureKafka()).brokers;
  admin = await connectAdmin(brokers);
}, 600_000);

afterAll(async () => {
  for (const s of sinks) await s.shutdown();
  if (!admin) return;
  await admin.deleteTopics({ topics: topics.flatMap((t) => [t, `${t}.dlq`]) }).catch(() => undefined);
  await admin.disconnect();
});

/** A topic of its own; `maxMessageBytes` sets the topic's max.message.bytes (the broker's default otherwise). */
async function newTopic(prefix: string, maxMessageBytes?: number): Promise<string> {
  const topic = uniqueTopicName(prefix);
  topics.push(topic);
  if (maxMessageBytes !== undefined) {
    await createTopicsAndWait(admin, [{ topic, numPartitions: 3, configEntries: [{ name: 'max.message.bytes', value: String(maxMessageBytes) }] }]);
  }
  return topic;
}

function sinkFor(topic: string, options: Omit<Parameters<typeof createKafkaProducerSink>[0], 'kafka'> = {}, env: Record<string, string> = {}): KafkaProducerSink {
  const sink = createKafkaProducerSink({ kafka: testConfig(kafkaEnv(brokers, topic, env), tmpdir()).kafka!, ...options });
  sinks.push(sink);
  return sink;
}

/**
 * Every record value of `topic`, read from the beginning: as many as the topic's
 * offsets say it holds (a second copy of a record counts there too), so the caller's
 * count of `expected` sees duplicates without waiting for them.
 */
async function readAll(topic: string, expected: number): Promise<string[]> {
  const held = (await admin.fetchTopicOffsets(topic)).reduce((n, p) => n + Number(p.high) - Number(p.low), 0);
  const consumer = createKafka(testConfig(kafkaEnv(brokers, topic), tmpdir()).kafka!, { clientId: 'it-sizes-reader' }).consumer({ groupId: `${topic}-reader`, maxWaitTimeInMs: 200 });
  const values: string[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => void values.push(message.value!.toString()) });
    const want = Math.max(expected, held);
    await waitFor(`${want} records of ${topic}`, () => (values.length >= want ? true : undefined), 30_000);
  } finally {
    await consumer.disconnect();
  }
  return values;
}

/** A boot event of `session` whose attrs carry `blob`. */
function withBlob(session: string, blob: string): ContinuityEvent {
  const [e] = makeEvents(1, 'it-sizes');
  return { ...e!, session_key: session, attrs: { blob } };
}

/** Random bytes as base64: what gzip cannot make much smaller (about 3/4 of the length). */
const incompressible = (chars: number): string => randomBytes(Math.ceil((chars * 3) / 4)).toString('base64').slice(0, chars);

describe('the gateway in front of Kafka: events over the size the consumer takes', () => {
  it('refuses a 2 MiB event with a coded 413 that is not retriable, and stays ready for everyone else', async () => {
    const topic = await newTopic('it-sizes-gw');
    const sink = sinkFor(topic);
    await sink.start();
    const { app } = await createGateway({ sink, mapOtlpRecord });
    try {
      const now = Date.now() * 1000;
      const boot = (extra: Record<string, unknown>) => ({ event_id: randomUUID(), event_type: 'boot', ts: now, source: 'server', service: 'it-sizes', boot_id: 'boot-it-sizes', pid: 1, ...extra });
      const big = app.inject({ method: 'POST', url: '/v1/events', payload: [boot({ attrs: { blob: incompressible(2 << 20) } })] });
      const bystanders = Array.from({ length: 5 }, () => app.inject({ method: 'POST', url: '/v1/events', payload: [boot({})] }));
      const res = await big;
      expect(res.statusCode).toBe(413);
      expect(res.headers['retry-after']).toBeUndefined();
      const body = res.json();
      expect(body).toMatchObject({ code: 'CONT_ERR_EVENT_TOO_LARGE', accepted: 0, rejected: [{ index: 0, issues: [{ code: 'too_large' }] }] });
      expect(body.rejected[0].issues[0].message).toMatch(/KAFKA_MAX_MESSAGE_BYTES/);
      for (const b of await Promise.all(bystanders)) expect(b.statusCode).toBe(200);
      expect(sink.ready()).toBe(true);
      expect((await app.inject({ url: '/readyz' })).statusCode).toBe(200);

      // Compressible: the broker would take it (gzip), but the consumer dead-letters a
      // value over KAFKA_MAX_MESSAGE_BYTES, so the gateway must not answer "stored".
      const compressible = await app.inject({ method: 'POST', url: '/v1/events', payload: [boot({ attrs: { blob: 'x'.repeat(1.5 * 1024 * 1024) } }), boot({})] });
      expect(compressible.statusCode).toBe(400);
      expect(compressible.json()).toMatchObject({ code: 'CONT_ERR_EVENT_TOO_LARGE', accepted: 1, rejected: [{ index: 0, issues: [{ code: 'too_large' }] }] });
      expect((await app.inject({ method: 'POST', url: '/v1/events', payload: [boot({})] })).statusCode).toBe(200);
      expect(sink.stats).toMatchObject({ sentEvents: 7, failedSends: 0, rejectedEvents: 2 });
      expect(await topicRecords(admin, topic)).toBe(7);
    } finally {
      await app.close();
    }
  });

  it('refuses an event of exactly one byte over KAFKA_MAX_MESSAGE_BYTES and takes one at the limit', async () => {
    const topic = await newTopic('it-sizes-edge');
    const sink = sinkFor(topic, {}, { KAFKA_MAX_MESSAGE_BYTES: '4096' });
    const base = withBlob('', '');
    const sized = (bytes: number): ContinuityEvent => withBlob('', 'y'.repeat(bytes - Buffer.byteLength(JSON.stringify(base))));
    const atLimit = sized(4096);
    const over = sized(4097);
    expect(Buffer.byteLength(JSON.stringify(atLimit))).toBe(4096);
    const refusals = await sink.accept([over, atLimit, sized(4096 + 2)]);
    expect(refusals).toEqual([
      { index: 0, issue: expect.objectContaining({ path: '', code: 'too_large', message: expect.stringMatching(/4097 bytes.*4096/) }) },
      { index: 2, issue: expect.objectContaining({ code: 'too_large' }) },
    ]);
    expect(sink.stats).toMatchObject({ sentEvents: 1, rejectedEvents: 2, refusedEvents: 0 });
    expect(sink.ready()).toBe(true);
  });
});

describe('produce requests and the broker limit (the topic max.message.bytes)', () => {
  it('never builds a request the broker refuses as too large: requests are cut at the topic limit it reads', async () => {
    const topic = await newTopic('it-sizes-cut', 64 * 1024);
    const sink = sinkFor(topic);
    await sink.start();
    // 40 events of 20 KB that gzip cannot shrink, one session (one partition), accepted
    // at once: coalesced as before, they would make one record batch of about 600 KB.
    const events = Array.from({ length: 40 }, () => withBlob('ab'.repeat(16), incompressible(20_000)));
    const results = await Promise.all(events.map((e) => sink.accept([e])));
    expect(results.every((r) => r === undefined || r.length === 0)).toBe(true);
    expect(sink.stats).toMatchObject({ sentEvents: 40, failedSends: 0, refusedEvents: 0, rejectedEvents: 0, splits: 0 });
    expect(sink.stats.sends).toBeGreaterThanOrEqual(14); // 3 of 20 KB per request at most under 64 KiB
    expect(sink.stats.brokerMaxMessageBytes).toBe(64 * 1024);
    expect(sink.ready()).toBe(true);
  });

  it('when the broker refuses a coalesced request as too large, refuses only the event it cannot take and sends the rest once', async () => {
    const topic = await newTopic('it-sizes-split', 64 * 1024);
    // The sink is told the broker takes 1 MiB batches (as if the topic limit had been
    // lowered after it connected): the request goes out whole and the broker refuses it.
    const sink = sinkFor(topic, { maxRecordBatchBytes: 1 << 20 });
    await sink.start();
    const session = 'cd'.repeat(16);
    const small = Array.from({ length: 30 }, (_, i) => withBlob(session, `small-${i}`));
    const big = withBlob(session, incompressible(100_000)); // under KAFKA_MAX_MESSAGE_BYTES, over the topic's limit even gzipped
    const requests = [small.slice(0, 10), [small[10]!, big, small[11]!], small.slice(12, 20), small.slice(20)];
    const results = await Promise.all(requests.map((r) => sink.accept(r)));
    expect(results[0] ?? []).toEqual([]);
    expect(results[1]).toEqual([{ index: 1, issue: expect.objectContaining({ code: 'too_large', message: expect.stringMatching(/MESSAGE_TOO_LARGE/) }) }]);
    expect(results[2] ?? []).toEqual([]);
    expect(results[3] ?? []).toEqual([]);
    expect(sink.ready()).toBe(true);
    expect(sink.stats).toMatchObject({ sentEvents: 30, rejectedEvents: 1, refusedEvents: 0 });
    expect(sink.stats.splits).toBeGreaterThan(0);
    // One partition, so the refused request stored nothing: every small event exactly once, in order.
    const values = (await readAll(topic, 30)).map((v) => (JSON.parse(v) as ContinuityEvent).attrs.blob);
    expect(values).toEqual(small.map((e) => e.attrs.blob));
    // And the sink keeps working with its new producer.
    await sink.accept([withBlob(session, 'after')]);
    expect(sink.stats.sentEvents).toBe(31);
  });
});
