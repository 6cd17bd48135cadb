// `continuity status` against the real broker when the configured group has never
// committed on the topic (a mistyped KAFKA_GROUP): the whole topic shows as lag, and
// the output must say why and name the groups that did commit there.
import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import { promisify } from 'node:util';
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafka, fetchConsumerLag, findCommittedGroups } from '../../ingest/index.ts';
import { connectAdmin, kafkaEnv, repoRoot, testConfig } from '../faults/support.ts';
import { createTopicsAndWait, ensureKafka, uniqueTopicName } from '../services/kafka.ts';

const execFileAsync = promisify(execFile);
let brokers: string[];
let admin: Admin;
const topic = uniqueTopicName('it-kafka-status');
const group = `${topic}-writer`;
const typo = `${topic}-wirter`;

const cli = (env: NodeJS.ProcessEnv, args: string[]) =>
  execFileAsync(process.execPath, ['--import', 'tsx', 'cli/main.ts', ...args], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    timeout: 60_000,
  });

beforeAll(async () => {
  brokers = (await ensureKafka()).brokers;
  admin = await connectAdmin(brokers);
  await createTopicsAndWait(admin, [{ topic, numPartitions: 2 }, { topic: `${topic}.dlq`, numPartitions: 2 }]);
  // idempotent: a send retried after a lost acknowledgement must not store its records
  // twice (CI once found partition 1 holding 4 records for 2, and every count off)
  const producer = createKafka(testConfig(kafkaEnv(brokers, topic), tmpdir()).kafka!, { clientId: 'it-status-producer' }).producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    await producer.send({ topic, messages: [0, 0, 0, 1, 1].map((partition, i) => ({ partition, value: String(i) })) });
  } finally {
    await producer.disconnect();
  }
  // The real group has processed partition 0 up to its end, partition 1 not at all.
  await admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 0, offset: '3' }] });
}, 600_000);

afterAll(async () => {
  if (!admin) return;
  await admin.deleteGroups([group]).catch(() => undefined);
  await admin.deleteTopics({ topics: [topic, `${topic}.dlq`] }).catch(() => undefined);
  await admin.disconnect();
});

describe('consumer lag of a group without committed offsets', () => {
  it('fetchConsumerLag says whether the group committed on the topic; findCommittedGroups names who did', async () => {
    expect(await fetchConsumerLag(admin, group, topic)).toMatchObject({ committed: true, total: 2 });
    expect(await fetchConsumerLag(admin, typo, topic)).toMatchObject({ committed: false, total: 5 });
    const found = await findCommittedGroups(admin, topic, { limit: 10_000 });
    expect(found.committed).toEqual([group]);
    expect(found.listed).toContain(group);
    expect(found.listed).not.toContain(typo);
    // Asked closest name first: with room for one group, the one the typo meant is it.
    const one = await findCommittedGroups(admin, topic, { limit: 1, near: typo });
    expect(one).toMatchObject({ committed: [group], unchecked: found.listed.length - 1 });
  });

  it('continuity status says the mistyped group has no committed offsets and names the group that has (text and --json, exit 0)', async () => {
    const env = kafkaEnv(brokers, topic, { KAFKA_GROUP: typo });
    const text = await cli(env, ['status']);
    expect(text.stdout).toContain(`group ${typo} on ${topic}`);
    expect(text.stdout).toMatch(new RegExp(`note: no consumer in group ${typo} has committed offsets on ${topic}, so the lag shown is the whole topic \\(5 records\\); check the group name`));
    expect(text.stdout).toContain(`The cluster does not know group ${typo}.`);
    expect(text.stdout).toMatch(new RegExp(`Groups with offsets on ${topic}: ${group}[ .(]`));
    expect(text.stdout).toMatch(/total lag 5;/);

    const json = JSON.parse((await cli(env, ['status', '--json'])).stdout) as Record<string, unknown>;
    expect(json).toMatchObject({ groupId: typo, total: 5, committed: false, group_known: false, groups_with_offsets: [group] });
    expect(json.note).toMatch(/no consumer in group .* has committed offsets/);
  }, 120_000);

  it('continuity status of the right group has no note', async () => {
    const env = kafkaEnv(brokers, topic);
    const text = await cli(env, ['status']);
    expect(text.stdout).not.toContain('note:');
    expect(text.stdout).toMatch(/total lag 2;/);
    const json = JSON.parse((await cli(env, ['status', '--json'])).stdout) as Record<string, unknown>;
    expect(json).toMatchObject({ groupId: group, total: 2, committed: true });
    expect(json).not.toHaveProperty('note');
  }, 120_000);
});
