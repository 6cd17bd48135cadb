import { createRequire } from 'node:module';
import { OTLPLogExporter } from '@opentelemetry/exporter-logs-otlp-http';
import type { Resource } from '@opentelemetry/resources';
import type { LogRecordExporter, ReadableLogRecord } from '@opentelemetry/sdk-logs';
import { ContinuityError } from '../../core/index.ts';
import type { AttributeValue } from './log-record.ts';

/**
 * The export side of the collector, split the OpenTelemetry way: {@link ExportQueue}
 * is the processor (bounded queue, batch size, flush interval, drop counter); a
 * {@link RecordSink} only sends one batch and reports the result. Nothing here
 * retries on its own (the OTLP/HTTP transport's bounded retry within its timeout
 * is the only retry).
 *
 * What sits in the queue is the collector's own compact per-request state, not
 * log records: a record (attribute map and then OTLP/JSON text) is built only at
 * export time, in batches, off the request path.
 */

/** Export counters, all monotonic except `queued` and `exporting`. Units: log records, except `export_failures` (export calls) and `emitted_events`. */
export interface PipelineCounters {
  /** Records the collector produced. */
  emitted: number;
  /** Contract events those records carry (an `exchange` record carries two: arrival and settlement). */
  emitted_events: number;
  /** Records refused because the queue held `maxQueueSize` records. */
  dropped: number;
  /** Records the exporter reported as delivered. */
  exported: number;
  /** Export calls that failed (unreachable endpoint, timeout, non-retryable status). */
  export_failures: number;
  /** Records in failed export calls, or refused by the receiver (OTLP partial success): lost. */
  failed_records: number;
  /** Records accepted and not yet handed to the exporter. */
  queued: number;
  /** Records handed to the exporter whose result is pending. */
  exporting: number;
}

/** A fresh counter set. Invariant: emitted = dropped + queued + exporting + exported + failed_records. */
export function createPipelineCounters(): PipelineCounters {
  return { emitted: 0, emitted_events: 0, dropped: 0, exported: 0, export_failures: 0, failed_records: 0, queued: 0, exporting: 0 };
}

/** One log record as the queue hands it to a sink. */
export interface OutRecord {
  /** `LogRecord.eventName`: the contract `event_type` (or `exchange`, see log-record.ts). */
  readonly eventName: string;
  /** Event time, µs since the Unix epoch (UTC). */
  readonly tsUs: number;
  readonly attributes: Readonly<Record<string, AttributeValue>>;
}

/**
 * Sends one batch; calls `done` exactly once: with the error of a failed export, or
 * with how many of the records the receiver refused (OTLP partial success,
 * `rejectedLogRecords`; 0 or absent: none). Never retries on its own account.
 */
export interface RecordSink {
  export(records: readonly OutRecord[], done: (error?: Error, rejected?: number) => void): void;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** The record's resource and instrumentation scope, shared by every record of one collector. */
export interface RecordOrigin {
  resource: Resource;
  scope: { name: string; version: string };
}

/** Options of {@link ExportQueue}. */
export interface ExportQueueOptions<T> {
  sink: RecordSink;
  counters: PipelineCounters;
  /** Records accepted and not yet exported, at most (beyond: dropped and counted). */
  maxQueueSize: number;
  maxExportBatchSize: number;
  /** Longest time a record waits for export, ms. */
  scheduledDelayMillis: number;
  /** An export whose result has not come back after this long counts as failed, ms. */
  exportTimeoutMillis: number;
  /** Builds the record of one queued item (at export time); undefined skips it. */
  render: (item: T) => OutRecord | undefined;
  /** Called before each export round (timer or flush): the collector queues arrivals of requests still open. */
  beforeExport: () => void;
  /** Told about errors of `render`, `beforeExport` and the sink (already counted). */
  onError: (error: unknown) => void;
}

/**
 * The collector's processor: a bounded FIFO of items, exported in batches of at
 * most `maxExportBatchSize`, one export at a time, when a batch is full or
 * `scheduledDelayMillis` after work arrived. O(1) per item on the request path
 * (an array push and a counter; one timer per round, not per item); never blocks.
 */
export class ExportQueue<T> {
  private items: T[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private exporting: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly o: ExportQueueOptions<T>) {}

