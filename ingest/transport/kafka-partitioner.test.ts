import { randomUUID } from 'node:crypto';
import { Partitioners, type PartitionMetadata } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { stablePartitioner } from './kafka-producer.ts';

const partitions = (n: number): PartitionMetadata[] =>
  Array.from({ length: n }, (_, i) => ({ partitionId: i, leader: 1, partitionErrorCode: 0, replicas: [1], isr: [1] }));

describe('stablePartitioner', () => {
  const topic = 't';
  const meta = partitions(6);
  const keys = [
    ...Array.from({ length: 300 }, () => randomUUID()),
    ...Array.from({ length: 64 }, (_, i) => i.toString(16).padStart(32, 'a')),
  ];

  it('puts a record in the same partition on a retry, so the broker can recognise the resent batch', () => {
    // kafkajs calls the partitioner again for every record on every retry of a request.
    const partitioner = stablePartitioner();
    const first = keys.map((key) => partitioner({ topic, partitionMetadata: meta, message: { key, value: '' } }));
    const retry = keys.map((key) => partitioner({ topic, partitionMetadata: meta, message: { key, value: '' } }));
    const otherProducer = stablePartitioner();
    const fresh = keys.map((key) => otherProducer({ topic, partitionMetadata: meta, message: { key, value: '' } }));
    expect(retry).toEqual(first);
    expect(fresh).toEqual(first);
  });

  it('spreads event_id keys over every partition and keeps session keys on murmur2', () => {
    const partitioner = stablePartitioner();
    const counts = new Array<number>(6).fill(0);
    for (let i = 0; i < 6000; i++) counts[partitioner({ topic, partitionMetadata: meta, message: { key: randomUUID(), value: '' } })]!++;
    for (const c of counts) expect(c).toBeGreaterThan(800); // 1000 expected; 800 is > 6 standard deviations below
    // Java's murmur2 placement of a session key (kafkajs DefaultPartitioner), with and without the cache.
    const sessionKey = 'a'.repeat(31) + '7';
    const murmur = Partitioners.DefaultPartitioner()({ topic, partitionMetadata: meta, message: { key: sessionKey, value: '' } });
    expect(partitioner({ topic, partitionMetadata: meta, message: { key: sessionKey, value: '' } })).toBe(murmur);
    expect(partitioner({ topic, partitionMetadata: meta, message: { key: sessionKey, value: '' } })).toBe(murmur);
    expect(partitioner({ topic, partitionMetadata: meta, message: { key: sessionKey, value: '', partition: 4 } })).toBe(4);
  });
});

describe('stablePartitioner, dead letters', () => {
  const topic = 'd';
  const meta = partitions(3);
  const letters = Array.from({ length: 300 }, (_, i) => ({
    key: i % 3 === 0 ? `session-${i}` : null,
    value: 'not json',
    headers: { 'continuity.dlq.origin': `events:${i % 6}:${1000 + i}` },
  }));

  it('places a dead letter by its key, or by its origin when it has none, the same on every call', () => {
    const first = letters.map((message) => stablePartitioner()({ topic, partitionMetadata: meta, message }));
    const p = stablePartitioner();
    const retry = letters.map((message) => p({ topic, partitionMetadata: meta, message }));
    expect(retry).toEqual(first);
    const murmur2 = Partitioners.DefaultPartitioner();
    for (let i = 0; i < letters.length; i++) {
      const l = letters[i]!;
      const byKey = { ...l, key: l.key ?? l.headers['continuity.dlq.origin'] };
      expect(first[i]).toBe(murmur2({ topic, partitionMetadata: meta, message: byKey }));
    }
    expect(new Set(first).size).toBe(3);
    // neither key nor origin: by the value, still the same on every call
    const bare = Array.from({ length: 30 }, (_, i) => ({ key: null, value: `payload ${i}` }));
    const once = bare.map((message) => stablePartitioner()({ topic, partitionMetadata: meta, message }));
    expect(bare.map((message) => p({ topic, partitionMetadata: meta, message }))).toEqual(once);
  });
});
