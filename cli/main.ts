import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { registerAnalyze, registerImport } from './commands/import.ts';
import { registerHash } from './commands/hash.ts';
import { registerQuery } from './commands/query.ts';
import { registerReport } from './commands/report.ts';
import { registerSql } from './commands/sql.ts';
import { registerServe } from './commands/serve.ts';
import { registerDrill } from './commands/drill.ts';
import { registerConsumer } from './commands/consumer.ts';
import { registerDev } from './commands/dev.ts';
import { registerGateway } from './commands/gateway.ts';
import { registerStatus } from './commands/status.ts';
import { registerCanary } from './commands/canary.ts';
import { registerCompact } from './commands/compact.ts';
import { reportError } from './context.ts';

const program = new Command('continuity')
  .description('MCP session-continuity analytics: import proxy logs and server events, query restarts, refused misses, re-mints and auth challenges.')
  .version((JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version)
  .option('--data-dir <dir>', 'embedded store directory (env CONTINUITY_DATA_DIR; default ./.continuity)')
  .showHelpAfterError()
  .exitOverride();

registerAnalyze(program);
registerImport(program);
registerReport(program);
registerCanary(program);
registerQuery(program);
registerSql(program);
registerHash(program);
registerServe(program);
registerDrill(program);
registerGateway(program);
registerConsumer(program);
registerStatus(program);
registerCompact(program);
registerDev(program);

// Output piped into a reader that stops early (`| head`): the rest has nowhere to go, which
// is not an error of this command (the shell's own tools exit quietly too).
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw err;
});

try {
  await program.parseAsync(process.argv);
} catch (err) {
  // (a usage error exits 2, as every configuration error does: cli/context.ts reportError;
  // commander's own code is 1, the same as a command that failed; --help and --version 0)
  if (err instanceof CommanderError) process.exitCode = err.exitCode === 0 ? 0 : 2;
  else process.exitCode = reportError(err);
}
