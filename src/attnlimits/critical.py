"""Critical top-N (Fig. 2c): the smallest N at which a two-sample KS test can no longer tell the
distribution of d~ from that of the expected distance."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray


def ks_pvalue(sample_a: NDArray[np.floating], sample_b: NDArray[np.floating]) -> float:
    """Two-sample Kolmogorov-Smirnov p-value (scipy, exact/asymptotic chosen by scipy)."""
    a = np.asarray(sample_a, dtype=np.float64)
    b = np.asarray(sample_b, dtype=np.float64)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size == 0 or b.size == 0:
        raise ValueError("KS test needs finite values in both samples")
    from scipy import stats  # imported here: scipy.stats costs ~1 s, most callers never need it

    return float(stats.ks_2samp(a, b).pvalue)


def ks_min_pvalue(n_a: int, n_b: int) -> float:
    """The smallest p-value the two-sample KS test can give for these sizes (fully separated
    samples). When it is >= alpha the test can never reject: a critical N would be meaningless."""
    return ks_pvalue(np.arange(n_a, dtype=np.float64), n_a + np.arange(n_b, dtype=np.float64))


@dataclass
class CriticalN:
    """Result of :func:`critical_n_search`."""

    n_crit: int | None  # None: still distinguishable at N = max_n (censored)
    evaluations: list[tuple[int, float]] = field(default_factory=list)  # (N, p-value) in order


def critical_n_search(pvalue_at: Callable[[int], float], max_n: int, ks_alpha: float) -> CriticalN:
    """Smallest N in [1, max_n] with p-value >= ks_alpha, by doubling then bisection.

    Cost: at most 2 * ceil(log2(max_n)) + 1 evaluations of ``pvalue_at`` (each one computes the
    two distance distributions at that N). Exact under the assumption that the test's verdict,
    once "indistinguishable", stays so for larger N; every evaluated point is returned so that
    a non-monotone p-value curve is visible in the output.
    """
    if max_n < 1:
        raise ValueError(f"max_n must be >= 1, got {max_n}")
    result = CriticalN(n_crit=None)
    cache: dict[int, float] = {}

    def same(n: int) -> bool:
        if n not in cache:
            cache[n] = pvalue_at(n)
            result.evaluations.append((n, cache[n]))
        return cache[n] >= ks_alpha

    if same(1):
        result.n_crit = 1
        return result
    lo, hi = 1, 2  # invariant: lo distinguishable
    while not same(min(hi, max_n)):
        if hi >= max_n:
            return result
        lo, hi = hi, hi * 2
    hi = min(hi, max_n)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if same(mid):
            hi = mid
        else:
            lo = mid
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


def linear_fit(x: NDArray[np.floating], y: NDArray[np.floating]) -> tuple[float, float, float]:
    """Ordinary least squares y = a + b x; returns (intercept, slope, R^2)."""
    from scipy import stats

    res = stats.linregress(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
    return float(res.intercept), float(res.slope), float(res.rvalue**2)


def critical_n_against_expectation(
    prepared: list[tuple[slice, Any]],
    n_samples: int,
    max_n: int,
    ks_alpha: float,
    draws: int,
    rng_for_n: Callable[[int], np.random.Generator],
) -> CriticalN:
    """Critical N of d~ against the Monte-Carlo expectation E over random top-N sets.

    ``prepared`` holds (slice of the samples, :func:`attnlimits.distance.weighted` of that block);
    ``rng_for_n(n)`` gives the generator of the draws at N, so a value does not depend on the
    order in which the search visits N.
    """
    from . import distance as dist

    def pvalue(n: int) -> float:
        d_tilde, expected = np.empty(n_samples), np.empty(n_samples)
        rng = rng_for_n(n)
        for sl, w in prepared:
            d_tilde[sl] = dist.distance_to_context(w, n=n)
            expected[sl] = dist.monte_carlo_expected_distance(w, None, n, draws, rng)[0]
        return ks_pvalue(d_tilde, expected)

    return critical_n_search(pvalue, max_n, ks_alpha)
