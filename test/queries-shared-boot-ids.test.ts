import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runQuery } from '../queries/index.ts';
import { buildCanaryReport } from '../reports/index.ts';
import { shutdown } from './fixtures/canary-scenarios.ts';
import { insertEvents } from './fixtures/proxy-scenario.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// Two services whose collectors number their boots the same way (the collector takes
// a custom bootId). A boot is its service's: one service's shutdown of its boot "1"
// ended the other's boot "1" too, whose restart had a downtime of -2995 s (a break-it
// pass).

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('shared_boot_ids');
  const events: Array<Record<string, unknown>> = [];
  // svc-a boots "1", "2", "3"; svc-b "3", "2", "1": each shut down before the next
  const plans = {
    'svc-a': { ids: ['1', '2', '3'], boots: [0, 605, 1210], shutdowns: [600, 1200] },
    'svc-b': { ids: ['3', '2', '1'], boots: [0, 3610, 7220], shutdowns: [3600, 7200] },
  };
  for (const [service, plan] of Object.entries(plans)) {
    const s = new ServerScenario(service);
    const ids = new Map<string, string>();
    plan.boots.forEach((at, i) => {
      ids.set(s.boot(at, `r${i + 1}`), plan.ids[i]!);
      s.session(`S${i}`, at + 1, 2);
      if (i < plan.shutdowns.length) shutdown(s, `boot-${service}-${at}`, plan.shutdowns[i]!);
    });
    events.push(...s.events.map((e) => ({ ...e, boot_id: ids.get(String(e.boot_id)) })));
  }
  await insertEvents(t.store, events);
});
afterAll(async () => {
  await t?.close();
});

describe('boot ids that two services share', () => {
  it('restarts: each service’s restart runs from its own boot’s shutdown, with or without a service filter', async () => {
    const all = await runQuery<{ service: string; downtime_s: number }>(t.store, 'restarts', {});
    expect(all.map((r) => [r.service, Number(r.downtime_s)]).sort()).toEqual([
      ['svc-a', 10],
      ['svc-a', 5],
      ['svc-b', 10],
      ['svc-b', 20],
    ]);
    for (const service of ['svc-a', 'svc-b']) {
      const one = await runQuery(t.store, 'restarts', { service });
      expect(one).toEqual(all.filter((r) => r.service === service));
    }
  });

  it('settlements: a boot has ended when its own service restarted or shut it down', async () => {
    const rows = await runQuery<{ service: string; boot_id: string; boot_ended: number }>(t.store, 'settlements', {});
    const ended = [...new Set(rows.map((r) => `${r.service} ${r.boot_id} ${Number(r.boot_ended)}`))].sort();
    expect(ended).toEqual(['svc-a 1 1', 'svc-a 2 1', 'svc-a 3 0', 'svc-b 1 0', 'svc-b 2 1', 'svc-b 3 1']);
  });

  it('the canary does not guess which service a shared boot_id names', async () => {
    const r = await buildCanaryReport(t.store, { deploy: '2', nowMicros: () => 4e15 });
    expect(r).toMatchObject({ verdict: 'cannot_evaluate', exit_code: 2 });
    expect(r.reason).toBe('boot_id "2" is a restart of several services (svc-a, svc-b): name one with --service');
    const a = await buildCanaryReport(t.store, { deploy: '2', service: 'svc-a', nowMicros: () => 4e15 });
    expect(a.deploy).toMatchObject({ service: 'svc-a', boot_id: '2', downtime_s: 5 });
    expect((await buildCanaryReport(t.store, { deploy: '2', service: 'svc-b', nowMicros: () => 4e15 })).deploy).toMatchObject({ service: 'svc-b', downtime_s: 10 });
  });
});
