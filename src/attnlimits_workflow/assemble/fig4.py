"""Fig. 4: max finite-difference sensitivity g(T, eps) across heads vs T, the exact Jacobian norm,
and the paper's bound min{1/(4T), sqrt 2} (with the always-valid 1/(2T))."""

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.figure import Figure

from attnlimits.gradient import corollary3_bound, gershgorin_bound


def fig4(g: pl.DataFrame, run: dict) -> tuple[Figure, str]:
    """The figure and its caption's note from the gradient summary; ``run``: the run
    description, whose protocol the note names."""
    all_rows = run.get("protocol") == "all_rows"
    g = g.sort("eps", "T")
    MARKERS = iter("osD^v<>")
    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    for eps in sorted(g["eps"].unique().to_list()):
        f = g.filter(pl.col("eps") == eps)
        ax.plot(
            f["T"].to_numpy(),
            f["g_max_over_heads"].to_numpy(),
            label=f"max g(T, eps={eps:g})",
            alpha=0.85,
            marker=next(MARKERS),
        )
    first = g.filter(pl.col("eps") == g["eps"].min())
    ts = first["T"].to_numpy()
    ax.plot(
        ts,
        first["jacobian_norm_max"].to_numpy(),
        color="0.2",
        marker="x",
        lw=1,
        label=r"exact $\|J\|_2$, max over heads",
    )
    dense = np.geomspace(ts.min(), ts.max(), 200)
    ax.plot(
        dense,
        corollary3_bound(dense),
        "k--",
        lw=1.2,
        label=r"paper: $\min\{1/(4T), \sqrt{2}\}$",
    )
    ax.plot(
        dense, gershgorin_bound(dense), ":", color="0.45", lw=1.2, label=r"$1/(2T)$ (always holds)"
    )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="temperature T",
        ylabel="sensitivity",
        title="Gradient sensitivity of softmax attention",
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    note = (
        "Algorithm 5: per head the mean over rows of ||softmax((l + eps v)/T) - softmax(l/T)|| / eps for "
        "one random unit direction v per row, then the maximum over the (layer, head) values; ||J|| the "
        "same way."
        if all_rows
        else "Maximum across all heads, layers and chunks (g: of the maximum over the directions)."
    )
    return fig, note
