"""Critical top-N (Fig. 2c): the smallest N at which a two-sample KS test can no longer tell the
distribution of d~ from that of the expected distance."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import distance as dist


@dataclass(frozen=True)
class KSResult:
    """A two-sample KS test: the statistic D, its p-value and the two sample sizes."""

    statistic: float
    pvalue: float
    n_a: int
    n_b: int


KS_EXACT_MAX_N = 10_000  # the largest sample the exact p-value is tried for (scipy's own limit)


def ks_statistic(sample_a: NDArray[np.floating], sample_b: NDArray[np.floating]) -> float:
    """D = max_x |F_a(x) - F_b(x)| of the two empirical CDFs (right-continuous, so ties between
    the samples count as in scipy's ks_2samp)."""
    a, b = np.sort(sample_a), np.sort(sample_b)
    both = np.concatenate([a, b])
    f_a = np.searchsorted(a, both, side="right") / a.size
    f_b = np.searchsorted(b, both, side="right") / b.size
    return float(np.max(np.abs(f_a - f_b)))


def ks_exact_pvalue_equal_sizes(n: int, h: int) -> float:
    """Exact two-sided P(D >= h / n) for two samples of n values each from one continuous
    distribution (Gnedenko and Korolyuk, 1951):

        p = 2 sum_{k >= 1} (-1)^(k+1) C(2n, n - k h) / C(2n, n),

    with C(2n, n - m) / C(2n, n) = prod_{j < m} (n - j) / (n + j + 1) accumulated as one
    product, so no factorial overflows."""
    if h <= 0:
        return 1.0
    if h > n:
        return 0.0
    j = np.arange(n, dtype=np.float64)
    ratio = np.cumprod((n - j) / (n + j + 1))  # ratio[m - 1] = C(2n, n - m) / C(2n, n)
    terms = ratio[np.arange(h, n + 1, h) - 1]
    signs = np.where(np.arange(terms.size) % 2 == 0, 1.0, -1.0)
    return float(min(1.0, max(0.0, 2.0 * float(np.sum(signs * terms)))))


def ks_test(sample_a: NDArray[np.floating], sample_b: NDArray[np.floating]) -> KSResult:
    """Two-sample Kolmogorov-Smirnov test, two-sided, on the finite values of each sample.

    The p-value is exact when both samples have at most KS_EXACT_MAX_N values, and asymptotic
    otherwise or where the exact computation does not converge (large unbalanced samples). That is
    the rule scipy's method="auto" applies, made explicit here, so the fallback is silent instead
    of a RuntimeWarning per test. Two samples of one size (the critical-N searches: a distance and
    its expectation per sample) take the closed form of ks_exact_pvalue_equal_sizes, which gives
    scipy's exact p-value without importing scipy.stats (tests/test_vanishing_critical.py holds
    them equal); every other case is scipy's ks_2samp."""
    a = np.asarray(sample_a, dtype=np.float64)
    b = np.asarray(sample_b, dtype=np.float64)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size == 0 or b.size == 0:
        raise ValueError("KS test needs finite values in both samples")
    if a.size == b.size <= KS_EXACT_MAX_N:
        # D is a multiple of 1/n: h steps of the two empirical CDFs
        h = round(ks_statistic(a, b) * a.size)
        return KSResult(h / a.size, ks_exact_pvalue_equal_sizes(a.size, h), a.size, b.size)
    import warnings

    from scipy import stats  # imported here: scipy.stats is a slow import most callers skip

    res = None
    if max(a.size, b.size) <= KS_EXACT_MAX_N:
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "error", message="ks_2samp: Exact calculation unsuccessful", category=RuntimeWarning
            )
            try:
                res = stats.ks_2samp(a, b, method="exact")
            except RuntimeWarning:
                res = None
    if res is None:
        res = stats.ks_2samp(a, b, method="asymp")
    return KSResult(float(res.statistic), float(res.pvalue), a.size, b.size)


def ks_pvalue(sample_a: NDArray[np.floating], sample_b: NDArray[np.floating]) -> float:
    """Two-sample Kolmogorov-Smirnov p-value (see :func:`ks_test`)."""
    return ks_test(sample_a, sample_b).pvalue


