import { defineConfig } from 'vitest/config';

// Each test file runs in its own process: the embedded ClickHouse engine is a
// per-process singleton bound to one data directory, so forks give every file
// its own engine and its own temporary store without global state.
export default defineConfig({
  test: {
    pool: 'forks',
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**', 'dist/**'],
    // Every process a test starts keeps events for ever unless the test says otherwise:
    // the captures are from 2026-11-30, and under the default 90-day retention their
    // lines would be dropped as they are written from 2027-02-28 on (test/helpers/store.ts
    // does the same for the stores tests open in process).
    env: { CONTINUITY_RETENTION_DAYS: '0' },
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
