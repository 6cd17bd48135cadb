import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countSessionsAcross, type RestartSpan } from '../queries/index.ts';
import { buildCanaryReport, type CanaryReport } from '../reports/canary.ts';
import { overlappingDeploy } from './fixtures/canary-scenarios.ts';
import { insertEvents, proxyEvents, repeat } from './fixtures/proxy-scenario.ts';
import { ServerScenario } from './fixtures/server-scenario.ts';
import { openTestStore, type TestStore } from './helpers/store.ts';

// The sessions a canary report counts as kept working across its deploy (the
// sessions_across check), where the proxy log's labels and the server's services do
// not line up one to one, and where the old and new instances overlapped. Each case
// lies days apart from the others, in one embedded store.

const DAY = 86_400;
const shift = (events: Array<Record<string, unknown>>, s: number) => events.map((e) => ({ ...e, ts: (e.ts as number) + Math.round(s * 1e6) }));
const label = (events: Array<Record<string, unknown>>, service: string) => events.map((e) => ({ ...e, service }));

/** A server restart of `service` (boots at `base` and `base` + 27 s) whose proxy log is labelled `proxyLabel`: proxy session A is served on both sides of it; the server's own sessions S (v1 only) and T (v2 only) are not. */
function serverRestart(service: string, proxyLabel: string, base: number): Array<Record<string, unknown>> {
  const s = new ServerScenario(service);
  s.boot(base, 'v1');
  s.session(`${service}-S`, base + 1, 20);
  s.boot(base + 27, 'v2');
  s.session(`${service}-T`, base + 28, 5);
  const proxy = proxyEvents([
    { at: base + 1, status: 200, minted: `${service}-A` },
    ...repeat(20, base + 2, 1, (at) => ({ at, status: 200, sid: `${service}-A` })),
    ...repeat(10, base + 28, 1, (at) => ({ at, status: 200, sid: `${service}-A` })),
  ]);
  return [...s.events, ...label(proxy, proxyLabel)];
}

/** A restart inferred from an unlabelled proxy log (502s from 10 s to 15 s), and a server of another service, with no restart, whose session runs across that moment. */
function unlabelledProxyRestart(base: number): Array<Record<string, unknown>> {
  const c = { ip: '10.5.0.1', ua: 'node' };
  const proxy = proxyEvents([
    { at: base, status: 200, minted: 'G-A', ...c },
    ...repeat(5, base + 1, 1, (at) => ({ at, status: 200, sid: 'G-A', ...c })),
    ...repeat(6, base + 10, 1, (at) => ({ at, status: 502, sid: 'G-A', proxyGenerated: true, ...c })),
    ...repeat(8, base + 17, 1, (at) => ({ at, status: 200, sid: 'G-A', ...c })),
  ]);
  const other = new ServerScenario('other');
  other.boot(base - 100, 'v1');
  other.session('other-X', base - 90, 200);
  // one environment of their own, so that a report scoped to it sees no server restart
  return [...label(proxy, ''), ...other.events].map((e) => ({ ...e, environment: 'edge' }));
}

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('canary-survivors');
  await insertEvents(t.store, [
    ...serverRestart('api', '', -20 * DAY),
    ...serverRestart('api2', 'api2', -10 * DAY),
    ...unlabelledProxyRestart(-5 * DAY),
    ...shift(overlappingDeploy('ovl'), 2 * DAY),
  ]);
});
afterAll(async () => {
  await t?.close();
});

const survivors = async (r: CanaryReport): Promise<number> => {
  const q = r.bounds.find((b) => b.id === 'sessions_kept_working')!.queries.find((x) => x.name === 'check:sessions_across')!;
  const p = q.params;
  return countSessionsAcross(t.store, p, { from: String(p.span_from), to: String(p.span_to), service: String(p.span_service), source: p.span_source as RestartSpan['source'] });
};

describe('the sessions that kept working across a deploy, by service', () => {
  it('a server deploy counts the proxy sessions of an unlabelled proxy log as well as a labelled one', async () => {
    for (const [service, boot] of [['api', -20 * DAY + 27], ['api2', -10 * DAY + 27]] as const) {
      const r = await buildCanaryReport(t.store, { deploy: `boot-${service}-${boot}` });
      expect(r.deploy, service).toMatchObject({ source: 'server', service });
      // A, seen only by the proxy; S and T never crossed
      expect(await survivors(r), service).toBe(1);
      // several services restart here, but the proxy log is unlabelled: not scoped to the deploy's service
      expect(r.scope.service, service).toBe('');
      expect(r.notes.filter((n) => n.startsWith('The store holds events of several services')), service).toEqual([
        expect.stringMatching(/and no --service was given, and some events carry no service \(imported without --service\), which a service filter would leave out: the gates count events of all of them\.$/),
      ]);
    }
  });

  it('a deploy inferred from an unlabelled proxy log counts its own sessions, not another server’s', async () => {
    const r = await buildCanaryReport(t.store, { deploy: 'latest', environment: 'edge' });
    expect(r.deploy).toMatchObject({ source: 'proxy', service: '' });
    // G-A crossed the gap; other-X (service 'other', no restart) is not this restart's
    expect(await survivors(r)).toBe(1);
    // no filter names the unlabelled events alone: the gates count 'other' too, and say
    // so (a newcomer pass: another service's 401s failed such a deploy, and no note said why)
    expect(r.scope.service).toBe('');
    expect(r.notes.filter((n) => n.includes('the gates count'))).toEqual([
      'The deploy has no service (a proxy log imported without --service) and the store also holds events of "other": the gates count events of both. Import the log again with --service to keep them apart.',
    ]);
  });

  it('overlapping instances: a session counts only if served before the new boot and after the old instance’s end', async () => {
    const r = await buildCanaryReport(t.store, { deploy: 'latest', service: 'ovl', afterS: 1800 });
    const { down_from, up_at } = r.deploy!;
    expect(Date.parse(down_from)).toBeGreaterThan(Date.parse(up_at!));
    // A was served only by the old instance, B only by the new one: neither crossed
    expect(await survivors(r)).toBe(0);
    // the span's order does not matter
    const span = (from: string, to: string): RestartSpan => ({ from, to, service: 'ovl', source: 'server' });
    const params = { service: 'ovl' };
    expect(await countSessionsAcross(t.store, params, span(up_at!, down_from))).toBe(await countSessionsAcross(t.store, params, span(down_from, up_at!)));
  });

  it('refuses a span it cannot read, with a coded error', async () => {
    for (const span of [
      { from: 'yesterday', to: '2026-11-30T04:00:00Z', service: '', source: 'server' },
      { from: '2026-11-30T04:00:00Z', to: '2026-11-30T04:00:00Z', service: '', source: 'client' },
    ]) {
      const err = await countSessionsAcross(t.store, {}, span as RestartSpan).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'CONT_ERR_QUERY_PARAM', message: expect.stringMatching(/sessions_across check: span_(from|source)/) });
    }
  });
});
