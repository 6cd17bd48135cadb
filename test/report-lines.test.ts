import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importCaddyLogs } from '../collectors/index.ts';
import { hasherForConfig } from '../core/index.ts';
import { buildContinuityReport, renderContinuityText } from '../reports/index.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

const CAPTURES = fileURLToPath(new URL('./fixtures/captures/', import.meta.url));
const RESTART = {
  access: [`${CAPTURES}caddy-sdk-restart/caddy-access.log`],
  errors: [`${CAPTURES}caddy-sdk-restart/caddy-error.log`],
};

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('report_lines');
});
afterAll(async () => {
  await t?.close();
});

describe('the report’s input lines, read from the store (`continuity report`)', () => {
  it('count each imported file once, however often it was imported (a re-import stores nothing twice)', async () => {
    const hasher = hasherForConfig(t.config);
    for (let i = 0; i < 3; i++) await importCaddyLogs(t.store, { ...RESTART, hasher, service: 'restart' });
    const [runs] = await t.store.query<{ n: number }>('SELECT count() AS n FROM import_runs');
    expect(runs?.n).toBe(6); // two files, three runs each: the runs are all kept
    const r = await buildContinuityReport(t.store);
    // 47 access lines, all parsed; 23 error lines, 10 of them the upstream errors
    expect(r.lines).toEqual({ read: 70, parsed: 57, rejected: 0, skipped: 13, scope: 'store' });
  });

  it('say that they are not limited to the report’s range or service', async () => {
    const r = await buildContinuityReport(t.store, { service: 'restart', t_from: '2026-11-30 04:04:40' });
    expect(r.lines.scope).toBe('store');
    expect(renderContinuityText(r)).toContain('Input (every file imported into the store, each once; not limited to the range)');
  });
});