def ks_min_pvalue(n_a: int, n_b: int) -> float:
    """The smallest p-value the two-sample KS test can give for these sizes (fully separated
    samples). When it is >= alpha the test can never reject: a critical N would be meaningless."""
    return ks_pvalue(np.arange(n_a, dtype=np.float64), n_a + np.arange(n_b, dtype=np.float64))


def ks_critical_statistic(n_a: int, n_b: int, alpha: float) -> float:
    """Asymptotic critical value of the two-sample KS statistic, c(alpha) sqrt((n+m)/(n m)) with
    c(alpha) = sqrt(-ln(alpha / 2) / 2). Only a guide for where to look next: the search decides
    every N by scipy's p-value."""
    return math.sqrt(-math.log(alpha / 2) / 2) * math.sqrt((n_a + n_b) / (n_a * n_b))


def ks_subsample(size: int, count: int | None, rng: np.random.Generator) -> NDArray[np.intp]:
    """Indices (sorted) of ``count`` of ``size`` values drawn without replacement by ``rng``, or
    all of them when ``count`` is None or at least ``size``.

    The KS test's power grows with its sample count: the same shift between d~ and E is
    rejected over 288 heads and not over 36. Comparing models at one count (a seeded subset of
    their heads or rows, the same on both sides of the test) makes their critical N comparable."""
    if count is None or count >= size:
        return np.arange(size)
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    return np.sort(rng.choice(size, size=count, replace=False))


@dataclass
class CriticalN:
    """Result of :func:`critical_n_search`."""

    n_crit: int | None  # None: still distinguishable at N = max_n (censored)
    evaluations: list[tuple[int, float]] = field(default_factory=list)  # (N, p-value) in order

    @property
    def censored(self) -> bool:
        """No N up to the top passed: N_crit is larger than :attr:`top_n`."""
        return self.n_crit is None

    @property
    def top_n(self) -> int | None:
        """The largest N evaluated (max_n once N = 1 has not passed)."""
        return max((n for n, _ in self.evaluations), default=None)


