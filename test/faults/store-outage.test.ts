// Fault 3: the store fails every insert for 30 s while events flow. The consumer pauses
// its partitions, backs off with jitter and keeps its group membership (heartbeats),
// then resumes: nothing lost, nothing duplicated, and the lag returns to zero.
import { rmSync } from 'node:fs';
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaConsumer, createKafkaProducerSink, fetchConsumerLag, type ConsumerEvent, type KafkaConsumer, type KafkaProducerSink } from '../../ingest/index.ts';
import { openMigratedStore, type Store } from '../../store/index.ts';
import { ensureKafka, uniqueTopicName } from '../services/kafka.ts';
import { connectAdmin, countEvents, faultyStore, feed, kafkaEnv, makeEvents, tempDir, testConfig, waitFor, waitForCaughtUp, type FaultyStore } from './support.ts';

const TOTAL = 60_000;
const OUTAGE_MS = 30_000;

describe('store unavailable for 30 s during ingestion', () => {
  const topic = uniqueTopicName('fault-store');
  const dataDir = tempDir('fault-store');
  let admin: Admin;
  let store: Store;
  let faulty: FaultyStore;
  let sink: KafkaProducerSink;
  let consumer: KafkaConsumer;
  const events: ConsumerEvent[] = [];

  beforeAll(async () => {
    const { brokers } = await ensureKafka();
    const config = testConfig(kafkaEnv(brokers, topic), dataDir);
    admin = await connectAdmin(brokers);
    store = await openMigratedStore(config);
    faulty = faultyStore(store);
    sink = createKafkaProducerSink({ kafka: config.kafka! });
    await sink.start();
    consumer = createKafkaConsumer({
      kafka: config.kafka!,
      store: faulty,
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1000,
      retryInitialDelayMs: 200,
      retryMaxDelayMs: 2000,
      onEvent: (e) => events.push(e),
    });
    await consumer.start();
  }, 600_000);

  afterAll(async () => {
    await consumer?.shutdown();
    await sink?.shutdown();
    await store?.close();
    if (admin) {
      await admin.deleteTopics({ topics: [topic, `${topic}.dlq`] }).catch(() => undefined);
      await admin.disconnect();
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('pauses, backs off, resumes: every event once, lag back to zero', async () => {
    const t0 = Date.now();
    // 60,000 events over about 20 s; the outage starts once some have been written.
    const feeding = feed(sink, makeEvents(TOTAL, topic), { chunk: 1000, perSecond: 3000 });
    await waitFor('the first writes', () => (consumer.metrics.rows >= 5000 ? true : undefined), 60_000);
    faulty.failFor(OUTAGE_MS);
    await waitFor('the consumer to pause', () => (consumer.metrics.paused ? true : undefined), 20_000, 50);
    // While the store is down nothing more is committed: the lag grows.
    const during = await waitFor(
      'the lag to grow while the store is down',
      async () => {
        const l = await fetchConsumerLag(admin, `${topic}-writer`, topic);
        return l.total >= 5000 && consumer.metrics.paused ? l : undefined;
      },
      OUTAGE_MS,
    );
    await feeding;

    const lag = await waitForCaughtUp(admin, `${topic}-writer`, topic, TOTAL, OUTAGE_MS + 90_000);
    expect(lag.total).toBe(0);
    await waitFor('the metric lag to reach zero', () => (consumer.metrics.lag() === 0 && !consumer.metrics.paused ? true : undefined), 30_000);

    const counts = await countEvents(store, topic);
    const m = consumer.metrics;
    console.log(
      `[fault-store] ${faulty.failedInserts} failed inserts, ${m.writeRetries} write retries, ${m.pauses} pause(s), ` +
        `${m.batches} batches, lag during ${during.total}; rows ${counts.rows}, unique ${counts.unique}; ${((Date.now() - t0) / 1000).toFixed(1)} s`,
    );
    expect(counts).toEqual({ rows: TOTAL, unique: TOTAL, final: TOTAL });
    expect(faulty.failedInserts).toBeGreaterThan(0);
    expect(m.pauses).toBeGreaterThanOrEqual(1);
    expect(events.some((e) => e.type === 'resumed' && e.pausedMs >= OUTAGE_MS - 5000)).toBe(true);
    // The group kept its member through the outage (heartbeats while backing off): one join, no crash.
    expect(events.filter((e) => e.type === 'joined')).toHaveLength(1);
    expect(m.crashes).toBe(0);
    expect(m.fatal).toBeUndefined();
  }, 240_000);
});
