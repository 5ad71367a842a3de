"""Critical top-N (Fig. 2c): the smallest N at which a two-sample KS test can no longer tell the
distribution of d~ from that of the expected distance."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


def resampled_critical_n(
    values_at: Callable[[int], tuple[NDArray[np.floating], NDArray[np.floating]]],
    search: Callable[[Callable[[int], KSResult]], tuple[int | None, int | None]],
    draws: NDArray[np.integer],
) -> list[tuple[int | None, int | None]]:
    """The critical-N search rerun on bootstrap resamples of its units (heads or rows).

    ``values_at(N)``: the two samples of the KS test at N, one value per unit (d~ and E, the
    same units on both sides), memoised by the caller so each N is computed once whatever
    resample asks for it; ``search(ks_at)``: the search (Algorithm 3's walk of its list)
    returning (first passing N or None when censored, top N tried);
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
