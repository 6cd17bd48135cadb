import type { Command } from 'commander';
import type { CommittedGroups, ConsumerLag } from '../../ingest/index.ts';
import { ContinuityError } from '../../core/index.ts';
import { configFrom } from '../context.ts';

/**
 * `continuity status [--json]`: the ingest consumer group's lag per partition of the
 * event topic (committed offset vs. partition end, from the cluster), and the number
 * of records in the dead-letter topic. Without KAFKA_BROKERS: says the store is embedded.
 *
 * When the group (KAFKA_GROUP) has no committed offset on any partition of the topic, the
 * lag is the whole topic, which is rarely what it means: the output says so in a `note`
 * line (JSON: `committed: false`, `note`, `group_known` = whether the cluster lists the
 * group, `groups_with_offsets` = the groups that did commit on the topic, null when the
 * cluster would not list its groups, and `groups_unchecked`: at most 50 groups are asked,
 * the names closest to the configured one first). A mistyped group name reads
 * as "the cluster does not know group X" next to the groups that exist.
 *
 * Exit code 0 whenever the status is printed: also with a note (no topic yet, no commits
 * by the group), which describes the cluster rather than a failure of this command.
 * @throws ContinuityError CONT_ERR_KAFKA_UNAVAILABLE when the cluster cannot be reached (exit 1).
 */
export function registerStatus(program: Command): void {
  program
    .command('status')
    .description('consumer lag per partition (Kafka mode) and dead-letter topic size')
    .option('--json', 'print one JSON object')
    .action(async (flags: { json?: boolean }, cmd: Command) => {
      const config = configFrom(cmd.optsWithGlobals());
      const kafka = config.kafka;
      if (!kafka) {
        const msg = { mode: 'embedded', dataDir: config.dataDir, note: 'KAFKA_BROKERS is not set: events are written in-process, there is no consumer lag' };
        process.stdout.write(flags.json ? JSON.stringify(msg) + '\n' : `${msg.note} (store ${config.dataDir})\n`);
        return;
      }
      // (loaded here, not at start: every other command would pay for Kafka)
      const { createKafka, fetchConsumerLag, findCommittedGroups } = await import('../../ingest/index.ts');
      const admin = createKafka(kafka, { clientId: 'continuity-status', retries: 2 }).admin();
      let lag: ConsumerLag;
      let others: CommittedGroups | Error | undefined;
      let dlq = 0;
      try {
        await admin.connect();
        const topics = new Set(await admin.listTopics());
        if (!topics.has(kafka.topic)) {
          const msg = { mode: 'kafka', brokers: kafka.brokers, topic: kafka.topic, note: `topic ${kafka.topic} does not exist yet: no gateway or consumer has run against this cluster` };
          process.stdout.write(flags.json ? JSON.stringify(msg) + '\n' : msg.note + '\n');
          return;
        }
        lag = await fetchConsumerLag(admin, kafka.group, kafka.topic);
        // Only to explain an uncommitted group; a cluster that will not list its groups
        // (ACLs) still gets the lag.
        if (!lag.committed) others = await findCommittedGroups(admin, kafka.topic, { near: kafka.group }).catch((err: Error) => err);
        if (topics.has(kafka.dlqTopic)) {
          dlq = (await admin.fetchTopicOffsets(kafka.dlqTopic)).reduce((n, p) => n + Number(BigInt(p.high) - BigInt(p.low)), 0);
        }
      } catch (err) {
        throw new ContinuityError('CONT_ERR_KAFKA_UNAVAILABLE', `${kafka.brokers.join(',')}: ${(err as Error).message}`, { cause: err });
      } finally {
        await admin.disconnect().catch(() => undefined);
      }
      const uncommitted = lag.committed ? undefined : uncommittedNote(lag, others);
      if (flags.json) {
        process.stdout.write(JSON.stringify({ mode: 'kafka', brokers: kafka.brokers, ...lag, ...uncommitted, dead_letter_topic: kafka.dlqTopic, dead_letter_records: dlq }) + '\n');
        return;
      }
      const rows = lag.partitions.map((p) => [String(p.partition), p.committed ?? '-', p.high, String(p.lag), p.metadata ?? '']);
      const head = ['partition', 'committed', 'end', 'lag', 'last commit'];
      const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
      const fmt = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padStart(widths[i]!))).join('  ');
      process.stdout.write(
        [
          `group ${lag.groupId} on ${lag.topic} (${kafka.brokers.join(',')})`,
          ...(uncommitted ? [`note: ${uncommitted.note}`] : []),
          fmt(head),
          ...rows.map(fmt),
          `total lag ${lag.total}; dead-letter topic ${kafka.dlqTopic}: ${dlq} records`,
          '',
        ].join('\n'),
      );
    });
}

/** The note and JSON fields for a group that has no committed offset on the topic. */
function uncommittedNote(
  lag: ConsumerLag,
  others: CommittedGroups | Error | undefined,
): { note: string; group_known: boolean | null; groups_with_offsets: string[] | null; groups_unchecked: number } {
  const parts = [
    `no consumer in group ${lag.groupId} has committed offsets on ${lag.topic}, so the lag shown is the whole topic (${lag.total} records); check the group name (KAFKA_GROUP).`,
  ];
  if (others === undefined || others instanceof Error) {
    parts.push(`The cluster's groups could not be listed${others ? `: ${others.message}` : ''}.`);
    return { note: parts.join(' '), group_known: null, groups_with_offsets: null, groups_unchecked: 0 };
  }
  const known = others.listed.includes(lag.groupId);
  parts.push(
    known
      ? `The cluster knows group ${lag.groupId}: if its consumer has just started, it commits after its first batch.`
      : `The cluster does not know group ${lag.groupId}.`,
  );
  const rest = others.unchecked > 0 ? ` (${others.unchecked} more groups not checked)` : '';
  parts.push(others.committed.length > 0 ? `Groups with offsets on ${lag.topic}: ${others.committed.join(', ')}${rest}.` : `No group has offsets on ${lag.topic}${rest}.`);
  return { note: parts.join(' '), group_known: known, groups_with_offsets: others.committed, groups_unchecked: others.unchecked };
}
