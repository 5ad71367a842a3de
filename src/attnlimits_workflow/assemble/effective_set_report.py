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
    "the next-token loss of the same final targets by at most tau (found by powers of two, then "
    "bisection: a crossing where the loss is not monotone in N); bars: paired-chunk bootstrap "
    "intervals (read on the cells between evaluated N; withheld below 8 chunks, or where more "
    "resamples than a tail pass at no N searched); open markers: censored "
    "(a lower bound). "
    "N_crit: the paper's critical N (KS test), from the model's critical-N summary: the first N "
    "of Algorithm 3's list that passes, drawn at its list cell's top with a bar down to the "
    "cell's least N."
)
# Spearman's rho over 3 lengths can only be +-0.5 or +-1: at least this many lengths in common,
# or no correlation is reported
MIN_LENGTHS_FOR_CORRELATION = 4
# Across L a rank correlation describes, it does not test: two quantities that both rise or fall
# with L give |rho| = 1 whatever their relation, and the lengths are not exchangeable under any
# null, so no p-value is given (a review: N* = 8 at every L against N_crit = 0.06 L + 1 gave
# rho = +1 and a permutation "p = 0.003")
TREND_CAVEAT = (
    "a description, not a test: across L two quantities that both rise or fall with L give "
    "|rho| = 1 whatever their relation, so it says whether they move together with L, not that "
    "one predicts the other"
)


def critical_by_length(
    critical: pl.DataFrame, masked: str, alpha: float | None = None
) -> pl.DataFrame:
    """N_crit/L per (L, expectation) under the model's reading of the masked keys (all rows of
    an encoder or a last-row run, which have one). ``alpha``: the KS test's level
    (analysis.critical_n.ks_alpha); a length whose least attainable p-value is at least alpha
    is KS blind (N_crit_blind): no N could fail there, so its N_crit says nothing of the data."""
    frame = critical
    if "masked" in frame.columns and masked in frame["masked"].to_list():
        frame = frame.filter(pl.col("masked") == masked)
    # a censored length has no N_crit, only its top N tried: N_crit >= top_N + 1, shown as such
    censored = pl.col("censored").cast(pl.Boolean)
    known = pl.col("N_crit").cast(pl.Float64).fill_nan(None)
    value = (
        # N_crit > top_N, an integer: at least top_N + 1 (review 33)
        pl.when(censored & known.is_null())
        .then(pl.col("top_N").cast(pl.Float64) + 1.0)
        .otherwise(known)
        if "top_N" in frame.columns
        else known
    )
    # Algorithm 3's list knows a found N_crit to its cell (the N tried before the first pass,
    # N_crit]: the cell's open low end as a share of L, null where the cell is one N wide
    low = (
        pl.when(~censored & (pl.col("N_crit_low").cast(pl.Float64) < known))
        .then((pl.col("N_crit_low").cast(pl.Float64) - 1.0) / pl.col("L"))
        .otherwise(None)
        if "N_crit_low" in frame.columns
        else pl.lit(None, pl.Float64)
    )
    blind = (
        pl.col("ks_min_pvalue").cast(pl.Float64) >= alpha
        if alpha is not None and "ks_min_pvalue" in frame.columns
        else pl.lit(False)
    )
    return frame.select(
        pl.col("L").cast(pl.Int64).alias("length"),
        "expectation",
        value.alias("N_crit"),
        censored.alias("N_crit_censored"),
        low.alias("N_crit_cell_low"),
        blind.fill_null(False).alias("N_crit_blind"),
    ).with_columns((pl.col("N_crit") / pl.col("length")).alias("N_crit_over_length"))


