import { describe, expect, it } from 'vitest';
import { additionalSuccessesNeeded, clopperPearsonLower, successesNeeded } from './bounds.ts';

/**
 * P(X ≥ x) for X ~ Binomial(n, p), summed term by term from k = n down (independent of
 * the beta quantile under test; p^n must not underflow, as for the cases below).
 */
function binomialUpperTail(x: number, n: number, p: number): number {
  let term = Math.pow(p, n); // P(X = n)
  let total = 0;
  for (let k = n; k >= x; k--) {
    total += term;
    term *= (k / (n - k + 1)) * ((1 - p) / p); // P(X = k - 1)
  }
  return total;
}

describe('Clopper–Pearson one-sided 95% lower bound', () => {
  it('4 clean deploys of 4 support only a 47.3% lower bound', () => {
    expect(clopperPearsonLower(4, 4)).toBeCloseTo(0.4729, 4);
  });
  it('299 consecutive successes are the fewest that clear 99%', () => {
    expect(clopperPearsonLower(299, 299)).toBeGreaterThan(0.99);
    expect(clopperPearsonLower(298, 298)).toBeLessThan(0.99);
    expect(successesNeeded(0.99)).toBe(299);
  });
  it('matches the beta-quantile form for x < n', () => {
    // references: scipy.stats.beta.ppf(0.05, x, n - x + 1)
    expect(clopperPearsonLower(8, 10)).toBeCloseTo(0.4930987, 6);
    expect(clopperPearsonLower(50, 100)).toBeCloseTo(0.4136217, 6);
    expect(clopperPearsonLower(37, 60)).toBeCloseTo(0.5024333, 6);
    expect(clopperPearsonLower(0, 10)).toBe(0);
  });
  it('inverts the binomial tail: P(X >= x | p_L) = alpha', () => {
    for (const [x, n] of [[37, 60], [1, 2], [95, 100], [990, 1000]] as const) {
      expect(binomialUpperTail(x, n, clopperPearsonLower(x, n)), `${x}/${n}`).toBeCloseTo(0.05, 9);
    }
  });
  it('refuses impossible counts', () => {
    expect(() => clopperPearsonLower(5, 4)).toThrow(RangeError);
    expect(() => clopperPearsonLower(1, 0)).toThrow(RangeError);
  });
});

describe('additional clean observations to clear a target', () => {
  it('with no failure it is what remains of the 299 needed for 99%', () => {
    expect(additionalSuccessesNeeded(0, 0, 0.99)).toBe(299);
    expect(additionalSuccessesNeeded(4, 4, 0.99)).toBe(295);
    expect(additionalSuccessesNeeded(400, 400, 0.99)).toBe(0);
  });
  it('refuses a target outside (0, 1), with or without failures', () => {
    for (const target of [0, -1, 1, 1.5, Number.NaN]) {
      expect(() => additionalSuccessesNeeded(3, 4, target)).toThrow(/target must be in \(0, 1\)/);
      expect(() => additionalSuccessesNeeded(4, 4, target)).toThrow(/target must be in \(0, 1\)/);
    }
  });
  it('needs one more success where the bound of m equals the target exactly', () => {
    // 0.05^(1/5) in floating point: 5 successes reach it but do not clear it
    const target = clopperPearsonLower(5, 5);
    expect(successesNeeded(target)).toBe(6);
    expect(clopperPearsonLower(6, 6)).toBeGreaterThan(target);
  });
  it('is the smallest k whose bound clears the target when there were failures', () => {
    const k = additionalSuccessesNeeded(2, 3, 0.99);
    expect(clopperPearsonLower(2 + k, 3 + k)).toBeGreaterThan(0.99);
    expect(clopperPearsonLower(2 + k - 1, 3 + k - 1)).toBeLessThanOrEqual(0.99);
    expect(k).toBeGreaterThan(299);
  });
});
