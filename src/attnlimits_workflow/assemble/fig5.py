"""Fig. 5: the paper's diagnostics under other normalizers of the same logits, one line each:
maximum weight vs L (vanishing attention), exact Jacobian norm vs L (gradient), critical N / L
vs L (distance), and N_s/N vs N (separability)."""

import matplotlib.pyplot as plt
import polars as pl
from matplotlib.figure import Figure

from ..plotting import log_axis

MARKERS = "osD^v<>ph*"


def normalizer_lines(ax, frame: pl.DataFrame, x: str, y: str, names: list[str], style) -> None:
    """One line of ``y`` against ``x`` per normalizer, in its ``style``."""
    for name in names:
        d = frame.filter(pl.col("normalizer") == name).sort(x)
        ax.plot(d[x], d[y], ms=3, label=name, **style[name])


def fig5(by_length: pl.DataFrame, sep: pl.DataFrame) -> tuple[Figure, str]:
    """The figure and its caption's note, from the normalizer summaries
    (normalizer_summary.summarise_normalizers)."""
    names = by_length["normalizer"].unique(maintain_order=True).to_list()
    colors = {n: plt.cm.tab10(i % 10) for i, n in enumerate(names)}
    # Rules that give nearly the same curve (softmax and the normalized Self-Adjust softmax) stay
    # visible through their line style.
    style = {
        n: dict(marker=MARKERS[i % 10], color=colors[n], ls=["-", "--", "-.", ":"][i % 4])
        for i, n in enumerate(names)
    }
    lengths = sorted(by_length["L"].unique().to_list())

    fig, axes = plt.subplots(2, 2, figsize=(8.4, 6.4), layout="constrained")
    panels = [
        (axes[0, 0], "max_weight", "median max weight", "(a) Vanishing attention"),
        (axes[0, 1], "jacobian_norm", r"median $\|J\|_2$", "(b) Jacobian norm"),
    ]
    for ax, metric, ylabel, title in panels:
        for name in names:
            d = by_length.filter(pl.col("normalizer") == name).sort("L")
            ax.plot(d["L"], d[f"{metric}_median"], ms=3, label=name, **style[name])
            if metric == "max_weight":  # (b)'s bands span 0 to 1/T for the sharp rules
                ax.fill_between(
                    d["L"],
                    d[f"{metric}_q25"],
                    d[f"{metric}_q75"],
                    color=colors[name],
                    alpha=0.1,
                    lw=0,
                )
        ax.set(xlabel="context length L", ylabel=ylabel, title=title)
        log_axis(ax, "x", lengths)
        if metric == "jacobian_norm":
            # symlog: a sparse normalizer's one-token rows have a Jacobian of exactly 0
            ax.set_yscale("symlog", linthresh=1e-3)
            ax.set_ylim(bottom=0)
        else:
            ax.set_yscale("log")  # a maximum weight is never 0
    ax = axes[1, 0]
    normalizer_lines(ax, by_length, "L", "N_crit_over_L", names, style)
    if "N_crit_below_over_L" in by_length.columns:
        # the first pass of the list is known to its cell: a bar down to its open low end
        for name in names:
            d = by_length.filter(
                (pl.col("normalizer") == name)
                & (pl.col("N_crit_below_over_L") < pl.col("N_crit_over_L"))
            )
            ax.vlines(
                d["L"], d["N_crit_below_over_L"], d["N_crit_over_L"], color=style[name]["color"]
            )
    log_axis(ax, "x", lengths)
    ax.set(
        xlabel="context length L",
        ylabel=r"$N_{crit} / L$",
        title="(c) Critical N (KS vs Monte-Carlo E)",
        ylim=(0, 1.05),
    )
    ax = axes[1, 1]
    normalizer_lines(ax, sep, "N", "ratio_mean", names, style)
    ax.axhline(0.8, color="0.5", lw=0.8, ls="--")
    log_axis(ax, "x", sorted(sep["N"].unique().to_list()))
    ax.set(
        xlabel="top-N",
        ylabel=r"mean $N_s / N$",
        title=f"(d) Separability at L = {sep['L'][0]}",
        ylim=(-0.02, 1.05),
    )
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(
        handles, labels, loc="upper center", ncol=min(len(names), 4), bbox_to_anchor=(0.5, 1.08)
    )
    # censored (no N < L passed: N_crit >= L) and not testable (the KS test cannot reject at the
    # sample count) are both undrawn, and counted apart (review 32)
    censored = (
        int(by_length["N_crit_censored"].fill_null(False).sum())
        if "N_crit_censored" in by_length.columns
        else by_length.filter(pl.col("N_crit").is_null()).height
    )
    untestable = (
        int((~by_length["N_crit_testable"].fill_null(True)).sum())
        if "N_crit_testable" in by_length.columns
        else 0
    )
    undrawn = f"{censored} (normalizer, L) pair{'s' if censored != 1 else ''} still separable at N = L-1 (N_crit >= L)"
    if untestable:
        undrawn += f" and {untestable} whose KS test cannot reject at its sample count"
    note = (
        "What-if: each normalizer re-normalizes the logits the model learned under softmax; this is not a retrained model. "
        f"(a) bands: quartiles across samples ({by_length['samples'].max()} per L); (b) medians only. Critical N: Algorithm 3's first N "
        "of its list (Table 1's, analysis.all_rows.critical_n_fractions) where a KS test "
        f"(alpha as in analysis.critical_n) no longer separates d~ from the Monte-Carlo E, drawn "
        f"at its list cell's top with a bar down to the list's N before it; {undrawn} "
        "are not drawn. (d) grey dashed: the paper's 0.8 saturation line; "
        "top-N tokens of weight 0 (the sparse rules') are never distinguishable, N stays the denominator "
        f"(mean per sample up to {sep['zero_weight_selected_mean'].max():.3g})."
    )
    return fig, note
