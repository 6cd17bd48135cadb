import { execFile, execFileSync, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../core/config.ts';
import { openStore } from '../store/index.ts';

describe('an embedded data directory has one owner', () => {
  it('a second process gets CONT_ERR_STORE_LOCKED naming the directory and the owner, and the store stays intact', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'continuity-lock-'));
    const holder = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/hold-store.ts', dataDir], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      const [chunk] = (await once(holder.stdout!, 'data')) as [Buffer];
      expect(chunk.toString()).toContain('ready');
      const err = await openStore(loadConfig({}, { dataDir })).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ code: 'CONT_ERR_STORE_LOCKED', details: { ownerPid: holder.pid } });
      expect((err as Error).message).toContain(dataDir);
    } finally {
      holder.stdin!.end();
      await once(holder, 'exit');
    }
    // After the owner exits, the directory opens and still holds its schema.
    const store = await openStore(loadConfig({}, { dataDir }));
    const [row] = await store.query<{ n: number }>("SELECT count() AS n FROM system.tables WHERE database = currentDatabase() AND name = 'events'");
    expect(row!.n).toBe(1);
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('the CLI says so with the coded error alone: the engine does not print its own "Cannot lock file" line', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'continuity-lock-'));
    const holder = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/hold-store.ts', dataDir], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      const [chunk] = (await once(holder.stdout!, 'data')) as [Buffer];
      expect(chunk.toString()).toContain('ready');
      const bin = new URL('../bin/continuity.mjs', import.meta.url).pathname;
      const env: NodeJS.ProcessEnv = { ...process.env, CONTINUITY_DATA_DIR: dataDir };
      delete env.CLICKHOUSE_URL;
      const cli = async (...args: string[]) =>
        (await promisify(execFile)(process.execPath, [bin, ...args], { env }).then(
          () => undefined,
          (e: unknown) => e,
        )) as { code: number; stderr: string } | undefined;
      const err = await cli('sql', 'SELECT 1');
      expect(err?.code).toBe(1);
      expect(err?.stderr).toMatch(/^error CONT_ERR_STORE_LOCKED: /);
      expect(err?.stderr).toContain(`owned by process ${holder.pid}`);
      expect(err?.stderr).not.toContain('Cannot lock file');
      expect(err?.stderr).not.toContain('DB::Exception');
      // compact adds that a running owner compacts by itself, after the store's own
      // detail (the registry's message once, not twice)
      const compact = await cli('compact');
      expect(compact?.code).toBe(1);
      expect(compact?.stderr).toMatch(
        new RegExp(`^error CONT_ERR_STORE_LOCKED: the embedded data directory is in use by another process: \\S+ is owned by process ${holder.pid};.* \\(a running serve or consumer compacts its closed days itself, every 15 minutes\\)`),
      );
      expect(compact?.stderr.match(/in use by another process/g)).toHaveLength(1);
    } finally {
      holder.stdin!.end();
      await once(holder, 'exit');
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('a status file that is a FIFO or a device is refused at once (the engine would hang on the FIFO)', async () => {
    for (const [kind, make] of [
      ['FIFO', (p: string) => execFileSync('mkfifo', [p])],
      ['device', (p: string) => symlinkSync('/dev/zero', p)],
    ] as const) {
      const dataDir = mkdtempSync(join(tmpdir(), 'continuity-lock-'));
      try {
        mkdirSync(join(dataDir, 'clickhouse'));
        make(join(dataDir, 'clickhouse', 'status'));
        const err = await openStore(loadConfig({}, { dataDir })).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err, kind).toMatchObject({ code: 'CONT_ERR_STORE_UNAVAILABLE' });
        expect((err as Error).message).toContain(`status is a ${kind}`);
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    }
  });
});
