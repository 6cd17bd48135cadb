import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ContinuityError } from '../../core/errors.ts';
import type { Store } from '../../store/index.ts';
import { decode, dedupToken, enrich, prepare, runBatch, validate, type DeadLetter, type InputMessage, type MessageRange, type WriteTargets } from './pipeline.ts';
import { encodeCommitMetadata, parseCommitMetadata } from './runner.ts';

const NOW_MS = 1_796_000_000_000;
const DAY_MS = 86_400_000;
const event = (extra: Record<string, unknown> = {}) => ({
  event_id: randomUUID(),
  event_type: 'boot',
  ts: NOW_MS * 1000,
  source: 'server',
  service: 'unit',
  boot_id: 'boot-unit',
  ...extra,
});
const msg = (offset: number, value: unknown, timestampMs = NOW_MS): InputMessage => ({
  offset: BigInt(offset),
  key: null,
  value: value === null ? null : Buffer.isBuffer(value) ? value : Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)),
  timestampMs,
  headers: {},
});
const range = (messages: InputMessage[], topic = 'events-t'): MessageRange => ({
  topic,
  partition: 3,
  first: messages[0]!.offset,
  last: messages[messages.length - 1]!.offset,
  messages,
});

describe('decode', () => {
  it('dead-letters empty, oversized, non-UTF-8 and non-JSON values with their reason', () => {
    expect(decode(msg(0, null), 100)).toMatchObject({ kind: 'dlq', reason: 'empty' });
    expect(decode(msg(0, ''), 100)).toMatchObject({ kind: 'dlq', reason: 'empty' });
    expect(decode(msg(0, 'x'.repeat(101)), 100)).toMatchObject({ kind: 'dlq', reason: 'too_large' });
    expect(decode(msg(0, Buffer.from([0x7b, 0xff, 0xfe, 0x7d])), 100)).toMatchObject({ kind: 'dlq', reason: 'not_utf8' });
    expect(decode(msg(0, '{"event_id": '), 100)).toMatchObject({ kind: 'dlq', reason: 'not_json' });
  });
  it('passes JSON through', () => {
    expect(decode(msg(0, '{"a":1}'), 100)).toEqual({ kind: 'ok', value: { a: 1 } });
  });
});

describe('validate', () => {
  it('dead-letters a contract violation naming the field and rule', () => {
    const out = validate({ ...event(), event_id: 'not-a-uuid' }, msg(0, '{}'));
    expect(out).toMatchObject({ kind: 'dlq', reason: 'invalid_event' });
    expect(out.kind === 'dlq' && out.detail).toMatch(/event_id/);
  });
  it('dead-letters a lone UTF-16 surrogate (a JSON \\ud800 escape) as invalid_event naming the field, before the store sees it', () => {
    const decoded = decode(msg(0, `{"event_id":"${randomUUID()}","event_type":"boot","ts":${NOW_MS * 1000},"source":"server","boot_id":"b1","service":"lone\\ud800surrogate"}`), 1 << 20);
    if (decoded.kind !== 'ok') throw new Error('fixture');
    const out = validate(decoded.value, msg(0, '{}'));
    expect(out).toMatchObject({ kind: 'dlq', reason: 'invalid_event', detail: expect.stringMatching(/^service lone_surrogate: /) });
  });
  it('judges future timestamps by the record time, so a replay decides the same way', () => {
    const e = event({ ts: (NOW_MS + 2 * 3_600_000) * 1000 });
    expect(validate(e, msg(0, '{}', NOW_MS))).toMatchObject({ kind: 'dlq', reason: 'invalid_event' });
    expect(validate(e, msg(0, '{}', NOW_MS + 3_600_000))).toMatchObject({ kind: 'ok' });
  });
});

describe('enrich', () => {
  it('drops a second copy of an event_id within the batch', () => {
    const seen = new Set<string>();
    const e = validate(event(), msg(0, '{}'));
    if (e.kind !== 'ok') throw new Error('fixture');
    expect(enrich(e.value, seen).kind).toBe('ok');
    expect(enrich(e.value, seen)).toEqual({ kind: 'drop', reason: 'duplicate_in_batch' });
  });
});

