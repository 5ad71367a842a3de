"""How Table 1 reads a critical-N curve: each length's N_crit is known only to its grid cell
(the N tried before the first pass, plus one, up to the first N that passed), and only from
below where the search was censored. The slope's interval over the bootstrap's searches, the
low end of each cell, and whether an outcome holds over every statistic the cells allow."""

from __future__ import annotations

import numpy as np
import polars as pl

from attnlimits.bootstrap import Interval, percentile_interval
from attnlimits.critical import CensoredSlope, censored_slope
from attnlimits.intervals import p_text


def slope_interval(
    point: CensoredSlope, replicates: pl.DataFrame | None, level: float, fit=censored_slope
) -> Interval | None:
    """The N_crit ~ c L slope's interval over the searches rerun on bootstrap resamples (one
    curve of the replicate table): from the low percentile of each resample's lower bound
    (``at_least``) to the high percentile of its upper end (+inf where a resample's search was
    censored at some L, and wherever the point search itself was), so censoring widens the
    interval instead of being dropped. None without replicates."""
    if replicates is None or replicates.height == 0:
        return None
    lows, highs = [], []
    for g in replicates.sort("replicate", "L").partition_by("replicate", maintain_order=True):
        s = fit(
            g["L"].to_numpy(),
            g["N_crit"].cast(pl.Float64).to_numpy(),
            g["censored"].to_numpy(),
            g["top_N"].to_numpy(),
        )
        # a resample's first pass is known to its grid cell: its low end reads the cell's
        cell = fit(
            g["L"].to_numpy(),
            lowest_n_crit(g),
            g["censored"].to_numpy(),
            g["top_N"].to_numpy(),
        )
        lows.append(cell.at_least)
        highs.append(s.upper)
    low, _, undefined = percentile_interval(lows, level)
    _, high, _ = percentile_interval(highs, level)
    # the point search censored at some L is open above whatever the resamples did: an interval
    # closed by resamples that all passed would call a censored slope "reproduced"
    high = max(high, point.upper)
    return Interval(point.at_least, low, high, level, len(lows), undefined)


def first_n_passed(curve: pl.DataFrame) -> np.ndarray:
    """Per length of a critical-N curve (summary/critical_n.csv rows): whether its search passed
    at the first N it tried (one evaluation, found) above N = 1, so that N_crit is only known to
    be at most that N: the grid's floor, not a measurement."""
    if "evaluations" not in curve.columns:
        return np.zeros(curve.height, dtype=bool)
    return (
        ((~curve["censored"]) & (curve["evaluations"] == 1) & (curve["N_crit"] > 1))
        .fill_null(False)
        .to_numpy()
    )


def lowest_n_crit(curve: pl.DataFrame) -> np.ndarray:
    """Per length of a critical-N curve (or of one resample's), the least N_crit its search
    allows: the low end of its grid cell, column N_crit_low (the N tried before the first pass,
    plus one); without that column, 1 where the first N tried passed (:func:`first_n_passed`),
    else N_crit. NaN where censored."""
    n_crit = curve["N_crit"].cast(pl.Float64).to_numpy()
    if "N_crit_low" in curve.columns:
        low = curve["N_crit_low"].cast(pl.Float64).to_numpy()
        return np.where(np.isnan(low), n_crit, low)
    return np.where(first_n_passed(curve), 1.0, n_crit)


def cells_text(curve: pl.DataFrame, lowest: np.ndarray) -> str:
    """Each found length's cell as a share of L, "L: (a, b]", a = (N_crit_low - 1) / L."""
    parts = []
    for length, n, low in zip(curve["L"], curve["N_crit"], lowest, strict=True):
        if n is not None and low < n:
            parts.append(f"{length}: ({(low - 1) / length:.3g}, {n / length:.3g}]")
    return ", ".join(parts)


def non_monotone_text(curve: pl.DataFrame, alpha: float) -> str:
    """Where the KS outcome is not monotone in N among the N evaluated (summaries.
    ks_outcomes_around_the_pass): a failure (p < alpha) above a length's first pass, or a pass
    below its grid cell. Each cell (N', N_crit] assumes one crossing; these lengths have more,
    so an N the search skipped may pass below the cell. "" where every length is monotone."""
    parts = []
    for r in curve.sort("L").iter_rows(named=True):
        seen = []
        if (r.get("least_p_above") is not None) and r["least_p_above"] < alpha:
            seen.append(
                f"fails at N = {r['N_least_p_above']} (p {p_text(r['least_p_above'], alpha, 2)})"
            )
        if (r.get("most_p_below") is not None) and r["most_p_below"] >= alpha:
            seen.append(
                f"passes at N = {r['N_most_p_below']} (p {p_text(r['most_p_below'], alpha, 2)})"
            )
        if seen:
            first = "no pass" if r["N_crit"] is None else f"first pass N = {r['N_crit']}"
            parts.append(f"L = {r['L']} ({first}; {', '.join(seen)})")
    if not parts:
        return ""
    return (
        f"the KS outcome is not monotone in N at {len(parts)}/{curve.height} lengths: "
        + "; ".join(parts)
        + "; each grid cell assumes one crossing"
    )


def passes_below_a_cell(curve: pl.DataFrame, alpha: float) -> bool:
    """Whether some length's evaluated N below its grid cell passed the KS test (p >= alpha):
    its first pass over every N may then lie below the cell, so a verdict read on the cells'
    low ends does not hold for that length (:func:`non_monotone_text` says which)."""
    if "most_p_below" not in curve.columns:
        return False
    return bool((curve["most_p_below"].fill_null(-1.0) >= alpha).any())


def direction(low: float, high: float, lowest: float, highest: float) -> str:
    """Which side of the band [low, high] a statistic known to lie in [lowest, highest] falls
    on: "above", "below", or "" where it is not wholly on one side."""
    if lowest > high:
        return "above"
    if highest < low:
        return "below"
    return ""


def floor_outcome(
    outcome: str, floor_slope: CensoredSlope, slope: CensoredSlope, low: float, high: float
) -> str:
    """``outcome`` if it holds over every statistic the passes at the first N tried allow, from
    ``floor_slope`` (their N_crit at 1) up to ``slope``'s upper end, else undecided: reproduced
    needs the whole range inside [low, high], not reproduced the whole range on one side of it.
    (``floor_slope`` reads every length at the low end of its grid cell: :func:`lowest_n_crit`.)"""
    lowest, highest = floor_slope.at_least, slope.upper
    if outcome == "reproduced" and not (low <= lowest and highest <= high):
        return "undecided"
    if outcome == "not reproduced" and not (lowest > high or highest < low):
        return "undecided"
    return outcome
