// Fault 1: the consumer PROCESS is killed with SIGKILL at random moments while 200,000
// events flow through Kafka; it is restarted after each kill. Afterwards every event is
// in the store exactly once: count() = uniqExact(event_id) = 200,000 without FINAL, so
// no batch was written twice (same insert deduplication token on replay) and none was
// lost (offsets committed only after the write), and no deduplication token leaked into
// a later batch (that would drop the later batch and show up as missing events).
import { rmSync } from 'node:fs';
import { Partitioners, type Admin, type Producer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafka, createKafkaProducerSink, type KafkaProducerSink } from '../../ingest/index.ts';
import { openMigratedStore, type Store } from '../../store/index.ts';
import { ensureKafka, uniqueTopicName } from '../services/kafka.ts';
import {
  connectAdmin,
  countEvents,
  feed,
  kafkaEnv,
  makeEvents,
  spawnConsumer,
  tempDir,
  testConfig,
  waitForCaughtUp,
  type ConsumerChild,
} from './support.ts';

const TOTAL = 200_000;
const KILLS = 10;
const POISON_ROUNDS = 10;
const POISON_PER_ROUND = 3;
// Batches end where a fetch ends (not at a row limit), so a range fetched again after a
// restart would end elsewhere — unless the consumer cuts it at its recorded intent.
const CONSUMER_ARGS = ['--session-timeout', '6000', '--max-batch-rows', '100000', '--fault-commit-delay', '500'];

describe('consumer killed with SIGKILL at random moments', () => {
  const topic = uniqueTopicName('fault-kill');
  const tag = topic;
  const dataDir = tempDir('fault-kill');
  let brokers: string[];
  let env: NodeJS.ProcessEnv;
  let admin: Admin;
  let sink: KafkaProducerSink;
  let raw: Producer;
  let store: Store | undefined;
  const children: ConsumerChild[] = [];

  beforeAll(async () => {
    brokers = (await ensureKafka()).brokers;
    env = kafkaEnv(brokers, topic);
    admin = await connectAdmin(brokers);
    const kafka = testConfig(env, dataDir).kafka!;
    sink = createKafkaProducerSink({ kafka });
    await sink.start(); // provisions the topic (6 partitions) and its dead-letter topic
    raw = createKafka(kafka, { clientId: 'fault-kill-poison' }).producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
    await raw.connect();
  }, 600_000);

  afterAll(async () => {
    for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    await store?.close();
    await sink?.shutdown();
    await raw?.disconnect().catch(() => undefined);
    if (admin) {
      await admin.deleteTopics({ topics: [topic, `${topic}.dlq`] }).catch(() => undefined);
      await admin.disconnect();
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(`stores ${TOTAL} events exactly once across ${KILLS} kills`, async () => {
    const t0 = Date.now();
    const events = makeEvents(TOTAL, tag);
    // ~4,000 events/s: the stream is still flowing during most of the kills.
    const feeding = feed(sink, events, { chunk: 2000, perSecond: 4000 });
    // A few poison records along the way: their dead letters must be exact too.
    const poisoning = (async () => {
      for (let round = 0; round < POISON_ROUNDS; round++) {
        await raw.send({
          topic,
          acks: -1,
          messages: Array.from({ length: POISON_PER_ROUND }, (_, i) => ({ key: `poison-${round}-${i}`, value: `{"not json": ${round}.${i}` })),
        });
        await new Promise((r) => setTimeout(r, 4000));
      }
    })();

    const killedAt: string[] = [];
    const written: Array<Record<string, unknown>> = [];
    for (let kill = 0; kill < KILLS; kill++) {
      const c = spawnConsumer(env, dataDir, CONSUMER_ARGS);
      children.push(c);
      await c.waitForLine('joined', 90_000);
      const mode = kill % 3;
      if (mode === 0) {
        // Between a confirmed write and its commit (the window --fault-commit-delay widens):
        // the next consumer must write the same range again, and the store must drop it.
        await c.waitForLine('written', 90_000);
      } else if (mode === 1) {
        // Anywhere in the stream of batches.
        await c.waitForLine('batch', 90_000);
        await new Promise((r) => setTimeout(r, Math.random() * 1500));
      } else {
        // Early: while it loads its committed offsets and fetches.
        await new Promise((r) => setTimeout(r, Math.random() * 400));
      }
      c.child.kill('SIGKILL');
      const exit = await c.exited;
      expect(exit.signal).toBe('SIGKILL');
      killedAt.push(`${((Date.now() - t0) / 1000).toFixed(1)}s after ${c.lines.filter((l) => l.event === 'batch').length} batches`);
      if (mode === 0) written.push(c.lines.filter((l) => l.event === 'written').at(-1)!);
    }
    const fed = await feeding;
    await poisoning;

    // The last consumer runs to the end, then stops gracefully (committing what it wrote).
    const last = spawnConsumer(env, dataDir, CONSUMER_ARGS);
    children.push(last);
    const poison = POISON_ROUNDS * POISON_PER_ROUND;
    await waitForCaughtUp(admin, `${topic}-writer`, topic, TOTAL + poison, 150_000);
    last.child.kill('SIGTERM');
    expect((await last.exited).code).toBe(0);
    expect(last.lines.at(-1)).toMatchObject({ event: 'stopped', fatal: null });

    // Only now does this process open the data directory (one owner at a time).
    store = await openMigratedStore(testConfig(env, dataDir));
    const counts = await countEvents(store, tag);
    const [dead] = await store.query<{ rows: number; offsets: number }>(
      `SELECT count() AS rows, uniqExact(origin, position) AS offsets FROM dead_letters WHERE source = 'kafka' AND startsWith(origin, {topic:String})`,
      { topic: `${topic}:` },
    );
    const replays = children.flatMap((c) => c.lines).filter((l) => l.event === 'batch' && l.replay === true).length;
    console.log(
      `[fault-kill] ${KILLS} kills (${killedAt.join('; ')}); ${replays} replayed batches; ` +
        `${fed.refusals} producer refusals; rows ${counts.rows}, unique ${counts.unique}; dead letters ${dead!.rows}; ${((Date.now() - t0) / 1000).toFixed(1)} s`,
    );
    expect(counts.rows).toBe(TOTAL);
    expect(counts.unique).toBe(TOTAL);
    expect(dead).toEqual({ rows: poison, offsets: poison });
    // A range a kill left written-but-uncommitted is written again by a later consumer
    // with the same range (so the same token) and stored once: every batch on that
    // partition that overlaps the range has exactly its bounds. A kill that came only
    // after the commit (a loaded machine can take longer than the widened window to
    // deliver the SIGKILL) leaves no replay, and nothing overlapping either.
    const batches = children.flatMap((c) => c.lines).filter((l) => l.event === 'batch');
    let inWindow = 0;
    for (const w of written) {
      const [first, last] = [BigInt(w.first as string), BigInt(w.last as string)];
      const overlapping = batches.filter(
        (b) => b.partition === w.partition && BigInt(b.first as string) <= last && BigInt(b.last as string) >= first,
      );
      for (const b of overlapping) expect({ partition: b.partition, first: b.first, last: b.last }).toEqual({ partition: w.partition, first: w.first, last: w.last });
      if (overlapping.some((b) => b.replay === true)) inWindow++;
    }
    console.log(`[fault-kill] ${inWindow} of ${written.length} write-then-kill(s) landed before the commit and were replayed with the same range`);
    // The replay path itself must have been exercised (the 500 ms window makes it the rule).
    expect(inWindow).toBeGreaterThan(0);
  }, 300_000);
});
