import { createHmac } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from './config.ts';
import { ContinuityError, ERROR_CODES } from './errors.ts';
import { createKeyedHasher, deploymentKeyWarning, loadOrCreateKeyFile } from './hash.ts';

describe('loadConfig', () => {
  it('defaults to the embedded store in ./.continuity', () => {
    const c = loadConfig({});
    expect(c.dataDir).toMatch(/\.continuity$/);
    expect(c.clickhouse).toBeUndefined();
    expect(c.retentionDays).toBeUndefined(); // the store keeps the TTL it has (90 days when created)
    expect(Object.isFrozen(c)).toBe(true);
  });
  it('switches to a server with CLICKHOUSE_URL', () => {
    const c = loadConfig({ CLICKHOUSE_URL: 'http://127.0.0.1:8123', CLICKHOUSE_DATABASE: 'mcp' });
    expect(c.clickhouse).toMatchObject({ url: 'http://127.0.0.1:8123', database: 'mcp', username: 'default' });
  });
  it('takes an empty variable or flag as unset', () => {
    const c = loadConfig({ CONTINUITY_DATA_DIR: '', CONTINUITY_REMINT_WINDOW_S: '' }, { dataDir: '' });
    expect(c.dataDir).toBe(resolve('./.continuity'));
    expect(c.remintWindowS).toBe(10);
    // the window may be as long as the queries' own window_s allows (a day)
    expect(loadConfig({ CONTINUITY_REMINT_WINDOW_S: '7200' }).remintWindowS).toBe(7200);
  });
  it('flags win over the environment', () => {
    expect(loadConfig({ CONTINUITY_DATA_DIR: '/a' }, { dataDir: '/b' }).dataDir).toBe('/b');
  });
  it('fails at start with a coded error naming each bad variable', () => {
    let err: unknown;
    try {
      loadConfig({ CONTINUITY_RETENTION_DAYS: 'soon', CLICKHOUSE_URL: 'ftp://x', CONTINUITY_HASH_KEY: 'zz' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ContinuityError);
    expect((err as ContinuityError).code).toBe('CONT_ERR_CONFIG');
    expect((err as Error).message).toMatch(/CONTINUITY_RETENTION_DAYS/);
    expect((err as Error).message).toMatch(/CLICKHOUSE_\*/);
    expect((err as Error).message).toMatch(/CONTINUITY_HASH_KEY/);
  });
  it('takes the retention in decimal days and the key in whole bytes only', () => {
    for (const days of ['0x10', '1e1', ' 7', '7.0', '-1']) {
      expect(() => loadConfig({ CONTINUITY_RETENTION_DAYS: days }), days).toThrow(expect.objectContaining({ code: 'CONT_ERR_CONFIG', message: expect.stringMatching(/CONTINUITY_RETENTION_DAYS/) }));
    }
    expect(loadConfig({ CONTINUITY_RETENTION_DAYS: '0' }).retentionDays).toBe(0);
    expect(loadConfig({ CONTINUITY_RETENTION_DAYS: '30' }).retentionDays).toBe(30);
    // 33 hex digits: the last would be dropped, hashing like the 32-digit prefix
    expect(() => loadConfig({ CONTINUITY_HASH_KEY: 'a'.repeat(33) })).toThrow(expect.objectContaining({ message: expect.stringMatching(/CONTINUITY_HASH_KEY.*even number of hex characters/) }));
    expect(loadConfig({ CONTINUITY_HASH_KEY: 'a'.repeat(34) }).hashKeyHex).toBe('a'.repeat(34));
  });
  it('takes a bearer token only as a client can send it (RFC 6750 b64token): no CR, space or non-ASCII letter (each got 401 on every request)', () => {
    for (const token of ['abcdefghijklmnopqrst\r', 'abcdefghijklmnop ', ' abcdefghijklmnop', 'abcdefgh ijklmnop', 'ключключключключ', 'abcdefghijklmnop\n', 'abcdefghijklmnop=x']) {
      expect(() => loadConfig({ CONTINUITY_INGEST_TOKEN: token }), JSON.stringify(token)).toThrow(
        expect.objectContaining({ code: 'CONT_ERR_CONFIG', message: expect.stringMatching(/CONTINUITY_INGEST_TOKEN\/--token.*RFC 6750/) }),
      );
    }
    for (const token of ['serve-e2e-token-0123456789', 'aB3.x_y~z+w/Q-0123==', 'A'.repeat(512)]) expect(loadConfig({}, { ingestToken: token }).ingestToken).toBe(token);
  });
});

describe('keyed hashing (HMAC-SHA-256, RFC 2104)', () => {
  const key = Buffer.from('00112233445566778899aabbccddeeff', 'hex');
  it('is the truncated HMAC-SHA-256 of the raw id', () => {
    const h = createKeyedHasher(key);
    expect(h('4f2b62a4-4517-4309-8dd1-da4057041770')).toBe(
      createHmac('sha256', key).update('4f2b62a4-4517-4309-8dd1-da4057041770').digest('hex').slice(0, 32),
    );
  });
  it('maps no id to no key and is stable across cache evictions', () => {
    const h = createKeyedHasher(key, 2);
    const first = ['a', 'b', 'c', 'd'].map(h);
    expect(['a', 'b', 'c', 'd'].map(h)).toEqual(first);
    expect(h('')).toBe('');
  });
  it('refuses short keys', () => {
    expect(() => createKeyedHasher(Buffer.alloc(8))).toThrow(RangeError);
  });
});

describe('error registry', () => {
  it('gives every code a fix and an HTTP status', () => {
    for (const spec of Object.values(ERROR_CODES)) {
      expect(spec.fix.length).toBeGreaterThan(10);
      expect(spec.httpStatus).toBeGreaterThanOrEqual(400);
    }
  });
  it('serializes code, message, fix and details', () => {
    const e = new ContinuityError('CONT_ERR_READONLY', 'DROP', { details: { sql: 'DROP TABLE x' } });
    expect(e.toJSON()).toMatchObject({ code: 'CONT_ERR_READONLY', details: { sql: 'DROP TABLE x' } });
    expect(e.retriable).toBe(false);
  });
});

describe('loadOrCreateKeyFile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'continuity-key-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('creates one 32-byte key, reads the same one back, and leaves no temporary file', () => {
    const path = join(dir, 'a', 'hash.key');
    const first = loadOrCreateKeyFile(path);
    expect(first).toHaveLength(32);
    expect(loadOrCreateKeyFile(path).equals(first)).toBe(true);
    expect(readdirSync(join(dir, 'a'))).toEqual(['hash.key']);
  });

  it('records the key a store was first hashed with, and warns when another is used (a break-it pass: used silently)', () => {
    const K1 = '11'.repeat(32);
    const K2 = '22'.repeat(32);
    // an import with CONTINUITY_HASH_KEY writes no hash.key: its fingerprint is what is kept
    const a = join(dir, 'env-first');
    expect(deploymentKeyWarning({ dataDir: a, hashKeyHex: K1 })).toBeUndefined();
    expect(readdirSync(a)).toEqual(['hash.key.id']);
    expect(deploymentKeyWarning({ dataDir: a, hashKeyHex: K1.toUpperCase() })).toBeUndefined();
    expect(deploymentKeyWarning({ dataDir: a, hashKeyHex: K2 })).toMatch(/^warning: this store was hashed with another key \(fingerprint [0-9a-f]{16}, .*hash\.key\.id\) than the one in use now \(CONTINUITY_HASH_KEY, [0-9a-f]{16}\)/);
    // the same store later without the variable: the new random hash.key is another key too
    expect(deploymentKeyWarning({ dataDir: a })).toContain(`than the one in use now (${a}/hash.key, `);
    // a store whose hash.key came first (no fingerprint kept yet): the file stands for it
    const b = join(dir, 'file-first');
    const kept = loadOrCreateKeyFile(join(b, 'hash.key')).toString('hex');
    expect(deploymentKeyWarning({ dataDir: b, hashKeyHex: K2 })).toContain('warning: this store was hashed with another key');
    expect(deploymentKeyWarning({ dataDir: b, hashKeyHex: kept })).toBeUndefined();
    expect(deploymentKeyWarning({ dataDir: b })).toBeUndefined();
  });

  it('refuses a key file it cannot read (a directory) with CONT_ERR_CONFIG naming it', () => {
    const path = join(dir, 'dir.key');
    mkdirSync(path);
    expect(() => loadOrCreateKeyFile(path)).toThrow(expect.objectContaining({ code: 'CONT_ERR_CONFIG', message: expect.stringContaining(`${path} cannot be read as the deployment key (EISDIR: `) }));
  });

  it('refuses an empty, non-hex or short key file with CONT_ERR_CONFIG instead of hashing with it', () => {
    const cases: Array<[string, string]> = [['empty', ''], ['nonhex', 'zz'.repeat(16)], ['short', 'ab'.repeat(15)], ['trailing', 'ab'.repeat(16) + 'xyz']];
    for (const [name, text] of cases) {
      const path = join(dir, `${name}.key`);
      writeFileSync(path, text);
      expect(() => loadOrCreateKeyFile(path), name).toThrow(expect.objectContaining({ code: 'CONT_ERR_CONFIG' }));
    }
  });
});
