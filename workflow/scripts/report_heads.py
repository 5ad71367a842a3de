"""Per-head saturation report: tables/heads.csv with the paper's diagnostic flags, and heatmaps
(layers x heads) of entropy, N_s/N, critical N / L and the effective temperature."""

import matplotlib.pyplot as plt
import numpy as np
import polars as pl

from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import save_run_figure, use_style
from attnlimits_workflow.tables import write_csv

log = job_logger(snakemake, "heads")
use_style(snakemake.input.style)
p = snakemake.params
heads = pl.read_parquet(snakemake.input.heads).sort("layer", "head")
heads = heads.with_columns(
    (pl.col("ns_ratio") <= p.ns_ratio_threshold).alias("flag_ns_ratio"),
    (pl.col("t_eff") < p.temperature_threshold).alias("flag_temperature"),
).with_columns((pl.col("flag_ns_ratio") | pl.col("flag_temperature")).alias("saturated"))
write_csv(heads, snakemake.output.csv)

layers = heads["layer"].unique().sort().to_list()
cols = heads["head"].unique().sort().to_list()


def grid(column):
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
        f"$N_s/N$ at N = {heads['N'][0]} (flag <= {p.ns_ratio_threshold})",
        "magma",
        (0, 1),
    ),
    ("N_crit_over_L", r"$N_{crit}/L$ (per head, KS over chunks)", "cividis", (0, 1)),
    ("t_eff", f"effective T = 1/std(logits) (flag < {p.temperature_threshold})", "coolwarm", None),
]
fig, axes = plt.subplots(2, 2, figsize=(8.4, 2.2 + 0.55 * len(layers) * 2), layout="constrained")
for ax, (column, title, cmap, lim) in zip(axes.flat, panels, strict=True):
    g = grid(column)
    norm = None
    if column == "t_eff":
        from matplotlib.colors import LogNorm

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
                    j, i, "x", ha="center", va="center", color="w", fontsize=8, fontweight="bold"
                )
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
        from matplotlib.ticker import FormatStrFormatter

        bar.ax.yaxis.set_major_formatter(FormatStrFormatter("%.3g"))
        bar.ax.yaxis.set_minor_formatter(FormatStrFormatter("%.3g"))
n_sat = int(heads["saturated"].sum())
save_run_figure(
    fig,
    snakemake,
    f"L = {L}; x: head flagged ({n_sat} of {heads.height} heads saturated by the paper's thresholds). "
    "Per-head critical N rests on the few chunks of one head (low KS power); blank: still separable at N = L-1, or too few chunks for the KS test to ever reject (ks_min_pvalue >= alpha). "
    "Top-N tokens of weight 0 are never selected nor distinguishable (analysis.zero_weight).",
    analysed_rows=True,
)
log.info("heads: %d of %d flagged", n_sat, heads.height)
