// Fault 2: the Kafka broker is stopped and started again in the middle of ingestion
// (a broker of this test's own, on its own port and data directory). While it is down
// the gateway answers 503 with Retry-After instead of buffering; clients resend; the
// consumer rides through. Afterwards nothing is lost and nothing is duplicated.
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import type { Admin } from 'kafkajs';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createGateway,
  createKafkaConsumer,
  createKafkaProducerSink,
  mapOtlpRecord,
  type ConsumerEvent,
  type KafkaConsumer,
  type KafkaProducerSink,
} from '../../ingest/index.ts';
import { openMigratedStore, type Store } from '../../store/index.ts';
import { uniqueTopicName } from '../services/kafka.ts';
import {
  connectAdmin,
  countEvents,
  feed,
  kafkaEnv,
  makeEvents,
  startOwnBroker,
  tempDir,
  testConfig,
  topicRecords,
  waitFor,
  waitForCaughtUp,
  type OwnBroker,
} from './support.ts';

const TOTAL = 60_000;

describe('broker restarted during ingestion', () => {
  const topic = uniqueTopicName('fault-broker');
  const dataDir = tempDir('fault-broker');
  let broker: OwnBroker;
  let admin: Admin | undefined;
  let store: Store;
  let sink: KafkaProducerSink;
  let consumer: KafkaConsumer;
  let app: FastifyInstance;
  let url: string;
  const consumerEvents: ConsumerEvent[] = [];

  beforeAll(async () => {
    broker = await startOwnBroker();
    const config = testConfig(kafkaEnv(broker.brokers, topic), dataDir);
    store = await openMigratedStore(config);
    // A short send budget so a stopped broker turns into 503s quickly.
    sink = createKafkaProducerSink({ kafka: config.kafka!, sendRetries: 2, retryAfterMs: 1000, sendTimeoutMs: 4000 });
    await sink.start();
    ({ app } = await createGateway({ sink, mapOtlpRecord }));
    await app.listen({ host: '127.0.0.1', port: 0 });
    const address = app.server.address();
    url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    consumer = createKafkaConsumer({
      kafka: config.kafka!,
      store,
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1000,
      retryMaxDelayMs: 2000,
      onEvent: (e) => consumerEvents.push(e),
    });
    await consumer.start();
  }, 600_000);

  afterAll(async () => {
    await app?.close();
    await consumer?.shutdown();
    await sink?.shutdown();
    await admin?.disconnect().catch(() => undefined);
    await store?.close();
    await broker?.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const post = (events: unknown[], signal?: AbortSignal) =>
    fetch(`${url}/v1/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(events), ...(signal ? { signal } : {}) });

  it('answers 503 while the broker is down, then loses and duplicates nothing', async () => {
    const t0 = Date.now();
    const events = makeEvents(TOTAL, topic);
    const feeding = feed(sink, events, { chunk: 1000, perSecond: 3000 });
    await waitFor('the first writes', () => (consumer.metrics.rows >= 10_000 ? true : undefined), 60_000);

    await broker.stop();
    const stoppedAt = Date.now();
    // The gateway refuses instead of buffering: 503 with Retry-After, /readyz unavailable.
    await waitFor('the sink to notice', () => (!sink.ready() ? true : undefined), 60_000, 50);
    const extra = { ...makeEvents(1, topic)[0]!, event_id: randomUUID() };
    const refused = await post([extra]);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await refused.json()).toMatchObject({ code: 'CONT_ERR_INGEST_UNAVAILABLE' });
    expect((await fetch(`${url}/readyz`)).status).toBe(503);
    // Down for a while longer, so the consumer's connections fail too.
    await new Promise((r) => setTimeout(r, 3000));
    await broker.start();
    const downMs = Date.now() - stoppedAt;

    const fed = await feeding;
    // The refused request, sent again once Kafka is back, is accepted.
    const accepted = await waitFor(
      'the gateway to accept again',
      async () => {
        const res = await post([extra]);
        return res.status === 200 ? res : undefined;
      },
      60_000,
      500,
    );
    expect(await accepted.json()).toEqual({ accepted: 1 });

    admin = await connectAdmin(broker.brokers);
    await waitForCaughtUp(admin, `${topic}-writer`, topic, TOTAL + 1, 180_000);
    const inTopic = await topicRecords(admin, topic);
    const counts = await countEvents(store, topic);
    const dropped = consumer.metrics.drops.duplicate_in_batch ?? 0;
    const replays = consumerEvents.filter((e) => e.type === 'batch' && e.replay).length;
    console.log(
      `[fault-broker] down ${downMs} ms; ${fed.refusals} chunks refused (503) and resent; ${inTopic} records in the topic for ${TOTAL + 1} events; ` +
        `consumer: ${consumer.metrics.crashes} crash/restarts, ${replays} replayed batches, ${dropped} in-batch duplicates; ` +
        `rows ${counts.rows}, unique ${counts.unique}, final ${counts.final}; ${((Date.now() - t0) / 1000).toFixed(1)} s`,
    );
    expect(fed.refusals).toBeGreaterThan(0);
    // Nothing lost, nothing duplicated for any reader (FINAL collapses by event_id).
    expect(counts.unique).toBe(TOTAL + 1);
    expect(counts.final).toBe(TOTAL + 1);
    // The consumer stored each record of the topic exactly once. The topic itself holds
    // a second copy only of a request whose acknowledgement was lost when the broker
    // stopped (the client resent it after the 503); usually there is none.
    expect(counts.rows).toBe(inTopic - dropped);
    expect(consumer.metrics.fatal).toBeUndefined();
  }, 300_000);

  it('answers 503 within its send timeout while the broker hangs (SIGSTOP: connections open, no answers), then accepts the resend', async () => {
    const before = await countEvents(store, topic);
    const events = makeEvents(2, topic).map((e) => ({ ...e, event_id: randomUUID() }));
    broker.signal('SIGSTOP');
    try {
      // Before the send timeout, each request waited 57-98 s for kafkajs to give up, /readyz said ready.
      const refused = await post([events[0]], AbortSignal.timeout(20_000));
      expect(refused.status).toBe(503);
      expect(await refused.json()).toMatchObject({ code: 'CONT_ERR_INGEST_UNAVAILABLE', message: expect.stringMatching(/no acknowledgement within 4000 ms/) });
      expect((await fetch(`${url}/readyz`)).status).toBe(503);
    } finally {
      broker.signal('SIGCONT');
    }
    const accepted = await waitFor(
      'the gateway to accept again after SIGCONT',
      async () => {
        const res = await post(events);
        return res.status === 200 ? res : undefined;
      },
      90_000,
      500,
    );
    expect(await accepted.json()).toEqual({ accepted: 2 });
    await waitFor('the two events in the store', async () => ((await countEvents(store, topic)).final === before.final + 2 ? true : undefined), 120_000, 500);
  }, 300_000);
});
