import { createHash, createHmac, randomBytes } from 'node:crypto';
import { linkSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { ContinuityError } from './errors.ts';
import { ensureDir, errnoText } from './fs.ts';

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
 * agree without any set-up. The file appears whole or not at all (written to a
 * temporary name, then linked into place), so a second process starting at the same
 * moment never reads it half-written, and uses the first one's key.
 * @param options.create false: a missing file is an error, not a new key (a reader
 *   such as `continuity hash` must not mint a key no stored hash was made with).
 * @throws ContinuityError CONT_ERR_CONFIG when the file is missing and `create` is
 *   false, cannot be read (a directory, no permission), or holds anything but at least 16 bytes of hex (an edited or damaged key would silently change every hash).
 */
export function loadOrCreateKeyFile(path: string, options: { create?: boolean } = {}): Buffer {
  let text: string;
  try {
    text = readFileSync(path, 'utf8').trim();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && options.create === false) {
      throw new ContinuityError(
        'CONT_ERR_CONFIG',
        `${path} does not exist: nothing was hashed into a store at ${dirname(path)} yet, so no hash would match; check --data-dir (CONTINUITY_DATA_DIR), or set CONTINUITY_HASH_KEY to the deployment key`,
        { cause: err, details: { path } },
      );
    }
    if (code !== 'ENOENT') {
      // a directory, an unreadable file: a coded error, not a stack trace (found by a break-it pass)
      throw new ContinuityError('CONT_ERR_CONFIG', `${path} cannot be read as the deployment key (${errnoText(err as NodeJS.ErrnoException)}); make it the key file it was, or set CONTINUITY_HASH_KEY`, {
        cause: err,
        details: { path, errno: code },
      });
    }
    ensureDir(dirname(path));
    const key = randomBytes(32);
    const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    writeFileSync(tmp, key.toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
    try {
      linkSync(tmp, path);
    } catch (raced) {
      // Another process created it first: use theirs so both hash alike.
      if ((raced as NodeJS.ErrnoException).code === 'EEXIST') return loadOrCreateKeyFile(path);
      throw raced;
    } finally {
      unlinkSync(tmp);
    }
    return key;
  }
  if (!/^(?:[0-9a-fA-F]{2}){16,}$/.test(text)) {
    throw new ContinuityError('CONT_ERR_CONFIG', `${path} does not hold a hex key of at least 16 bytes; restore it (every stored hash depends on it), or remove it to start a new key for a new data directory`, {
      details: { path },
    });
  }
  return Buffer.from(text, 'hex');
}

/**
 * The deployment's hasher: `CONTINUITY_HASH_KEY` when set, otherwise the key kept
 * in `<data-dir>/hash.key` (created on first use, unless `create` is false: see
 * {@link loadOrCreateKeyFile}).
 */
export function hasherForConfig(config: { hashKeyHex?: string | undefined; dataDir: string }, options: { create?: boolean } = {}): KeyedHasher {
  const key = config.hashKeyHex ? Buffer.from(config.hashKeyHex, 'hex') : loadOrCreateKeyFile(`${config.dataDir}/hash.key`, options);
  return createKeyedHasher(key);
}

/**
 * Checks the key a writer (an import, `serve`) is about to hash with against the key
 * the data directory's store was hashed with before, and records it on first use, as
 * a fingerprint in `<data-dir>/hash.key.id` (the first 16 hex characters of the key's
 * SHA-256; the key itself stays where it is). Ids hashed with two keys never match:
 * a session cut between two imports counts twice, so a change of key is said, not
 * refused (a deployment may rotate its key on purpose). Without a recorded fingerprint
 * (a store from before it was kept), `<data-dir>/hash.key` stands for it when present.
 * A break-it pass found CONTINUITY_HASH_KEY changed between imports without a word.
 * @returns the warning, or undefined when the key is the one recorded (or the first).
 * @throws ContinuityError CONT_ERR_CONFIG as {@link loadOrCreateKeyFile} does.
 */
export function deploymentKeyWarning(config: { hashKeyHex?: string | undefined; dataDir: string }): string | undefined {
  const idPath = `${config.dataDir}/hash.key.id`;
  const keyPath = `${config.dataDir}/hash.key`;
  const fingerprint = (key: Buffer): string => createHash('sha256').update(key).digest('hex').slice(0, 16);
  const readText = (path: string): string | undefined => {
    try {
      return readFileSync(path, 'utf8').trim() || undefined;
    } catch {
      return undefined;
    }
  };
  const current = fingerprint(config.hashKeyHex ? Buffer.from(config.hashKeyHex, 'hex') : loadOrCreateKeyFile(keyPath));
  const kept = readText(idPath);
  // (no fingerprint kept yet: without the variable the key file is the key in use; with
  // it, the key file, when there is one, is what the store was hashed with)
  const fileKey = config.hashKeyHex ? readText(keyPath) : undefined;
  const recorded = kept ?? (fileKey === undefined ? undefined : fingerprint(Buffer.from(fileKey, 'hex')));
  if (kept === undefined && (recorded === undefined || recorded === current)) {
    ensureDir(config.dataDir);
    writeFileSync(idPath, current + '\n', { mode: 0o600 });
  }
  if (recorded === undefined || recorded === current) return undefined;
  const now = config.hashKeyHex ? 'CONTINUITY_HASH_KEY' : keyPath;
  return (
    `warning: this store was hashed with another key (fingerprint ${recorded}, ${idPath}) than the one in use now (${now}, ${current}): ` +
    `ids hashed with the two never match (a session shows as two); use the store's key (${keyPath}, or the CONTINUITY_HASH_KEY it was imported with), ` +
    `or a new --data-dir for the new key`
  );
}

/**
 * Makes sure the deployment key exists before anything is hashed with it, and says
 * where it is: `serve` and `consumer` call it at start, so that a collector can be
 * given the key of the store its events go to before the first proxy log is
 * imported (they hash nothing themselves: collectors hash before sending, DESIGN §3).
 * @returns `'CONTINUITY_HASH_KEY'` when the key is set there, else the path of
 *   `<data-dir>/hash.key`, created when absent ({@link loadOrCreateKeyFile}).
 * @throws ContinuityError CONT_ERR_CONFIG as {@link loadOrCreateKeyFile} does.
 */
export function ensureDeploymentKey(config: { hashKeyHex?: string | undefined; dataDir: string }): string {
  if (config.hashKeyHex) return 'CONTINUITY_HASH_KEY';
  const path = `${config.dataDir}/hash.key`;
  loadOrCreateKeyFile(path);
  return path;
}
