import type { Config } from '../core/config.ts';
import { openStore, type Store } from './client.ts';
import { migrate } from './migrate.ts';

/**
 * Opens the configured store and applies pending migrations and the retention setting
 * (`onRetentionChange`: told when that setting changed the store's retention, days, 0 = none;
 * `why` given: the store itself changed it, see migrate).
 */
export async function openMigratedStore(config: Config, options: { onRetentionChange?: (fromDays: number, toDays: number, why?: string) => void } = {}): Promise<Store> {
  const store = await openStore(config);
  try {
    await migrate(store, { retentionDays: config.retentionDays, ...(options.onRetentionChange ? { onRetentionChange: options.onRetentionChange } : {}) });
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}
