import { randomFillSync } from 'node:crypto';

/**
 * A UUIDv7 generator (RFC 9562 §5.7): 48-bit Unix time in milliseconds, version
 * 7, a 12-bit `rand_a` used as a monotonic counter (§6.2 "Method 1", fixed-length
 * dedicated counter, seeded randomly with its top bit clear), the variant bits,
 * and 62 random bits. Ids from one generator sort in creation order even within
 * one millisecond; on counter overflow the timestamp is advanced by 1 ms (§6.2).
 *
 * @param now clock in ms since the Unix epoch (injectable for tests).
 * @returns a function returning lowercase, hyphenated UUID strings.
 */
export function createUuidV7Generator(now: () => number = Date.now): () => string {
  let lastMs = -1;
  let counter = 0;
  const bytes = Buffer.alloc(16);
  return () => {
    let ms = Math.floor(now());
    randomFillSync(bytes, 6, 10);
    if (ms > lastMs) {
      lastMs = ms;
      // Random seed in the lower 11 bits leaves headroom for increments (§6.2).
      counter = ((bytes[6]! << 8) | bytes[7]!) & 0x7ff;
    } else {
      ms = lastMs;
      counter += 1;
      if (counter > 0xfff) {
        lastMs += 1;
        ms = lastMs;
        counter = ((bytes[6]! << 8) | bytes[7]!) & 0x7ff;
      }
    }
    bytes.writeUIntBE(ms, 0, 6);
    bytes[6] = 0x70 | (counter >> 8);
    bytes[7] = counter & 0xff;
    bytes[8] = 0x80 | (bytes[8]! & 0x3f);
    const hex = bytes.toString('hex');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  };
}