describe('prepare (decode → validate → enrich over a range)', () => {
  it('splits a range into rows, dead letters and drops, with the range token', () => {
    const dup = event();
    const r = range([msg(10, event()), msg(11, 'nope'), msg(12, dup), msg(13, dup), msg(14, { event_type: 'boot' }), msg(15, event())]);
    const b = prepare(r, { maxMessageBytes: 1 << 20 });
    expect(b.token).toMatch(/^events-t:3:10-15:[0-9a-f]{16}$/);
    expect(b.rows).toHaveLength(3);
    expect(b.rowMessages.map((m) => m.offset)).toEqual([10n, 12n, 15n]);
    expect(b.deadLetters.map((d) => [d.message.offset, d.reason])).toEqual([
      [11n, 'not_json'],
      [14n, 'invalid_event'],
    ]);
    expect(b.drops).toEqual({ duplicate_in_batch: 1 });
    // Rows are the validated events, defaults filled in (what the table receives).
    expect(JSON.parse(b.rows.line(0))).toMatchObject({ event_type: 'boot', pid: 0, attrs: {} });
    // The body the store gets: every row on its own line, each ending in a newline.
    const body = b.rows.lines(0, b.rows.length).toString('utf8');
    expect(body.endsWith('\n')).toBe(true);
    expect(body.split('\n').slice(0, -1).map((l) => JSON.parse(l).event_id)).toEqual([10, 12, 15].map((o) => JSON.parse(r.messages[o - 10]!.value!.toString()).event_id));
  });
  it('is deterministic: the same range prepares to the same rows', () => {
    const r = range([msg(0, event()), msg(1, event({ extra_field: 'kept in attrs' }))]);
    const a = prepare(r, { maxMessageBytes: 1 << 20 });
    const b = prepare(r, { maxMessageBytes: 1 << 20 });
    const { rows: rowsA, ...restA } = a;
    const { rows: rowsB, ...restB } = b;
    expect(restA).toEqual(restB);
    expect(rowsA.lines(0, rowsA.length).equals(rowsB.lines(0, rowsB.length))).toBe(true);
    expect(JSON.parse(a.rows.line(1)).attrs).toEqual({ extra_field: 'kept in attrs' });
  });
  it('dead-letters a valid event with an unknown field nested 100,000 arrays deep, and the rest flows', () => {
    const n = 100_000;
    const deep = JSON.stringify(event()).slice(0, -1) + ',"deep":' + '['.repeat(n) + ']'.repeat(n) + '}';
    const b = prepare(range([msg(0, event()), msg(1, deep), msg(2, event())]), { maxMessageBytes: 1 << 20 });
    expect(b.rowMessages.map((m) => m.offset)).toEqual([0n, 2n]);
    expect(b.deadLetters).toEqual([expect.objectContaining({ reason: 'invalid_event', detail: expect.stringMatching(/deep too_deep: nested deeper than 64 levels/) })]);
  });
  it('turns an exception out of a per-message step into an invalid_event dead letter naming it, not a stop', () => {
    const bad = { ...msg(1, event()) };
    Object.defineProperty(bad, 'timestampMs', {
      get() {
        throw new TypeError('no timestamp here');
      },
    });
    const b = prepare(range([msg(0, event()), bad, msg(2, event())]), { maxMessageBytes: 1 << 20 });
    expect(b.rowMessages.map((m) => m.offset)).toEqual([0n, 2n]);
    expect(b.deadLetters).toEqual([
      expect.objectContaining({ reason: 'invalid_event', detail: 'the validate step failed on this record: TypeError: no timestamp here' }),
    ]);
  });
});

describe('dedupToken', () => {
  it('names the records of the range too: the same offsets of a topic created again are another range (a break-it pass: dropped as copies)', () => {
    const first = prepare(range([msg(0, event()), msg(1, event())]), { maxMessageBytes: 1 << 20 });
    const again = prepare(range([msg(0, event()), msg(1, event())]), { maxMessageBytes: 1 << 20 });
    expect(first.token).not.toBe(again.token); // new event_ids at the same offsets
    // a replay reads the same records: the same token, so the store drops its insert
    const messages = [msg(0, event()), msg(1, event())];
    expect(prepare(range(messages), { maxMessageBytes: 1 << 20 }).token).toBe(prepare(range(messages), { maxMessageBytes: 1 << 20 }).token);
    expect(dedupToken('t', 1, 0n, 1n, 'abc')).toBe('t:1:0-1:abc');
  });
  it('is topic:partition:first-last in the store token syntax', () => {
    expect(dedupToken('mcp-continuity-events', 5, 100n, 199n)).toBe('mcp-continuity-events:5:100-199');
    const long = dedupToken('t'.repeat(249), 5, 2n ** 62n, 2n ** 62n + 10n);
    expect(long.length).toBeLessThanOrEqual(200);
    expect(long).toMatch(/^[A-Za-z0-9:._\-/]{1,200}$/);
    expect(long).not.toBe(dedupToken('u'.repeat(249), 5, 2n ** 62n, 2n ** 62n + 10n));
  });
});

