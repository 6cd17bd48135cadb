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
 * @param overrides environment variables for its config over the defaults below
 *   (undefined removes one).
 */
export async function openTestStore(name = 'test', overrides: NodeJS.ProcessEnv = {}): Promise<TestStore> {
  const dataDir = mkdtempSync(join(tmpdir(), 'continuity-test-'));
  // Kept for ever (CONTINUITY_RETENTION_DAYS=0): the captures are from 2026-11-30 and
  // the fixtures' days are fixed, so under the default 90 days every test that reads
  // them would find nothing from 2027-02-28 on. The tests of the retention itself set
  // theirs (vitest.config.ts does the same for the CLI's processes).
  const env: NodeJS.ProcessEnv = { CONTINUITY_HASH_KEY: '00112233445566778899aabbccddeeff', CONTINUITY_RETENTION_DAYS: '0' };
  if (process.env.CLICKHOUSE_URL) {
    env.CLICKHOUSE_URL = process.env.CLICKHOUSE_URL;
    env.CLICKHOUSE_USER = process.env.CLICKHOUSE_USER;
    env.CLICKHOUSE_PASSWORD = process.env.CLICKHOUSE_PASSWORD;
    env.CLICKHOUSE_DATABASE = `t_${name.replace(/\W/g, '_')}_${process.pid}`;
  }
  // (an override of undefined removes the variable: { CONTINUITY_RETENTION_DAYS: undefined }
  // opens the store with its own default retention, for the tests of the retention)
  for (const [k, v] of Object.entries(overrides)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
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
