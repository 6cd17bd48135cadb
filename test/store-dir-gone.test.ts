import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestStore, type TestStore } from './helpers/store.ts';

// The data directory removed under a running process: the engine recreates bare part
// directories and reports its writes as done, and they are gone at the next open. A
// break-it pass lost 2,000 acknowledged events that way (the consumer committed their
// offsets, `serve` counted them written). Each write now checks the directory is still
// the one the store opened (store/client.ts assertSameDataDir). Embedded only.

const row = () => JSON.stringify({ event_id: randomUUID(), event_type: 'boot', ts: Date.now() * 1000, source: 'server', service: 'gone', boot_id: 'b1' });

let t: TestStore;
beforeAll(async () => {
  t = await openTestStore('dir_gone');
});
afterAll(async () => {
  await t?.close();
});

describe.skipIf(!!process.env.CLICKHOUSE_URL)('a data directory removed under the store', () => {
  it('fails the next write as the store unavailable (retriable), instead of reporting it done', async () => {
    await t.store.insertJsonEachRow('events', row());
    rmSync(t.config.dataDir, { recursive: true, force: true });
    const err = await t.store.insertJsonEachRow('events', row()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'CONT_ERR_STORE_UNAVAILABLE', retriable: true, details: { reason: 'data_dir_gone', dataDir: t.config.dataDir } });
    expect((err as Error).message).toMatch(/was removed or replaced while this process had it open/);
  });
});