describe('commit metadata of the intent protocol', () => {
  it('round-trips and ignores foreign metadata', () => {
    const rec = { kind: 'intent', first: 17n, last: 4095n } as const;
    expect(encodeCommitMetadata(rec)).toBe('continuity/1 intent 17-4095');
    expect(parseCommitMetadata(encodeCommitMetadata(rec))).toEqual(rec);
    expect(parseCommitMetadata('continuity/1 done 0-0')).toEqual({ kind: 'done', first: 0n, last: 0n });
    expect(parseCommitMetadata('')).toBeUndefined();
    expect(parseCommitMetadata(null)).toBeUndefined();
    expect(parseCommitMetadata('continuity/1 intent 9-3')).toBeUndefined();
    expect(parseCommitMetadata('some other tool')).toBeUndefined();
  });
});

/** A store stand-in that records inserts and fails on demand (unit level: no engine). */
function recordingTargets(failures: Array<'unavailable' | 'bad-row' | 'broken'> = [], badMarker = 'BAD', cutoffs: number[] = []) {
  const inserts: Array<{ table: string; token: string | undefined; rows: number }> = [];
  const published: DeadLetter[] = [];
  const store = {
    async insertJsonEachRow(table: string, body: string | Buffer, options: { dedupToken?: string } = {}) {
      const f = failures.shift();
      if (f === 'unavailable') throw new ContinuityError('CONT_ERR_STORE_UNAVAILABLE', 'down for the test');
      if (f === 'broken') throw new ContinuityError('CONT_ERR_STORE_QUERY', 'Unknown table expression identifier (UNKNOWN_TABLE)');
      if (table === 'events' && body.includes(badMarker)) {
        throw new ContinuityError('CONT_ERR_STORE_QUERY', 'Cannot parse input: expected (CANNOT_PARSE_INPUT_ASSERTION_FAILED)');
      }
      inserts.push({ table, token: options.dedupToken, rows: body.toString().split('\n').filter((l) => l !== '').length });
    },
    async query() {
      return [];
    },
  } as unknown as Store;
  // The store's retention: 90 days before NOW_MS, or the next of `cutoffs` on each call (a clock that moves).
  let cutoff = (NOW_MS - 90 * DAY_MS) * 1000;
  const retention = {
    days: 90,
    cutoffMicros: () => (cutoff = cutoffs.shift() ?? cutoff),
    explain: (ts: number, c: number) => `event time ${ts} is older than the 90-day retention (cutoff ${c})`,
  };
  const targets: WriteTargets = {
    store,
    retention,
    async publishDeadLetters(_r, letters) {
      published.push(...letters);
    },
  };
  return { targets, inserts, published };
}

const hooks = () => {
  const calls: string[] = [];
  return {
    calls,
    hooks: {
      beforeWrite: async () => void calls.push('beforeWrite'),
      onRetry: async (_e: Error, n: number) => void calls.push(`retry ${n}`),
      onRecovered: async () => void calls.push('recovered'),
    },
  };
};

