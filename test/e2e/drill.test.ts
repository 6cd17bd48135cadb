import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureCaddy, renderDrillText, runDrill, type DrillVariant } from '../../drill/index.ts';
import { openTestStore, type TestStore } from '../helpers/store.ts';

// The restart drill end to end (drill/run.ts): real Caddy, a real SDK MCP server
// killed with SIGKILL twice, the SDK's own client. Every number the report and
// the named queries give must equal what the drill itself recorded. Both
// variants share one store, each under its own service name.

let t: TestStore;
let caddyBin: string;

beforeAll(async () => {
  // A clean machine gets Caddy from its package manager (needs root, as on CI).
  caddyBin = ensureCaddy({ install: true });
  t = await openTestStore('drill');
}, 600_000);
afterAll(async () => {
  await t?.close();
});

describe.each<DrillVariant>(['stale', 'reinit'])('restart drill, variant %s', (variant) => {
  it('reports exactly the restarts, 502s, refused misses, unsettled arrivals and unrecovered sessions that happened', async () => {
    const result = await runDrill({ variant, store: t.store, hashKeyHex: t.config.hashKeyHex!, caddyBin, service: `e2e-drill-${variant}` });
    process.stdout.write(renderDrillText(result));

    // The scenario really happened as designed (checked before trusting any comparison).
    expect(result.truth.restarts.map((r) => r.kind)).toEqual(['slow', 'fast']);
    expect(result.truth.boots.map((b) => b.ended_by)).toEqual(['kill -9', 'kill -9', 'SIGTERM']);
    expect(result.truth.proxy_502).toBeGreaterThan(0);
    expect(result.truth.refused_404).toBeGreaterThan(0);
    expect(result.truth.boots[0]!.open_at_end.length).toBeGreaterThan(0);
    if (variant === 'stale') {
      expect(result.truth.sessions).toMatchObject({ minted: 1, stale: 1, recovered: 0, unrecovered: 1 });
    } else {
      expect(result.truth.sessions).toMatchObject({ minted: 3, stale: 2, recovered: 2, unrecovered: 0 });
      expect(result.truth.adopted_pairs).toBe(2);
    }

    const differing = result.checks
      .filter((c) => !c.ok)
      .map((c) => `${c.name}: truth ${c.truth}, reported ${c.reported ?? 'n/a'}${c.note ? ` (${c.note})` : ''} — reads ${c.reads}`);
    expect(differing).toEqual([]);
    expect(result.ok).toBe(true);
  }, 120_000);
});
