import type { Command } from 'commander';
import { createKafka, fetchConsumerLag, type ConsumerLag } from '../../ingest/index.ts';
import { ContinuityError } from '../../core/index.ts';
import { configFrom } from '../context.ts';

/**
 * `continuity status [--json]`: the ingest consumer group's lag per partition of the
 * event topic (committed offset vs. partition end, from the cluster), and the number
 * of records in the dead-letter topic. Without KAFKA_BROKERS: says the store is embedded.
 * @throws ContinuityError CONT_ERR_KAFKA_UNAVAILABLE when the cluster cannot be reached.
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
      const admin = createKafka(kafka, { clientId: 'continuity-status', retries: 2 }).admin();
      let lag: ConsumerLag;
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
        if (topics.has(kafka.dlqTopic)) {
          dlq = (await admin.fetchTopicOffsets(kafka.dlqTopic)).reduce((n, p) => n + Number(BigInt(p.high) - BigInt(p.low)), 0);
        }
      } catch (err) {
        throw new ContinuityError('CONT_ERR_KAFKA_UNAVAILABLE', `${kafka.brokers.join(',')}: ${(err as Error).message}`, { cause: err });
      } finally {
        await admin.disconnect().catch(() => undefined);
      }
      if (flags.json) {
        process.stdout.write(JSON.stringify({ mode: 'kafka', brokers: kafka.brokers, ...lag, dead_letter_topic: kafka.dlqTopic, dead_letter_records: dlq }) + '\n');
        return;
      }
      const rows = lag.partitions.map((p) => [String(p.partition), p.committed ?? '-', p.high, String(p.lag), p.metadata ?? '']);
      const head = ['partition', 'committed', 'end', 'lag', 'last commit'];
      const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
      const fmt = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padStart(widths[i]!))).join('  ');
      process.stdout.write(
        [
          `group ${lag.groupId} on ${lag.topic} (${kafka.brokers.join(',')})`,
          fmt(head),
          ...rows.map(fmt),
          `total lag ${lag.total}; dead-letter topic ${kafka.dlqTopic}: ${dlq} records`,
          '',
        ].join('\n'),
      );
    });
}
