import type { Command } from 'commander';
import { COMPACT_QUIET_MS, compactClosedDays, type CompactedPartition } from '../../store/index.ts';
import { ContinuityError } from '../../core/index.ts';
import { assertStoreExists, configFrom, openCommandStore, positiveFlag } from '../context.ts';

/** What a partition left alone was left for, in the command's words. */
const WHY: Record<NonNullable<CompactedPartition['skipped']>, string> = {
  open: 'today (UTC), not closed yet',
  recent: 'written to within --quiet',
  disk: 'not enough free disk for a merge',
};

/**
 * `continuity compact [--quiet <minutes>] [--json]`: merges each closed day of the
 * event tables into one part (store/compact.ts `compactClosedDays`), so reads of
 * those days do not merge their parts again. `serve` and `consumer` do this on their
 * own every 15 minutes; this is for a store written by `import` (or a server written
 * by others). Prints a line per day and table merged or left alone (and why), then a
 * summary line (JSON: one object per partition, then `{ merged, open, recent, disk, ms }`).
 * @throws ContinuityError of the store (CONT_ERR_STORE_*), e.g. CONT_ERR_STORE_LOCKED
 *   when another process owns the embedded data directory.
 */
export function registerCompact(program: Command): void {
  program
    .command('compact')
    .description('merge each closed day (UTC) of the event tables into one part, so reads over past days do not merge parts again')
    .option('--quiet <minutes>', 'leave a day alone that was written to this recently (0: merge every closed day)', String(COMPACT_QUIET_MS / 60_000))
    .option('--json', 'one JSON object per partition, then one with the counts: { merged, open, recent, disk, ms }')
    .action(async (flags: { quiet: string; json?: boolean }, cmd: Command) => {
      const config = configFrom(cmd.optsWithGlobals());
      const quietMs = positiveFlag('--quiet', flags.quiet, false, true) * 60_000;
      assertStoreExists(config, 'compact');
      const store = await openCommandStore(config).catch((err: unknown) => {
        if (err instanceof ContinuityError && err.code === 'CONT_ERR_STORE_LOCKED') {
          throw new ContinuityError('CONT_ERR_STORE_LOCKED', [err.detail, '(a running serve or consumer compacts its closed days itself, every 15 minutes)'].filter(Boolean).join(' '), {
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
            if (flags.json) process.stdout.write(JSON.stringify(p) + '\n');
            else if (p.skipped !== 'open') process.stdout.write(`${p.day} ${p.table}: ${p.parts} parts, ${p.rows} rows ${p.skipped ? `left alone (${WHY[p.skipped]})` : `merged in ${p.ms} ms`}\n`);
          },
        });
        const ms = Math.round(performance.now() - t);
        const n = (why?: CompactedPartition['skipped']) => done.filter((p) => p.skipped === why).length;
        if (flags.json) {
          process.stdout.write(JSON.stringify({ merged: n(), open: n('open'), recent: n('recent'), disk: n('disk'), ms }) + '\n');
        } else {
          const left = [
            n('recent') ? `${n('recent')} written to in the last ${flags.quiet.trim()} minute(s) left alone (--quiet 0 merges them now)` : '',
            n('disk') ? `${n('disk')} left alone for want of free disk` : '',
            n('open') ? `${n('open')} of today (UTC), not closed yet` : '',
          ].filter(Boolean);
          const none = done.length === 0 ? ': every day is one part already' : '';
          process.stdout.write(`${n()} partition(s) merged in ${ms} ms${none}${left.length ? `; ${left.join('; ')}` : ''}\n`);
        }
      } finally {
        await store.close();
      }
    });
}
