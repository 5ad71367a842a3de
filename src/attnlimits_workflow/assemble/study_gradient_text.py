"""The study page's gradient text (docs/study.md): the table of ||J|| over the temperature sweep
per model, the rule's bound checked on every (row, T), and the low-temperature mean T ||J||
read in words. Split from study_report, which assembles the page."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from attnlimits.checks import RTOL_FLOAT64, VIOLATED, check_bound
from attnlimits.gradient import corollary3_bound

from ..study_limits import LOW_TEMPERATURE


def bound_check(g: pl.DataFrame) -> tuple[str, int | None]:
    """The rule's ||J|| bound checked on every row at every T of the sweep (study_gradient, the
    model's table ``g``): the text and the number of (row, T) above it (None: no known bound)."""
    if g["bound"].is_nan().all():
        return "no known bound", None
    over = int(g["violated"].sum())
    untestable = int(g["not_testable"].sum())
    # a missing norm has no outcome (checks.check_bound): it is no (row, T) checked
    checked = int((g["jacobian_norm"].is_not_null() & ~g["jacobian_norm"].is_nan()).sum())
    text = f"{over} of {checked} (row, T) above it"
    return text + (f", {untestable} not testable" if untestable else ""), over


def shown_temperatures(temperatures: list[float]) -> list[float]:
    """The temperatures the gradient table shows: the grid's ends, and T = 1 where it has it."""
    middle = [1.0] if 1.0 in temperatures[1:-1] else []
    return [temperatures[0], *middle, temperatures[-1]]


def gradient_header(temperatures: list[float]) -> str:
    """The gradient table's median column, naming :func:`shown_temperatures` of the grid."""
    shown = " / ".join(f"{t:g}" for t in shown_temperatures(sorted(temperatures)))
    return f"median ||J|| at T = {shown}"


def gradient_row(s: Any, n: str) -> list[str]:
    """Model ``n``'s row of the page's gradient table: ||J|| over the temperature sweep, at the
    header's temperatures (the first model's), "n/a" where a temperature has no norm. ``s``:
    the page's study_report.Study (its gradient tables and model names; not imported here, as
    study_report imports this module)."""
    temperatures = sorted(s.gradient[s.names[0]]["T"].unique())
    g = (
        s.gradient[n]
        # a missing norm is left out (polars' median sorts NaN above every number)
        .with_columns(pl.col("jacobian_norm").fill_nan(None))
        .group_by("T")
        .agg(
            pl.col("jacobian_norm").median().alias("median"),
            pl.col("jacobian_norm").max().alias("max"),
            (pl.col("jacobian_norm") / pl.col("bound")).fill_nan(None).max().alias("tightness"),
        )
        .sort("T")  # the largest norm's T is the smallest one on ties: the same on every run
    )
    median = dict(zip(g["T"].to_list(), g["median"].to_list(), strict=True))

    def at(t: float) -> str:
        value = median.get(t)
        return "n/a" if value is None else f"{value:.3g}"

    shown = [at(t) for t in shown_temperatures(temperatures)]
    known = g.drop_nulls("max")
    tight = g["tightness"].drop_nulls()
    text, _ = bound_check(s.gradient[n])
    return [
        n,
        " / ".join(shown),
        f"{known['max'].max():.3g} (T = {known['T'][int(known['max'].arg_max())]:g})"
        if known.height
        else "n/a",
        f"{tight.max():.3f}" if tight.len() else "no known bound",
        text,
    ]


def low_temperature_means(g: pl.DataFrame) -> pl.DataFrame:
    """The mean T ||J|| per temperature of a sweep ``g`` at T <= LOW_TEMPERATURE, by T."""
    return (
        g.filter(pl.col("T") <= LOW_TEMPERATURE)
        .with_columns(c=(pl.col("T") * pl.col("jacobian_norm")).fill_nan(None))
        # a missing norm is left out, as low_temperature_sensitivity leaves it out
        .drop_nulls("c")
        .group_by("T")
        .agg(pl.col("c").mean())
        .sort("T")
    )


