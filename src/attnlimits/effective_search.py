"""N*'s measure and search (numpy; attnlimits.effective_set has the intervention itself).

- dNLL_rel(N) = (NLL(M_N) - NLL(M)) / NLL(M) on the same scored targets;
- N*_tau = min {N >= 1 : dNLL_rel(N) <= tau}, searched as the follow-up paper does: powers of two,
  then the crossing refined to an integer;
- a paired-document bootstrap of N* over the evaluated N.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

SELECTIONS = ("attention", "contribution", "random")
MODES = ("delete", "renormalize")


def relative_nll_increase(nll: NDArray | float, base: NDArray | float) -> NDArray | float:
    """dNLL_rel = (NLL(M_N) - NLL(M)) / NLL(M), of totals (or means) over the same targets."""
    return (np.asarray(nll, dtype=np.float64) - base) / base


def powers_of_two(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit``, and ``limit`` itself: the search's first evaluations."""
    if limit < 1:
        raise ValueError(f"the search needs a limit >= 1, got {limit}")
    out = [1 << k for k in range(limit.bit_length()) if 1 << k < limit]
    return out + [limit]


@dataclass(frozen=True)
class Search:
    """N* of one curve: ``n_star`` the first passing N found (None: censored, none up to
    ``limit`` passes), ``evaluated`` every N the search asked for, with its dNLL_rel."""

    n_star: int | None
    limit: int
    evaluated: dict[int, float]

    @property
    def censored(self) -> bool:
        return self.n_star is None


def search_n_star(
    dnll: Callable[[int], float], tau: float, limit: int, refine: bool = True
) -> Search:
    """N*_tau = min {N >= 1 : dnll(N) <= tau} over 1..``limit``, as the follow-up paper searches
    it: every power of two up to ``limit`` (and ``limit``), then, if ``refine``, bisection over
    the integers between the last failing power and the first passing one. On a curve that is
    non-increasing in N this is the full scan's answer; otherwise it is a crossing (dnll(N*) <=
    tau < dnll(N* - 1)) within the first passing power's bracket. ``dnll`` is called once per N
    (N* needs one intervened forward per N)."""
    evaluated: dict[int, float] = {}

    def at(n: int) -> float:
        if n not in evaluated:
            evaluated[n] = float(dnll(n))
        return evaluated[n]

    previous = 0
    for n in powers_of_two(limit):
        if at(n) <= tau:
            lo, hi = previous, n  # lo fails (or is 0), hi passes
            if refine:
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if at(mid) <= tau:
                        hi = mid
                    else:
                        lo = mid
            return Search(hi, limit, evaluated)
        previous = n
    return Search(None, limit, evaluated)


def first_passing(evaluated: Mapping[int, float], tau: float) -> int | None:
    """The smallest evaluated N whose dNLL_rel is at most tau (None if none)."""
    passing = [n for n, v in evaluated.items() if v <= tau]
    return min(passing) if passing else None


def bootstrap_n_star(
    nll: Mapping[int, NDArray[np.float64]],
    base: NDArray[np.float64],
    tau: float,
    resamples: int,
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Paired-document bootstrap: ``nll[N]`` and ``base`` are per-chunk NLL totals over the same
    targets; each resample draws chunks with replacement, the same for every N and the base.
    Returns (N* per resample over the evaluated N, NaN where none passes; dNLL_rel per
    resample and evaluated N, (resamples, len(nll)) in sorted N order). N* of a resample is the
    smallest evaluated N that passes, so its interval ends lie on the evaluated N."""
    ns = sorted(nll)
    chunks = len(base)
    totals = np.stack([np.asarray(nll[n], dtype=np.float64) for n in ns])  # (N, chunks)
    picks = rng.integers(0, chunks, size=(resamples, chunks))
    counts = np.stack([np.bincount(p, minlength=chunks) for p in picks]).astype(np.float64)
    base_total = counts @ base
    curves = (counts @ totals.T - base_total[:, None]) / base_total[:, None]
    passing = curves <= tau
    first = np.where(
        passing.any(axis=1), np.asarray(ns, dtype=np.float64)[passing.argmax(axis=1)], np.nan
    )
    return first, curves
