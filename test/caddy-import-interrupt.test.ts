// An import stopped by a signal (CaddyImportOptions.signal; the CLI aborts it on
// SIGINT, SIGTERM or SIGHUP): what was read is written and recorded in import_runs,
// and the whole input imported later stores each line once. A signal used to end
// `import caddy -` by Node's default handler: its events were stored without their
// import_runs row, and it said nothing (a break-it pass).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importCaddyLogs } from '../collectors/index.ts';
import { hasherForConfig } from '../core/index.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

const ACCESS = fileURLToPath(new URL('./fixtures/captures/caddy-sdk-restart/caddy-access.log', import.meta.url));

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('caddy_import_interrupt');
});
afterAll(async () => {
  await t?.close();
});

/**
 * A standard input that yields `chunks`, then waits for bytes that never come (an idle
 * pipe); `waiting` settles when the reader asks for more, i.e. once it has handled
 * every chunk (the reader asks for the next only after the previous one's lines).
 */
function idlePipe(chunks: Buffer[]): { stdin: NodeJS.ReadableStream; waiting: Promise<void> } {
  let idle!: () => void;
  const waiting = new Promise<void>((resolve) => (idle = resolve));
  const iterable = {
    async *[Symbol.asyncIterator]() {
      yield* chunks;
      idle();
      await new Promise<never>(() => {});
    },
  };
  return { stdin: iterable as unknown as NodeJS.ReadableStream, waiting };
}

describe('an import stopped by a signal', () => {
  it('stores and records the lines read before it; the whole input imported later stores each line once', async () => {
    const text = readFileSync(ACCESS);
    const lines = text.toString('utf8').trimEnd().split('\n');
    expect(lines.length).toBeGreaterThan(40);
    // 30 whole lines and half of the 31st, then the pipe goes quiet
    const whole = Buffer.from(lines.slice(0, 30).join('\n') + '\n');
    const cut = Buffer.from(lines[30]!.slice(0, Math.floor(lines[30]!.length / 2)));
    const { stdin, waiting } = idlePipe([whole, cut]);
    const stop = new AbortController();
    void waiting.then(() => stop.abort());
    const hasher = hasherForConfig(t.config);

    const first = await importCaddyLogs(t.store, { access: ['-'], stdin, hasher, service: 'stopped', signal: stop.signal });
    expect(first.interrupted).toBe(true);
    expect(first.files).toHaveLength(1);
    expect(first.files[0]).toMatchObject({ path: '-', interrupted: true, decoded_bytes: whole.length + cut.length });
    // the cut line is neither imported nor counted
    expect(first.lines.read).toBe(30);
    expect(first.lines.parsed + first.lines.rejected + first.lines.skipped).toBe(30);
    const stored = async () =>
      (await t.store.query<{ n: string; ids: string }>("SELECT count() AS n, uniqExact(event_id) AS ids FROM events FINAL WHERE service = 'stopped'"))[0]!;
    expect(Number((await stored()).n)).toBe(first.events_written);
    expect(first.events_written).toBeGreaterThan(0);
    const runs = await t.store.query<{ origin: string; lines_read: string; events_written: string; decoded_hash: string }>(
      "SELECT origin, lines_read, events_written, decoded_hash FROM import_runs WHERE origin = '-'",
    );
    expect(runs.map((r) => ({ origin: r.origin, lines_read: Number(r.lines_read), events_written: Number(r.events_written) }))).toEqual([
      { origin: '-', lines_read: 30, events_written: first.events_written },
    ]);

    // the whole log: its first run's content is a prefix of it, and no line is stored twice
    const all = await importCaddyLogs(t.store, { access: [ACCESS], hasher, service: 'stopped' });
    expect(all.interrupted).toBe(false);
    expect(all.files[0]!.prefix_hashes).toEqual([runs[0]!.decoded_hash]);
    const after = await stored();
    expect(Number(after.n)).toBe(all.events_written);
    expect(Number(after.ids)).toBe(all.events_written);
  });

  it('stops an input read from a file between chunks, and leaves the inputs after it unread', async () => {
    const stop = new AbortController();
    stop.abort();
    const report = await importCaddyLogs(t.store, { access: [ACCESS, ACCESS], hasher: hasherForConfig(t.config), service: 'stopped-early', signal: stop.signal });
    expect(report).toMatchObject({ interrupted: true, events_written: 0, lines: { read: 0 } });
    expect(report.files.map((f) => f.interrupted)).toEqual([true]);
  });
});
