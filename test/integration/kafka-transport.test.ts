// The Kafka transport against the real broker: the gateway's producer sink (keys,
// partitions, order, refusal instead of unbounded buffering), and the two processes
// (`continuity gateway`, `continuity consumer`) plus `continuity status` end to end.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { Partitioners, type Admin, type Consumer, type PartitionMetadata } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGateway, createKafka, createKafkaProducerSink, mapOtlpRecord, type KafkaProducerSink } from '../../ingest/index.ts';
import { openMigratedStore } from '../../store/index.ts';
import { connectAdmin, countEvents, freePortPair, kafkaEnv, makeEvents, repoRoot, spawnConsumer, tempDir, testConfig, waitFor, waitForCaughtUp } from '../faults/support.ts';
import { ensureKafka, uniqueTopicName } from '../services/kafka.ts';

const execFileAsync = promisify(execFile);
let brokers: string[];
let admin: Admin;
const topics: string[] = [];

beforeAll(async () => {
  brokers = (await ensureKafka()).brokers;
  admin = await connectAdmin(brokers);
}, 600_000);

afterAll(async () => {
  if (!admin) return;
  await admin.deleteTopics({ topics: topics.flatMap((t) => [t, `${t}.dlq`]) }).catch(() => undefined);
  await admin.disconnect();
});

describe('producer sink (gateway → Kafka)', () => {
  let sink: KafkaProducerSink;
  let reader: Consumer | undefined;
  const topic = uniqueTopicName('it-kafka-sink');
  topics.push(topic);

  afterAll(async () => {
    await reader?.disconnect().catch(() => undefined);
    await sink?.shutdown();
  });

  it('provisions the topic with the configured partitions and keys events by session', async () => {
    const kafka = testConfig(kafkaEnv(brokers, topic, { KAFKA_PARTITIONS: '4' }), tmpdir()).kafka!;
    sink = createKafkaProducerSink({ kafka });
    await sink.start();
    const meta = await admin.fetchTopicMetadata({ topics: [topic, `${topic}.dlq`] });
    expect(meta.topics.map((t) => t.partitions.length)).toEqual([4, 4]);

    const events = makeEvents(3000, topic);
    for (let i = 0; i < events.length; i += 500) await sink.accept(events.slice(i, i + 500));
    expect(sink.stats).toMatchObject({ sentEvents: 3000, failedSends: 0, queuedEvents: 0 });

    const got: Array<{ partition: number; key: string; seq: number; session: string }> = [];
    reader = createKafka(kafka, { clientId: 'it-sink-reader' }).consumer({ groupId: `${topic}-reader`, maxWaitTimeInMs: 200 });
    await reader.connect();
    await reader.subscribe({ topic, fromBeginning: true });
    await reader.run({
      eachMessage: async ({ partition, message }) => {
        const e = JSON.parse(message.value!.toString()) as { attrs: { seq: string }; session_key: string; event_id: string };
        got.push({ partition, key: message.key!.toString(), seq: Number(e.attrs.seq), session: e.session_key });
        expect(message.key!.toString()).toBe(e.session_key || e.event_id);
      },
    });
    await waitFor('all records read back', () => (got.length >= 3000 ? true : undefined), 30_000);

    const partitionMetadata: PartitionMetadata[] = meta.topics.find((t) => t.name === topic)!.partitions;
    const murmur2 = Partitioners.DefaultPartitioner();
    const bySession = new Map<string, typeof got>();
    for (const g of got.filter((g) => g.session !== '')) bySession.set(g.session, [...(bySession.get(g.session) ?? []), g]);
    for (const [session, list] of bySession) {
      // One partition per session (the Java client's murmur2 choice), in send order.
      expect(new Set(list.map((g) => g.partition))).toEqual(new Set([murmur2({ topic, partitionMetadata, message: { key: session, value: null } })]));
      expect(list.map((g) => g.seq)).toEqual([...list.map((g) => g.seq)].sort((a, b) => a - b));
    }
    // Events without a session are keyed by event_id and reach every partition.
    expect(new Set(got.filter((g) => g.session === '').map((g) => g.partition)).size).toBe(4);
  });
});

describe('refusing instead of buffering', () => {
  it('refuses with a retriable 503 error when Kafka cannot be reached, and the gateway says so', async () => {
    const port = await freePortPair(); // nothing listens there
    const kafka = testConfig(kafkaEnv([`127.0.0.1:${port}`], uniqueTopicName('it-nokafka')), tmpdir()).kafka!;
    const sink = createKafkaProducerSink({ kafka, retryAfterMs: 60_000 });
    await expect(sink.start()).rejects.toMatchObject({ code: 'CONT_ERR_INGEST_UNAVAILABLE', retriable: true });
    expect(sink.ready()).toBe(false);
    await expect(sink.accept(makeEvents(1, 'x'))).rejects.toMatchObject({ code: 'CONT_ERR_INGEST_UNAVAILABLE', httpStatus: 503 });
    const { app } = await createGateway({ sink, mapOtlpRecord });
    try {
      const res = await app.inject({ method: 'POST', url: '/v1/events', payload: makeEvents(2, 'x') });
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toMatch(/^\d+$/);
      expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(503);
    } finally {
      await app.close();
      await sink.shutdown();
    }
    expect(sink.stats.sentEvents).toBe(0);
  });

  it('refuses what exceeds the queue bound without waiting for Kafka', async () => {
    const topic = uniqueTopicName('it-sink-bound');
    topics.push(topic);
    const kafka = testConfig(kafkaEnv(brokers, topic), tmpdir()).kafka!;
    const sink = createKafkaProducerSink({ kafka, maxQueuedEvents: 100 });
    try {
      await expect(sink.accept(makeEvents(101, topic))).rejects.toMatchObject({ code: 'CONT_ERR_INGEST_UNAVAILABLE' });
      await sink.accept(makeEvents(100, topic));
      expect(sink.stats).toMatchObject({ sentEvents: 100, refusedEvents: 101 });
    } finally {
      await sink.shutdown();
    }
  });
});

