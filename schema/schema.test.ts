import { describe, expect, it } from 'vitest';
import { parseEvent } from './index.ts';

const base = { event_id: '0190d3c4-8a5e-7c3b-9f1e-2a4b6c8d0e1f', ts: 1_796_011_472_545_440, source: 'server' };

describe('parseEvent (contract v1)', () => {
  it('accepts a settlement and applies defaults', () => {
    const r = parseEvent({ ...base, event_type: 'settlement', arrival_id: 'a1', outcome: 'ok', http_status: 200 });
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.event).toMatchObject({ session_resolution: 'none', attrs: {} });
  });
  it('keeps unknown fields in attrs instead of dropping them', () => {
    const r = parseEvent({ ...base, event_type: 'boot', pid: 7, 'k8s.pod.name': 'mcp-0', nested: { a: 1 } });
    expect(r.ok && r.event.attrs).toEqual({ 'k8s.pod.name': 'mcp-0', nested: '{"a":1}' });
  });
  it('refuses a settlement without arrival_id, naming the field', () => {
    const r = parseEvent({ ...base, event_type: 'settlement', outcome: 'ok' });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.issues.map((i) => i.path)).toContain('arrival_id');
  });
  it('refuses unknown event types, raw session ids and far-future timestamps with codes', () => {
    const unknown = parseEvent({ ...base, event_type: 'heartbeat' });
    expect(!unknown.ok && unknown.issues[0]!.code).toBe('unknown_event_type');
    const raw = parseEvent({ ...base, event_type: 'boot', session_key: '4f2b62a4-4517-4309-8dd1-da4057041770' });
    expect(!raw.ok && raw.issues[0]!.path).toBe('session_key');
    const future = parseEvent({ ...base, event_type: 'boot', ts: Date.now() * 1000 + 365 * 86_400e6 });
    expect(!future.ok && future.issues[0]!.code).toBe('ts_in_future');
  });
  it('refuses non-objects', () => {
    for (const v of [null, 3, 'x', []]) expect(parseEvent(v).ok).toBe(false);
  });
});
