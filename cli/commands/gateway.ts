import type { Command } from 'commander';
import { closeWithin, ContinuityError, type Config, type KafkaConfig } from '../../core/index.ts';
import type { KafkaLogLevel } from '../../ingest/index.ts';
import { configFrom, listenError, portFlag } from '../context.ts';
import { untilSignal } from '../signals.ts';

/** The Kafka settings a Kafka-mode command needs. @throws ContinuityError CONT_ERR_CONFIG when KAFKA_BROKERS is unset. */
export function requireKafka(config: Config, command: string): KafkaConfig {
  if (!config.kafka) {
    throw new ContinuityError('CONT_ERR_CONFIG', `KAFKA_BROKERS: \`continuity ${command}\` needs a Kafka cluster (e.g. KAFKA_BROKERS=127.0.0.1:39092; \`continuity dev kafka start\` runs one)`);
  }
  return config.kafka;
}

interface GatewayFlags {
  host: string;
  port: string;
  token?: string;
  logLevel: KafkaLogLevel;
}

/**
 * `continuity gateway [--host 127.0.0.1] [--port 4318] [--token T]`: the ingest
 * gateway (OTLP/HTTP logs, JSON events) producing to the Kafka topic (KAFKA_BROKERS).
 * It answers 503 with Retry-After while Kafka cannot take events, and refuses an
 * event over KAFKA_MAX_MESSAGE_BYTES for good (413, or listed in a partial 400).
 * SIGINT/SIGTERM: stop accepting (a request still arriving on an open connection is
 * answered 503), wait for Kafka's acknowledgements, print what was sent and refused,
 * exit.
 */
export function registerGateway(program: Command): void {
  program
    .command('gateway')
    .description('run the ingest gateway in front of Kafka (needs KAFKA_BROKERS; the consumer writes to the store)')
    .option('--host <host>', 'listen address', '127.0.0.1')
    .option('--port <port>', 'TCP port (0: any free port)', '4318')
    .option('--token <token>', 'bearer token the POST routes require, at least 16 characters (env CONTINUITY_INGEST_TOKEN)')
    .option('--log-level <level>', 'kafkajs log level (stderr): nothing | error | warn | info | debug', 'nothing')
    .action(async (flags: GatewayFlags, cmd: Command) => {
      const config = configFrom({ ...cmd.optsWithGlobals(), ingestToken: flags.token });
      const kafka = requireKafka(config, 'gateway');
      // (loaded here, not at start: every other command would pay for Kafka and HTTP)
      const { createGateway, createKafkaProducerSink, mapOtlpRecord } = await import('../../ingest/index.ts');
      const sink = createKafkaProducerSink({ kafka, logLevel: flags.logLevel });
      await sink.start().catch((err: unknown) => {
        process.stderr.write(`warning: ${(err as Error).message}; answering 503 until Kafka is back\n`);
      });
      const { app, stats } = await createGateway({ sink, mapOtlpRecord, bearerToken: config.ingestToken });
      const port = portFlag(flags.port);
      const address = await app.listen({ host: flags.host, port }).catch(async (err: unknown) => {
        await app.close();
        await sink.shutdown();
        throw listenError(err, flags.host, port);
      });
      process.stdout.write(
        `continuity gateway: listening on ${address} (POST /v1/logs, POST /v1/events) → Kafka ${kafka.brokers.join(',')} topic ${kafka.topic} (${kafka.partitions} partitions)\n`,
      );
      await untilSignal();
      await closeWithin(app);
      await sink.shutdown();
      // The gateway's counts are what the clients got: every 503, those of the shutdown too.
      process.stdout.write(
        `continuity gateway: stopped; ${sink.stats.sentEvents} events sent, ${stats.unavailable} requests refused with 503 (${stats.unavailableEvents} events), ${stats.rejected} events refused for good (invalid or too large)\n`,
      );
    });
}
