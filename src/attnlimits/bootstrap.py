"""Seeded bootstrap intervals, and verdicts with three outcomes.

A measured value (a mean N_s/N, a fitted slope, a first passing N) is computed from units: heads
under the paper's protocol, (head, chunk) rows under the last-row protocol. Its interval comes
from recomputing the value on resamples of those units drawn with replacement (Efron's percentile
bootstrap). Where the units form a grid (heads x chunks), each axis is resampled on its own, so
that both the spread between heads and the spread between the text's chunks reach the interval.
The paper's protocol analyses one sequence (analysis.all_rows.chunks: 1, one value per head), so
its intervals resample heads only and hold for that sequence: how a verdict moves with the text
is what a second text shows (config/findings.yaml), not these intervals.

A claim is a band of allowed values, [low, high] with either end open. Its verdict reads the
whole interval against the band: reproduced when the interval lies inside it, not reproduced when
the interval misses it, undecided when the interval straddles an edge. "Undecided" is an outcome:
the data cannot tell.

Percentiles are order statistics (``inverted_cdf``): a resample whose value is censored (+inf,
e.g. no N passes a test below L) stays in the distribution, and no interpolation mixes it with a
finite value. Resamples whose value is undefined (NaN, e.g. a slope over one distinct length) are
left out and counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
UNDECIDED = "undecided"
NO_VERDICT = "no verdict"


@dataclass(frozen=True)
class Interval:
    """A value, its bootstrap interval at ``level``, and how many resamples defined it."""

    value: float
    low: float
    high: float
    level: float
    resamples: int
    undefined: int = 0

    def text(self, digits: int = 3) -> str:
        """``0.742 [0.721, 0.768]``; ``nan`` parts print as ``n/a``."""

        def f(v: float) -> str:
            return "n/a" if np.isnan(v) else f"{v:.{digits}g}"

        return f"{f(self.value)} [{f(self.low)}, {f(self.high)}]"


@dataclass(frozen=True)
class Band:
    """The values a claim allows: low <= value <= high (an end may be infinite)."""

    low: float = -np.inf
    high: float = np.inf


def resample_indices(
    sizes: Sequence[int], resamples: int, rng: np.random.Generator
) -> list[NDArray[np.int64]]:
    """One (resamples, size) array of indices drawn with replacement per axis, axis by axis."""
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if any(n < 1 for n in sizes):
        raise ValueError(f"every axis needs at least one unit, got sizes {tuple(sizes)}")
    return [rng.integers(0, n, size=(resamples, n)) for n in sizes]


def cluster_indices(
    clusters: ArrayLike, resamples: int, rng: np.random.Generator
) -> NDArray[np.int64]:
    """(resamples, units) indices of a cluster bootstrap: each resample draws as many clusters
    as there are, with replacement, and takes every unit of each drawn cluster (in unit order,
    clusters in drawn order). ``clusters``: each unit's cluster (e.g. a head's layer). Units of
    one cluster move together, so the resample keeps their correlation, which drawing units one
    by one (:func:`resample_indices`) treats as independent evidence. Every cluster must hold
    the same number of units, so that every resample has as many units as the sample."""
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    clusters = np.asarray(clusters)
    if clusters.size == 0:
        raise ValueError("a cluster bootstrap needs at least one unit")
    names, sizes = np.unique(clusters, return_counts=True)
    if (sizes != sizes[0]).any():
        raise ValueError(
            "a cluster bootstrap needs the same number of units in every cluster, got "
            + ", ".join(f"{n}: {k}" for n, k in zip(names.tolist(), sizes.tolist(), strict=True))
        )
    members = np.stack([np.flatnonzero(clusters == name) for name in names])
    picks = rng.integers(0, len(names), size=(resamples, len(names)))
    return members[picks].reshape(resamples, -1).astype(np.int64)


def percentile_interval(stats: ArrayLike, level: float) -> tuple[float, float, int]:
    """(low, high, undefined): the central ``level`` interval of the defined resampled values."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    stats = np.asarray(stats, dtype=np.float64).ravel()
    defined = stats[~np.isnan(stats)]
    undefined = stats.size - defined.size
    if defined.size == 0:
        return np.nan, np.nan, undefined
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(defined, [tail, 1.0 - tail], method="inverted_cdf")
    return float(low), float(high), undefined


def bootstrap(
    statistic: Callable[..., float],
    sizes: Sequence[int],
    *,
    resamples: int,
    level: float,
    seed: int | np.random.Generator,
) -> Interval:
    """The interval of ``statistic(*indices)``, one index array per axis of units.

    ``statistic`` receives, per axis, the indices of the units in a resample (``arange`` for the
    value itself) and recomputes the value from them: a refit, a rerun test, anything."""
    rng = np.random.default_rng(seed)
    value = float(statistic(*(np.arange(n) for n in sizes)))
    draws = resample_indices(sizes, resamples, rng)
    stats = np.array([statistic(*(d[r] for d in draws)) for r in range(resamples)], dtype=float)
    low, high, undefined = percentile_interval(stats, level)
    return Interval(value, low, high, level, resamples, undefined)