def rank_correlations(summary: pl.DataFrame, critical: pl.DataFrame) -> pl.DataFrame:
    """Spearman's rho between N*/L and N_crit/L across the lengths both have (uncensored), per
    (variant, expectation); null where fewer than MIN_LENGTHS_FOR_CORRELATION lengths are
    shared (then it is not defined, not zero). Fractions of L, not counts: both counts grow with
    L. Fractions share the 1/L too, and any two trends in L rank alike: a description, with no
    p-value (:data:`TREND_CAVEAT`). N_crit is known to its list cell: lengths whose cells
    overlap tie (:func:`cell_ranks`). A KS-blind length (N_crit_blind) ranks nothing: its
    N_crit is the list's first N whatever the data."""
    rows = []
    for (variant,), part in summary.group_by(["variant"], maintain_order=True):
        for (expectation,), crit in critical.group_by(["expectation"], maintain_order=True):
            both = part.join(crit, on="length").filter(
                pl.col("n_star").is_not_null() & ~pl.col("N_crit_censored")
            )
            if "N_crit_blind" in both.columns:
                both = both.filter(~pl.col("N_crit_blind"))
            if "n_star_floor" in both.columns:
                # an N* known to its power-of-two cell only ranks nothing (review 34)
                both = both.filter(pl.col("n_star_floor") >= pl.col("n_star"))
            rho = None
            if both.height >= MIN_LENGTHS_FOR_CORRELATION:
                x = both["n_star_over_length"].to_numpy()
                top = both["N_crit_over_length"].to_numpy()
                least = top
                if "N_crit_cell_low" in both.columns:
                    # the cell (a, N_crit]'s least N is a + 1 (N_crit_cell_low is a / L)
                    least = (
                        both.select(
                            (pl.col("N_crit_cell_low") + 1.0 / pl.col("length")).fill_null(
                                pl.col("N_crit_over_length")
                            )
                        )
                        .to_series()
                        .to_numpy()
                    )
                rho = _spearman(x, cell_ranks(least, top))
            rows.append(
                {
                    "variant": variant,
                    "expectation": expectation,
                    "lengths": both.height,
                    "spearman_rho": rho,
                }
            )
    return pl.DataFrame(
        rows,
        schema={
            "variant": pl.String,
            "expectation": pl.String,
            "lengths": pl.Int64,
            "spearman_rho": pl.Float64,
        },
    )


def _spearman(x, y) -> float | None:
    """Spearman's rho, None where it is not defined (a variable constant over the lengths)."""
    from scipy.stats import spearmanr

    found = float(spearmanr(x, y).statistic)
    return None if math.isnan(found) else found


def cell_ranks(least, top) -> np.ndarray:
    """Ranks of values known to intervals [least, top] (N_crit / L on its list cells): lengths
    whose intervals overlap, directly or through others, tie (their order is not known), and
    the groups rank in order. Ranking the tops would rank the list's rounding: one fraction cell
    gives 0.703, 0.699, 0.699, 0.700 at L = 128 ... 1024 (review 37)."""
    least, top = np.asarray(least, dtype=np.float64), np.asarray(top, dtype=np.float64)
    order = np.argsort(least, kind="stable")
    ranks = np.empty(len(least))
    group, reach = -1, -np.inf
    for i in order:
        if least[i] > reach:
            group += 1
        reach = max(reach, top[i]) if least[i] <= reach else top[i]
        ranks[i] = group
    return ranks


def undefined_reason(lengths: int) -> str:
    """Why a rank correlation over ``lengths`` shared lengths is not defined: too few lengths, or
    (with enough) one of the two fractions taking one value at every length (a tie, review 26)."""
    if lengths >= MIN_LENGTHS_FOR_CORRELATION:
        return (
            f"not defined: over {lengths} lengths with both uncensored, N*/L takes one value at "
            "every length or N_crit/L's list cells overlap at every length (no order to rank)"
        )
    return (
        f"not defined: {lengths} lengths with both uncensored, {MIN_LENGTHS_FOR_CORRELATION} needed"
    )