describe('continuity gateway | consumer | status (the processes)', () => {
  const topic = uniqueTopicName('it-kafka-procs');
  topics.push(topic);
  const dataDir = tempDir('procs');
  const children: ChildProcess[] = [];

  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  const cli = (env: NodeJS.ProcessEnv, args: string[]) =>
    execFileAsync(process.execPath, ['--import', 'tsx', 'cli/main.ts', ...args], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
      timeout: 60_000,
    });

  it('refuses to start without KAFKA_BROKERS (configuration error, exit 2)', async () => {
    const err = await cli({}, ['--data-dir', dataDir, 'consumer']).then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(err?.code).toBe(2);
    expect(err?.stderr).toMatch(/CONT_ERR_CONFIG.*KAFKA_BROKERS/);
  });

  it('carries events from the gateway through Kafka to the store, and status shows zero lag', async () => {
    const env = kafkaEnv(brokers, topic);
    const gateway = spawn(process.execPath, ['--import', 'tsx', 'cli/main.ts', 'gateway', '--port', '0', '--log-level', 'nothing'], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(gateway);
    const gatewayExit = new Promise<number | null>((r) => gateway.on('exit', r));
    const listening = await new Promise<string>((resolve, reject) => {
      createInterface({ input: gateway.stdout! }).on('line', (l) => {
        const m = /listening on (http:\/\/\S+)/.exec(l);
        if (m) resolve(m[1]!);
      });
      gateway.on('exit', (code) => reject(new Error(`gateway exited ${code}`)));
    });
    const events = makeEvents(2000, topic);
    for (let i = 0; i < events.length; i += 500) {
      const res = await fetch(`${listening}/v1/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(events.slice(i, i + 500)) });
      expect(res.status).toBe(200);
    }
    // --port: the consumer serves the read API on the store it owns (DESIGN §2)
    const consumer = spawnConsumer(env, dataDir, ['--port', '0']);
    children.push(consumer.child);
    await waitForCaughtUp(admin, `${topic}-writer`, topic, 2000, 60_000);
    const api = String((await consumer.waitForLine('started', 30_000)).api);
    expect(api).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api$/);
    const health = (await (await fetch(api.replace(/\/api$/, '/healthz'))).json()) as { status: string; consumer: { lag: number; fatal: string | null } };
    expect(health).toMatchObject({ status: 'ok', consumer: { lag: 0, fatal: null } });
    const sql = await fetch(`${api}/sql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sql: 'SELECT count() AS n, uniqExact(event_id) AS u FROM events FINAL', format: 'jsonl' }),
    });
    expect(sql.status).toBe(200);
    expect(JSON.parse(await sql.text())).toEqual({ n: '2000', u: '2000' }); // (64-bit integers quoted)
    expect((await fetch(`${api}/queries`)).status).toBe(200);
    // the store is the consumer's: a command opening it is told where to read it instead
    const locked = await cli(env, ['--data-dir', dataDir, 'sql', 'SELECT 1']).then(
      () => undefined,
      (e: { stderr: string }) => e,
    );
    expect(locked?.stderr).toMatch(/CONT_ERR_STORE_LOCKED.*continuity consumer --port/s);

    const status = await cli(env, ['status']);
    expect(status.stdout).toMatch(new RegExp(`group ${topic}-writer on ${topic}`));
    expect(status.stdout).toMatch(/total lag 0; dead-letter topic .*: 0 records/);
    const json = JSON.parse((await cli(env, ['status', '--json'])).stdout) as { total: number; partitions: Array<{ metadata: string }> };
    expect(json.total).toBe(0);
    expect(json.partitions.filter((p) => p.metadata).every((p) => /^continuity\/1 done \d+-\d+$/.test(p.metadata))).toBe(true);

    gateway.kill('SIGTERM');
    consumer.child.kill('SIGTERM');
    expect((await consumer.exited).code).toBe(0);
    expect(await gatewayExit).toBe(0);
    const store = await openMigratedStore(testConfig(env, dataDir));
    try {
      expect(await countEvents(store, topic)).toEqual({ rows: 2000, unique: 2000, final: 2000 });
    } finally {
      await store.close();
    }
  }, 120_000);
});