# relative differences this small between the low-T means are ties (rounding of one sweep)
FLAT = 1e-9


def low_temperature_fall(g: pl.DataFrame, name: str, seed: int | None = None) -> str:
    """The mean T ||J|| of model ``name``'s sweep ``g`` at each T <= LOW_TEMPERATURE, from the
    largest T to the smallest, and whether it falls, rises or neither as T falls, in words.
    ``seed``: the sweep is this seed's alone (a study of several seeds reads the first's)."""
    low = low_temperature_means(g).sort("T", descending=True)
    alone = "" if seed is None else f" on seed {seed} alone"
    if low.height < 2:
        return (
            f"{name}'s sweep{alone} has fewer than two temperatures at or below {LOW_TEMPERATURE:g}"
        )
    c = low["c"].to_numpy()
    steps = np.diff(c)
    # a step within rounding of its own two means is no step
    pair = np.maximum(np.abs(c[:-1]), np.abs(c[1:]))
    steps = np.where(np.isfinite(steps) & (np.abs(steps) <= FLAT * pair), 0.0, steps)
    temperatures = " / ".join(f"{t:g}" for t in low["T"])
    means = " / ".join(f"{v:.3g}" for v in c)
    if not np.isfinite(c).all():
        return f"{name}'s mean T ||J||{alone} at T = {temperatures} is {means} (infinite at some T)"
    if (steps == 0).all():
        # c / T for every row (the reference the text names), or a mean of 0 everywhere
        shape = "stays flat"
    elif (steps <= 0).all():
        shape = "falls"
    elif (steps >= 0).all():
        shape = "rises"
    else:
        shape = "is not monotone"
    return f"{name}'s mean T ||J||{alone} at T = {temperatures} is {means} (it {shape} as T falls)"


def low_temperature_lead(g: pl.DataFrame) -> str:
    """Which temperature at or below LOW_TEMPERATURE gives sweep ``g``'s mean T ||J|| (over
    those temperatures) its largest share, with that share: read off every temperature, not
    the two ends."""
    low = low_temperature_means(g).sort("T", descending=True)
    if low.height == 0:
        return f"the sweep has no temperature at or below {LOW_TEMPERATURE:g}"
    if low.height == 1:
        return f"the sweep has one temperature at or below {LOW_TEMPERATURE:g}, T = {low['T'][0]:g}"
    if not np.isfinite(low["c"].to_numpy()).all():
        infinite = " / ".join(
            f"{t:g}" for t, c in zip(low["T"], low["c"], strict=True) if not np.isfinite(c)
        )
        return f"the mean is infinite at T = {infinite}: no share can be read"
    total = float(low["c"].sum())
    if not total > 0:
        return f"no temperature at or below {LOW_TEMPERATURE:g} leads the mean: it is 0"
    share = low["c"].to_numpy() / total
    i = int(np.argmax(share))
    if share[i] - np.sort(share)[-2] <= FLAT:
        # a tie for the largest share (a flat mean among them): no one temperature leads
        return f"no one temperature at or below {LOW_TEMPERATURE:g} leads the mean"
    where = ", the largest such T" if i == 0 else ", the smallest" if i == low.height - 1 else ""
    return (
        f"the largest share of the mean comes from T = {low['T'][i]:g}{where} ({share[i]:.0%} "
        f"of it, against {1 / low.height:.0%} if every T gave as much)"
    )


def over_printed_bound(g: pl.DataFrame) -> str:
    """How many (row, T) pairs of a sweep exceed the paper's printed min{1/(4T), sqrt 2}
    (Corollary 3, as printed: sqrt 2 below T = 1/(4 sqrt 2)), in words."""
    norms, temperatures = g["jacobian_norm"].to_numpy(), g["T"].to_numpy()
    known = ~np.isnan(norms)  # a missing norm is neither over nor under the bound
    # the tolerance of every other bound check of the study: a rounding above is not over it
    check = check_bound(
        norms[known], corollary3_bound(temperatures[known]), upper=True, rtol=RTOL_FLOAT64
    )
    return f"{int((check == VIOLATED).sum())} of {int(known.sum())}"
