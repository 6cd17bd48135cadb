import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { ContinuityError } from '../../core/index.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const script = fileURLToPath(new URL('../../scripts/kafka.sh', import.meta.url));

/**
 * `continuity dev kafka [start|stop|status]`: the local single-node Kafka broker of
 * scripts/kafka.sh (docs/kafka.md), run from the repository root so its data stay in
 * `.kafka/` (KAFKA_PORT, KAFKA_DATA_DIR and the script's other variables pass through).
 * `start` prints the bootstrap address to use as KAFKA_BROKERS. The exit code is the
 * script's: status 0 running, 3 stopped (or started but not answering yet), 4 when this
 * broker is not running and another process answers on its port or its controller port
 * (the message names it when `ss` can); start 4 for that same case, 1 for other failures.
 * @throws ContinuityError CONT_ERR_CONFIG (exit 2) for another action.
 */
export function registerDev(program: Command): void {
  const dev = program.command('dev').description('development helpers');
  dev
    .command('kafka')
    .description('start, stop or check the local Kafka broker (scripts/kafka.sh); exit 0 running, 3 stopped, 4 another process on its port (start: 1 other failures)')
    .argument('[action]', 'start | stop | status', 'status')
    .action(async (action: string) => {
      if (!['start', 'stop', 'status'].includes(action)) {
        throw new ContinuityError('CONT_ERR_CONFIG', `continuity dev kafka takes start, stop or status, got ${JSON.stringify(action)}`);
      }
      const code = await new Promise<number>((resolve, reject) => {
        const child = spawn('bash', [script, action], { cwd: repoRoot, stdio: 'inherit' });
        child.on('error', reject);
        child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0)));
      });
      process.exitCode = code;
    });
}