def correlation_sentence(correlations: pl.DataFrame, variant: str = "attention-delete") -> str:
    """One sentence: do N* and the critical N move together across L?"""
    rows = correlations.filter(pl.col("variant") == variant)
    if rows.is_empty():
        return f"No {variant} N* to compare with the critical N."
    parts = []
    for r in rows.iter_rows(named=True):
        if r["spearman_rho"] is None:
            parts.append(f"against N_crit ({r['expectation']}) {undefined_reason(r['lengths'])}")
        else:
            parts.append(
                f"Spearman rho {r['spearman_rho']:+.2f} against N_crit/L ({r['expectation']}) "
                f"over {r['lengths']} lengths"
            )
    return f"N*/L ({variant}) across L: " + "; ".join(parts) + f" ({TREND_CAVEAT})."


def effective_set_table(summary: pl.DataFrame, critical: pl.DataFrame) -> pl.DataFrame:
    """One row per (variant, L): N* with its interval and N*/L, beside N_crit/L per expectation,
    whether that N_crit is censored (a lower bound) and whether its KS test was blind."""
    out = summary
    for column, name in (
        ("N_crit_over_length", "N_crit_over_L"),
        ("N_crit_censored", "N_crit_censored"),
        ("N_crit_cell_low", "N_crit_cell_low"),
        ("N_crit_blind", "N_crit_blind"),
    ):
        if column not in critical.columns:
            continue
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
        # the line joins exact values only: a censored one is a lower bound (open marker), and
        # one known to its power-of-two cell (effective_set.refine false) is drawn as that range
        floor = (
            part["n_star_floor"].fill_null(0).to_numpy().astype(float)
            if "n_star_floor" in part.columns
            else np.zeros(len(part))
        )
        cell = found & (floor > 0) & (floor < value * length)
        exact = found & ~cell
        (line,) = ax.plot(length[exact] * shift, value[exact], marker="o", label=f"N*/L, {variant}")
        for k, j in enumerate(np.nonzero(cell)[0]):
            ax.plot(
                [length[j] * shift] * 2,
                [floor[j] / length[j], value[j]],
                color=line.get_color(),
                lw=4,
                alpha=0.45,
                solid_capstyle="butt",
                label=f"N* cell (refine false), {variant}" if k == 0 else None,
            )
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
        known = part.filter(pl.col("N_crit_over_length").is_not_null())
        if "N_crit_blind" in known.columns:
            blind = known.filter(pl.col("N_crit_blind"))
            known = known.filter(~pl.col("N_crit_blind"))
            if blind.height:  # no N could fail there: apart, not joined to the measured ones
                ax.plot(
                    blind["length"].to_numpy(),
                    blind["N_crit_over_length"].to_numpy(),
                    ls="none",
                    marker="x",
                    color="0.5",
                    label=f"N_crit/L, {expectation}: KS blind (no N could fail)",
                )
        found = known.filter(~pl.col("N_crit_censored"))
        label = f"N_crit/L, {expectation}"
        if found.is_empty():
            label += ": censored at every L"
        color = "0.4" if expectation == "closed_form" else "0.65"

        def draw(frame: pl.DataFrame, color=color, **style) -> None:
            ax.plot(
                frame["length"].to_numpy(),
                frame["N_crit_over_length"].to_numpy(),
                color=color,
                **style,
            )

        draw(found, ls="--", marker="s", ms=3, label=label)
        if "N_crit_cell_low" in found.columns:
            # the first pass of the list is known to its cell: a bar down to its least N
            cells = found.filter(pl.col("N_crit_cell_low").is_not_null())
            ax.vlines(
                cells["length"].to_numpy(),
                (cells["N_crit_cell_low"] + 1.0 / cells["length"]).to_numpy(),
                cells["N_crit_over_length"].to_numpy(),
                color=color,
                lw=1,
            )
        bounds = known.filter(pl.col("N_crit_censored"))
        if bounds.height:
            # censored: at least its top N tried, an open marker pointing up
            draw(bounds, ls="none", marker="^", ms=5, mfc="white")
    log_axis(ax, "x", sorted(set(summary["length"].to_list())))
    ax.set_yscale("log")  # the limits of the log axis: a linear one's margin can reach below 0
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
