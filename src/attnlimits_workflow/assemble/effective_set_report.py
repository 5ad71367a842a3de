"""N*, the effective attention set size, beside the paper's critical N: the table, the figure of
N*/L and N_crit/L against L, and whether the two move together (a rank correlation across L)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.figure import Figure

from ..plotting import log_axis

NOTE = (
    "N*: the least N for which keeping only the N keys of each query (every head and layer) raises "
    "the next-token loss of the same final targets by at most tau; bars: paired-chunk bootstrap "
    "intervals (their ends on the evaluated N; withheld below 8 chunks); open markers: censored "
    "(a lower bound). "
    "N_crit: the paper's critical N (KS test), from the model's critical-N summary."
)
# Spearman's rho over 3 lengths can only be +-0.5 or +-1 (smallest two-sided p 0.33): at least
# this many lengths in common, or no correlation is reported
MIN_LENGTHS_FOR_CORRELATION = 4
# seeded draws of the lengths' orderings for the permutation p beyond 7 lengths (7! = 5040
# orderings are enumerated exactly)
PERMUTATIONS = 9999


def critical_by_length(critical: pl.DataFrame, masked: str) -> pl.DataFrame:
    """N_crit/L per (L, expectation) under the model's reading of the masked keys (all rows of
    an encoder or a last-row run, which have one)."""
    frame = critical
    if "masked" in frame.columns and masked in frame["masked"].to_list():
        frame = frame.filter(pl.col("masked") == masked)
    return frame.select(
        pl.col("L").cast(pl.Int64).alias("length"),
        "expectation",
        pl.col("N_crit").cast(pl.Float64),
        pl.col("censored").cast(pl.Boolean).alias("N_crit_censored"),
    ).with_columns((pl.col("N_crit") / pl.col("length")).alias("N_crit_over_length"))


def rank_correlations(summary: pl.DataFrame, critical: pl.DataFrame) -> pl.DataFrame:
    """Spearman's rho between N*/L and N_crit/L across the lengths both have (uncensored), per
    (variant, expectation), with its two-sided p; null where fewer than
    MIN_LENGTHS_FOR_CORRELATION lengths are shared (then it is not defined, not zero). Fractions
    of L, not counts: both counts grow with L, which alone would correlate them."""
    from scipy.stats import permutation_test, spearmanr

    rows = []
    for (variant,), part in summary.group_by(["variant"], maintain_order=True):
        for (expectation,), crit in critical.group_by(["expectation"], maintain_order=True):
            both = part.join(crit, on="length").filter(
                pl.col("n_star").is_not_null() & ~pl.col("N_crit_censored")
            )
            rho = p_value = least = None
            if both.height >= MIN_LENGTHS_FOR_CORRELATION:
                x = both["n_star_over_length"].to_numpy()
                y = both["N_crit_over_length"].to_numpy()
                rho = float(spearmanr(x, y).statistic)
                if math.isnan(rho):
                    rho = None
                else:
                    # the exact permutation p over every ordering of the lengths (all of them up
                    # to 7 lengths; seeded draws above): the asymptotic p of spearmanr reads
                    # rho = 1 over 4 lengths as p = 0, where 2 of the 24 orderings reach it
                    p_value = float(
                        permutation_test(
                            (x,),
                            lambda a, y=y: spearmanr(a, y).statistic,
                            permutation_type="pairings",
                            alternative="two-sided",
                            n_resamples=PERMUTATIONS,
                            rng=np.random.default_rng(0),
                        ).pvalue
                    )
                    least = min(1.0, 2.0 / math.factorial(both.height))
            rows.append(
                {
                    "variant": variant,
                    "expectation": expectation,
                    "lengths": both.height,
                    "spearman_rho": rho,
                    "p_value": p_value,
                    "least_p": least,
                }
            )
    return pl.DataFrame(
        rows,
        schema={
            "variant": pl.String,
            "expectation": pl.String,
            "lengths": pl.Int64,
            "spearman_rho": pl.Float64,
            "p_value": pl.Float64,
            "least_p": pl.Float64,
        },
    )


def p_value_text(row: dict) -> str:
    """'exact permutation p = x, the least n lengths can give: y' of a rank_correlations row:
    the floor says whether any data over that many lengths could have been significant."""
    return (
        f"exact permutation p = {row['p_value']:.2g}, the least {row['lengths']} lengths can "
        f"give: {row['least_p']:.2g}"
    )


def correlation_sentence(correlations: pl.DataFrame, variant: str = "attention-delete") -> str:
    """One sentence: do N* and the critical N move together across L?"""
    rows = correlations.filter(pl.col("variant") == variant)
    if rows.is_empty():
        return f"No {variant} N* to compare with the critical N."
    parts = []
    for r in rows.iter_rows(named=True):
        if r["spearman_rho"] is None:
            parts.append(
                f"against N_crit ({r['expectation']}) not defined: {r['lengths']} lengths with both "
                f"uncensored, {MIN_LENGTHS_FOR_CORRELATION} needed"
            )
        else:
            parts.append(
                f"Spearman rho {r['spearman_rho']:+.2f} ({p_value_text(r)}) against N_crit/L "
                f"({r['expectation']}) over {r['lengths']} lengths"
            )
    return f"N*/L ({variant}) across L: " + "; ".join(parts) + "."


def effective_set_table(summary: pl.DataFrame, critical: pl.DataFrame) -> pl.DataFrame:
    """One row per (variant, L): N* with its interval and N*/L, beside N_crit/L per expectation
    and whether that N_crit is censored (a lower bound)."""
    out = summary
    for column, name in (
        ("N_crit_over_length", "N_crit_over_L"),
        ("N_crit_censored", "N_crit_censored"),
    ):
        wide = critical.select("length", "expectation", column).pivot(
            on="expectation", index="length", values=column
        )
        wide = wide.rename({c: f"{name}_{c}" for c in wide.columns if c != "length"})
        out = out.join(wide, on="length", how="left")
    return out.sort(["variant", "length"])


def effective_set_figure(summary: pl.DataFrame, critical: pl.DataFrame, tau: float) -> Figure:
    """N*/L (each variant, bootstrap bars, censored open) and N_crit/L (dashed) against L."""
    fig, ax = plt.subplots(figsize=(8.0, 4.2))
    groups = list(summary.sort("length").group_by(["variant"], maintain_order=True))
    for i, ((variant,), part) in enumerate(groups):
        # each variant a little apart along L, so that the intervals do not hide each other
        shift = 1.0 + 0.025 * (i - (len(groups) - 1) / 2)
        length = part["length"].to_numpy().astype(float)
        found = part["n_star"].is_not_null().to_numpy()
        value = (
            np.where(
                found,
                part["n_star"].fill_null(0).to_numpy().astype(float),
                part["lower_bound"].fill_null(0).to_numpy().astype(float),
            )
            / length
        )
        (line,) = ax.plot(length * shift, value, marker="o", label=f"N*/L, {variant}")
        low = part["n_star_low"].to_numpy().astype(float) / length
        high = part["n_star_high"].to_numpy().astype(float) / length
        bars = found & np.isfinite(low) & np.isfinite(high)
        if bars.any():
            ax.errorbar(
                length[bars] * shift,
                value[bars],
                yerr=[value[bars] - low[bars], high[bars] - value[bars]],
                fmt="none",
                ecolor=line.get_color(),
                capsize=3,
            )
        if (~found).any():
            ax.plot(
                length[~found] * shift,
                value[~found],
                ls="none",
                marker="^",
                mfc="white",
                color=line.get_color(),
            )
    lengths = summary["length"]
    shown = critical.filter(pl.col("length").is_between(lengths.min(), lengths.max()))
    for (expectation,), part in shown.sort("length").group_by(["expectation"], maintain_order=True):
        found = part.filter(pl.col("N_crit_over_length").is_not_nan())
        label = f"N_crit/L, {expectation}"
        if found.is_empty():
            label += ": censored at every L"
        ax.plot(
            found["length"].to_numpy(),
            found["N_crit_over_length"].to_numpy(),
            ls="--",
            marker="s",
            ms=3,
            color="0.4" if expectation == "closed_form" else "0.65",
            label=label,
        )
    log_axis(ax, "x", sorted(set(summary["length"].to_list())))
    low, high = ax.get_ylim()
    steps = [m * 10.0**e for e in range(-5, 1) for m in (1, 2, 5) if m * 10.0**e <= 1.0]
    log_axis(ax, "y", [t for t in steps if low <= t <= high] or None)
    ax.set_ylim(low, high)
    ax.set_xlabel("context length L (tokens)")
    ax.set_ylabel("fraction of the context")
    ax.set_title(f"Effective attention set N*_{tau:g} and the critical N, per L")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    return fig
