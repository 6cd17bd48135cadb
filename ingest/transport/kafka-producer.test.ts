import { randomBytes, randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { RECORD_FRAMING_BYTES, recordBytesPerBatch } from './kafka-producer.ts';

// kafkajs's own record and batch encoders (the ones its produce request uses), to
// measure a batch as the broker will: `Encoder.size()` of the batch is what Kafka
// checks against the topic's max.message.bytes.
const require = createRequire(import.meta.url);
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0') as {
  RecordBatch: (args: { compression: number; records: unknown[]; lastOffsetDelta: number }) => Promise<{ size(): number }>;
};
const Record = require('kafkajs/src/protocol/recordBatch/record/v0') as (args: { key: string; value: string | Buffer; offsetDelta: number; timestampDelta: number }) => unknown;
const GZIP = 1;
const NONE = 0;

/** Records of random base64 values (what gzip can hardly shrink) that the sink counts as at most `budget` bytes. */
function recordsWithin(budget: number, valueBytes: number): Array<{ key: string; value: string }> {
  const out: Array<{ key: string; value: string }> = [];
  let used = 0;
  for (;;) {
    const key = randomUUID();
    const size = Math.min(valueBytes, budget - used - key.length - RECORD_FRAMING_BYTES);
    if (size <= 0) return out;
    const value = randomBytes(size).toString('base64').slice(0, size);
    out.push({ key, value });
    used += size + key.length + RECORD_FRAMING_BYTES;
  }
}

describe('recordBytesPerBatch', () => {
  it.each([
    [64 * 1024, 4000],
    [1_048_588, 20_000],
    [1_048_588, 1_048_000],
  ])('keeps a batch of max.message.bytes %i within it, gzip or not (values of %i bytes)', async (limit, valueBytes) => {
    const budget = recordBytesPerBatch(limit);
    expect(budget).toBeGreaterThan(limit - 500);
    const records = recordsWithin(budget, valueBytes).map((r, i) => Record({ ...r, offsetDelta: i, timestampDelta: 0 }));
    for (const compression of [GZIP, NONE]) {
      const batch = await RecordBatch({ compression, records, lastOffsetDelta: records.length - 1 });
      expect(batch.size(), `compression ${compression}`).toBeLessThanOrEqual(limit);
    }
  });

  it('keeps the same bound for bytes gzip cannot shrink at all', async () => {
    // Random bytes, worse for gzip than any JSON text can be.
    const limit = 256 * 1024;
    const key = randomUUID();
    const value = randomBytes(recordBytesPerBatch(limit) - key.length - RECORD_FRAMING_BYTES);
    const batch = await RecordBatch({ compression: GZIP, records: [Record({ key, value, offsetDelta: 0, timestampDelta: 0 })], lastOffsetDelta: 0 });
    expect(batch.size()).toBeGreaterThan(limit - 200);
    expect(batch.size()).toBeLessThanOrEqual(limit);
  });
});
