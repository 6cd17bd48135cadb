// Fault 5: the store's disk fills up while events flow. The engine refuses every insert
// into `events` with NOT_ENOUGH_SPACE (code 243) — here through the MergeTree setting
// `min_free_disk_bytes_to_perform_insert`, which makes the real engine answer exactly as
// a full disk does (a 40 MB tmpfs gives the same text). That is the store being down,
// not a statement it rejects: the consumer pauses, backs off and keeps its partitions,
// then resumes once space returns. Before, it logged `fatal` and exited.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConsumerEvent } from '../../ingest/index.ts';
import { countEvents, feed, makeEvents, startIngestRig, waitFor, waitForCaughtUp, type IngestRig } from './support.ts';

const TOTAL = 20_000;

describe('the store\'s disk full during ingestion', () => {
  let rig: IngestRig;

  beforeAll(async () => {
    rig = await startIngestRig('fault-full', { retryMaxDelayMs: 1000 });
  }, 600_000);

  afterAll(async () => {
    await rig?.store.command('ALTER TABLE events RESET SETTING min_free_disk_bytes_to_perform_insert').catch(() => undefined);
    await rig?.close();
  });

  it('pauses while the disk is full and resumes when space returns: every event once, no fatal', async () => {
    const { topic, dataDir, admin, store, sink, consumer, events } = rig;
    const feeding = feed(sink, makeEvents(TOTAL, topic), { chunk: 500, perSecond: 2000 });
    await waitFor('the first writes', () => (consumer.metrics.rows >= 2000 ? true : undefined), 60_000);
    await store.command('ALTER TABLE events MODIFY SETTING min_free_disk_bytes_to_perform_insert = 1000000000000000');
    const paused = await waitFor('the consumer to pause', () => events.find((e): e is Extract<ConsumerEvent, { type: 'paused' }> => e.type === 'paused'), 30_000, 50);
    expect(paused.error).toMatch(/the file system of the data directory .* is full.*NOT_ENOUGH_SPACE/);
    expect(paused.error).toContain(dataDir);
    // Still paused, and alive, some attempts later.
    await waitFor('several write attempts on the full disk', () => (consumer.metrics.writeRetries >= 5 ? true : undefined), 30_000, 50);
    expect(consumer.metrics.fatal).toBeUndefined();
    expect(consumer.metrics.paused).toBe(true);
    await store.command('ALTER TABLE events RESET SETTING min_free_disk_bytes_to_perform_insert');
    await feeding;

    await waitForCaughtUp(admin, `${topic}-writer`, topic, TOTAL, 120_000);
    expect(await countEvents(store, topic)).toEqual({ rows: TOTAL, unique: TOTAL, final: TOTAL });
    const m = consumer.metrics;
    expect(events.some((e) => e.type === 'resumed')).toBe(true);
    expect(events.filter((e) => e.type === 'fatal')).toEqual([]);
    expect(m.fatal).toBeUndefined();
    expect(m.crashes).toBe(0);
    expect(m.deadLetters).toEqual({});
  }, 240_000);
});
