/**
 * mulberry32: a small, fast, seeded PRNG (public domain) for the synthetic data of
 * the benchmarks and the property tests. Not for anything secret.
 * @returns a function giving uniform numbers in [0, 1), the same sequence for the same seed.
 */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
