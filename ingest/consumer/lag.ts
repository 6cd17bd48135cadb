import type { Admin } from 'kafkajs';

/** One partition's consumer lag. Offsets are decimal strings (Kafka offsets are 64-bit). */
export interface PartitionLag {
  partition: number;
  /** The group's committed offset (the next record to process), or null when it committed none. */
  committed: string | null;
  /** Commit metadata, e.g. `continuity/1 done 0-4999` (the consumer's intent protocol). */
  metadata: string | null;
  /** First and next offset of the partition's log (`low` moves with retention). */
  low: string;
  high: string;
  /** Records not yet processed: high − committed, or high − low without a commit. */
  lag: number;
}

/** Consumer lag of one group on one topic. */
export interface ConsumerLag {
  groupId: string;
  topic: string;
  partitions: PartitionLag[];
  /** Sum of the partitions' lag. */
  total: number;
}

/**
 * Reads a group's lag on a topic from the cluster (kafkajs admin `fetchOffsets` and
 * `fetchTopicOffsets`): what `continuity status` prints and what tests wait on.
 * @throws kafkajs errors when the cluster cannot be reached or the topic does not exist.
 */
export async function fetchConsumerLag(admin: Admin, groupId: string, topic: string): Promise<ConsumerLag> {
  // One after the other: a failed call must not leave the other retrying in the background.
  const ends = await admin.fetchTopicOffsets(topic);
  const committed = await admin.fetchOffsets({ groupId, topics: [topic] });
  const byPartition = new Map((committed[0]?.partitions ?? []).map((p) => [p.partition, p]));
  const partitions = ends
    .map((e): PartitionLag => {
      const c = byPartition.get(e.partition);
      const has = c !== undefined && BigInt(c.offset) >= 0n;
      const from = has ? BigInt(c.offset) : BigInt(e.low);
      const high = BigInt(e.high);
      return {
        partition: e.partition,
        committed: has ? c.offset : null,
        metadata: c?.metadata ?? null,
        low: e.low,
        high: e.high,
        lag: Number(high > from ? high - from : 0n),
      };
    })
    .sort((a, b) => a.partition - b.partition);
  return { groupId, topic, partitions, total: partitions.reduce((n, p) => n + p.lag, 0) };
}
