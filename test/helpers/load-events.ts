// Child process for CLI tests: opens the embedded store in argv[2], inserts the
// contract events of the JSON-lines file argv[3] (already in contract shape, as
// the fixture builders make them), and exits. A process of its own, because the
// engine binds one data directory per process and the CLI under test must open
// the directory after it.
import { readFileSync } from 'node:fs';
import { loadConfig } from '../../core/config.ts';
import { openMigratedStore } from '../../store/index.ts';

const [dataDir, file] = process.argv.slice(2);
if (!dataDir || !file) throw new Error('usage: load-events.ts <data-dir> <events.jsonl>');
const store = await openMigratedStore(loadConfig({}, { dataDir }));
try {
  await store.insertJsonEachRow('events', readFileSync(file, 'utf8').trim());
} finally {
  await store.close();
}