  /** Queues one item worth `records` records and `events` contract events; false when dropped (queue full or closed). */
  push(item: T, events = 1): boolean {
    const c = this.o.counters;
    c.emitted += 1;
    c.emitted_events += events;
    if (this.closed || c.queued >= this.o.maxQueueSize) {
      c.dropped += 1;
      return false;
    }
    c.queued += 1;
    this.items.push(item);
    if (this.items.length - this.head >= this.o.maxExportBatchSize) {
      // A full batch goes out on the next turn (not inside the host's request callback).
      if (!this.immediate && !this.exporting) this.immediate = setImmediate(this.onTimer);
    } else this.schedule();
    return true;
  }

  /** The queue can take another item now. */
  hasRoom(): boolean {
    return !this.closed && this.o.counters.queued < this.o.maxQueueSize;
  }

  /** Arms the export timer if it is not armed (e.g. a request arrived: its arrival must leave even if it never settles). */
  schedule(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(this.onTimer, this.o.scheduledDelayMillis);
    this.timer.unref();
  }

  private readonly onTimer = (): void => {
    this.timer = undefined;
    this.immediate = undefined;
    void this.drain();
  };

  /** Exports everything queued so far (after `beforeExport`), batch after batch; resolves when done. */
  private drain(): Promise<void> {
    if (this.exporting) return this.exporting.then(() => this.drain());
    try {
      this.o.beforeExport();
    } catch (err) {
      this.o.onError(err);
    }
    if (this.head > 0) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    if (this.items.length === 0) return Promise.resolve();
    // Exports what is queued now; items that arrive meanwhile wait for their own
    // round (a full batch or the timer), so a busy server exports in batches, not
    // one small request after another.
    let end = this.items.length;
    const run = (async () => {
      while (end - this.head > 0) {
        await this.exportOne(end - this.head);
        if (end - this.head <= 0 && this.items.length - this.head >= this.o.maxExportBatchSize) end = this.items.length;
      }
      if (this.items.length - this.head > 0) this.schedule();
    })();
    this.exporting = run.finally(() => {
      this.exporting = undefined;
    });
    return this.exporting;
  }

