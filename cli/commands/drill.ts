import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { loadConfig } from '../../core/index.ts';
import type { DrillResult, DrillVariant } from '../../drill/index.ts';
import { ContinuityError } from '../../core/index.ts';
import { withStore } from '../context.ts';
import { untilSignal } from '../signals.ts';

interface DrillFlags {
  variant: string;
  json?: boolean;
  keep?: boolean;
}

const VARIANTS: Record<string, DrillVariant[]> = { stale: ['stale'], reinit: ['reinit'], both: ['stale', 'reinit'] };

/**
 * `continuity drill [--variant stale|reinit|both] [--json] [--keep]`: the restart
 * drill (drill/run.ts) against its own temporary embedded store. Exit 0 only when
 * every reported number equals the drill's ground truth.
 */
export function registerDrill(program: Command): void {
  program
    .command('drill')
    .description('restart drill: Caddy + a real SDK MCP server killed twice (kill -9), ground truth vs what the queries report')
    .option('--variant <variant>', 'stale (the SDK client keeps the dead session) | reinit (the app re-initializes after 404) | both', 'both')
    .option('--json', 'print the results (ground truth, reported numbers, checks, the report) as one JSON object')
    .option('--keep', 'keep the temporary directory with the Caddyfile and Caddy logs')
    .action(async (flags: DrillFlags) => {
      const variants = VARIANTS[flags.variant];
      if (!variants) throw new ContinuityError('CONT_ERR_CONFIG', `--variant must be stale, reinit or both, not ${JSON.stringify(flags.variant)}`);
      // (loaded here, not at start: every other command would pay for the MCP SDK and the drill)
      const { ensureCaddy, renderDrillText, runDrill } = await import('../../drill/index.ts');
      const caddyBin = ensureCaddy({ install: false });
      const dataDir = mkdtempSync(join(tmpdir(), 'continuity-drill-store-'));
      // The drill's own store and key: it never touches the configured data directory.
      const config = loadConfig({ CONTINUITY_HASH_KEY: randomBytes(16).toString('hex') }, { dataDir });
      const results: DrillResult[] = [];
      // Ctrl-C or SIGTERM: kill Caddy and the servers now, then fail the run.
      const aborter = new AbortController();
      void untilSignal().then((signal) => aborter.abort(new Error(`${signal}: drill interrupted`)));
      try {
        await withStore(config, async (store) => {
          for (const variant of variants) {
            const log = flags.json ? undefined : (line: string) => process.stderr.write(`[${variant}] ${line}\n`);
            const result = await runDrill({ variant, store, hashKeyHex: config.hashKeyHex!, caddyBin, keepFiles: flags.keep ?? false, signal: aborter.signal, ...(log ? { log } : {}) });
            results.push(result);
            if (!flags.json) process.stdout.write(renderDrillText(result) + '\n');
          }
        });
      } catch (err) {
        if (!aborter.signal.aborted) throw err;
        process.stderr.write(`${(aborter.signal.reason as Error).message}: Caddy and the servers were killed\n`);
        process.exitCode = 130;
        return;
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
      const ok = results.every((r) => r.ok);
      if (flags.json) process.stdout.write(JSON.stringify({ ok, results }, null, 2) + '\n');
      else process.stdout.write(`drill ${ok ? 'PASS' : 'FAIL'}: ${results.map((r) => `${r.variant} ${r.ok ? 'pass' : 'fail'}`).join(', ')}\n`);
      if (!ok) process.exitCode = 1;
    });
}