def bootstrap_mean(
    values: ArrayLike,
    *,
    resamples: int,
    level: float,
    seed: int | np.random.Generator,
) -> Interval:
    """:func:`bootstrap` of the mean of ``values`` (1-D: units; 2-D: a heads x chunks grid, each
    axis resampled on its own), vectorised over resamples; NaN cells are left out of each mean.

    Draws the same indices as :func:`bootstrap` with the same seed, so the two agree exactly."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim not in (1, 2):
        raise ValueError(f"values must be 1-D or 2-D, got shape {values.shape}")
    rng = np.random.default_rng(seed)
    draws = resample_indices(values.shape, resamples, rng)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = float(np.nanmean(values)) if np.isfinite(values).any() else np.nan
        if values.ndim == 1:
            picked = values[draws[0]]  # (resamples, units)
        else:
            # (resamples, heads, chunks): rows draws[0][r], columns draws[1][r]
            picked = values[draws[0][:, :, None], draws[1][:, None, :]]
        picked = picked.reshape(resamples, -1)
        ok = ~np.isnan(picked)
        stats = np.where(ok, picked, 0.0).sum(axis=1) / ok.sum(axis=1)
    low, high, undefined = percentile_interval(stats, level)
    return Interval(value, low, high, level, resamples, undefined)


def verdict(interval: Interval, band: Band) -> str:
    """Reproduced when the whole interval and the measured value lie in ``band``, not reproduced
    when none of the interval does and the value does not either, undecided otherwise; no verdict
    when the interval is undefined. Undecided, too, when more than 1 - level of the resamples
    left the value undefined (a slope over one distinct length): the interval of the rest would
    then speak for too few of them. The value must agree with its interval because a percentile
    interval can lie wholly on one side of it: resamples of a first passing N pass later than
    the sample they are drawn from (docs/paper-notes.md section 15), and a verdict against the
    measured value would then rest on that bias."""
    low, high = interval.low, interval.high
    if np.isnan(low) or np.isnan(high):
        return NO_VERDICT
    if interval.resamples and interval.undefined > (1.0 - interval.level) * interval.resamples:
        return UNDECIDED
    value = interval.value
    if band.low <= low and high <= band.high and band.low <= value <= band.high:
        return REPRODUCED
    # the value and its interval on one side: a point below the band with its interval above
    # it says no side, and no verdict either (review 39)
    if (high < band.low and value < band.low) or (low > band.high and value > band.high):
        return NOT_REPRODUCED
    return UNDECIDED


def clopper_pearson(successes: int, trials: int, level: float) -> tuple[float, float]:
    """The exact (Clopper-Pearson) central ``level`` interval of a binomial proportion
    ``successes / trials``: beta quantiles, 0 and 1 at the ends (0 of 10 at 0.95: [0, 0.3085])."""
    from scipy import stats

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials >= 1, got {successes} of {trials}")
    tail = (1.0 - level) / 2.0
    low = 0.0 if successes == 0 else stats.beta.ppf(tail, successes, trials - successes + 1)
    high = (
        1.0 if successes == trials else stats.beta.ppf(1 - tail, successes + 1, trials - successes)
    )
    return float(low), float(high)


def deciding_part(intervals: Sequence[Interval], bands: Sequence[Band]) -> int:
    """Which statistic of a joint claim (:func:`joint_verdict`) its verdict rests on: the first
    whose own verdict is the joint one (the first to miss its band, to be undefined, or to
    straddle an edge); the first when every one lies in its band."""
    joint = joint_verdict(intervals, bands)
    each = [verdict(i, b) for i, b in zip(intervals, bands, strict=True)]
    return next((k for k, v in enumerate(each) if v == joint), 0)


def joint_verdict(intervals: Sequence[Interval], bands: Sequence[Band]) -> str:
    """:func:`verdict` of a claim on several statistics at once (all must lie in their bands):
    reproduced when every interval lies inside its band (the whole box does), not reproduced when
    one misses its band (no point of the box can hold), no verdict when one is undefined,
    undecided otherwise."""
    each = [verdict(i, b) for i, b in zip(intervals, bands, strict=True)]
    for outcome in (NOT_REPRODUCED, NO_VERDICT, UNDECIDED):
        if outcome in each:
            return outcome
    return REPRODUCED


def missed_side(
    intervals: Sequence[Interval], bands: Sequence[Band], names: Sequence[str] | None = None
) -> str | None:
    """Where a claim that is not reproduced (:func:`joint_verdict`) misses its bands: "above"
    or "below" when every statistic that misses its band (value and interval wholly outside,
    :func:`verdict`) lies on that side of it, "above and below" when one lies above and another
    below; None when the joint verdict is not "not reproduced". A reader of "not reproduced"
    assumes a side, and two readings that miss a two-sided band on opposite sides disagree.

    ``names``: what each statistic is, where a joint claim reads different ones (a slope and
    its fit's R^2): the side is then named by the statistics that missed ("R^2 below"), never
    read as the side of one band (review 37); statistics of one name (the smallest and largest
    of one median) share a band and a plain side."""
    if joint_verdict(intervals, bands) != NOT_REPRODUCED:
        return None
    names = list(names) if names is not None else [""] * len(intervals)
    missed: dict[str, set[str]] = {}
    for i, b, name in zip(intervals, bands, names, strict=True):
        if verdict(i, b) == NOT_REPRODUCED:
            missed.setdefault(name, set()).add("above" if i.value > b.high else "below")

    def side(sides: set[str]) -> str:
        return " and ".join(s for s in ("above", "below") if s in sides)

    if set(missed) == {""} or len(set(names)) == 1:
        return side(set().union(*missed.values()))
    return "; ".join(f"{name} {side(sides)}" for name, sides in missed.items())
