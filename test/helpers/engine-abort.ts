// Child process for test/store-abort.test.ts: opens an embedded store in argv[2],
// runs a statement, prints "ready", then ends as argv[3] says: `abort` calls
// process.abort(), `oom` fills the V8 heap until Node's fatal out-of-memory error,
// `wait` waits for a signal from the parent.
import { loadConfig } from '../../core/index.ts';
import { openMigratedStore } from '../../store/index.ts';

const store = await openMigratedStore(loadConfig({}, { dataDir: process.argv[2]! }));
await store.query('SELECT 1');
process.stdout.write('ready\n');
const how = process.argv[3];
if (how === 'abort') process.abort();
if (how === 'oom') {
  const kept: number[][] = [];
  for (;;) kept.push(new Array<number>(1 << 20).fill(kept.length));
}
if (how === 'wait') setInterval(() => {}, 1000);
