/**
 * The median of `xs` (the mean of the two middle values for an even count), the
 * figure every bench script reports over its runs or pairs.
 * @returns NaN for an empty list.
 */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
