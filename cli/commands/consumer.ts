import { Option, type Command } from 'commander';
import type { ReadServer } from '../../api/index.ts';
import type { ConsumerEvent, KafkaLogLevel } from '../../ingest/index.ts';
import { DEFAULT_FETCH_MAX_WAIT_MS, DEFAULT_FETCH_MIN_BYTES } from '../../ingest/consumer/defaults.ts';
import { ensureDeploymentKey, retry } from '../../core/index.ts';
import { startCompaction, type Compaction } from '../../store/index.ts';
import { configFrom, listenError, openCommandStore, portFlag, positiveFlag } from '../context.ts';
import { STILL_RUNNING, untilSignal } from '../signals.ts';
import { requireKafka } from './gateway.ts';

interface ConsumerFlags {
  progress?: boolean;
  sessionTimeout: string;
  maxBatchRows: string;
  fetchMaxWait: string;
  fetchMinBytes: string;
  concurrency: string;
  logLevel: KafkaLogLevel;
  faultCommitDelay: string;
  host: string;
  port?: string;
  token?: string;
}

/**
 * `continuity consumer [--progress]`: the Kafka → store consumer (KAFKA_BROKERS) on the
 * configured store; it owns the embedded data directory while it runs. Prints one JSON
 * line per lifecycle event on stdout (with --progress also one per confirmed write,
 * `written`, and one per committed batch, `batch`).
 * While Kafka cannot be reached at start it waits, retrying with backoff (a `waiting`
 * line per attempt). SIGINT/SIGTERM: finish and commit the batch being written, leave
 * the group, close the store. Exits 1 when the consumer stops on a non-retriable error.
 *
 * With `--port`, it also serves the read API on the store it owns (api/server.ts
 * `createReadServer`: `/api/queries`, `/api/report`, `POST /api/sql`, and
 * `GET /healthz` with the consumer's lag), so other commands can read an embedded
 * store the consumer holds (DESIGN §2); `--token` (CONTINUITY_INGEST_TOKEN) guards it.
 */
