import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { buildCanaryReport } from '../reports/index.ts';
import { shutdown } from './fixtures/canary-scenarios.ts';
import { insertEvents, T0_MICROS } from './fixtures/proxy-scenario.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';
import { formatTimeMicros } from '../core/time.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// A client resending a dead session id across two restarts (DESIGN §1: the SDK client
// does so for ever). Each new boot's collector calls the id unknown_after_boot; a
// server's miss counted as active whatever its session did in the range, so the canary
// of the second deploy counted a session the first restart had broken (a break-it pass).
// S is served by r1 only, T by r2; both are refused by r3.

let t: TestStore;
let r3: string;
beforeAll(async () => {
  t = await openTestStore('refused_active');
  const s = new ServerScenario('svc');
  const b1 = s.boot(0, 'r1');
  s.session('S', 1, 3);
  shutdown(s, b1, 100);
  const b2 = s.boot(105, 'r2');
  s.refused(106, 'S', 'unknown_after_boot');
  s.session('T', 107, 2);
  s.refused(110, 'S', 'unknown_after_boot');
  shutdown(s, b2, 200);
  r3 = s.boot(205, 'r3');
  s.refused(206, 'S', 'unknown_after_boot');
  s.refused(207, 'T', 'unknown_after_boot');
  await insertEvents(t.store, s.events);
});
afterAll(async () => {
  await t?.close();
});

const at = (s: number) => formatTimeMicros(T0_MICROS + s * 1e6);

describe('refused misses on sessions the range served (misses_active)', () => {
  it('counts a server miss as active only after a successful request of its session in the range', async () => {
    type Row = { boot: string; misses: number; misses_active: number; sessions_active: number };
    const all = await runQuery<Row>(t.store, 'refused_misses', {});
    // over everything, S was served (by r1) before each of its misses
    expect(all.filter((r) => r.boot === r3).map((r) => [Number(r.misses), Number(r.misses_active)])).toEqual([[2, 2]]);
    // from r2's boot on, S is no session this range served; T is
    const fromR2 = await runQuery<Row>(t.store, 'refused_misses', { t_from: at(104), t_to: at(300) });
    expect(fromR2.filter((r) => r.boot === r3).map((r) => [Number(r.misses), Number(r.misses_active), Number(r.sessions_active)])).toEqual([[2, 1, 1]]);
    const r2 = fromR2.filter((r) => r.boot !== r3);
    expect([r2.reduce((n, r) => n + Number(r.misses), 0), r2.reduce((n, r) => n + Number(r.misses_active), 0)]).toEqual([2, 0]);
  });

  it('the canary of r3 counts the miss on the session r2 served, not the one stale since r2 booted', async () => {
    const report = await buildCanaryReport(t.store, { deploy: 'r3', nowMicros: () => T0_MICROS + 4000 * 1e6 });
    const gate = report.gates.find((g) => g.id === 'refused_after_boot')!;
    expect(gate.numbers).toMatchObject({ refused_misses: 1, not_counted_stale_before: 1 });
  });
});