def critical_n_search(ks_at: Callable[[int], KSResult], max_n: int, ks_alpha: float) -> CriticalN:
    """Smallest N in [1, max_n] whose KS p-value is >= ks_alpha, assuming the verdict, once
    "indistinguishable", stays so for larger N (every evaluated point is returned, so that a
    non-monotone p-value curve is visible in the output).

    Search: N = 1 and N = max_n first (either settles it: N_crit = 1, or censored), then a
    safeguarded regula falsi on the KS statistic D(N) inside the bracket [lo, hi] (lo
    distinguishable, hi not): the next N is where the straight line between (lo, D(lo)) and
    (hi, D(hi)) crosses the critical D, with the Illinois modification against one end
    sticking. The safeguard is a budget: before step s the bracket may be at most
    (max_n - 1) / 2**(s // 2) wide, and a wider one is bisected instead, so the search is never
    more than about twice as long as plain bisection. D(N) is smooth in N on real data, so
    this typically needs 6-10 evaluations at L = 1024, where doubling + bisection needs ~20.
    Cost bound: at most 4 + 2 * ceil(log2(max_n)) evaluations of ``ks_at`` (each computes the
    two distance distributions at that N).
    """
    if max_n < 1:
        raise ValueError(f"max_n must be >= 1, got {max_n}")
    result = CriticalN(n_crit=None)
    cache: dict[int, KSResult] = {}

    def evaluate(n: int) -> KSResult:
        if n not in cache:
            cache[n] = ks_at(n)
            result.evaluations.append((n, cache[n].pvalue))
        return cache[n]

    def same(res: KSResult) -> bool:
        return res.pvalue >= ks_alpha

    first = evaluate(1)
    if same(first):
        result.n_crit = 1
        return result
    last = evaluate(max_n)
    if not same(last):
        return result
    d_target = ks_critical_statistic(first.n_a, first.n_b, ks_alpha)
    lo, hi = 1, max_n  # invariant: lo distinguishable, hi not
    f_lo, f_hi = first.statistic - d_target, last.statistic - d_target
    kept = 0  # +k: lo kept k times in a row, -k: hi kept k times (for the Illinois halving)
    step = 0
    while hi - lo > 1:
        over_budget = (hi - lo) * 2 ** (step // 2) > max_n - 1
        if over_budget or not f_lo > 0 >= f_hi:
            mid = (lo + hi) // 2
        else:
            mid = lo + int(round((hi - lo) * f_lo / (f_lo - f_hi)))
            mid = min(max(mid, lo + 1), hi - 1)
        res = evaluate(mid)
        f_mid = res.statistic - d_target
        if same(res):
            hi, f_hi = mid, f_mid
            kept = min(kept, 0) - 1
            if kept <= -2:
                f_lo /= 2  # lo has stuck: pull the next interpolation point towards it
        else:
            lo, f_lo = mid, f_mid
            kept = max(kept, 0) + 1
            if kept >= 2:
                f_hi /= 2
        step += 1
    result.n_crit = hi
    return result


def fit_through_origin(x: NDArray[np.floating], y: NDArray[np.floating]) -> float:
    """Least-squares slope of y = c x (the paper's N_crit ~ 0.06 L)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.any():
        return float("nan")
    return float((x[ok] * y[ok]).sum() / (x[ok] ** 2).sum())


@dataclass(frozen=True)
class CensoredSlope:
    """The N_crit ~ c L slope of lengths some of whose searches ended without a pass.

    ``found``: through the lengths whose N_crit was found (NaN if none); ``at_least``: with each
    censored length at its top N tried + 1. A censored N_crit is larger than its top N and the slope
    through the origin grows with every N, so the slope through all lengths is >= ``at_least``
    (and unbounded above): the top is a bound, never a measurement. Without censoring the
    three agree."""

    found: float
    at_least: float
    censored: int

    @property
    def upper(self) -> float:
        """The largest the slope through every length can be: ``at_least`` unless censored."""
        return math.inf if self.censored else self.at_least


def _found_and_bound(lengths, n_crit, censored, top_n) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """(lengths, censored, found, bound) as float64 / bool arrays: N_crit where found (NaN where
    censored), and the lower bound at every length (a censored one at its top N + 1: N_crit is
    an integer above every N tried, review 34)."""
    lengths = np.asarray(lengths, dtype=np.float64)
    censored = np.asarray(censored, dtype=bool)
    found = np.where(censored, np.nan, np.asarray(n_crit, dtype=np.float64))
    bound = np.where(censored, np.asarray(top_n, dtype=np.float64) + 1.0, found)
    return lengths, censored, found, bound


def censored_slope(
    lengths: NDArray[np.floating],
    n_crit: NDArray[np.floating],
    censored: NDArray[np.bool_],
    top_n: NDArray[np.floating],
) -> CensoredSlope:
    """:class:`CensoredSlope` of one curve (arrays per length; ``n_crit`` NaN where censored)."""
    lengths, censored, found, bound = _found_and_bound(lengths, n_crit, censored, top_n)
    return CensoredSlope(
        fit_through_origin(lengths, found), fit_through_origin(lengths, bound), int(censored.sum())
    )


def largest_share(
    lengths: NDArray[np.floating],
    n_crit: NDArray[np.floating],
    censored: NDArray[np.bool_],
    top_n: NDArray[np.floating],
) -> CensoredSlope:
    """The largest N_crit / L over the lengths, as a :class:`CensoredSlope` (``found``: over the
    lengths with a pass, NaN if none; ``at_least``: over every length, a censored one at its
    (top N + 1) / L; unbounded above where any length is censored). "Fewer than 6 % of the tokens" is a
    statement at every L: one slope through the origin, led by the largest L, passes a curve
    whose short lengths need more."""
    lengths, censored, found, bound = _found_and_bound(lengths, n_crit, censored, top_n)
    found, bound = found / lengths, bound / lengths
    with np.errstate(all="ignore"):
        largest_found = float(np.nanmax(found)) if np.isfinite(found).any() else math.nan
    return CensoredSlope(largest_found, float(np.max(bound)), int(censored.sum()))


def slope_within(slope: CensoredSlope, low: float, high: float) -> bool | None:
    """Whether the slope through every length lies in [low, high]: True or False when the
    bounds from :class:`CensoredSlope` settle it, None when censoring leaves it open (the slope
    is at least ``at_least``, inside, and could exceed ``high``)."""
    if math.isnan(slope.at_least):
        return None
    if low <= slope.at_least and slope.upper <= high:
        return True
    if slope.at_least > high or slope.upper < low:
        return False
    return None


def linear_fit(x: NDArray[np.floating], y: NDArray[np.floating]) -> tuple[float, float, float]:
    """Ordinary least squares y = a + b x; returns (intercept, slope, R^2): scipy's linregress
    (tests/test_vanishing_critical.py holds them equal) in a few numpy lines, since Table 1 refits
    every slope on each of 1000 bootstrap resamples and linregress costs ~2 ms a call. As there, R^2
    is NaN where y is constant (no fit to explain), and identical x are refused."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    dx, dy = x - x.mean(), y - y.mean()
    sxx, sxy, syy = float(dx @ dx), float(dx @ dy), float(dy @ dy)
    if sxx == 0.0:
        raise ValueError("Cannot calculate a linear regression if all x values are identical")
    slope = sxy / sxx
    r = np.nan if syy == 0.0 else min(1.0, max(-1.0, sxy / np.sqrt(sxx * syy)))
    return float(y.mean() - slope * x.mean()), slope, r * r


def weighted_bytes(w: Any) -> int:
    """Memory a prepared block holds of its own: its arrays, less ``x`` (a view of the pack)."""
    return sum(v.nbytes for k, v in vars(w).items() if isinstance(v, np.ndarray) and k != "x")


class BlockedDistances:
    """d~ and the two expectation terms at any N for samples held as blocks.

    ``prepared`` holds (slice of the samples, :func:`attnlimits.distance.weighted` of that block),
    made once and shared by every N a search visits. d~ is cached per N: the searches against
    the closed form and against the Monte-Carlo E of one L evaluate it at the same N.
    """

    def __init__(
        self,
        prepared: list[tuple[slice, Any]],
        n_samples: int,
        prepare: Callable[[slice], Any] | None = None,
    ) -> None:
        # A block held as (slice, None) is prepared again, by ``prepare``, at every visit.
        self.prepared = prepared
        self.n_samples = n_samples
        self._prepare = prepare
        self._distance: dict[int, NDArray[np.float64]] = {}

    @classmethod
    def within(
        cls, slices: list[slice], prepare: Callable[[slice], Any], n_samples: int, max_bytes: int
    ) -> BlockedDistances:
        """Blocks prepared once and kept while their products fit in ``max_bytes``; the rest are
        prepared again at each visit. The values do not depend on the budget (``prepare`` is
        deterministic and the blocks are visited in the same order), only the time and memory:
        kept whole, the float64 products of every sample grow with the corpus."""
        prepared: list[tuple[slice, Any]] = []
        held = 0
        for sl in slices:
            if held >= max_bytes:
                prepared.append((sl, None))
                continue
            w = prepare(sl)
            size = weighted_bytes(w)
            if held + size > max_bytes:
                prepared.append((sl, None))
            else:
                prepared.append((sl, w))
            held += size
        return cls(prepared, n_samples, prepare)

    @property
    def held_blocks(self) -> int:
        return sum(w is not None for _, w in self.prepared)

    def _over_blocks(self, per_block: Callable[[Any], NDArray[np.float64]]) -> NDArray[np.float64]:
        out = np.empty(self.n_samples)
        for sl, w in self.prepared:
            if w is None:
                if self._prepare is None:
                    raise ValueError(f"block {sl} is not prepared and no prepare function is given")
                w = self._prepare(sl)
            out[sl] = per_block(w)
        return out

    def distance(self, n: int) -> NDArray[np.float64]:
        """d~ (Eq. 7) of every sample at N = n."""
        if n not in self._distance:
            self._distance[n] = self._over_blocks(lambda w: dist.distance_to_context(w, n=n))
        return self._distance[n]

    def closed_form(self, n: int) -> NDArray[np.float64]:
        """Theorem 1.2's printed expectation term of every sample at N = n."""
        return self._over_blocks(lambda w: dist.expectation_term(w, n=n))

    def monte_carlo(self, n: int, draws: int, rng: np.random.Generator) -> NDArray[np.float64]:
        """The Monte-Carlo E of every sample at N = n; ``rng`` is consumed block by block."""
        return self._over_blocks(
            lambda w: dist.monte_carlo_expected_distance(w, n=n, draws=draws, rng=rng).mean
        )


def critical_n_against_expectation(
    prepared: list[tuple[slice, Any]],
    n_samples: int,
    max_n: int,
    ks_alpha: float,
    draws: int,
    rng_for_n: Callable[[int], np.random.Generator],
) -> CriticalN:
    """Critical N of d~ against the Monte-Carlo expectation E over random top-N sets.

    ``prepared`` as for :class:`BlockedDistances`; ``rng_for_n(n)`` gives the generator of the
    draws at N, so a value does not depend on the order in which the search visits N.
    """
    samples = BlockedDistances(prepared, n_samples)
    return critical_n_search(
        lambda n: ks_test(samples.distance(n), samples.monte_carlo(n, draws, rng_for_n(n))),
        max_n,
        ks_alpha,
    )


def resampled_critical_n(
    values_at: Callable[[int], tuple[NDArray[np.floating], NDArray[np.floating]]],
    search: Callable[[Callable[[int], KSResult]], tuple[int | None, int | None]],
    draws: NDArray[np.integer],
) -> list[tuple[int | None, int | None]]:
    """The critical-N search rerun on bootstrap resamples of its units (heads or rows).

    ``values_at(N)``: the two samples of the KS test at N, one value per unit (d~ and E, the
    same units on both sides), memoised by the caller so each N is computed once whatever
    resample asks for it; ``search(ks_at)``: the search (Algorithm 3's list or
    :func:`critical_n_search`) returning (first passing N or None when censored, top N tried);
    ``draws``: (resamples, units) indices drawn with replacement. Each resample tests the drawn
    units' values on both sides, a unit drawn k times counting k times."""
    out = []
    for drawn in np.asarray(draws):

        def ks_at(n: int, drawn=drawn) -> KSResult:
            d, e = values_at(n)
            return ks_test(np.asarray(d)[drawn], np.asarray(e)[drawn])

        out.append(search(ks_at))
    return out


def ks_steps_rows(sample_a: NDArray[np.floating], sample_b: NDArray[np.floating]) -> NDArray:
    """Per row of two (R, n) arrays, h = n D: the KS statistic of row r of ``sample_a`` against
    row r of ``sample_b`` in steps of 1/n (:func:`ks_statistic` of each pair, vectorised; the
    values must be finite). The merged sample is sorted once per row; the CDF difference is read
    at the last of each run of equal values, so ties count as in the right-continuous CDFs."""
    a = np.asarray(sample_a, dtype=np.float64)
    b = np.asarray(sample_b, dtype=np.float64)
    values = np.concatenate([a, b], axis=1)
    signs = np.concatenate([np.ones_like(a, dtype=np.int64), -np.ones_like(b, dtype=np.int64)], 1)
    order = np.argsort(values, axis=1, kind="stable")
    values = np.take_along_axis(values, order, axis=1)
    steps = np.cumsum(np.take_along_axis(signs, order, axis=1), axis=1)
    run_end = np.ones(values.shape, dtype=bool)
    run_end[:, :-1] = values[:, 1:] != values[:, :-1]
    return np.max(np.abs(steps) * run_end, axis=1)


def first_passing_n_resampled(
    values_at: Callable[[int], tuple[NDArray[np.floating], NDArray[np.floating]]],
    grid: Sequence[int],
    alpha: float,
    draws: NDArray[np.integer],
) -> list[tuple[int | None, int | None]]:
    """:func:`resampled_critical_n` with Algorithm 3's list search (the first N of ``grid`` whose
    KS p-value is >= ``alpha``) on every resample at once: per N, the KS steps of every resample
    still searching (:func:`ks_steps_rows`) and the exact equal-size p-value from a table of the
    n + 1 values it can take. ``values_at(N)`` is asked only while a resample still searches,
    in grid order, as the loop asks it. Non-finite values fall back to the loop's ks_test."""
    draws = np.asarray(draws)
    out: list[tuple[int | None, int | None]] = [(None, grid[-1])] * len(draws)
    pending = np.arange(len(draws))
    tables: dict[int, NDArray[np.float64]] = {}
    for n in grid:
        if not pending.size:
            break
        d, e = (np.asarray(v, dtype=np.float64) for v in values_at(n))
        picked = draws[pending]
        if np.isfinite(d).all() and np.isfinite(e).all():
            if d.size not in tables:
                tables[d.size] = np.array(
                    [ks_exact_pvalue_equal_sizes(d.size, h) for h in range(d.size + 1)]
                )
            passed = tables[d.size][ks_steps_rows(d[picked], e[picked])] >= alpha
        else:
            passed = np.array([ks_test(d[i], e[i]).pvalue >= alpha for i in picked], dtype=bool)
        for r in pending[passed]:
            out[r] = (n, n)
        pending = pending[~passed]
    return out


# The resolution of a last-row resample's search: bisection over N spaced this far apart in
# ratio (every integer up to 1 / step). Each N costs a pass over every row at that N, and
# resamples whose searches share a bracket ask for the same midpoint, so the distinct N grow
# with the spread of the resamples' first passing N over the grid, not over the integers.
RESAMPLE_N_STEP = 0.01


def resample_grid(max_n: int, step: float = RESAMPLE_N_STEP) -> list[int]:
    """1, 2, ..., up to 1 / step, then N growing by a factor (1 + step) per point, and max_n:
    the N a resample's bisection may visit (:func:`bisected_n_resampled`)."""
    if max_n < 1:
        raise ValueError(f"max_n must be >= 1, got {max_n}")
    grid = {max_n}
    n = 1.0
    while n < max_n:
        grid.add(int(math.ceil(n)))
        n = max(n + 1.0, n * (1.0 + step))
    return sorted(g for g in grid if g <= max_n)


def bisected_n_resampled(
    values_at: Callable[[int], tuple[NDArray[np.floating], NDArray[np.floating]]],
    grid: Sequence[int],
    alpha: float,
    draws: NDArray[np.integer],
) -> list[tuple[int | None, int | None]]:
    """Per resample of ``draws``: the first N of ``grid`` whose KS p-value is >= ``alpha``,
    found by bisection over the grid under :func:`critical_n_search`'s assumption (once
    indistinguishable, always), with (None, grid[-1]) when the last N is still distinguishable.

    Every resample starts from the bracket [grid[0], grid[-1]], so resamples that agree so far
    ask for the same midpoint, and each grid N is asked of ``values_at`` once (memoised by the
    caller). Equal to :func:`resampled_critical_n` with a bisection over ``grid`` per resample
    (tests/test_critical_replicates.py)."""
    draws = np.asarray(draws)
    size = len(grid)
    tables: dict[int, NDArray[np.float64]] = {}

    def passes(index: int, which: NDArray[np.intp]) -> NDArray[np.bool_]:
        d, e = (np.asarray(v, dtype=np.float64) for v in values_at(grid[index]))
        picked = draws[which]
        if np.isfinite(d).all() and np.isfinite(e).all():
            if d.size not in tables:
                tables[d.size] = np.array(
                    [ks_exact_pvalue_equal_sizes(d.size, h) for h in range(d.size + 1)]
                )
            return tables[d.size][ks_steps_rows(d[picked], e[picked])] >= alpha
        return np.array([ks_test(d[i], e[i]).pvalue >= alpha for i in picked], dtype=bool)

    everyone = np.arange(len(draws))
    first = passes(0, everyone)
    last = passes(size - 1, everyone) if size > 1 else first
    # found: a grid index, -1 while searching, -2 censored (the last N still distinguishable);
    # invariant per searching resample: grid[lo] distinguishable, grid[hi] not
    found = np.where(first, 0, np.where(last, -1, -2))
    lo = np.zeros(len(draws), dtype=np.int64)
    hi = np.full(len(draws), size - 1, dtype=np.int64)
    pending = np.flatnonzero(found == -1)
    while pending.size:
        mids = (lo[pending] + hi[pending]) // 2
        for mid in np.unique(mids):
            which = pending[mids == mid]
            ok = passes(int(mid), which)
            hi[which[ok]] = mid
            lo[which[~ok]] = mid
        done = pending[hi[pending] - lo[pending] <= 1]
        found[done] = hi[done]
        pending = pending[hi[pending] - lo[pending] > 1]
    return [(None, grid[-1]) if f == -2 else (grid[int(f)], grid[int(f)]) for f in found]
