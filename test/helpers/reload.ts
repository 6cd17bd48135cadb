import { createHash } from 'node:crypto';
import { RETAINED_TABLES, type Store } from '../../store/index.ts';

/**
 * Empties the store's event tables (and what derives from them), then writes `batches`
 * in this order, each its own insert with a deduplication token named by `label`, the
 * batch's place and its events' ids: the way the order tests load the same events in
 * different orders into one store.
 */
export async function reloadEvents(store: Store, batches: Array<Array<Record<string, unknown>>>, label: string): Promise<void> {
  for (const table of RETAINED_TABLES) await store.command(`TRUNCATE TABLE ${table}`);
  for (const [i, rows] of batches.entries()) {
    const ids = createHash('sha256').update(rows.map((r) => String(r.event_id)).join(',')).digest('hex');
    await store.insertJsonEachRow('events', rows.map((r) => JSON.stringify(r)).join('\n'), { dedupToken: `${label}-${i}-${ids}` });
  }
}

/**
 * A maker of proxy access lines written straight to the store (no validation): line `n`
 * (its event_id), `dt_s` seconds after `t0` (µs since the epoch), a POST to `/mcp` with
 * `defaults`, then `fields`.
 */
export function proxyLines(t0: number, defaults: Record<string, unknown>) {
  return (n: number, dt_s: number, fields: Record<string, unknown>): Record<string, unknown> => ({
    event_id: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    event_type: 'proxy_access',
    ts: t0 + dt_s * 1_000_000,
    source: 'proxy',
    http_method: 'POST',
    url_path: '/mcp',
    ...defaults,
    ...fields,
  });
}
