"""Fig. 2: (a) distance vs L at fixed N, (b) vs N at fixed L, (c) critical N vs L."""

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.figure import Figure

from attnlimits.critical import fit_through_origin

from .replicates import critical_n_band

SERIES = [
    ("distance", r"true distance $\tilde d$"),
    ("mc_expectation", "E (Monte Carlo)"),
    ("expectation_term", "Thm 1.2 term (as printed)"),
    ("upper_bound", "Thm 1.1 upper bound"),
]


OTHER_MASKED = {"non_selected": "prefix", "prefix": "non_selected"}
SHORT = {"distance": r"$\tilde d$", "expectation_term": "Thm 1.2 term"}


def panel(ax, frame, x, xlabel, title, masked: str, other_masked=False):
    """Distance, E, the printed term and the upper bound against ``x``: medians with their
    interquartile bands; with ``other_masked``, the other reading of masked keys dashed."""
    frame = frame.sort(x)
    xs = frame[x].to_numpy()
    colors = {}
    for col, label in SERIES:
        line = ax.plot(xs, frame[f"{col}_median"].to_numpy(), marker="o", label=label)[0]
        colors[col] = line.get_color()
        ax.fill_between(
            xs,
            frame[f"{col}_q25"].to_numpy(),
            frame[f"{col}_q75"].to_numpy(),
            color=line.get_color(),
            alpha=0.18,
            lw=0,
        )
    if other_masked and "distance_other_masked_median" in frame.columns:
        # analysis.all_rows.masked the other way: the open choice's effect on d~ and on E
        for col in ("distance", "expectation_term"):
            ax.plot(
                xs,
                frame[f"{col}_other_masked_median"].to_numpy(),
                ls="--",
                marker="x",
                color=colors[col],
                label=f"{SHORT[col]}, masked keys {OTHER_MASKED[masked]}",
            )
    ax.set(xscale="log", yscale="log", xlabel=xlabel, title=title)
    ax.set_xticks(xs, [str(v) for v in xs], minor=False)
    ax.minorticks_off()


