// Child process for test/store-lazy-engine.test.ts: prints, as JSON lines, whether
// the embedded engine's library (libchdb) is mapped into this process after
// importing every module a command runs (the gateway's, the consumer's, serve's,
// the CLI's), and again after opening an embedded store in argv[2].
import { readFileSync } from 'node:fs';

const mapped = (): boolean => readFileSync('/proc/self/maps', 'utf8').includes('libchdb');
for (const m of ['api', 'collectors', 'core', 'drill', 'ingest', 'queries', 'reports', 'schema', 'store']) await import(`../../${m}/index.ts`);
for (const c of ['canary', 'consumer', 'gateway', 'query', 'report', 'serve', 'sql', 'status']) await import(`../../cli/commands/${c}.ts`);
process.stdout.write(JSON.stringify({ step: 'imported', mapped: mapped() }) + '\n');
const { loadConfig } = await import('../../core/index.ts');
const { openMigratedStore } = await import('../../store/index.ts');
const store = await openMigratedStore(loadConfig({}, { dataDir: process.argv[2]! }));
process.stdout.write(JSON.stringify({ step: 'opened', mapped: mapped() }) + '\n');
await store.close();
