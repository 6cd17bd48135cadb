import type { Config } from '../core/config.ts';
import { openStore, type Store } from './client.ts';
import { migrate } from './migrate.ts';

/** Opens the configured store and applies pending migrations and the retention setting. */
export async function openMigratedStore(config: Config): Promise<Store> {
  const store = await openStore(config);
  try {
    await migrate(store, { retentionDays: config.retentionDays });
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}
