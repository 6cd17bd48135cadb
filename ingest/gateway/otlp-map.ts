import { createHash } from 'node:crypto';
import { logRecordToEvents, type OtelAttributes } from '../../collectors/index.ts';
import type { OtlpLogRecord } from './otlp.ts';

/**
 * Maps a decoded OTLP log record onto the contract event inputs it carries, with
 * the mapping the MCP collector defines (DESIGN §3: `mcp.method.name` →
 * `mcp_method`, …): one event, or two for the collector's `exchange` record
 * (an arrival and its settlement in one record; collectors/mcp README "Records
 * on the wire").
 *
 * An event without an id (no `log.record.uid`) gets a deterministic `event_id`:
 * an RFC 9562 v8 UUID from SHA-256 of the record's event name, time, attributes
 * and resource (and the event's index within the record), so an exporter that
 * resends a batch after a timeout does not store it twice.
 */
export function mapOtlpRecord(record: OtlpLogRecord): unknown[] {
  const events = logRecordToEvents({
    eventName: record.eventName,
    timeUnixNano: record.timeUnixNano,
    attributes: record.attributes as OtelAttributes,
    resourceAttributes: record.resource as OtelAttributes,
  });
  events.forEach((event, index) => {
    if (event.event_id !== undefined && event.event_id !== '') return;
    const digest = createHash('sha256')
      .update(JSON.stringify([record.eventName, record.timeUnixNano, record.attributes, record.resource, ...(index > 0 ? [index] : [])]))
      .digest();
    event.event_id = uuidV8(digest);
  });
  return events;
}

/** Formats the first 16 bytes of `bytes` as a UUID with version 8 and the RFC 9562 variant. */
function uuidV8(bytes: Buffer): string {
  const b = Buffer.from(bytes.subarray(0, 16));
  b[6] = (b[6]! & 0x0f) | 0x80;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
