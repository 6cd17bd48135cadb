import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, it } from 'vitest';
import type { ContractEventInput } from './log-record.ts';
import { invalidEvents, startFixture, type Fixture } from './test-support/sdk-fixture.ts';

const byType = (events: ContractEventInput[], type: string) => events.filter((e) => e.event_type === type);

async function startSlowCall(fx: Fixture) {
  const client = new Client({ name: 'drain-client', version: '1' });
  const transport = new StreamableHTTPClientTransport(fx.url('/mcp'));
  await client.connect(transport);
  const pending = client.callTool({ name: 'slow', arguments: {} });
  await fx.eventsWhen((evs) => byType(evs, 'arrival').some((a) => a.tool_name === 'slow'));
  return { client, pending };
}

describe('shutdown', () => {
  const fixtures: Fixture[] = [];
  afterEach(async () => {
    for (const fx of fixtures.splice(0)) await fx.close();
  });

  it('waits for in-flight requests, then emits shutdown with in_flight and flushes', async () => {
    const fx = await startFixture();
    fixtures.push(fx);
    const { client, pending } = await startSlowCall(fx);
    const done = fx.collector.shutdown({ reason: 'upgrade', drainTimeoutMs: 60_000 });
    // The slow tool call is still open: the drain must not have finished.
    expect(fx.collector.counters().in_flight).toBeGreaterThanOrEqual(2);
    fx.gate.release();
    await pending;
    await done;
    const events = (await fx.events());
    const shutdown = byType(events, 'shutdown');
    expect(shutdown).toHaveLength(1);
    // in_flight counts the slow POST and the client's GET stream; streams are reported apart and not waited for.
    expect(shutdown[0]).toMatchObject({ reason: 'upgrade', in_flight: 2, attrs: { 'continuity.in_flight_streams': '1' } });
    const slow = byType(events, 'arrival').find((a) => a.tool_name === 'slow');
    expect(byType(events, 'settlement').find((s) => s.arrival_id === slow?.arrival_id)).toMatchObject({ outcome: 'ok' });
    expect(invalidEvents(events)).toEqual([]);
    // After shutdown the host keeps working and nothing more is emitted.
    const before = fx.collector.counters().emitted;
    await client.listTools();
    await client.close();
    expect(fx.collector.counters().emitted).toBe(before);
    expect(fx.collector.counters().internal_errors).toBe(0);
  });

  it('reports drain_timeout when requests are still open at the deadline; they stay unsettled (S15)', async () => {
    const fx = await startFixture();
    fixtures.push(fx);
    const { client, pending } = await startSlowCall(fx);
    await fx.collector.shutdown({ reason: 'signal', drainTimeoutMs: 50 });
    const events = await fx.events();
    const shutdown = byType(events, 'shutdown')[0];
    expect(shutdown).toMatchObject({ reason: 'drain_timeout', in_flight: 2, attrs: { 'continuity.requested_reason': 'signal' } });
    const slow = byType(events, 'arrival').find((a) => a.tool_name === 'slow');
    expect(slow).toBeDefined();
    expect(byType(events, 'settlement').some((s) => s.arrival_id === slow?.arrival_id)).toBe(false);
    expect(invalidEvents(events)).toEqual([]);
    fx.gate.release();
    await pending;
    await client.close();
  });

  it('is idempotent and never rejects; an invalid reason is counted and replaced', async () => {
    const fx = await startFixture();
    fixtures.push(fx);
    const a = fx.collector.shutdown({ reason: 'bogus' as never, drainTimeoutMs: 0 });
    const b = fx.collector.shutdown({ reason: 'crash' });
    expect(a).toBe(b);
    await a;
    const events = await fx.events();
    expect(byType(events, 'shutdown')).toHaveLength(1);
    expect(byType(events, 'shutdown')[0]).toMatchObject({ reason: 'signal' });
    expect(fx.collector.counters().rejected_calls).toBe(1);
  });

  it('installs signal handlers only when asked, and removes them on shutdown', async () => {
    const before = process.listenerCount('SIGTERM');
    const plain = await startFixture();
    fixtures.push(plain);
    expect(process.listenerCount('SIGTERM')).toBe(before);
    const withSignals = await startFixture({ handleSignals: true });
    fixtures.push(withSignals);
    expect(process.listenerCount('SIGTERM')).toBe(before + 1);
    expect(process.listenerCount('SIGINT')).toBeGreaterThanOrEqual(1);
    await withSignals.collector.shutdown({ drainTimeoutMs: 0 });
    expect(process.listenerCount('SIGTERM')).toBe(before);
    await plain.collector.shutdown({ drainTimeoutMs: 0 });
  });
});
