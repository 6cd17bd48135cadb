/**
 * Exact (Clopper–Pearson) one-sided confidence bounds for a binomial proportion
 * (Clopper & Pearson, Biometrika 26(4), 1934): the lower bound p_L for x successes
 * in n trials at confidence 1 − α is the p for which P(X ≥ x | n, p) = α. With
 * x = n it has the closed form α^(1/n): 4 of 4 at 95% → 0.473, and 299 consecutive
 * successes are the fewest whose bound clears 0.99. Otherwise p_L is the α quantile
 * of Beta(x, n − x + 1), since P(X ≥ x | n, p) = I_p(x, n − x + 1).
 */

import betaQuantile from '@stdlib/stats-base-dists-beta-quantile';

/**
 * One-sided lower confidence bound of a success proportion.
 * @param successes x, an integer in [0, n]
 * @param trials n ≥ 1
 * @param confidence 1 − α, in (0, 1) (default 0.95); the quantile is accurate to
 *   about 1e-10 relative at 0.95 up to n = 1e12, to about 1e-6 at 0.5 beyond n = 1e9
 * @returns p_L in [0, 1]; 0 when x = 0.
 * @throws RangeError for counts out of range.
 */
export function clopperPearsonLower(successes: number, trials: number, confidence = 0.95): number {
  if (!Number.isInteger(successes) || !Number.isInteger(trials) || trials < 1 || successes < 0 || successes > trials) {
    throw new RangeError(`need integers 0 <= successes <= trials, trials >= 1 (got ${successes}/${trials})`);
  }
  if (!(confidence > 0 && confidence < 1)) throw new RangeError('confidence must be in (0, 1)');
  const alpha = 1 - confidence;
  if (successes === 0) return 0;
  if (successes === trials) return Math.pow(alpha, 1 / trials);
  // P(X ≥ x | p) = I_p(x, n − x + 1) = α: the α quantile of Beta(x, n − x + 1)
  return betaQuantile(alpha, successes, trials - successes + 1);
}

/**
 * The fewest consecutive successes (no failure) whose lower bound clears `target`:
 * the smallest n with α^(1/n) > target, i.e. n > ln α / ln target.
 */
export function successesNeeded(target: number, confidence = 0.95): number {
  if (!(target > 0 && target < 1)) throw new RangeError('target must be in (0, 1)');
  const alpha = 1 - confidence;
  const n = Math.floor(Math.log(alpha) / Math.log(target)) + 1;
  // where ln α / ln target is an integer m up to rounding, α^(1/m) may equal target: not above it
  return Math.pow(alpha, 1 / n) > target ? n : n + 1;
}

/**
 * How many more consecutive successes, added to `successes` of `trials`, bring
 * the one-sided lower bound above `target`: the smallest k ≥ 0 with
 * clopperPearsonLower(successes + k, trials + k) > target. With no failure so far
 * this is successesNeeded(target) − trials (never below 0); each failure raises it.
 * @param successes x, an integer in [0, n]
 * @param trials n ≥ 0 (0: nothing observed yet, the answer is successesNeeded(target))
 * @throws RangeError for counts out of range or a target outside (0, 1).
 */
export function additionalSuccessesNeeded(successes: number, trials: number, target: number, confidence = 0.95): number {
  if (!Number.isInteger(successes) || !Number.isInteger(trials) || trials < 0 || successes < 0 || successes > trials) {
    throw new RangeError(`need integers 0 <= successes <= trials (got ${successes}/${trials})`);
  }
  if (!(target > 0 && target < 1)) throw new RangeError('target must be in (0, 1)');
  if (successes === trials) return Math.max(0, successesNeeded(target, confidence) - trials);
  const clears = (k: number) => clopperPearsonLower(successes + k, trials + k, confidence) > target;
  if (clears(0)) return 0;
  // The bound rises with every added success: double to bracket, then bisect.
  let lo = 0;
  let hi = 1;
  while (!clears(hi)) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (clears(mid)) hi = mid;
    else lo = mid;
  }
  return hi;
}
