import { createHmac, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Keyed hashing of raw identifiers (session ids, principals) before they leave
 * the observed process — DESIGN §3 "Privacy". HMAC-SHA-256 (RFC 2104, FIPS 180-4)
 * with a deployment key; the key is never stored next to the events.
 *
 * Output: the first 16 bytes of the MAC as 32 lowercase hex characters. 128 bits
 * keeps collisions out of reach for any realistic number of sessions while
 * halving the column size.
 */
export interface KeyedHasher {
  /** Hash of `raw`; the empty string maps to the empty string (no identifier). */
  (raw: string): string;
}

/**
 * Creates a hasher for `key`. Repeated identifiers are served from a bounded
 * cache (session ids recur on every request of a session).
 *
 * @param key deployment key, at least 16 bytes.
 * @param cacheSize entries kept; the cache is cleared whole when full (cheap, bounded).
 */
export function createKeyedHasher(key: Buffer, cacheSize = 65_536): KeyedHasher {
  if (key.length < 16) throw new RangeError('hash key must be at least 16 bytes');
  const cache = new Map<string, string>();
  return (raw: string): string => {
    if (raw === '') return '';
    const hit = cache.get(raw);
    if (hit !== undefined) return hit;
    const out = createHmac('sha256', key).update(raw, 'utf8').digest('hex').slice(0, 32);
    if (cache.size >= cacheSize) cache.clear();
    cache.set(raw, out);
    return out;
  };
}

/**
 * Reads the deployment key from `path`, creating it (32 random bytes, hex, mode 0600)
 * when absent. Used by the embedded mode so that `continuity hash` and imports
 * agree without any set-up.
 */
export function loadOrCreateKeyFile(path: string): Buffer {
  try {
    return Buffer.from(readFileSync(path, 'utf8').trim(), 'hex');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    mkdirSync(dirname(path), { recursive: true });
    const key = randomBytes(32);
    try {
      writeFileSync(path, key.toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
    } catch (raced) {
      // Another process created it first: use theirs so both hash alike.
      if ((raced as NodeJS.ErrnoException).code === 'EEXIST') return loadOrCreateKeyFile(path);
      throw raced;
    }
    return key;
  }
}

/**
 * The deployment's hasher: `CONTINUITY_HASH_KEY` when set, otherwise the key kept
 * in `<data-dir>/hash.key` (created on first use).
 */
export function hasherForConfig(config: { hashKeyHex?: string | undefined; dataDir: string }): KeyedHasher {
  const key = config.hashKeyHex ? Buffer.from(config.hashKeyHex, 'hex') : loadOrCreateKeyFile(`${config.dataDir}/hash.key`);
  return createKeyedHasher(key);
}