  private exportOne(available: number): Promise<void> {
    const n = Math.min(this.o.maxExportBatchSize, available);
    const batch = this.items.slice(this.head, this.head + n);
    this.head += n;
    const c = this.o.counters;
    c.queued = Math.max(0, c.queued - n);
    const records: OutRecord[] = [];
    let skipped = 0;
    for (const item of batch) {
      let r: OutRecord | undefined;
      try {
        r = this.o.render(item);
        if (r) r = wellFormed(r);
      } catch (err) {
        this.o.onError(err);
      }
      if (r) records.push(r);
      else skipped += 1;
    }
    // A record that could not be built is lost: count it as failed so the invariant holds.
    c.failed_records += skipped;
    if (records.length === 0) return Promise.resolve();
    const m = records.length;
    c.exporting += m;
    return new Promise<void>((resolve) => {
      let finished = false;
      const finish = (error?: Error, rejected = 0) => {
        if (finished) return;
        finished = true;
        clearTimeout(timeout);
        c.exporting = Math.max(0, c.exporting - m);
        // A failed export is counted, not an internal error: an unreachable endpoint is the sink's business.
        if (error) {
          c.export_failures += 1;
          c.failed_records += m;
        } else {
          // Records the receiver refused are lost as much as a failed call's (they were counted exported: a break-it pass).
          const lost = Math.min(m, Math.max(0, Math.floor(rejected) || 0));
          c.failed_records += lost;
          c.exported += m - lost;
        }
        resolve();
      };
      const timeout = setTimeout(() => finish(new Error(`export timed out after ${this.o.exportTimeoutMillis} ms`)), this.o.exportTimeoutMillis);
      timeout.unref();
      try {
        this.o.sink.export(records, finish);
      } catch (err) {
        finish(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /** Exports everything queued (and the arrivals of open requests); resolves, never rejects. */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    try {
      await this.drain();
      await this.o.sink.forceFlush();
    } catch (err) {
      this.o.onError(err);
    }
  }

  /** Flushes, then refuses further items and shuts the sink down. */
  async shutdown(): Promise<void> {
    await this.flush();
    this.closed = true;
    if (this.immediate) clearImmediate(this.immediate);
    try {
      await this.o.sink.shutdown();
    } catch (err) {
      this.o.onError(err);
    }
  }
}

/**
 * `r` with every string attribute well-formed UTF-16 (ECMA-262
 * `String.prototype.toWellFormed`: a lone surrogate becomes U+FFFD). A client's text
 * can hold one (a JSON `\ud83d` escape), and a cut at a length limit can split a
 * pair (`clientInfo.name` of 255 letters and an emoji); the store cannot keep such a
 * string, so the gateway refused every record of the session that carried it, while
 * the counters said exported (a break-it pass). `r` itself when all are well-formed.
 */
export function wellFormed(r: OutRecord): OutRecord {
  let fixed: Record<string, AttributeValue> | undefined;
  for (const key in r.attributes) {
    const v = r.attributes[key];
    if (typeof v === 'string' && !v.isWellFormed()) (fixed ??= { ...r.attributes })[key] = v.toWellFormed();
  }
  return fixed === undefined ? r : { ...r, attributes: fixed };
}

const EXPORT_SUCCESS = 0;

/**
 * A sink around any OpenTelemetry `LogRecordExporter` (tests: InMemoryLogRecordExporter;
 * embedded mode; the protobuf OTLP exporter): each record becomes a `ReadableLogRecord`.
 */
export function createExporterSink(exporter: LogRecordExporter, origin: RecordOrigin): RecordSink {
  const scope = { name: origin.scope.name, version: origin.scope.version };
  return {
    export(records, done) {
      const logs: ReadableLogRecord[] = records.map((r) => {
        const hr: [number, number] = [Math.floor(r.tsUs / 1e6), (r.tsUs % 1e6) * 1000];
        return { hrTime: hr, hrTimeObserved: hr, eventName: r.eventName, resource: origin.resource, instrumentationScope: scope, attributes: r.attributes, droppedAttributesCount: 0 };
      });
      exporter.export(logs, (result) => done(result.code === EXPORT_SUCCESS ? undefined : (result.error ?? new Error('export failed'))));
    },
    forceFlush: () => exporter.forceFlush(),
    shutdown: () => exporter.shutdown(),
  };
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

function otlpConfig(options: OtlpOptions): OtlpConfig {
  return {
    url: options.url ?? DEFAULT_OTLP_URL,
    headers: options.headers ?? {},
    timeoutMillis: options.timeoutMillis ?? 10_000,
    // One request at a time: the queue exports sequentially anyway.
    concurrencyLimit: 2,
    ...(options.compression ? { compression: options.compression as OtlpConfig['compression'] } : {}),
  };
}

/**
 * Creates the OpenTelemetry OTLP/HTTP log exporter. JSON uses `@opentelemetry/exporter-logs-otlp-http`;
 * protobuf uses `@opentelemetry/exporter-logs-otlp-proto`, loaded only when asked for.
 * (The collector's default JSON path uses {@link createOtlpJsonSink} instead.)
 *
 * @throws ContinuityError `CONT_ERR_CONFIG` when protobuf is asked for and the
 *   protobuf exporter package cannot be loaded.
 */
export function createOtlpExporter(options: OtlpOptions = {}): LogRecordExporter {
  const config = otlpConfig(options);
  if (options.encoding !== 'protobuf') return new OTLPLogExporter(config);
  let mod: { OTLPLogExporter: new (config: OtlpConfig) => LogRecordExporter };
  try {
    mod = createRequire(import.meta.url)('@opentelemetry/exporter-logs-otlp-proto') as typeof mod;
  } catch (cause) {
    throw new ContinuityError('CONT_ERR_CONFIG', 'otlp.encoding=protobuf needs the @opentelemetry/exporter-logs-otlp-proto package', { cause });
  }
  return new mod.OTLPLogExporter(config);
}

/** An encoded ExportLogsServiceRequest and the number of records in it. */
interface EncodedBatch {
  readonly count: number;
  readonly bytes: Uint8Array;
}

interface ExportDelegate {
  export(batch: EncodedBatch, done: (result: { code: number; error?: Error }) => void): void;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

interface OtlpHttpModule {
  createOtlpHttpExportDelegate(
    options: unknown,
    serializer: { serializeRequest(b: EncodedBatch): Uint8Array; deserializeResponse(data: Uint8Array): unknown },
    componentType: string,
    metricsHelper: { name: 'log'; countItems(b: EncodedBatch): number },
    meterProvider: undefined,
  ): ExportDelegate;
  convertLegacyHttpOptions(config: OtlpConfig, signal: string, path: string, requiredHeaders: Record<string, string>): unknown;
}

/**
 * The collector's default sink: OTLP/HTTP with the JSON encoding ("OTLP/HTTP",
 * `application/json` `ExportLogsServiceRequest`), written straight from the
 * records' attribute maps into one string per batch — no per-attribute OTLP
 * objects. The HTTP side (keep-alive agent, timeout, gzip, headers, the bounded
 * retry of 429/502/503/504 within the timeout) is the OpenTelemetry exporter's
 * own transport, `@opentelemetry/otlp-exporter-base/node-http`, resolved through
 * `@opentelemetry/exporter-logs-otlp-http`, whose dependency it is.
 */
export function createOtlpJsonSink(options: OtlpOptions, origin: RecordOrigin): RecordSink {
  const requireFrom = createRequire(createRequire(import.meta.url).resolve('@opentelemetry/exporter-logs-otlp-http'));
  const http = requireFrom('@opentelemetry/otlp-exporter-base/node-http') as OtlpHttpModule;
  let rejected = 0;
  const delegate = http.createOtlpHttpExportDelegate(
    http.convertLegacyHttpOptions(otlpConfig(options), 'LOGS', 'v1/logs', { 'Content-Type': 'application/json' }),
    {
      serializeRequest: (b) => b.bytes,
      // The delegate calls this and then the export's callback in one synchronous step,
      // so `rejected` is the answer of the request whose callback reads it.
      deserializeResponse: (data) => {
        const response = data.byteLength ? JSON.parse(new TextDecoder().decode(data)) : {};
        rejected = Number(response?.partialSuccess?.rejectedLogRecords) || 0;
        return response;
      },
    },
    'otlp_http_log_exporter',
    { name: 'log', countItems: (b) => b.count },
    undefined,
  );
  const resourceJson = `{"attributes":${encodeAttributes(origin.resource.attributes as Record<string, AttributeValue>)}}`;
  const scopeJson = JSON.stringify({ name: origin.scope.name, version: origin.scope.version });
  return {
    export(records, done) {
      let body = `{"resourceLogs":[{"resource":${resourceJson},"scopeLogs":[{"scope":${scopeJson},"logRecords":[`;
      for (let i = 0; i < records.length; i++) {
        const r = records[i]!;
        // observedTimeUnixNano is optional (OTLP): the event time is always set.
        body += `${i ? ',' : ''}{"timeUnixNano":"${Math.round(r.tsUs)}000","eventName":${jsonKey(r.eventName)},"attributes":${encodeAttributes(r.attributes)}}`;
      }
      body += ']}]}]}';
      delegate.export({ count: records.length, bytes: Buffer.from(body, 'utf8') }, (result) => {
        const refused = rejected;
        rejected = 0;
        done(result.code === EXPORT_SUCCESS ? undefined : (result.error ?? new Error('export failed')), refused);
      });
    },
    forceFlush: () => delegate.forceFlush(),
    shutdown: () => delegate.shutdown(),
  };
}

const keyJson = new Map<string, string>();
const keyValuePrefix = new Map<string, string>();

/** JSON text of an attribute key or event name, memoized (a small fixed set). */
function jsonKey(key: string): string {
  let text = keyJson.get(key);
  if (text === undefined) {
    text = JSON.stringify(key);
    if (keyJson.size < 1024) keyJson.set(key, text);
  }
  return text;
}

/** `{"key":<key>,"value":{` for an attribute key, memoized. */
function kvPrefix(key: string): string {
  let text = keyValuePrefix.get(key);
  if (text === undefined) {
    text = `{"key":${JSON.stringify(key)},"value":{`;
    if (keyValuePrefix.size < 1024) keyValuePrefix.set(key, text);
  }
  return text;
}

/** OTLP/JSON `KeyValue` list (common/v1): strings, integers (`intValue`), other numbers (`doubleValue`), booleans. */
export function encodeAttributes(attributes: Readonly<Record<string, unknown>>): string {
  let out = '';
  for (const key in attributes) {
    const v = attributes[key];
    let value: string;
    if (typeof v === 'string') value = `"stringValue":${JSON.stringify(v)}}}`;
    else if (typeof v === 'number') value = !Number.isFinite(v) ? `"stringValue":"${v}"}}` : Number.isInteger(v) ? `"intValue":${v}}}` : `"doubleValue":${v}}}`;
    else if (typeof v === 'boolean') value = `"boolValue":${v}}}`;
    else continue;
    out += (out === '' ? '' : ',') + kvPrefix(key) + value;
  }
  return `[${out}]`;
}
