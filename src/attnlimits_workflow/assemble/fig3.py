"""Fig. 3: N_s/N across heads vs N (boxes) with Theorem 2's bounds and the paper's 0.70-0.85 band."""

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.figure import Figure

from .replicates import percentile_band


def fig3(
    sep: pl.DataFrame,
    run: dict,
    replicates: pl.DataFrame | None = None,
    level: float = 0.95,
    zero_weight: str = "not_selected",
) -> tuple[Figure, str]:
    """The figure and its caption's note from the separability summary (sorted by N here);
    ``run``: the run description, whose protocol the note names; ``replicates``: the summary's
    bootstrap replicates (assemble.replicates), whose ``level`` interval of each median is drawn
    beside its box (none drawn without them); ``zero_weight``: analysis.zero_weight, whose
    reading of top-N tokens of weight 0 the note states."""
    all_rows = run.get("protocol") == "all_rows"
    sep = sep.sort("N")
    ns = sep["N"].to_list()
    pos = np.arange(len(ns))
    stats = [
        {
            "whislo": r["ratio_min"],
            "q1": r["ratio_q25"],
            "med": r["ratio_median"],
            "q3": r["ratio_q75"],
            "whishi": r["ratio_max"],
            "label": str(r["N"]),
        }
        for r in sep.iter_rows(named=True)
    ]
    fig, ax = plt.subplots(figsize=(7.0, 3.4))
    ax.axhspan(0.70, 0.85, color="0.85", alpha=0.6, lw=0, label="paper: saturation band 0.70-0.85")
    ax.bxp(
        stats,
        positions=pos,
        widths=0.55,
        patch_artist=True,
        boxprops={"facecolor": "#1b9e77", "alpha": 0.6},
        medianprops={"color": "k"},
        showfliers=False,
    )
    # Both bounds as medians, like the boxes' middle line.
    upper = sep["upper_bound_median"].to_numpy()
    lower = sep["lower_bound_median"].to_numpy()
    banded = replicates is not None and replicates.height > 0
    if banded:
        # the median's bootstrap interval (what Table 1's saturation verdict reads), beside the box
        band = percentile_band(replicates, ("N",), "ratio_median", level)
        band = sep.select("N").join(band, on="N", how="left")
        med = sep["ratio_median"].to_numpy()
        ax.errorbar(
            pos + 0.36,
            med,
            yerr=[med - band["low"].to_numpy(), band["high"].to_numpy() - med],
            fmt="k.",
            ms=3,
            capsize=2,
            lw=1,
            label=f"median, {100 * level:g} % bootstrap interval",
        )
    ax.plot(pos, upper, "r-o", ms=3, label="Thm 2 upper bound (median)")
    clipped = np.clip(lower, -0.05, None)
    ax.plot(pos, clipped, "b-s", ms=3, label="Thm 2 lower bound (median)")
    if np.any(lower < -0.05):
        ax.plot([], [], " ", label="(lower bound < -0.05 shown at -0.05)")
    ax.set(
        xlabel="top-N",
        ylabel=r"$N_s / N$ across heads",
        ylim=(-0.07, 1.05),
        title="Geometric separability (Theorem 2)",
    )
    ax.set_xticks(pos, [str(n) for n in ns])
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    degenerate = int(sep["zero_radius"].sum() + sep["negative_xi_square"].sum())
    spread = "the (layer, head) values" if all_rows else "heads, layers and chunks"
    note = (
        f"Boxes: quartiles, whiskers: min-max across {spread}; L = {sep['L'][0]}; {degenerate} "
        "degenerate samples (r = 0 or xi^2 < 0) excluded from the bounds. "
        + (
            "Top-N tokens of weight 0 are not selected, and those of weight at most float32's "
            "eps of the row's peak stay selected but never count as distinguishable "
            "(analysis.zero_weight: not_selected; N stays the denominator): "
            if zero_weight == "not_selected"
            else "Top-N tokens of weight 0 count as selected, and as distinguishable where they "
            "lie within r of s (analysis.zero_weight: literal): "
        )
        + f"at most {sep['zero_weight_selected_mean'].max():.3g} of weight 0 per row on average "
        "at any N. "
        "The upper bound cannot fall below e^(-1/16) = 0.939."
    )
    if banded:
        note += (
            f" Bars beside the boxes: the median's {100 * level:g} % percentile bootstrap interval "
            f"over {replicates['replicate'].n_unique()} resamples of the heads"
            + ("" if all_rows else " and chunks")
            + " (analysis.bootstrap)."
        )
    return fig, note