describe('runBatch (the pipeline top to bottom)', () => {
  it('records the intent before writing, retries a retriable failure with the same token, then reports recovery', async () => {
    const t = recordingTargets(['unavailable', 'unavailable']);
    const h = hooks();
    const report = await runBatch(range([msg(0, event()), msg(1, event()), msg(2, 'x')]), { targets: t.targets, maxMessageBytes: 1 << 20, retryInitialDelayMs: 1, retryMaxDelayMs: 2 }, h.hooks);
    expect(h.calls).toEqual(['beforeWrite', 'retry 1', 'retry 2', 'recovered']);
    expect(report).toMatchObject({ rows: 2, retries: 2, deadLetters: { not_json: 1 }, token: expect.stringMatching(/^events-t:3:0-2:[0-9a-f]{16}$/) });
    expect(t.inserts).toEqual([
      { table: 'events', token: expect.stringMatching(/^events-t:3:0-2:[0-9a-f]{16}$/), rows: 2 },
      { table: 'dead_letters', token: undefined, rows: 1 },
    ]);
    expect(t.published.map((d) => d.reason)).toEqual(['not_json']);
  });

  it('bisects a batch the store refuses as data and dead-letters only the refused row', async () => {
    const t = recordingTargets();
    const h = hooks();
    const messages = [0, 1, 2, 3, 4].map((i) => msg(i, event(i === 3 ? { service: 'BAD' } : {})));
    const report = await runBatch(range(messages), { targets: t.targets, maxMessageBytes: 1 << 20 }, h.hooks);
    expect(report.rows).toBe(4);
    expect(report.deadLetters).toEqual({ store_rejected: 1 });
    expect(t.published.map((d) => d.message.offset)).toEqual([3n]);
    const events = t.inserts.filter((i) => i.table === 'events');
    expect(events.reduce((n, i) => n + i.rows, 0)).toBe(4);
    // Sub-range tokens derive from the range token and offsets: equal on a replay.
    expect(events.every((i) => /^events-t:3:0-4:[0-9a-f]{16}\//.test(i.token ?? ''))).toBe(true);
  });

  it('dead-letters rows older than the store\'s retention as expired instead of inserting them (the TTL would drop them unseen)', async () => {
    const t = recordingTargets();
    const old = [event({ ts: 978_307_200_001_000 }), event({ ts: (NOW_MS - 100 * DAY_MS) * 1000 })];
    const messages = [msg(0, event()), msg(1, old[0]), msg(2, event({ ts: (NOW_MS - 89 * DAY_MS) * 1000 })), msg(3, old[1])];
    const report = await runBatch(range(messages), { targets: t.targets, maxMessageBytes: 1 << 20 }, hooks().hooks);
    expect(report).toMatchObject({ rows: 2, deadLetters: { expired: 2 } });
    expect(t.inserts).toEqual([
      { table: 'events', token: expect.stringMatching(/^events-t:3:0-3:[0-9a-f]{16}$/), rows: 2 },
      { table: 'dead_letters', token: undefined, rows: 2 },
    ]);
    expect(t.published.map((d) => [d.message.offset, d.reason])).toEqual([
      [1n, 'expired'],
      [3n, 'expired'],
    ]);
    expect(t.published[0]!.detail).toMatch(/older than the 90-day retention/);
  });

  it('judges expiry when the write happens: a row that passes the retention while the store is down is dead-lettered, not inserted', async () => {
    const ts = (NOW_MS - 90 * DAY_MS) * 1000 + 5;
    // First attempt: the row is 5 µs inside the retention; by the retry it is past it.
    const t = recordingTargets(['unavailable'], 'BAD', [ts - 1, ts + 1]);
    const report = await runBatch(range([msg(0, event({ ts })), msg(1, event())]), { targets: t.targets, maxMessageBytes: 1 << 20, retryInitialDelayMs: 1, retryMaxDelayMs: 2 }, hooks().hooks);
    expect(report).toMatchObject({ rows: 1, retries: 1, deadLetters: { expired: 1 } });
    expect(t.inserts.filter((i) => i.table === 'events')).toEqual([{ table: 'events', token: expect.stringMatching(/^events-t:3:0-1:[0-9a-f]{16}$/), rows: 1 }]);
  });

  it('stops on a non-retriable error that is not about the rows', async () => {
    const t = recordingTargets(['broken']);
    await expect(runBatch(range([msg(0, event())]), { targets: t.targets, maxMessageBytes: 1 << 20 }, hooks().hooks)).rejects.toMatchObject({
      code: 'CONT_ERR_STORE_QUERY',
    });
  });

  it('abandons the batch when a hook throws (a rebalance) instead of retrying it', async () => {
    const t = recordingTargets(['unavailable', 'unavailable', 'unavailable']);
    const lost = Object.assign(new Error('The group is rebalancing'), { retriable: true, type: 'REBALANCE_IN_PROGRESS' });
    const h = hooks();
    const run = runBatch(range([msg(0, event())]), { targets: t.targets, maxMessageBytes: 1 << 20, retryInitialDelayMs: 1 }, {
      ...h.hooks,
      onRetry: async () => {
        throw lost;
      },
    });
    await expect(run).rejects.toBe(lost);
    expect(t.inserts).toEqual([]);
  });
});

describe('dead letters on the real engine', () => {
  it('writes a dead letter once per record: a replay adds none, a topic created again (same offsets, other records) adds its own (a break-it pass: skipped by offset)', async () => {
    const { openTestStore } = await import('../../test/helpers/store.ts');
    const t = await openTestStore('pipeline_dead_letters');
    try {
      const published: DeadLetter[] = [];
      const targets: WriteTargets = {
        store: t.store,
        retention: { cutoffMicros: () => 0, explain: () => '' },
        async publishDeadLetters(_r, letters) {
          published.push(...letters);
        },
      };
      const options = { targets, maxMessageBytes: 1 << 20, retryInitialDelayMs: 1, retryMaxDelayMs: 2 };
      const first = range([msg(0, 'not json, first topic'), msg(1, event())], 'recreated-t');
      await runBatch(first, options, hooks().hooks);
      await runBatch(first, options, hooks().hooks); // a replay of the same records
      await runBatch(range([msg(0, 'not json, the topic created again'), msg(1, event())], 'recreated-t'), options, hooks().hooks);
      const rows = await t.store.query<{ position: number; payload: string }>(
        `SELECT position, payload FROM dead_letters WHERE source = 'kafka' AND origin = 'recreated-t:3' ORDER BY payload`,
      );
      expect(rows).toEqual([
        { position: 0, payload: 'not json, first topic' },
        { position: 0, payload: 'not json, the topic created again' },
      ]);
      expect(published.map((l) => l.message.value?.toString())).toEqual(['not json, first topic', 'not json, the topic created again']);
    } finally {
      await t.close();
    }
  });
});