def fig2(
    dist: pl.DataFrame,
    crit: pl.DataFrame,
    p: dict,
    masked: str,
    replicates: pl.DataFrame | None = None,
    level: float = 0.95,
    alpha: float = 0.01,
    mc_rows: int | None = None,
) -> tuple[Figure, str]:
    """The figure and its caption's note, from the distance and critical-N summaries; ``p``:
    analysis.distance, ``masked``: analysis.all_rows.masked; ``replicates``: the critical-N
    searches rerun on bootstrap resamples (summaries.critical_n_replicates), whose ``level``
    band of N_crit per L panel (c) draws (none without them); ``alpha``: the KS test's level
    (analysis.critical_n.ks_alpha); ``mc_rows``: the rows per head the Monte-Carlo E is drawn
    on when every row is analysed (analysis.all_rows.mc_rows; None: E on every analysed row)."""
    # constrained layout with the legends below the panels: inside, (a)'s legend ran over (b)
    # and (c)'s over its own points
    fig, axes = plt.subplots(1, 3, figsize=(11, 4.6), layout="constrained")
    panel(
        axes[0],
        dist.filter(pl.col("N") == p["n_fixed"]),
        "L",
        "sequence length L",
        f"(a) N = {p['n_fixed']}",
        masked,
        other_masked=True,
    )
    panel(
        axes[1],
        dist.filter(pl.col("L") == p["length_fixed"]),
        "N",
        "top-N",
        f"(b) L = {p['length_fixed']}",
        masked,
    )
    axes[0].set_ylabel("distance (median, IQR across heads)")
    # (a) and (b) draw the same series: one legend under both
    axes[0].legend(loc="upper left", bbox_to_anchor=(0.0, -0.2), ncol=2, borderaxespad=0)

    ax = axes[2]
    lengths = np.array(sorted(crit["L"].unique().to_list()))
    # The reading analysis.all_rows.masked names (an encoder's rows have one: "both"), filled markers
    # where a search passed, open ones at the top N where it never did (N_crit >= that N, censored).
    # The fitted line runs through the found lengths only: a censored length is a bound, not a value.
    drawn = crit.filter(pl.col("masked").is_in([masked, "both"]))
    # a length whose KS test cannot reach alpha on its sample count passes at the first N
    # whatever the data: drawn apart, as a point no data could have moved
    blind_rule = (pl.col("ks_min_pvalue") >= alpha).fill_null(False)
    censored_any, banded, open_top = False, 0, False
    blind_rows = drawn.filter(blind_rule & ~pl.col("censored"))
    for kind, label, marker in (
        ("monte_carlo", "KS vs E (Monte Carlo)", "o"),
        ("closed_form", "KS vs Thm 1.2 term", "s"),
    ):
        f = drawn.filter(pl.col("expectation") == kind).sort("L")
        found = f.filter(~pl.col("censored"))
        blind = found.filter(blind_rule)
        found = found.filter(~blind_rule)
        line = ax.plot(
            found["L"].to_numpy(), found["N_crit"].to_numpy(), marker=marker, ls="none", label=label
        )[0]
        if blind.height:
            ax.plot(
                blind["L"].to_numpy(),
                blind["N_crit"].to_numpy(),
                marker="x",
                ls="none",
                color="0.5",
                label=f"{label}: KS blind (least p >= {alpha:g})",
            )
        if "N_crit_low" in found.columns:
            # Algorithm 3's first pass is known to its list cell: a bar down to the cell's least N
            cells = found.filter(pl.col("N_crit_low") < pl.col("N_crit"))
            ax.vlines(
                cells["L"].to_numpy(),
                cells["N_crit_low"].to_numpy(),
                cells["N_crit"].to_numpy(),
                color=line.get_color(),
                lw=1,
            )
        reps = (
            None
            if replicates is None or replicates.height == 0
            else replicates.filter(
                pl.col("masked").is_in([masked, "both"]) & (pl.col("expectation") == kind)
            )
        )
        if reps is not None and blind.height:
            # every resample of a blind length passes at the first N too: a band of no width
            # there would read as precision
            reps = reps.filter(~pl.col("L").is_in(blind["L"].to_list()))
        if reps is not None and reps.height:
            # a censored resample's N_crit is above its top N: +inf, so a band that reaches
            # it is drawn up to L (N_crit <= L always) and said so in the note
            band = critical_n_band(reps, level)
            ax.fill_between(
                band["L"].to_numpy(),
                band["low"].to_numpy(),
                np.minimum(band["high"].to_numpy(), band["L"].to_numpy()),
                color=line.get_color(),
                alpha=0.15,
                lw=0,
                label=f"{label}: {100 * level:g} % bootstrap band",
            )
            banded = max(banded, reps["replicate"].n_unique())
            open_top = open_top or bool(np.isinf(band["high"].to_numpy()).any())
        cens = f.filter(pl.col("censored"))
        if cens.height:
            censored_any = True
            ax.plot(
                cens["L"].to_numpy(),
                cens["top_N"].to_numpy(),
                marker=marker,
                ls="none",
                mfc="none",
                color=line.get_color(),
                label=f"{label}: censored, N_crit >= top N",
            )
        # through the measured lengths: the summary's fitted_slope also runs through blind ones
        slope = (
            fit_through_origin(found["L"].to_numpy(), found["N_crit"].to_numpy())
            if found.height
            else None
        )
        if found.height and slope is not None and np.isfinite(slope):
            ax.plot(
                lengths,
                slope * lengths,
                color=line.get_color(),
                lw=1,
                # through the cells' tops: an upper end where the cells have width
                label=f"fit {slope:.3f} L through the cells' tops"
                + (" (found L only)" if cens.height else ""),
            )
    ax.plot(lengths, 0.06 * lengths, "k--", lw=1, label="paper: 0.06 L")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="sequence length L",
        ylabel=r"critical $N$",
        title=rf"(c) critical N (KS, $\alpha$={alpha:g})",
    )
    ax.set_xticks(lengths, [str(v) for v in lengths])
    ax.minorticks_off()
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.2), fontsize=6.5, borderaxespad=0)
    reading = (
        "no masked keys (both readings coincide)"
        if (drawn["masked"] == "both").all()
        else f"masked keys {masked} (analysis.all_rows.masked; the other reading in "
        "summary/critical_n.csv and Table 1)"
    )
    note = f"(c) {reading}; KS over {drawn['ks_samples'].max()} values per side."
    if censored_any:
        note += (
            " Open markers at the top N tried (L - 1): no N passed there, so N_crit >= that N"
            " (censored); the fit runs through the found lengths only."
        )
    drawn_lengths = sorted(set(dist["L"].to_list()) | set(crit["L"].to_list()))
    if mc_rows is not None and drawn_lengths and max(drawn_lengths) > mc_rows:
        note += (
            f" E (Monte Carlo) is drawn on {mc_rows} evenly spaced query rows per head where"
            f" L > {mc_rows} (analysis.all_rows.mc_rows), an estimate of its mean over every"
            " row; d~ and the Thm 1.2 term use every row."
        )
    if blind_rows.height:
        note += (
            f" Grey x: KS blind at {blind_rows['L'].n_unique()} length(s), the least attainable"
            f" p-value on {blind_rows['ks_samples'].min()} values per side being >= {alpha:g}:"
            " no N can fail there, so N_crit is the list's first N whatever the data; no band"
            " is drawn there, the fitted line leaves them out, and Table 1 reads the critical-N"
            " claim as not testable."
        )
    if banded:
        note += (
            f" Shaded: N_crit's {100 * level:g} % band over {banded} reruns of the search on"
            " resamples of its units (analysis.bootstrap), over the resamples' list cells: the"
            " low end a percentile of each cell's least N, the high end of its top"
            + (
                "; a band drawn up to L holds censored resamples (N_crit above their top N)."
                if open_top
                else "."
            )
        )
    if "distance_other_masked_median" in dist.columns:
        note += (
            f" (a) dashed: a causal row's masked keys entered as {OTHER_MASKED[masked]} instead of"
            f" {masked} (analysis.all_rows.masked)."
        )
    return fig, note
