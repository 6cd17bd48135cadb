import type { Command } from 'commander';
import { ContinuityError } from '../../core/errors.ts';
import { hasherForConfig } from '../../core/hash.ts';
import { configFrom } from '../context.ts';

/**
 * `continuity hash <raw id>`: the keyed hash under which a raw session id or principal
 * is stored. Without CONTINUITY_HASH_KEY it uses `<data-dir>/hash.key` and never
 * creates one: a new key (a mistyped --data-dir) would print a hash no store holds
 * (found by a newcomer pass).
 * @throws ContinuityError CONT_ERR_CONFIG when the raw id is empty or the data directory has no key yet.
 */
export function registerHash(program: Command): void {
  program
    .command('hash')
    .description("print a raw session id's or principal's keyed hash (HMAC-SHA-256 with the deployment key), to find it in the store")
    .argument('<raw>', 'the raw identifier, e.g. an Mcp-Session-Id')
    .action((raw: string, _opts: unknown, cmd: Command) => {
      // (an empty id is no header a client sent: the stores never hash one)
      if (raw.trim() === '') throw new ContinuityError('CONT_ERR_CONFIG', 'hash takes a non-empty raw id (an Mcp-Session-Id or a principal)');
      const config = configFrom(cmd.optsWithGlobals());
      process.stdout.write(hasherForConfig(config, { create: false })(raw) + '\n');
    });
}
