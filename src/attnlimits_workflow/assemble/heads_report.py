"""Per-head saturation report: the heads table with the paper's diagnostic flags (thresholds
beyond.*_threshold, defaults from its Section 5), and heatmaps (layers x heads) of entropy,
N_s/N, critical N / L and the effective temperature."""

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.ticker import FormatStrFormatter


def flag_heads(
    heads: pl.DataFrame, ns_ratio_threshold: float, temperature_threshold: float
) -> pl.DataFrame:
    """The heads sorted by (layer, head), flagged where N_s/N <= ``ns_ratio_threshold`` or the
    effective temperature <= ``temperature_threshold``; "saturated": either flag."""
    return (
        heads.sort("layer", "head")
        .with_columns(
            (pl.col("ns_ratio") <= ns_ratio_threshold).alias("flag_ns_ratio"),
            # the paper: "avoid using the T <= 0.1" (Section 5)
            (pl.col("t_eff") <= temperature_threshold).alias("flag_temperature"),
        )
        .with_columns((pl.col("flag_ns_ratio") | pl.col("flag_temperature")).alias("saturated"))
    )


def heads_figure(
    heads: pl.DataFrame, ns_ratio_threshold: float, temperature_threshold: float
) -> tuple[Figure, str]:
    """The heatmaps of the flagged heads (:func:`flag_heads`) and the caption's note."""
    layers = heads["layer"].unique().sort().to_list()
    cols = heads["head"].unique().sort().to_list()

    def grid(column):
        """The column as a layers x heads array (NaN where missing)."""
        g = np.full((len(layers), len(cols)), np.nan)
        for r in heads.iter_rows(named=True):
            v = r[column]
            g[layers.index(r["layer"]), cols.index(r["head"])] = np.nan if v is None else v
        return g

    L = heads["L"][0]
    panels = [
        ("entropy", f"entropy (nats; uniform = {np.log(L):.2f})", "viridis", None),
        (
            "ns_ratio",
            f"$N_s/N$ at N = {heads['N'][0]} (flag <= {ns_ratio_threshold})",
            "magma",
            (0, 1),
        ),
        ("N_crit_over_L", r"$N_{crit}/L$ (per head, KS over chunks)", "cividis", (0, 1)),
        (
            "t_eff",
            f"effective T = 1/std(logits) (flag <= {temperature_threshold})",
            "coolwarm",
            None,
        ),
    ]
    fig, axes = plt.subplots(
        2, 2, figsize=(8.4, 2.2 + 0.55 * len(layers) * 2), layout="constrained"
    )
    for ax, (column, title, cmap, lim) in zip(axes.flat, panels, strict=True):
        g = grid(column)
        if column == "N_crit_over_L" and "N_crit_censored" in heads.columns:
            # no N < L passed: N_crit >= L, drawn at 1 (the colour scale's top)
            g[grid("N_crit_censored") == 1] = 1.0
        norm = None
        if column == "t_eff":
            finite = g[np.isfinite(g) & (g > 0)]
            if finite.size:
                norm = LogNorm(vmin=finite.min(), vmax=max(finite.max(), finite.min() * 1.01))
        im = ax.imshow(
            np.ma.masked_invalid(g),
            cmap=cmap,
            aspect="auto",
            norm=norm,
            vmin=None if norm else (lim[0] if lim else None),
            vmax=None if norm else (lim[1] if lim else None),
        )
        if column in ("ns_ratio", "t_eff"):
            flag_col = "flag_ns_ratio" if column == "ns_ratio" else "flag_temperature"
            for (i, j), v in np.ndenumerate(grid(flag_col)):
                if v == 1:
                    ax.text(
                        j,
                        i,
                        "x",
                        ha="center",
                        va="center",
                        color="w",
                        fontsize=8,
                        fontweight="bold",
                    )
        if column == "N_crit_over_L" and "N_crit_censored" in heads.columns:
            # censored: still separable at N = L - 1, so N_crit >= L (drawn at 1 above)
            for (i, j), v in np.ndenumerate(grid("N_crit_censored")):
                if v == 1:
                    ax.text(j, i, ">", ha="center", va="center", color="k", fontsize=8)
        ax.set(title=title, xlabel="head", ylabel="layer")
        ax.set_xticks(range(len(cols)), [str(c) for c in cols], fontsize=6)
        ax.set_yticks(range(len(layers)), [str(lay) for lay in layers], fontsize=6)
        ax.grid(False)
        bar = fig.colorbar(im, ax=ax, shrink=0.85)
        if norm is None:
            bar.formatter.set_useOffset(False)  # entropies near log L: no "1e-5 + 4.1588" offset
        else:
            # a log scale spanning less than a decade gets ticks written as plain numbers, major and
            # minor alike, instead of a lone "4x10^0"
            bar.ax.yaxis.set_major_formatter(FormatStrFormatter("%.3g"))
            bar.ax.yaxis.set_minor_formatter(FormatStrFormatter("%.3g"))
    n_sat = int(heads["saturated"].sum())
    note = (
        f"L = {L}, each (layer, chunk, head) read at its analysed row only (extraction.query_row, "
        "as under the last-row protocol) whatever analysis.protocol; "
        f"x: head flagged ({n_sat} of {heads.height} heads saturated: N_s/N <= "
        f"beyond.ns_ratio_threshold = {ns_ratio_threshold:g} or effective T <= "
        f"beyond.temperature_threshold = {temperature_threshold:g}; the defaults follow the "
        "paper's Section 5: a head saturates where N_s/N drops to 70-80 %, and T <= 0.1 is to be "
        "avoided; the effective T = 1/std(logits) is this project's proxy for the head's T). "
        "Per-head critical N rests on the few chunks of one head (low KS power), the first pass of "
        "Algorithm 3's N list (analysis.all_rows.critical_n_fractions), drawn at its cell's top "
        "(cells up to 0.1 L wide above 0.5 L with the default list); "
        "'>': no N of the list passed, still separable at N = L-1 "
        "(censored: N_crit >= L, drawn at 1); blank: too few chunks for the KS test to ever reject (ks_min_pvalue >= alpha). "
        "Top-N tokens of weight 0 are never selected nor distinguishable under "
        "analysis.zero_weight not_selected (the default); literal selects them."
    )
    return fig, note
