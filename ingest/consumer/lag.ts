import type { Admin } from 'kafkajs';
import { distance } from 'fastest-levenshtein';

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
  /**
   * True when the group has a committed offset on at least one partition of the topic.
   * False for a group that never committed there (a mistyped group name, or a consumer
   * that has not committed yet): every lag then counts the whole partition (high − low).
   */
  committed: boolean;
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
  return {
    groupId,
    topic,
    partitions,
    total: partitions.reduce((n, p) => n + p.lag, 0),
    committed: partitions.some((p) => p.committed !== null),
  };
}

/** Which consumer groups have committed offsets on a topic (see {@link findCommittedGroups}). */
export interface CommittedGroups {
  /** Every group id the cluster lists (kafkajs admin `listGroups`), sorted. */
  listed: string[];
  /** The listed groups with a committed offset on at least one partition of the topic, sorted. */
  committed: string[];
  /** Listed groups not asked because there were more than `limit`. */
  unchecked: number;
}

/**
 * Lists the cluster's consumer groups and asks each (`fetchOffsets`, one group after the
 * other, at most `limit` of them, default 50) whether it committed an offset on `topic`:
 * what `continuity status` names when the configured group has no committed offsets.
 * With `near` (the configured group name), the groups are asked closest name first (edit
 * distance), so on a cluster with more than `limit` groups the one a typo meant is asked.
 * @throws kafkajs errors when the cluster cannot be reached or refuses to list groups.
 */
export async function findCommittedGroups(admin: Admin, topic: string, options: { limit?: number; near?: string } = {}): Promise<CommittedGroups> {
  const limit = options.limit ?? 50;
  const listed = (await admin.listGroups()).groups.map((g) => g.groupId).sort();
  const near = options.near;
  const order = near === undefined ? listed : listed.map((g) => ({ g, d: distance(g, near) })).sort((a, b) => a.d - b.d).map((x) => x.g);
  const committed: string[] = [];
  for (const groupId of order.slice(0, limit)) {
    const offsets = await admin.fetchOffsets({ groupId, topics: [topic] });
    if ((offsets[0]?.partitions ?? []).some((p) => BigInt(p.offset) >= 0n)) committed.push(groupId);
  }
  return { listed, committed: committed.sort(), unchecked: Math.max(0, listed.length - limit) };
}
