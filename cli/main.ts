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
import { outputFailure, reportError } from './context.ts';
import { ContinuityError } from '../core/errors.ts';

const program = new Command('continuity')
  .description('MCP session-continuity analytics: import proxy logs and server events, query restarts, refused misses, re-mints and auth challenges.')
  .version((JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version)
  .option('--data-dir <dir>', 'embedded store directory (env CONTINUITY_DATA_DIR; default ./.continuity)')
  .showHelpAfterError()
  // usage errors coded as every other error is (commander wrote "error: missing required
  // argument …" with no code: a newcomer pass); inherited by every command registered below
  .configureOutput({ outputError: (text, write) => write(text.replace(/^error: /, 'error CONT_ERR_CONFIG: ')) })
  .exitOverride()
  // An option whose value is missing takes the next option as its value: `report --service
  // --json` filtered on a service named "--json" and printed an empty text report (a
  // break-it pass). A value that is another of the command's options is refused.
  .hook('preAction', (_program, command) => {
    const names = new Set(command.options.flatMap((o) => [o.long, o.short]).filter((n): n is string => n !== undefined));
    for (const option of command.options) {
      const value: unknown = command.getOptionValue(option.attributeName());
      if (typeof value === 'string' && names.has(value.split('=')[0]!)) {
        throw new ContinuityError('CONT_ERR_CONFIG', `${option.long ?? option.short} took ${value} as its value: give ${option.long ?? option.short} a value of its own`);
      }
      // An empty value (an unset shell variable: `--from "$START"`) is no value: `report
      // --from ""` reported over all time and `serve --host ""` listened on every address
      // (a break-it pass). Leaving the option out is how to say "none".
      if (value === '' && option.required && command.getOptionValueSource(option.attributeName()) === 'cli') {
        throw new ContinuityError('CONT_ERR_CONFIG', `${option.long ?? option.short} is empty: give it a value, or leave it out`);
      }
    }
  });

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

// Output that cannot be written: a reader that stopped early (`| head`, EPIPE), a full
// disk (ENOSPC), a closed terminal. The command still finishes its work (an import stores
// what it read, serve writes every event it accepted) and closes the store: exiting here
// would drop accepted events, and exiting with the embedded engine open crashes it (a
// break-it pass: serve with a dead stderr lost every acknowledged event at SIGTERM, and
// import exited 139). A lost stdout is the command's failure (exit 1), except EPIPE, which
// the shell's own tools take quietly too; what stderr cannot say is dropped.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') return;
  // (canary: 2, cannot evaluate; its 1 means a gate failed, and a pipeline rolls back on it)
  process.exitCode = outputFailure.exitCode;
  try {
    process.stderr.write(`continuity: the output could not be written (${err.code ?? err.message})\n`);
  } catch {
    // stderr is gone too: nothing to say it on
  }
});
process.stderr.on('error', () => {});

try {
  await program.parseAsync(process.argv);
} catch (err) {
  // (a usage error exits 2, as every configuration error does: cli/context.ts reportError;
  // commander's own code is 1, the same as a command that failed; --help and --version 0)
  if (err instanceof CommanderError) process.exitCode = err.exitCode === 0 ? 0 : 2;
  else process.exitCode = reportError(err);
}
