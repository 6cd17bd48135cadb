// Child process for the lock test: opens the embedded store in argv[2], prints
// "ready", and holds it until its stdin closes.
import { loadConfig } from '../../core/config.ts';
import { openMigratedStore } from '../../store/index.ts';

const store = await openMigratedStore(loadConfig({}, { dataDir: process.argv[2] }));
process.stdout.write('ready\n');
process.stdin.resume();
process.stdin.on('end', () => {
  void store.close().then(() => process.exit(0));
});
