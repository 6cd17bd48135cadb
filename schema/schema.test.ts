import { describe, expect, it } from 'vitest';
import { MAX_NESTING_DEPTH, nestingExceeds, parseEvent } from './index.ts';

const base = { event_id: '0190d3c4-8a5e-7c3b-9f1e-2a4b6c8d0e1f', ts: 1_796_011_472_545_440, source: 'server', boot_id: 'boot-1' };

describe('parseEvent (contract v1)', () => {
  it('accepts a settlement and applies defaults', () => {
    const r = parseEvent({ ...base, event_type: 'settlement', arrival_id: 'a1', outcome: 'ok', http_status: 200 });
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.event).toMatchObject({ session_resolution: 'none', attrs: {} });
  });
  it('refuses a boot or a shutdown with no boot_id (boots with none were taken for one incarnation), and takes other events without one', () => {
    const { boot_id: _, ...noBoot } = base;
    for (const type of ['boot', 'shutdown'] as const) {
      const extra = type === 'shutdown' ? { reason: 'signal' } : {};
      for (const [given, code] of [[{}, 'invalid_type'], [{ boot_id: '' }, 'invalid_format'], [{ boot_id: ' \t ' }, 'invalid_format']] as const) {
        const r = parseEvent({ ...noBoot, ...given, event_type: type, ...extra });
        expect(r.ok, `${type} ${JSON.stringify(given)}`).toBe(false);
        if (!r.ok) expect(r.issues).toEqual([expect.objectContaining({ path: 'boot_id', code })]);
      }
      expect(parseEvent({ ...base, event_type: type, ...extra }).ok).toBe(true);
    }
    expect(parseEvent({ ...noBoot, event_type: 'settlement', arrival_id: 'a1', outcome: 'ok' }).ok).toBe(true);
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
  it('refuses a lone UTF-16 surrogate in any string with lone_surrogate, naming each field (the store cannot keep it)', () => {
    // JSON's "\ud800" escape parses to a lone surrogate; the engine refuses the row later.
    const input = JSON.parse('{"event_type":"boot","service":"lone\\ud800surrogate","attrs":{"x":"x\\ud800y","k\\udc00":"v"},"odd":"tail\\udbff"}');
    const r = parseEvent({ ...base, ...input });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.issues.map((i) => [i.path, i.code])).toEqual([
      ['service', 'lone_surrogate'],
      ['attrs.x', 'lone_surrogate'],
      ['attrs.k\ufffd', 'lone_surrogate'],
      ['attrs.odd', 'lone_surrogate'],
    ]);
    expect(r.issues[0]!.message).toMatch(/surrogate/);
    // Paired surrogates (an emoji) are ordinary text.
    const emoji = parseEvent({ ...base, event_type: 'boot', service: 'emoji😀', attrs: { '😀': '😀' } });
    expect(emoji.ok).toBe(true);
  });
  it('refuses non-objects', () => {
    for (const v of [null, 3, 'x', []]) expect(parseEvent(v).ok).toBe(false);
  });
  it('refuses an unknown field nested deeper than MAX_NESTING_DEPTH with too_deep, without throwing, however deep', () => {
    const nested = (n: number): unknown => JSON.parse('['.repeat(n) + ']'.repeat(n));
    for (const n of [MAX_NESTING_DEPTH + 1, 100_000]) {
      const r = parseEvent({ ...base, event_type: 'boot', deep: nested(n) });
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.issues).toEqual([{ path: 'deep', code: 'too_deep', message: expect.stringContaining(`deeper than ${MAX_NESTING_DEPTH} levels`) }]);
    }
    const atLimit = parseEvent({ ...base, event_type: 'boot', deep: nested(MAX_NESTING_DEPTH) });
    expect(atLimit.ok && atLimit.event.attrs.deep).toBe('['.repeat(MAX_NESTING_DEPTH) + ']'.repeat(MAX_NESTING_DEPTH));
    // Issues of the contract fields are reported beside it.
    const both = parseEvent({ ...base, event_type: 'boot', pid: 'x', deep: nested(100_000) });
    expect(!both.ok && both.issues.map((i) => `${i.path} ${i.code}`).sort()).toEqual(['deep too_deep', 'pid invalid_type']);
  });
  it('never throws on deep values in contract fields either', () => {
    const deep = JSON.parse('['.repeat(100_000) + ']'.repeat(100_000));
    for (const field of ['event_type', 'ts', 'attrs', 'pid', 'service']) {
      const r = parseEvent({ ...base, event_type: 'boot', [field]: deep });
      expect(r.ok, field).toBe(false);
    }
    const inAttrs = parseEvent({ ...base, event_type: 'boot', attrs: { a: deep } });
    expect(!inAttrs.ok && inAttrs.issues[0]).toMatchObject({ path: 'attrs.a', code: 'invalid_type' });
  });
  it('measures nesting iteratively: arrays and objects count, scalars do not', () => {
    expect(nestingExceeds('x', 0)).toBe(false);
    expect(nestingExceeds({}, 0)).toBe(true);
    expect(nestingExceeds({ a: [1, { b: 'c' }] }, 3)).toBe(false);
    expect(nestingExceeds({ a: [1, { b: {} }] }, 3)).toBe(true);
    expect(nestingExceeds(JSON.parse('{"a":'.repeat(200_000) + '1' + '}'.repeat(200_000)), 64)).toBe(true);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(nestingExceeds(cyclic, 64)).toBe(true);
  });
  it('refuses an attrs that is not an object, with or without unknown fields beside it', () => {
    for (const extra of [{}, { other: 'field' }]) {
      const r = parseEvent({ ...base, event_type: 'boot', attrs: 'keepme', ...extra });
      expect(r.ok, JSON.stringify(extra)).toBe(false);
      if (!r.ok) expect(r.issues).toEqual([expect.objectContaining({ path: 'attrs', code: 'invalid_type' })]);
    }
  });
  it('keeps an unknown field that repeats an attrs entry once, and refuses one that contradicts it', () => {
    const same = parseEvent({ ...base, event_type: 'boot', attrs: { foo: 'x', bar: 'b' }, foo: 'x' });
    expect(same.ok && same.event.attrs).toEqual({ foo: 'x', bar: 'b' });
    const differ = parseEvent({ ...base, event_type: 'boot', attrs: { foo: 'inner' }, foo: 'outer' });
    expect(differ.ok).toBe(false);
    if (!differ.ok) expect(differ.issues).toEqual([expect.objectContaining({ path: 'foo', code: 'attrs_conflict' })]);
  });
  it('refuses a __proto__ key as a field or in attrs instead of losing it', () => {
    const json = JSON.stringify({ ...base, event_type: 'boot' }).slice(0, -1);
    const top = parseEvent(JSON.parse(`${json},"__proto__":"x","a":"b"}`));
    expect(!top.ok && top.issues).toEqual([expect.objectContaining({ path: '__proto__', code: 'forbidden_key' })]);
    for (const tail of [',"attrs":{"__proto__":"x"}}', ',"attrs":{"__proto__":{"polluted":"yes"}},"a":"b"}']) {
      const inAttrs = parseEvent(JSON.parse(json + tail));
      expect(!inAttrs.ok && inAttrs.issues).toEqual([expect.objectContaining({ path: 'attrs.__proto__', code: 'forbidden_key' })]);
    }
    // A constructor key is an ordinary name.
    const ctor = parseEvent({ ...base, event_type: 'boot', constructor: 'c' });
    expect(ctor.ok && ctor.event.attrs).toEqual({ constructor: 'c' });
  });
});
