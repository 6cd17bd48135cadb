import type { Command } from 'commander';
import type { ServerEndpoints } from '../../api/index.ts';
import { ensureDeploymentKey, isLoopbackHost, deploymentKeyWarning } from '../../core/index.ts';
import { startCompaction } from '../../store/index.ts';
import { configFrom, listenError, openCommandStore, portFlag } from '../context.ts';
import { STILL_RUNNING, untilSignal } from '../signals.ts';

interface ServeFlags {
  host: string;
  port: string;
  token?: string;
}

function describe(e: ServerEndpoints, location: string, mode: string, token: boolean, key: string, host: string): string {
  const owner = mode === 'embedded' ? ' (this process owns it while it runs: other continuity commands on this directory stop with CONT_ERR_STORE_LOCKED; read it through the HTTP API below)' : '';
  // (a wildcard host is every address; the URLs below name loopback, which reaches it from
  // this machine: the line said only "listening on http://127.0.0.1:…", a newcomer pass)
  const port = /:(\d+)$/.exec(e.base)?.[1] ?? '';
  const wildcard = host === '0.0.0.0' || host === '::' || host === '[::]';
  return [
    `continuity serve: store ${mode} ${location}${owner}`,
    wildcard ? `listening on every address (${host}, port ${port}); from this machine ${e.base}` : `listening on ${e.base}`,
    `  POST ${e.otlpLogs}    OTLP/HTTP logs (protobuf or JSON, gzip ok)`,
    `  POST ${e.events}  contract events as JSON`,
    `  GET  ${e.api}/queries, ${e.api}/queries/<name>?param=value, ${e.api}/report; POST ${e.api}/sql, ${e.api}/canary (continuity canary --url ${e.base})`,
    'OpenTelemetry exporters (and the MCP collector, otlp.url):',
    `  OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=${e.otlpLogs}`,
    '  OTEL_EXPORTER_OTLP_LOGS_PROTOCOL=http/protobuf   (http/json works too)',
    ...(token ? ['  OTEL_EXPORTER_OTLP_LOGS_HEADERS=Authorization=Bearer%20<token>   (every route but /healthz and /readyz requires it)'] : []),
    key === 'CONTINUITY_HASH_KEY'
      ? 'deployment hash key: CONTINUITY_HASH_KEY (give the MCP collector the same hashKey, and import proxy logs with it set)'
      : `deployment hash key: ${key} (give the MCP collector its contents as hashKey; imports into this directory use it)`,
    'stop with Ctrl-C or SIGTERM (writes what was accepted, then closes the store)',
    '',
  ].join('\n');
}

/**
 * `continuity serve [--host 127.0.0.1] [--port 4318] [--token T]`: the ingest
 * gateway, the in-process writer and the read API in one process, on the
 * configured store (embedded by default; the ClickHouse server when CLICKHOUSE_URL
 * is set). One graceful shutdown on SIGINT/SIGTERM: stop accepting, flush the
 * writer, close the store.
 */
export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the ingest gateway (OTLP/HTTP logs, JSON events), the store writer and the read API (/api) in one process')
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--port <port>', 'TCP port (4318: the OTLP/HTTP default; 0: any free port)', '4318')
    .option('--token <token>', 'bearer token every route but /healthz and /readyz requires, at least 16 characters (env CONTINUITY_INGEST_TOKEN)')
    .action(async (flags: ServeFlags, cmd: Command) => {
      const config = configFrom({ ...cmd.optsWithGlobals(), ingestToken: flags.token });
      const port = portFlag(flags.port);
      // (loaded here, not at start: every other command would pay for the HTTP stack)
      const { createContinuityServer } = await import('../../api/index.ts');
      const store = await openCommandStore(config);
      // the key exists before any event arrives: a collector is given it first (found by a newcomer pass: no file until the first import)
      let key: string;
      try {
        key = ensureDeploymentKey(config);
        const mismatch = deploymentKeyWarning(config);
        if (mismatch) process.stderr.write(mismatch + '\n');
      } catch (err) {
        await store.close();
        throw err;
      }
      const server = await createContinuityServer({ store, bearerToken: config.ingestToken, queryDefaults: config });
      // a second signal exits at once: say what of the accepted events it leaves unwritten
      const signal = untilSignal(
        () => {
          const { bufferedRows, pendingBatches, pendingRows } = server.transport.writer.stats;
          if (bufferedRows === 0 && pendingBatches === 0) return 'every accepted event was written';
          // (in events: a count of batches left the reader to guess how many; a break-it pass)
          return `${bufferedRows + pendingRows} accepted event(s) not yet written are lost: ${bufferedRows} in the open batch, ${pendingRows} in ${pendingBatches} batch(es) queued or being written`;
        },
        () => store.statements > 0,
      );
      let endpoints: ServerEndpoints;
      try {
        endpoints = await server.listen(flags.host, port);
      } catch (err) {
        await server.shutdown();
        await store.close();
        throw listenError(err, flags.host, port);
      }
      process.stdout.write(describe(endpoints, store.location, store.mode, config.ingestToken !== undefined, key, flags.host));
      // open beyond this machine with no token: anyone who reaches it can send events and read everything (a break-it pass)
      if (config.ingestToken === undefined && !isLoopbackHost(flags.host)) {
        process.stderr.write(
          `warning: serve listens on ${flags.host}, beyond this machine, with no --token: anyone who can reach it can send events and read the whole store through /api/sql; set --token (or CONTINUITY_INGEST_TOKEN)\n`,
        );
      }
      // serve never goes through Kafka: say so rather than let KAFKA_BROKERS look obeyed (found by a newcomer pass)
      if (config.kafka) {
        process.stderr.write(
          'note: KAFKA_BROKERS is set, but serve writes what it accepts straight to its store, not through Kafka; ' +
            'for the Kafka path run `continuity gateway` and `continuity consumer` (docs/ingest-kafka.md)\n',
        );
      }
      // closed days merged into one part each, every 15 minutes (store/compact.ts)
      const compaction = startCompaction(store, {
        onPass: ({ merged, error }) => {
          if (error) process.stderr.write(`compaction failed (tried again in 15 minutes): ${error.message}\n`);
          for (const p of merged) process.stderr.write(`compacted ${p.day} ${p.table}: ${p.parts} parts, ${p.rows} rows${p.skipped ? ` skipped (${p.skipped})` : ` in ${p.ms} ms`}\n`);
        },
      });
      const received = await signal;
      process.stderr.write(`${received}: shutting down (no new requests; writing what was accepted)\n`);
      // no new requests and the accepted events written first; then the compaction
      // stops (a merge under way runs to its end before the store closes)
      const { error } = await server.shutdown();
      await compaction.stop();
      const rows = server.transport.writer.stats;
      await store.close();
      process.stderr.write(`stopped: ${rows.rows} event(s) written this run${rows.dropped ? `, ${rows.dropped} lost` : ''}; store closed\n`);
      if (store.statements > 0) process.stderr.write(STILL_RUNNING);
      if (error) throw error;
    });
}
