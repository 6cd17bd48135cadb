/**
 * The fixed cost of named-query statements: `tsx bench/query-fixed-cost.ts <input.json> [--runs R]`.
 *
 * Runs each statement of `input.json` (`{ "<name>": { "sql": "…", "params": { … } }, … }`,
 * the SQL and bound parameters `runQuery` sent to a loaded store, written by
 * bench/queries.ts) against a new, empty embedded store (migrated, in a temporary
 * directory removed afterwards): once, then R (default 5) times. With no rows to read,
 * what remains is what does not grow with the data: parsing, analysis (the engine
 * analyzes a common table expression again at each reference, and runs scalar
 * subqueries while it analyzes), planning and building the pipelines. bench/queries.ts
 * prints it beside each query's time on the loaded store.
 * Runs in a process of its own: the embedded engine opens one data directory per process.
 * Prints one JSON object, `{ "<name>": median ms, … }`, as its last line.
 * @throws when the input is unreadable or a statement fails.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../core/index.ts';
import { openMigratedStore } from '../store/index.ts';
import { median } from './median.ts';

async function main(): Promise<void> {
  const [input, ...rest] = process.argv.slice(2);
  if (input === undefined) throw new Error('usage: query-fixed-cost.ts <input.json> [--runs R]');
  const at = rest.indexOf('--runs');
  const runs = at >= 0 ? Number(rest[at + 1]) : 5;
  if (!Number.isInteger(runs) || runs <= 0) throw new Error('--runs takes a positive integer');
  const statements = JSON.parse(readFileSync(input, 'utf8')) as Record<string, { sql: string; params: Record<string, unknown> }>;
  const dataDir = mkdtempSync(join(tmpdir(), 'continuity-fixed-cost-'));
  const store = await openMigratedStore(loadConfig({}, { dataDir }));
  const fixed: Record<string, number> = {};
  try {
    for (const [name, { sql, params }] of Object.entries(statements)) {
      await store.query(sql, params);
      const times: number[] = [];
      for (let i = 0; i < runs; i++) {
        const t = performance.now();
        await store.query(sql, params);
        times.push(performance.now() - t);
      }
      fixed[name] = Math.round(median(times));
    }
  } finally {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
  console.log(JSON.stringify(fixed));
}

await main();