export function registerConsumer(program: Command): void {
  program
    .command('consumer')
    .description('run the Kafka → store consumer (needs KAFKA_BROKERS; owns the embedded data directory while it runs)')
    .option('--progress', 'also print a JSON line per confirmed write (written) and per committed batch (batch)')
    .option('--session-timeout <ms>', 'consumer-group session timeout: how soon a dead consumer\'s partitions move', '30000')
    .option('--max-batch-rows <n>', 'rows per write at most', '10000')
    .option('--fetch-max-wait <ms>', 'longest wait for a fetch: the time bound of a batch', String(DEFAULT_FETCH_MAX_WAIT_MS))
    .option('--fetch-min-bytes <bytes>', 'bytes (as stored, compressed) a fetch waits for before the broker answers it', String(DEFAULT_FETCH_MIN_BYTES))
    .option('--concurrency <n>', 'partitions processed at the same time (each stays in order)', '3')
    .option('--log-level <level>', 'kafkajs log level (stderr): nothing | error | warn | info | debug', 'nothing')
    .option('--port <port>', 'also serve the read API (/api, /healthz) on this TCP port: other commands read the store the consumer owns through it (0: any free port)')
    .option('--host <host>', 'address the read API listens on (with --port)', '127.0.0.1')
    .option('--token <token>', 'bearer token the read API requires, at least 16 characters (env CONTINUITY_INGEST_TOKEN)')
    .addOption(new Option('--fault-commit-delay <ms>', 'fault tests only: wait between a confirmed write and its commit').default('0').hideHelp())
    .action(async (flags: ConsumerFlags, cmd: Command) => {
      const config = configFrom({ ...cmd.optsWithGlobals(), ingestToken: flags.token });
      const kafka = requireKafka(config, 'consumer');
      const port = flags.port === undefined ? undefined : portFlag(flags.port);
      // (loaded here, not at start: every other command would pay for Kafka and HTTP)
      const [{ createKafkaConsumer }, { createReadServer }] = await Promise.all([import('../../ingest/index.ts'), import('../../api/index.ts')]);
      const store = await openCommandStore(config);
      try {
        // the key exists before any event arrives, so a collector can be given it (core/hash.ts)
        ensureDeploymentKey(config);
      } catch (err) {
        await store.close();
        throw err;
      }
      const line = (o: object): void => {
        process.stdout.write(JSON.stringify(o) + '\n');
      };
      let fatal: ((e: ConsumerEvent) => void) | undefined;
      const stopped = new Promise<ConsumerEvent>((resolve) => {
        fatal = resolve;
      });
      const consumer = createKafkaConsumer({
        kafka,
        store,
        logLevel: flags.logLevel,
        sessionTimeoutMs: positiveFlag('--session-timeout', flags.sessionTimeout, true),
        maxBatchRows: positiveFlag('--max-batch-rows', flags.maxBatchRows, true),
        fetchMaxWaitMs: positiveFlag('--fetch-max-wait', flags.fetchMaxWait, true),
        fetchMinBytes: positiveFlag('--fetch-min-bytes', flags.fetchMinBytes, true),
        partitionsConsumedConcurrently: positiveFlag('--concurrency', flags.concurrency, true),
        faultCommitDelayMs: Number(flags.faultCommitDelay) || 0,
        onEvent: (e) => {
          if ((e.type !== 'batch' && e.type !== 'written') || flags.progress) line({ event: e.type, ...e, type: undefined, at: new Date().toISOString() });
          if (e.type === 'fatal') fatal?.(e);
        },
      });
      let exitCode = 0;
      let api: ReadServer | undefined;
      let apiUrl: string | undefined;
      if (port !== undefined) {
        const m = consumer.metrics;
        api = await createReadServer({
          store,
          bearerToken: config.ingestToken,
          queryDefaults: config,
          health: () => ({ consumer: { lag: m.lag(), paused: m.paused, batches: m.batches, rows: m.rows, fatal: m.fatal ?? null } }),
        });
        try {
          apiUrl = await api.listen(flags.host, port);
        } catch (err) {
          await api.close();
          await store.close();
          throw listenError(err, flags.host, port);
        }
      }
      const signal = untilSignal(undefined, () => store.statements > 0);
      const aborted = new AbortController();
      let compaction: Compaction | undefined;
      void signal.then(() => aborted.abort());
      try {
        // Kafka down at start: wait for it (with backoff) rather than exit.
        const started = await retry(
          () =>
            consumer.start().catch((err: unknown) => {
              line({ event: 'waiting', error: (err as Error).message, at: new Date().toISOString() });
              throw err;
            }),
          { attempts: Number.POSITIVE_INFINITY, initialDelayMs: 500, maxDelayMs: 10_000, signal: aborted.signal },
        ).then(
          () => true,
          (err: unknown) => {
            if (aborted.signal.aborted) return false; // stopped while waiting for Kafka
            throw err;
          },
        );
        if (started) {
          // closed days merged into one part each, every 15 minutes (store/compact.ts)
          compaction = startCompaction(store, {
            onPass: ({ merged, error }) => line({ event: 'compacted', partitions: merged, ...(error ? { error: error.message } : {}), at: new Date().toISOString() }),
          });
          line({ event: 'started', pid: process.pid, store: `${store.mode} ${store.location}`, brokers: kafka.brokers, topic: kafka.topic, group: kafka.group, dlq: kafka.dlqTopic, ...(apiUrl ? { api: `${apiUrl}/api` } : {}) });
          const why = await Promise.race([signal, stopped]);
          if (typeof why === 'object') exitCode = 1;
        }
      } finally {
        await api?.close();
        await consumer.shutdown();
        // after the consumer (its last batch written and committed); a merge under way
        // runs to its end before the store closes
        await compaction?.stop();
        await store.close();
      }
      const m = consumer.metrics;
      line({ event: 'stopped', batches: m.batches, rows: m.rows, dead_letters: m.deadLetters, drops: m.drops, replays: m.replays, write_retries: m.writeRetries, fatal: m.fatal ?? null });
      if (store.statements > 0) process.stderr.write(STILL_RUNNING);
      process.exitCode = exitCode;
    });
}
