import type { Command } from 'commander';
import { COMPACT_QUIET_MS, compactClosedDays, openMigratedStore } from '../../store/index.ts';
import { ContinuityError, ERROR_CODES } from '../../core/index.ts';
import { configFrom, positiveFlag } from '../context.ts';

/**
 * `continuity compact [--quiet <minutes>] [--json]`: merges each closed day of the
 * event tables into one part (store/compact.ts `compactClosedDays`), so reads of
 * those days do not merge their parts again. `serve` and `consumer` do this on their
 * own every 15 minutes; this is for a store written by `import` (or a server written
 * by others). Prints one line per day and table merged (JSON: one object per line).
 * @throws ContinuityError of the store (CONT_ERR_STORE_*), e.g. CONT_ERR_STORE_LOCKED
 *   when another process owns the embedded data directory.
 */
export function registerCompact(program: Command): void {
  program
    .command('compact')
    .description('merge each closed day (UTC) of the event tables into one part, so reads over past days do not merge parts again')
    .option('--quiet <minutes>', 'leave a day alone that was written to this recently (0: merge every closed day)', String(COMPACT_QUIET_MS / 60_000))
    .option('--json', 'one JSON object per partition')
    .action(async (flags: { quiet: string; json?: boolean }, cmd: Command) => {
      const config = configFrom(cmd.optsWithGlobals());
      const quietMs = /^\s*0*\.?0*\s*$/.test(flags.quiet) && /0/.test(flags.quiet) ? 0 : positiveFlag('--quiet', flags.quiet, false) * 60_000;
      const store = await openMigratedStore(config).catch((err: unknown) => {
        if (err instanceof ContinuityError && err.code === 'CONT_ERR_STORE_LOCKED') {
          const prefix = `${ERROR_CODES.CONT_ERR_STORE_LOCKED.message}: `;
          const detail = err.message.startsWith(prefix) ? err.message.slice(prefix.length) : err.message;
          throw new ContinuityError('CONT_ERR_STORE_LOCKED', `${detail} (a running serve or consumer compacts its closed days itself, every 15 minutes)`, {
            cause: err,
            details: err.details,
          });
        }
        throw err;
      });
      try {
        const t = performance.now();
        // each partition printed as soon as it is merged: a pass stopped half way says what it did
        const done = await compactClosedDays(store, {
          quietMs,
          onPartition: (p) => {
            const what = p.skipped ? `skipped (${p.skipped === 'disk' ? 'not enough free disk for a merge' : p.skipped})` : `merged in ${p.ms} ms`;
            process.stdout.write(flags.json ? JSON.stringify(p) + '\n' : `${p.day} ${p.table}: ${p.parts} parts, ${p.rows} rows ${what}\n`);
          },
        });
        if (!flags.json) process.stdout.write(`${done.filter((p) => !p.skipped).length} partition(s) merged in ${Math.round(performance.now() - t)} ms\n`);
      } finally {
        await store.close();
      }
    });
}
