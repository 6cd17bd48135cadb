import { createRequire } from 'node:module';
import { OTLPLogExporter } from '@opentelemetry/exporter-logs-otlp-http';
import type { LogRecordExporter, LogRecordProcessor, ReadWriteLogRecord, ReadableLogRecord } from '@opentelemetry/sdk-logs';
import { ContinuityError } from '../../core/index.ts';

/**
 * The export side of the collector, split the OpenTelemetry way: the SDK's
 * BatchLogRecordProcessor batches; {@link BoundedQueueProcessor} in front of it
 * enforces the queue bound and counts drops; {@link CountingExporter} around the
 * exporter counts what was sent and what failed. Nothing here retries on its own
 * (the OTLP exporter's bounded retry within its timeout is the only retry).
 */

/** Export counters, all monotonic except `queued` and `exporting`. Units: log records, except `export_failures` (export calls). */
export interface PipelineCounters {
  /** Records the collector produced. */
  emitted: number;
  /** Records refused because the queue held `maxQueueSize` records. */
  dropped: number;
  /** Records the exporter reported as delivered. */
  exported: number;
  /** Export calls that failed (unreachable endpoint, timeout, non-retryable status). */
  export_failures: number;
  /** Records in failed export calls (lost). */
  failed_records: number;
  /** Records accepted and not yet handed to the exporter. */
  queued: number;
  /** Records handed to the exporter whose result is pending. */
  exporting: number;
}

/** A fresh counter set. Invariant: emitted = dropped + queued + exporting + exported + failed_records. */
export function createPipelineCounters(): PipelineCounters {
  return { emitted: 0, dropped: 0, exported: 0, export_failures: 0, failed_records: 0, queued: 0, exporting: 0 };
}

type ExportCallback = Parameters<LogRecordExporter['export']>[1];
type EmitContext = Parameters<LogRecordProcessor['onEmit']>[1];
type ExportResult = Parameters<ExportCallback>[0];
/** `ExportResultCode.SUCCESS` / `FAILED` of @opentelemetry/core (numeric enum). */
const EXPORT_SUCCESS = 0;
const EXPORT_FAILED = 1 as ExportResult['code'];

/**
 * Wraps an exporter to count delivered and failed records. Calls the wrapped
 * exporter's callback exactly once per export; a synchronous throw from the
 * wrapped exporter becomes a failed result (never propagates).
 */
export class CountingExporter implements LogRecordExporter {
  constructor(
    private readonly inner: LogRecordExporter,
    private readonly counters: PipelineCounters,
  ) {}

  export(logs: ReadableLogRecord[], resultCallback: ExportCallback): void {
    const n = logs.length;
    const c = this.counters;
    c.queued = Math.max(0, c.queued - n);
    c.exporting += n;
    let done = false;
    const finish: ExportCallback = (result) => {
      if (done) return;
      done = true;
      c.exporting = Math.max(0, c.exporting - n);
      if (result.code === EXPORT_SUCCESS) c.exported += n;
      else {
        c.export_failures += 1;
        c.failed_records += n;
      }
      resultCallback(result);
    };
    try {
      this.inner.export(logs, finish);
    } catch (err) {
      finish({ code: EXPORT_FAILED, error: err instanceof Error ? err : new Error(String(err)) });
    }
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}

/**
 * Enforces the queue bound in front of the SDK's BatchLogRecordProcessor and
 * counts drops. The SDK drops silently (it only reports drops to a self-
 * observability meter); this processor refuses a record when `queued` (accepted
 * but not yet handed to the exporter — never less than the SDK's own buffer)
 * reaches `maxQueueSize`, so the SDK buffer never overflows and every drop is
 * counted here. O(1) per record; never blocks.
 */
export class BoundedQueueProcessor implements LogRecordProcessor {
  constructor(
    private readonly inner: LogRecordProcessor,
    private readonly maxQueueSize: number,
    private readonly counters: PipelineCounters,
  ) {}

  onEmit(logRecord: ReadWriteLogRecord, context?: EmitContext): void {
    const c = this.counters;
    c.emitted += 1;
    if (c.queued >= this.maxQueueSize) {
      c.dropped += 1;
      return;
    }
    c.queued += 1;
    this.inner.onEmit(logRecord, context);
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}

/** OTLP/HTTP exporter settings. */
export interface OtlpOptions {
  /** Endpoint URL (default `http://127.0.0.1:4318/v1/logs`, the OTLP/HTTP logs path). */
  url?: string;
  /** `json` (application/json, default) or `protobuf` (application/x-protobuf). */
  encoding?: 'json' | 'protobuf';
  /** Extra request headers (e.g. an ingest token). */
  headers?: Record<string, string>;
  /** Per-export timeout, ms, including the exporter's own bounded retries (default 10 000). */
  timeoutMillis?: number;
  /** Request body compression (default none). */
  compression?: 'gzip' | 'none';
}

/** Default OTLP/HTTP logs endpoint: a collector or the ingest gateway on this host (OTLP spec default port 4318). */
export const DEFAULT_OTLP_URL = 'http://127.0.0.1:4318/v1/logs';

type OtlpConfig = NonNullable<ConstructorParameters<typeof OTLPLogExporter>[0]>;

/**
 * Creates the OTLP/HTTP log exporter. JSON uses `@opentelemetry/exporter-logs-otlp-http`;
 * protobuf uses `@opentelemetry/exporter-logs-otlp-proto`, loaded only when asked for.
 *
 * @throws ContinuityError `CONT_ERR_CONFIG` when protobuf is asked for and the
 *   protobuf exporter package cannot be loaded.
 */
export function createOtlpExporter(options: OtlpOptions = {}): LogRecordExporter {
  const config: OtlpConfig = {
    url: options.url ?? DEFAULT_OTLP_URL,
    headers: options.headers ?? {},
    timeoutMillis: options.timeoutMillis ?? 10_000,
    // One request at a time: the batch processor exports sequentially anyway.
    concurrencyLimit: 2,
    ...(options.compression ? { compression: options.compression as OtlpConfig['compression'] } : {}),
  };
  if (options.encoding !== 'protobuf') return new OTLPLogExporter(config);
  let mod: { OTLPLogExporter: new (config: OtlpConfig) => LogRecordExporter };
  try {
    mod = createRequire(import.meta.url)('@opentelemetry/exporter-logs-otlp-proto') as typeof mod;
  } catch (cause) {
    throw new ContinuityError('CONT_ERR_CONFIG', 'otlp.encoding=protobuf needs the @opentelemetry/exporter-logs-otlp-proto package', { cause });
  }
  return new mod.OTLPLogExporter(config);
}
