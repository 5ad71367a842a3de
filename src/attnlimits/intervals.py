"""Intervals over a handful of training seeds: Student's t-intervals (on the log scale for
positive measures), paired ratios of a rule's measure to the baseline's of the same seed, odds of
a share, and a log-log slope. Pure functions of numbers (the normalizer study's statistics;
attnlimits.bootstrap has the resampling intervals)."""

from __future__ import annotations

import math

import numpy as np


def odds(x: float) -> float:
    """x / (1 - x) of a share, clipped to [0, 1] first (a t-interval's end may leave it); 1 is
    +inf."""
    x = min(max(x, 0.0), 1.0)
    return math.inf if x == 1.0 else x / (1.0 - x)


def loglog_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of log y on log x over the points with y > 0 (NaN if under two)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = (x > 0) & (y > 0)
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)[0])


def t_interval(values, level: float) -> tuple[float, float, float]:
    """(mean, low, high): mean +- t_{(1 + level)/2, n - 1} sd / sqrt(n), Student's t with n - 1
    degrees of freedom over n seeds. Chosen over the bootstrap: with 3 seeds a percentile
    bootstrap of the mean can only return about the seeds' range (which covers the median with
    probability 1 - 2 / 2^3 = 75%, whatever level it is labelled), while the t-interval has its
    level when the seeds' values spread normally. NaN ends with fewer than two values."""
    from scipy import stats

    x = np.asarray(values, dtype=np.float64)
    mean = float(x.mean()) if x.size else math.nan
    if x.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf((1.0 + level) / 2.0, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return mean, mean - half, mean + half


def log_t_interval(values, level: float) -> tuple[float, float, float]:
    """(geometric mean, low, high): t_interval of log(values), mapped back. For positive
    measures compared by a ratio: the interval is one of ratios, never reaches below 0, and a
    seed 100x off moves it by a factor, not by its raw size (sigmoid's length ratio: 0.0015,
    0.10 and 0.21 over three seeds)."""
    mean, low, high = t_interval(np.log(np.asarray(values, dtype=np.float64)), level)
    return math.exp(mean), math.exp(low), math.exp(high)


def paired_ratio(
    values: tuple[float, ...], base: tuple[float, ...], level: float, share: bool = False
) -> tuple[float, float, float]:
    """(ratio, low, high): seed by seed value / baseline value (odds / odds for a ``share``),
    their geometric mean and its t-interval on the log scale. The models of one seed share
    initial weights and batches, so the pairs remove the spread the seeds have in common; two
    unpaired intervals of three seeds each would need the seeds' whole spread on both sides.
    NaN where under two pairs or any value is not positive (a share not inside (0, 1))."""
    logs = paired_log_ratios(values, base, share)
    if logs is None:
        return math.nan, math.nan, math.nan
    mean, low, high = t_interval(logs, level)
    return math.exp(mean), math.exp(low), math.exp(high)


def sign_test_greater(above: int, trials: int) -> float:
    """One-sided exact sign test: P(B >= above) for B ~ Binomial(trials, 1/2), the chance that at
    least ``above`` of ``trials`` untied pairs favour one side when neither is favoured; 1 for no
    trials. Normality-free: it reads only which side each pair falls on. With 3 pairs its
    smallest value is 1/8 = 0.125, with 4 it is 1/16."""
    if trials < 0 or not 0 <= above <= max(trials, 0):
        raise ValueError(f"need 0 <= above <= trials, got {above} of {trials}")
    if trials == 0:
        return 1.0
    return sum(math.comb(trials, k) for k in range(above, trials + 1)) / 2.0**trials


def benjamini_hochberg(pvalues, q: float) -> list[bool]:
    """Which hypotheses Benjamini-Hochberg's step-up procedure rejects at false-discovery rate
    ``q``: sort the m p-values, find the largest rank k with p_(k) <= k q / m, reject the k
    smallest. NaN p-values are never rejected and do not count in m."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must lie in (0, 1), got {q}")
    p = np.asarray(pvalues, dtype=np.float64)
    tested = np.flatnonzero(~np.isnan(p))
    m = tested.size
    reject = np.zeros(p.shape, dtype=bool)
    if m == 0:
        return reject.tolist()
    order = tested[np.argsort(p[tested], kind="stable")]
    passing = np.flatnonzero(p[order] <= q * np.arange(1, m + 1) / m)
    if passing.size:
        reject[order[: passing[-1] + 1]] = True
    return reject.tolist()


def holm(pvalues, alpha: float) -> list[bool]:
    """Which hypotheses Holm's step-down procedure rejects at family-wise level ``alpha``: sort
    the m p-values, reject while p_(k) <= alpha / (m - k + 1), stop at the first that is not.
    NaN p-values are never rejected and do not count in m. Its first cut, alpha / m, is
    Benjamini-Hochberg's (at q = alpha); every later one is stricter, so it rejects a subset of
    what :func:`benjamini_hochberg` rejects."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    p = np.asarray(pvalues, dtype=np.float64)
    tested = np.flatnonzero(~np.isnan(p))
    m = tested.size
    reject = np.zeros(p.shape, dtype=bool)
    order = tested[np.argsort(p[tested], kind="stable")]
    failing = np.flatnonzero(p[order] > alpha / (m - np.arange(m)))
    reject[order[: failing[0] if failing.size else m]] = True
    return reject.tolist()


def paired_log_ratios(
    values: tuple[float, ...], base: tuple[float, ...], share: bool = False
) -> np.ndarray | None:
    """Seed by seed log(value / baseline value) (of the odds for a ``share``), the numbers
    :func:`paired_ratio` summarises; None where under two pairs or a value is not positive (a
    share not inside (0, 1))."""
    v, b = np.asarray(values, dtype=np.float64), np.asarray(base, dtype=np.float64)
    if v.size < 2 or v.size != b.size:
        return None
    if share:
        if not (((v > 0) & (v < 1)).all() and ((b > 0) & (b < 1)).all()):
            return None
        v, b = v / (1 - v), b / (1 - b)
    if not ((v > 0).all() and (b > 0).all()):
        return None
    return np.log(v / b)


# A standard error this small relative to its mean is rounding, not spread: ratios computed by
# division that agree on every seed differ in their last bits (sd ~ 1e-16), which a t-test would
# read as certainty (p ~ 1e-32).
NO_SPREAD = 1e-12


def no_spread(se: float, center: float) -> bool:
    """Whether a standard error ``se`` around ``center`` is rounding only (:data:`NO_SPREAD`)."""
    return se <= NO_SPREAD * max(1.0, abs(center))


def beyond_ratio_pvalue(log_ratios, ratio: float) -> float:
    """Two-sided p-value of a paired ratio lying beyond ``ratio`` on either side: the smaller of
    the one-sided t-tests of mean log ratio > log ratio and of mean log ratio < -log ratio
    (Student's t, n - 1 degrees of freedom), doubled (the side is read off the data), at most 1.
    It is below 1 - level exactly when the paired ratio's ``level`` t-interval (paired_ratio)
    lies wholly beyond ``ratio`` on one side. Seeds that agree (up to rounding: :func:`no_spread`)
    leave the t-test no spread to read: beyond the ratio they get the exact sign-flip p of n
    pairs all on one side, 2^(1 - n) (0.25 with 3 seeds), inside it 1."""
    from scipy import stats

    x = np.asarray(log_ratios, dtype=np.float64)
    if x.size < 2 or ratio <= 1.0:
        raise ValueError(f"need two or more log ratios and a ratio above 1, got {x.size}, {ratio}")
    edge, mean = math.log(ratio), float(x.mean())
    se = float(x.std(ddof=1)) / math.sqrt(x.size)
    if no_spread(se, mean):
        # at or beyond, to a log's rounding, as the sign test and the intervals (review 42)
        return min(1.0, 2.0 ** (1 - x.size)) if abs(mean) >= edge - 1e-12 * max(1.0, edge) else 1.0
    up = float(stats.t.sf((mean - edge) / se, x.size - 1))
    down = float(stats.t.cdf((mean + edge) / se, x.size - 1))
    return min(1.0, 2.0 * min(up, down))


def beyond_ratio_sign_pvalue(log_ratios, ratio: float) -> float:
    """Two-sided exact sign test that the seeds' ratios lie beyond ``ratio`` on one side: the
    smaller of :func:`sign_test_greater` of the seeds above ``ratio`` and of those below
    1 / ``ratio``, doubled (the side is read off the data), at most 1. No normality assumed;
    with 3 seeds it is at least 1/4 (one-sided 1/8)."""
    x = np.asarray(log_ratios, dtype=np.float64)
    edge, n = math.log(ratio), int(x.size)
    # at or beyond, as the intervals read it (a ratio of exactly 1.5 is beyond 1.5x), to the
    # rounding of a log: 3/2 and 2/3 land either side of +-log 1.5 (review 40)
    tol = 1e-12 * max(1.0, edge)
    up = sign_test_greater(int((x >= edge - tol).sum()), n)
    down = sign_test_greater(int((x <= -edge + tol).sum()), n)
    return min(1.0, 2.0 * min(up, down))


def beyond_ratio_unpaired_pvalue(
    lows: tuple[float, ...],
    highs: tuple[float, ...],
    base_lows: tuple[float, ...],
    base_highs: tuple[float, ...],
    ratio: float,
) -> float:
    """Two-sided p-value of two unpaired sets of seeds lying ``ratio`` apart, for measures known
    within (low, high) per seed (a censored one: high above low): "above" tests the rule's lower
    ends against the baseline's upper ends, "below" its upper ends against the baseline's lower
    ends, each by Welch's one-sided t-test on the logs beyond log ratio; the smaller doubled, at
    most 1. Values at a boundary (0, or the infinite odds of a share of 1) as ``one_sided``
    says; NaN where a side has fewer than two values, a value is negative, or a side mixes the
    boundary with finite values."""
    from scipy import stats

    edge = math.log(ratio)

    def one_sided(x, y) -> float:
        """x above y by the ratio. At the boundaries (a share of 0 or 1: odds 0 or infinite, a
        measure of 0) there is no spread for a t-test: every x infinite or every y 0 is beyond
        any ratio, and gets the exact one-sided permutation p of all x above all y, 1 / C(n +
        m, n) (1/20 for 3 and 3 seeds); any y infinite or x 0 can never be above (p 1); a side
        mixing the boundary with finite values has no test (NaN)."""
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        if x.size < 2 or y.size < 2 or (x < 0).any() or (y < 0).any():
            return math.nan
        if np.isinf(y).any() or (x == 0).any():
            return 1.0
        x_top, y_bottom = np.isinf(x), y == 0
        if x_top.all() or y_bottom.all():
            return 1.0 / math.comb(x.size + y.size, x.size)
        if x_top.any() or y_bottom.any():
            return math.nan
        lx, ly = np.log(x), np.log(y)
        diff = float(lx.mean() - ly.mean())
        vx, vy = lx.var(ddof=1) / lx.size, ly.var(ddof=1) / ly.size
        se = math.sqrt(vx + vy)
        if no_spread(se, diff):
            # every x and every y agree (up to rounding): the exact permutation p of all x
            # above all y where they lie the ratio apart, as at the boundaries
            return 1.0 / math.comb(lx.size + ly.size, lx.size) if diff > edge else 1.0
        df = (vx + vy) ** 2 / (vx**2 / (lx.size - 1) + vy**2 / (ly.size - 1))
        return float(stats.t.sf((diff - edge) / se, df))

    up, down = one_sided(lows, base_highs), one_sided(base_lows, highs)
    if math.isnan(up) or math.isnan(down):
        return math.nan
    return min(1.0, 2.0 * min(up, down))


# sign_flip_pvalue enumerates every sign pattern up to this many nonzero differences
SIGN_FLIP_EXACT_UNITS = 16


def sign_flip_pvalue(differences, draws: int = 20_000, seed: int = 0) -> float:
    """Two-sided sign-flip permutation p-value of sum(differences) = 0: under the null each
    difference is as likely negative as positive (its two sides exchangeable), so every sign
    pattern is equally likely, and p is the share of patterns whose |sum| is at least the
    observed one. Exact (every pattern) for up to 16 nonzero differences, else ``draws``
    seeded patterns, (1 + hits) / (1 + draws). Zeros change no sum and are left out; 1 where
    none remain. Unlike a sign test it weighs each difference by its size, so its direction is
    the sum's."""
    d = np.asarray(differences, dtype=np.float64)
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    observed = abs(float(d.sum()))
    tol = 1e-9 * max(1.0, observed)
    if d.size <= SIGN_FLIP_EXACT_UNITS:
        signs = 1 - 2 * ((np.arange(2**d.size)[:, None] >> np.arange(d.size)) & 1)
        sums = np.abs(signs @ d)
        return float((sums >= observed - tol).mean())
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(draws, d.size))
    hits = int((np.abs(signs @ d) >= observed - tol).sum())
    return (1 + hits) / (1 + draws)


def p_text(p: float, alpha: float, digits: int = 3) -> str:
    """``p`` to ``digits`` significant digits, or more where fewer would put it on the other side
    of ``alpha`` in print: 1000/20001 = 0.049998 reads "0.049998", never "0.05" beside "< 0.05"."""
    for shown_digits in range(digits, 17):
        shown = f"{p:.{shown_digits}g}"
        if (float(shown) < alpha) == (p < alpha):
            return shown
    return repr(p)
