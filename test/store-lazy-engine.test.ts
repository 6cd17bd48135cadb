import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

// The embedded engine's library is loaded by the first embedded open, not by an
// import: a gateway, a consumer writing to a ClickHouse server and a CLI command
// that talks to `serve` over HTTP would otherwise each carry about 145 MB of it.

const run = promisify(execFile);
const CHILD = new URL('./helpers/engine-mapped.ts', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'continuity-lazy-engine-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the embedded engine is loaded on first use', () => {
  it('is not mapped after importing every module a command runs, and is after an embedded open', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.CLICKHOUSE_URL;
    const { stdout } = await run(process.execPath, ['--import', 'tsx', CHILD, dir], { env });
    const steps = stdout.trim().split('\n').map((l) => JSON.parse(l) as { step: string; mapped: boolean });
    expect(steps).toEqual([
      { step: 'imported', mapped: false },
      { step: 'opened', mapped: true },
    ]);
  }, 60_000);
});
