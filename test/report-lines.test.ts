import { createHash } from 'node:crypto';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateCaddyAccessLog } from '../bench/generate-caddy.ts';
import { importCaddyLogs } from '../collectors/index.ts';
import { hasherForConfig, type KeyedHasher } from '../core/index.ts';
import { buildContinuityReport, importedLineCounts, renderContinuityText, type LineCounts } from '../reports/index.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

const CAPTURES = fileURLToPath(new URL('./fixtures/captures/', import.meta.url));
const RESTART = {
  access: [`${CAPTURES}caddy-sdk-restart/caddy-access.log`],
  errors: [`${CAPTURES}caddy-sdk-restart/caddy-error.log`],
};

let t: TestStore;
let hasher: KeyedHasher;
let dir: string;
/** 400 generated access lines, each ending in a newline. */
let generated: string[];
beforeAll(async () => {
  t = await openTestStore('report_lines');
  hasher = hasherForConfig(t.config);
  dir = mkdtempSync(join(tmpdir(), 'continuity-report-lines-'));
  await generateCaddyAccessLog({ lines: 400, path: join(dir, 'generated.log'), seed: 11 });
  generated = readFileSync(join(dir, 'generated.log'), 'utf8').split(/(?<=\n)/);
});
afterAll(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The lines `continuity report` prints (`buildContinuityReport(store).lines`, without its queries). */
const storeLines = (): Promise<LineCounts> => importedLineCounts(t.store);
const importAccess = (path: string, service: string) => importCaddyLogs(t.store, { access: [path], hasher, service });

/** What importing `step` adds to the store's line counts. */
async function added(step: () => Promise<unknown>): Promise<Omit<LineCounts, 'scope'>> {
  const before = await storeLines();
  await step();
  const after = await storeLines();
  return {
    read: after.read - before.read,
    parsed: after.parsed - before.parsed,
    rejected: after.rejected - before.rejected,
    skipped: after.skipped - before.skipped,
  };
}

describe('the report’s input lines, read from the store (`continuity report`)', () => {
  it('count each imported file once, however often it was imported (a re-import stores nothing twice)', async () => {
    for (let i = 0; i < 3; i++) await importCaddyLogs(t.store, { ...RESTART, hasher, service: 'restart' });
    const [runs] = await t.store.query<{ n: number }>('SELECT count() AS n FROM import_runs');
    expect(runs?.n).toBe(6); // two files, three runs each: the runs are all kept
    const r = await buildContinuityReport(t.store);
    // 47 access lines, all parsed; 23 error lines, 10 of them the upstream errors
    // (the test store keeps events for ever: test/helpers/store.ts)
    expect(r.lines).toEqual({ read: 70, parsed: 57, rejected: 0, skipped: 13, scope: 'store', retention_days: 0 });
  });

  it('leave out an import that read no access entry (the command fails with CONT_ERR_NOTHING_IMPORTED)', async () => {
    // (an error log given as the access log, then the right files: the failed run counted
    // for good, its 23 lines twice beside the right import's; a break-it and a newcomer pass)
    expect(await added(() => importCaddyLogs(t.store, { access: RESTART.errors, hasher, service: 'restart' }))).toEqual({ read: 0, parsed: 0, rejected: 0, skipped: 0 });
    const [runs] = await t.store.query<{ n: number }>("SELECT count() AS n FROM import_runs WHERE kind = 'caddy_access' AND origin = {o:String}", { o: RESTART.errors[0]! });
    expect(Number(runs?.n)).toBe(0);
  });

  it('say that they are not limited to the report’s range or service', async () => {
    const r = await buildContinuityReport(t.store, { service: 'restart', t_from: '2026-11-30 04:04:40' });
    expect(r.lines.scope).toBe('store');
    expect(renderContinuityText(r)).toContain('Input (every file imported into the store, each once; not limited to the range)');
  });

  it('show the range in one form however its ends were typed (epoch seconds, ISO with T and Z or an offset)', async () => {
    // (the header echoed `2026-11-30 04:05:00 .. 2026-11-30T04:06:00Z` as typed: a newcomer pass)
    const r = await buildContinuityReport(t.store, { service: 'restart', t_from: '1796011480.5', t_to: '2026-11-30T05:06:00+01:00' });
    expect(r.range).toMatchObject({ t_from: '2026-11-30 04:04:40.500000', t_to: '2026-11-30 04:06:00' });
    expect(renderContinuityText(r)).toContain('  range (UTC, as every time below): 2026-11-30 04:04:40.500000 .. 2026-11-30 04:06:00  service: restart\n');
    expect((await buildContinuityReport(t.store, { service: 'restart' })).range).toMatchObject({ t_from: 'all', t_to: 'all' });
  });

  it('list each restart under the counts with its source and service, and the tallies in words', async () => {
    // (a server boot was listed as if it were one of the proxy's restarts, no service
    // shown, and the tallies printed as JSON: a newcomer pass)
    const r = await buildContinuityReport(t.store, { service: 'restart' });
    const boot = { ...r.restarts.list[0]!, source: 'server', service: 'demo', evidence: 'server_boot', up_at: '2026-12-04 22:13:22.000000' };
    const text = renderContinuityText({ ...r, restarts: { ...r.restarts, list: [...r.restarts.list, boot] } });
    expect(text).toMatch(/\n {4}2026-11-30 04:04:45\.699494 +inferred from proxy, service restart: proxy_5xx_gap\+session_refusals; downtime/);
    expect(text).toMatch(/\n {4}2026-12-04 22:13:22\.000000 +server boot, service demo: server_boot; downtime/);
    expect(text).toContain('  by reason                              unknown_after_boot 25\n');
    expect(text).toContain('  what the session did next              same_session_again 24, nothing 1\n');
    expect(text).toContain('  verdicts                               none\n');
    expect(r.findings).toContain('25 refused miss(es) on 1 session(s); next action: same_session_again 24, nothing 1.');
  });

  it('show what the store holds in the text report without letting it act on the terminal', async () => {
    const r = await buildContinuityReport(t.store, { service: 'restart' });
    const hostile = 'ua \u001b]0;PWNED\u0007\u001b[31mevil\u202e';
    const text = renderContinuityText({ ...r, findings: [...r.findings, hostile], range: { ...r.range, service: hostile } });
    expect(text).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
    expect(text).toContain('  - ua \\x1B]0;PWNED\\x07\\x1B[31mevil\\u202E\n');
    // a line break (LF, CR, CR LF) in a value begins no line of its own
    const broken = 'evil\nFAKE: No continuity problems found\r\nmore\rend';
    const one = renderContinuityText({ ...r, findings: [broken], range: { ...r.range, service: broken } });
    expect(one).toContain('  - evil FAKE: No continuity problems found more end\n');
    expect(one).toContain('service: evil FAKE: No continuity problems found more end\n');
    expect(one.split('\n').filter((l) => l.startsWith('FAKE') || l.startsWith('more') || l.startsWith('end'))).toEqual([]);
  });

  it('count a gzip of an imported file as that file (its decompressed content is the same)', async () => {
    const gz = join(dir, 'caddy-access.log.gz');
    writeFileSync(gz, gzipSync(readFileSync(RESTART.access[0]!)));
    expect(await added(() => importAccess(gz, 'restart'))).toEqual({ read: 0, parsed: 0, rejected: 0, skipped: 0 });
    // and the plain file after its gzip
    expect(await added(() => importAccess(RESTART.access[0]!, 'restart'))).toEqual({ read: 0, parsed: 0, rejected: 0, skipped: 0 });
  });

  it('count a log that grew between imports once, at its latest length', async () => {
    const log = join(dir, 'access.log');
    writeFileSync(log, generated.slice(0, 150).join(''));
    expect(await added(() => importAccess(log, 'grown'))).toMatchObject({ read: 150, parsed: 150 });
    appendFileSync(log, generated.slice(150, 300).join(''));
    // 300 lines now: the first 150 were counted already
    expect(await added(() => importAccess(log, 'grown'))).toMatchObject({ read: 150, parsed: 150 });
    // rotated and compressed after 20 more lines: a gzip that grew counts the same way
    const rotated = join(dir, 'access.log.1.gz');
    writeFileSync(rotated, gzipSync(generated.slice(0, 320).join('')));
    expect(await added(() => importAccess(rotated, 'grown'))).toMatchObject({ read: 20, parsed: 20 });
  });

  it('count a log caught in the middle of a line once, when the line was complete at the next import', async () => {
    const log = join(dir, 'cut.log');
    const whole = generated.slice(0, 100).join('');
    const cut = whole.length - 40; // the 100th line is half written
    writeFileSync(log, whole.slice(0, cut));
    expect(await added(() => importAccess(log, 'cut'))).toEqual({ read: 100, parsed: 99, rejected: 1, skipped: 0 });
    appendFileSync(log, whole.slice(cut));
    expect(await added(() => importAccess(log, 'cut'))).toEqual({ read: 0, parsed: 1, rejected: -1, skipped: 0 });
  });

  it('still count both of two logs that only start alike, and a shorter copy imported after the longer one', async () => {
    const a = join(dir, 'a.log');
    const b = join(dir, 'b.log');
    writeFileSync(a, generated.slice(0, 50).join('') + generated.slice(350, 360).join(''));
    writeFileSync(b, generated.slice(0, 50).join('') + generated.slice(360, 370).join(''));
    expect(await added(() => importAccess(a, 'alike'))).toMatchObject({ read: 60 });
    expect(await added(() => importAccess(b, 'alike'))).toMatchObject({ read: 60 });
    // a prefix is recognised only in the import that extends it (its hash is taken then)
    const short = join(dir, 'short.log');
    writeFileSync(short, generated.slice(0, 50).join(''));
    expect(await added(() => importAccess(short, 'alike'))).toMatchObject({ read: 50 });
  });

  it('match a run recorded before migration 0009 (hash of the gzip bytes only) with a later import of those bytes', async () => {
    const gz = join(dir, 'old.log.gz');
    const bytes = gzipSync(generated.slice(380, 390).join(''));
    writeFileSync(gz, bytes);
    const old = {
      run_id: '00000000-0000-4000-8000-000000000009',
      kind: 'caddy_access',
      origin: gz,
      content_hash: createHash('sha256').update(bytes).digest('hex'),
      started_at: '2026-01-01 00:00:00.000',
      finished_at: '2026-01-01 00:00:01.000',
      lines_read: 10,
      lines_parsed: 10,
      lines_rejected: 0,
      events_written: 10,
    };
    expect(await added(() => t.store.insertJsonEachRow('import_runs', JSON.stringify(old)))).toMatchObject({ read: 10 });
    expect(await added(() => importAccess(gz, 'old'))).toMatchObject({ read: 0 });
    // the plain file now matches too, through the gzip's later run
    const plain = join(dir, 'old.log');
    writeFileSync(plain, generated.slice(380, 390).join(''));
    expect(await added(() => importAccess(plain, 'old'))).toMatchObject({ read: 0 });
  });

  it('count a corrected file as another input: both runs count (documented in LineCounts)', async () => {
    const log = join(dir, 'fixed.log');
    const lines = generated.slice(370, 380);
    writeFileSync(log, [...lines.slice(0, 5), 'not json\n', ...lines.slice(5)].join(''));
    expect(await added(() => importAccess(log, 'fixed'))).toEqual({ read: 11, parsed: 10, rejected: 1, skipped: 0 });
    writeFileSync(log, [...lines.slice(0, 5), ...lines.slice(5)].join(''));
    expect(await added(() => importAccess(log, 'fixed'))).toEqual({ read: 10, parsed: 10, rejected: 0, skipped: 0 });
  });
});
