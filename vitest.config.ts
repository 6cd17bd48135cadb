import { defineConfig } from 'vitest/config';

// Each test file runs in its own process: the embedded ClickHouse engine is a
// per-process singleton bound to one data directory, so forks give every file
// its own engine and its own temporary store without global state.
export default defineConfig({
  test: {
    pool: 'forks',
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**', 'dist/**'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
