import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type Config } from '../../core/config.ts';
import { openMigratedStore, type Store } from '../../store/index.ts';

/** A migrated store in a fresh temporary data directory (embedded), or on CLICKHOUSE_URL when set. */
export interface TestStore {
  readonly store: Store;
  readonly config: Config;
  close(): Promise<void>;
}

/**
 * Opens a store for one test file. Embedded: a new temporary data directory
 * (vitest runs each file in its own process, and the engine allows one directory
 * per process). Server: a database of its own, named after `name`.
 */
export async function openTestStore(name = 'test'): Promise<TestStore> {
  const dataDir = mkdtempSync(join(tmpdir(), 'continuity-test-'));
  const env: NodeJS.ProcessEnv = { CONTINUITY_HASH_KEY: '00112233445566778899aabbccddeeff' };
  if (process.env.CLICKHOUSE_URL) {
    env.CLICKHOUSE_URL = process.env.CLICKHOUSE_URL;
    env.CLICKHOUSE_USER = process.env.CLICKHOUSE_USER;
    env.CLICKHOUSE_PASSWORD = process.env.CLICKHOUSE_PASSWORD;
    env.CLICKHOUSE_DATABASE = `t_${name.replace(/\W/g, '_')}_${process.pid}`;
  }
  const config = loadConfig(env, { dataDir });
  const store = await openMigratedStore(config);
  return {
    store,
    config,
    async close() {
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
