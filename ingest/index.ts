/** Ingest: the batching writer and its sinks (gateway, transport and consumer come later). */
export { createBatchWriter } from './writer/batch-writer.ts';
export type { BatchSink, BatchWriter, BatchWriterOptions, BatchWriterStats, SinkResult } from './writer/batch-writer.ts';
export { contentToken, createStoreSink } from './writer/store-sink.ts';
export type { StoreSink, StoreSinkOptions, StoreSinkStats } from './writer/store-sink.ts';
