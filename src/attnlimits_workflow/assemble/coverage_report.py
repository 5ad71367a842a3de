"""Multi-head coverage: measured fraction of the heads' combined top-N set that at least one head
keeps distinguishable, against the paper's 1 - (1 - p)^H and the overlap-aware prediction."""

import matplotlib.pyplot as plt
import polars as pl
from matplotlib.figure import Figure

from attnlimits.coverage import heads_for_coverage

from ..plotting import log_axis

METRICS = ["coverage", "p", "predicted_paper", "predicted_overlap", "union_selected"]
NOTE = (
    "Each (layer, chunk, head) contributes its analysed row only (extraction.query_row, as "
    "under the last-row protocol), whatever analysis.protocol. "
    "A token counts as covered if at least one head has it in its top-N set and inside B_r(s) (Theorem 2). "
    "The paper's formula assumes the heads select the same tokens independently. A top-N token of "
    "weight 0 is not selected (analysis.zero_weight: the union and p count selected tokens only)."
)


def coverage_by(cov: pl.DataFrame, n_conf: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The metrics' means over (layer, chunk) per N, and per layer at N = ``n_conf``."""
    metrics = METRICS
    # a group where no head selects anything has no p (NaN): left out of the means (review 33)
    by_n = cov.group_by("N").agg(pl.col(m).fill_nan(None).mean() for m in metrics).sort("N")
    by_layer = (
        cov.filter(pl.col("N") == n_conf)
        .group_by("layer")
        .agg(pl.col(m).fill_nan(None).mean() for m in metrics)
        .sort("layer")
    )
    return by_n, by_layer


def coverage_table(cov: pl.DataFrame, n_conf: int) -> pl.DataFrame:
    """Rows "all" per N, then per layer at N = ``n_conf``, with the heads the paper's formula
    needs for 99% coverage."""
    by_n, by_layer = coverage_by(cov, n_conf)
    table = pl.concat(
        [
            by_n.with_columns(pl.lit("all").alias("layer")),
            by_layer.with_columns(
                pl.lit(n_conf).cast(pl.Int32).alias("N"), pl.col("layer").cast(pl.String)
            ),
        ],
        how="diagonal_relaxed",
    ).select("layer", "N", *METRICS)
    table = table.with_columns(
        pl.col("p")
        .map_elements(lambda p: heads_for_coverage(p, 0.99), return_dtype=pl.Float64)
        .alias("heads_for_99pct_paper")
    )
    return table


def coverage_header(cov: pl.DataFrame, n_conf: int, run: dict) -> str:
    return (
        f"Multi-head coverage, {run['model']} ({run['weights']}), {int(cov['heads'][0])} heads, L = {cov['L'][0]}, last-row "
        "protocol (the analysed row, whatever analysis.protocol): means over (layer, chunk); rows 'all' per N, then per layer at N = "
        f"{n_conf}. coverage = |tokens distinguishable by >= 1 head| / |union of the heads' top-N|; "
        "p = mean over heads of N_s / |selected| (the head's top-N tokens of weight > 0 under analysis.zero_weight; "
        "N_s/N where no top-N weight is 0; a head that selects nothing left out, of p and of the paper's H), the rate 1-(1-p)^h_t needs per selected token; predicted_paper = 1-(1-p)^H; predicted_overlap = mean over the union of 1-(1-p)^h_t."
    )


def coverage_figure(cov: pl.DataFrame, n_conf: int) -> Figure:
    """(a) coverage against N, (b) per layer at N = ``n_conf``; the caption's note is NOTE."""
    by_n, by_layer = coverage_by(cov, n_conf)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8.4, 3.4), layout="constrained")
    ax1.plot(by_n["N"], by_n["coverage"], "k-o", ms=3, label="measured coverage")
    ax1.plot(
        by_n["N"],
        by_n["predicted_paper"],
        "r--",
        label=r"paper's $1-(1-p)^H$ (H: heads selecting any token)",
    )
    ax1.plot(by_n["N"], by_n["predicted_overlap"], "b:", label=r"independence, measured overlap")
    ax1.plot(
        by_n["N"],
        by_n["p"],
        color="0.5",
        marker="s",
        ms=3,
        lw=0.8,
        label=r"single head $p = N_s/|\mathrm{selected}|$",
    )
    log_axis(ax1, "x", by_n["N"].to_list())
    ax1.set(
        xlabel="top-N per head",
        ylabel="fraction",
        ylim=(-0.02, 1.05),
        title="(a) Coverage vs N",
    )
    ax1.legend(loc="lower left", fontsize=7)
    ax2.plot(by_layer["layer"], by_layer["coverage"], "k-o", ms=3, label="measured")
    ax2.plot(by_layer["layer"], by_layer["predicted_paper"], "r--", label="paper")
    ax2.plot(by_layer["layer"], by_layer["predicted_overlap"], "b:", label="measured overlap")
    ax2.set(
        xlabel="layer",
        ylabel="fraction",
        ylim=(-0.02, 1.05),
        title=f"(b) Per layer at N = {n_conf}",
    )
    ax2.legend(loc="lower left", fontsize=7)
    return fig
