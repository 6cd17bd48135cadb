// Fault 3: the store fails every insert for 30 s while events flow. The consumer pauses
// its partitions, backs off with jitter and keeps its group membership (heartbeats),
// then resumes: nothing lost, nothing duplicated, and the lag returns to zero.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchConsumerLag } from '../../ingest/index.ts';
import { countEvents, faultyStore, feed, makeEvents, startIngestRig, waitFor, waitForCaughtUp, type FaultyStore, type IngestRig } from './support.ts';

const TOTAL = 60_000;
const OUTAGE_MS = 30_000;

describe('store unavailable for 30 s during ingestion', () => {
  let rig: IngestRig;
  let faulty: FaultyStore;

  beforeAll(async () => {
    rig = await startIngestRig('fault-store', { retryMaxDelayMs: 2000, wrap: (store) => (faulty = faultyStore(store)) });
  }, 600_000);

  afterAll(async () => {
    await rig?.close();
  });

  it('pauses, backs off, resumes: every event once, lag back to zero', async () => {
    const { topic, admin, store, sink, consumer, events } = rig;
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
    // The consumer's own lag says so too (its lag check, every 5 s: a paused consumer
    // fetches nothing, and the lag read 0 after a batch that had caught up).
    await waitFor('the metric lag to grow while paused', () => (consumer.metrics.paused && consumer.metrics.lag() >= 5000 ? true : undefined), OUTAGE_MS, 100);
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
