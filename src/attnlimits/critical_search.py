"""Algorithm 3's search over N on per-head means: the N list at L, the fixed fractions at which
the KS distance is reported, the per-head means of per-row values, and the first N of the list
whose test passes (in batches, as the row engine's pooling job reads them).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .critical import BlockedDistances, ks_test

FloatArray = NDArray[np.floating]


def critical_n_list(length: int, fractions, edges=()) -> list[int]:
    """Algorithm 3's increasing N list at length L: round(f L) for each fraction, at least 1,
    below L, without repeats, and always ending at N = L - 1 (one non-selected token), so a
    search that finds no pass has tried every N up to the top and its "never" is a censored
    N_crit > L - 1, not the grid's edge. The default fractions step by 0.01 L up to 0.1 L, so an
    N_crit near the paper's 0.06 L is resolved to 0.01 L, and by 0.95 L and 0.99 L near the top.
    ``edges``: fractions e whose floor(e L) and ceil(e L) are both listed, so that a claim band's
    edge (0.06 L: "fewer than 6 %") falls between two evaluated N, never inside a grid cell."""
    listed = {max(1, round(f * length)) for f in fractions} | {length - 1}
    for e in edges:
        listed |= {math.floor(e * length), math.ceil(e * length)}
    return sorted(n for n in listed if 1 <= n < length)


def cell_floor(n_crit: int | None, tried) -> int | None:
    """The least N_crit a first pass at ``n_crit`` allows: one above the largest N tried below
    it (each failed, or the pass would have come first), or 1 when none was. A search over a
    list knows N_crit only to its cell (that N, n_crit]; None for a censored search."""
    if n_crit is None:
        return None
    below = [int(n) for n in tried if int(n) < n_crit]
    return max(below) + 1 if below else 1


def fixed_fraction_ns(length: int, fractions) -> dict[float, int]:
    """N = round(f L) for each fraction f, clipped to [1, L - 1]: the N at which the KS distance D
    is reported whatever the search finds (analysis.critical_n.d_fractions)."""
    return {float(f): min(length - 1, max(1, round(f * length))) for f in fractions}


def head_means(values: FloatArray, head: NDArray[np.intp], n_heads: int) -> NDArray[np.float64]:
    """Mean over rows (NaN rows left out) per head: the paper's one value per (layer, head)."""
    values = np.asarray(values, dtype=np.float64)
    ok = ~np.isnan(values)
    total = np.bincount(head[ok], weights=values[ok], minlength=n_heads)
    count = np.bincount(head[ok], minlength=n_heads)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


@dataclass(frozen=True)
class CriticalSearch:
    """Algorithm 3's answer: the first N whose KS test does not reject (-1 if none), and every
    N tried with its p-value."""

    critical_n: int
    tried: list[tuple[int, float]]

    @property
    def censored(self) -> bool:
        """No N of the list passed: N_crit is larger than :attr:`top_n`, not a measured value."""
        return self.critical_n == -1

    @property
    def top_n(self) -> int | None:
        """The largest N tried (the list's top when censored); None before any N."""
        return max((n for n, _ in self.tried), default=None)


def first_passing_n(
    per_n: Iterable[tuple[int, FloatArray, FloatArray]] | Callable,
    *,
    alpha: float,
    keep: NDArray[np.intp] | None = None,
) -> CriticalSearch:
    """Algorithm 3: for N in increasing order, a two-sample KS test between the per-head mean d~
    and the per-head mean E; the first N where the test does not reject at ``alpha``.

    ``per_n`` yields (N, head means of d~, head means of E) lazily, so the search stops at the
    first passing N without computing the rest. ``keep``: the heads the test compares (the same
    ones on both sides, e.g. :func:`attnlimits.critical.ks_subsample`'s), default all: the KS
    test's power grows with its sample count, so models are compared at one count.
    """
    tried = []
    last = -1
    for n, d_means, e_means in per_n:
        if n <= last:
            raise ValueError(f"the N list must increase; {n} after {last}")
        last = n
        d_means, e_means = np.asarray(d_means), np.asarray(e_means)
        if keep is not None:
            d_means, e_means = d_means[keep], e_means[keep]
        p = ks_test(d_means, e_means).pvalue
        tried.append((int(n), float(p)))
        if p >= alpha:
            return CriticalSearch(int(n), tried)
    return CriticalSearch(-1, tried)


def search_in_batches(
    grid: Sequence[int],
    evaluate: Callable[[list[int], list[str]], dict[str, FloatArray]],
    kinds: Sequence[str],
    *,
    alpha: float,
    batch: int,
    keep: NDArray[np.intp] | None = None,
) -> dict[str, CriticalSearch]:
    """Algorithm 3 for several expectations side by side, N taken ``batch`` at a time.

    ``evaluate(ns, pending)`` returns per-head means for every N of the batch: "distance" and
    each pending kind, arrays (len(ns), heads). Each kind's search is :func:`first_passing_n`
    over the list and stops at its own first pass: later batches are evaluated only for the
    kinds still searching, and none after every kind has passed. ``keep``: as for
    :func:`first_passing_n`.
    """
    found: dict[str, int] = {}
    tried: dict[str, list[tuple[int, float]]] = {kind: [] for kind in kinds}
    for first in range(0, len(grid), batch):
        pending = [kind for kind in kinds if kind not in found]
        if not pending:
            break
        ns = list(grid[first : first + batch])
        means = evaluate(ns, pending)
        for kind in pending:
            result = first_passing_n(
                ((n, means["distance"][j], means[kind][j]) for j, n in enumerate(ns)),
                alpha=alpha,
                keep=keep,
            )
            tried[kind] += result.tried
            if result.critical_n != -1:
                found[kind] = result.critical_n
    return {kind: CriticalSearch(found.get(kind, -1), tried[kind]) for kind in kinds}


def max_of_head_means(values: FloatArray, head: NDArray[np.intp], n_heads: int) -> float:
    """Algorithm 5's plotted value: the maximum over heads of the mean over rows."""
    return float(np.nanmax(head_means(values, head, n_heads)))


def critical_n_against_expectation(
    prepared: list[tuple[slice, Any]],
    n_samples: int,
    grid: Sequence[int],
    ks_alpha: float,
    draws: int,
    rng_for_n: Callable[[int], np.random.Generator],
) -> CriticalSearch:
    """Algorithm 3 of the samples' d~ against the Monte-Carlo expectation E over random top-N
    sets: the first N of ``grid`` (attnlimits.critical_search.critical_n_list) whose KS test
    does not reject at ``ks_alpha``, each N computed only when the walk reaches it. A walk, not
    a bracketing search: the outcome need not be monotone in N (a curve can pass at a few N,
    reject, and pass again), and the paper's answer is the first pass of its list (review 36).
    A first pass is known to its cell of the list (critical_search.cell_floor).

    ``prepared`` as for :class:`BlockedDistances`; ``rng_for_n(n)`` gives the generator of the
    draws at N, so a value does not depend on which other N the walk visits."""
    samples = BlockedDistances(prepared, n_samples)
    return first_passing_n(
        ((n, samples.distance(n), samples.monte_carlo(n, draws, rng_for_n(n))) for n in grid),
        alpha=ks_alpha,
    )
