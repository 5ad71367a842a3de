"""The normalizer study's figure (figures/study/normalizer_limits.pdf): each limit's measure per
rule against L, the gradient against T, and the heads."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.figure import Figure

from attnlimits import rules as rule_table

from ..plotting import log_axis
from ..study import censored_critical_n

if TYPE_CHECKING:
    from .study_report import Study

# Panel (d)'s y range: at small T softmax's norm underflows towards 1e-200 and the Self-Adjust
# rules' grows without bound; the bounds live in this range, and the table has the extremes.
GRADIENT_RANGE = (1e-5, 1e4)


def medians(frame: pl.DataFrame, by: str, column: str, *others: pl.Expr) -> pl.DataFrame:
    """The median of ``column`` per value of ``by`` (sorted), a NaN left out as a missing value
    (polars' median sorts NaN above every number, so NaN rows would raise it), with ``others``."""
    return (
        frame.with_columns(pl.col(column).fill_nan(None))
        .group_by(by)
        .agg(pl.col(column).median(), *others)
        .sort(by)
    )


def medians_by_length(ax, samples: dict[str, pl.DataFrame], column: str, style: dict) -> None:
    """Per model, the median of ``column`` against L."""
    for n, frame in samples.items():
        per_l = medians(frame, "L", column)
        ax.plot(per_l["L"], per_l[column], **style[n])


def length_axes(ax, lengths: np.ndarray, ylabel: str, title: str) -> None:
    """Log axes with L on x, ticked at ``lengths``."""
    log_axis(ax, "x", lengths)
    ax.set(yscale="log", xlabel="context length L", ylabel=ylabel, title=title)


def study_figure(s: Study) -> tuple[Figure, str]:
    """The eight panels (training, length generalisation, and the limits on each model's own
    attention) and the caption."""
    names, models, rules, study, p = s.names, s.models, s.rules, s.settings, s
    samples, critical, separability, gradient = s.samples, s.critical_n, s.separability, s.gradient
    heads, histories, evaluations = s.heads, s.histories, s.evaluations
    l_max, contexts = s.l_max, s.contexts
    tail_percent = s.tail_percent
    fig, axes = plt.subplots(2, 4, figsize=(17, 7.5), constrained_layout=True)
    # tab20: up to 20 rules in distinct colours (tab10 repeated them from the 11th)
    colors = plt.get_cmap("tab20")
    markers = "osD^v<>px"
    style = {
        n: dict(color=colors(i % 20), marker=markers[i % len(markers)], ms=4, label=n)
        for i, n in enumerate(names)
    }
    ax = axes[0, 0]
    for n in names:
        h = histories[n]
        ax.plot(h["tokens"] / 1e6, h["loss"], **{**style[n], "marker": None})
    ax.set(xlabel="training tokens (millions)", ylabel="training loss (nats)", title="(a) training")
    ax = axes[0, 1]
    for n in names:
        ev = sorted(evaluations[n]["contexts"], key=lambda c: c["context"])
        ax.plot([c["context"] for c in ev], [c["tail_perplexity"] for c in ev], **style[n])
    ax.axvline(study["training"]["context"], color="0.6", ls=":", lw=1)
    log_axis(ax, "x", contexts)
    ax.set(
        xlabel="evaluation context (tokens)",
        ylabel=f"held-out perplexity, last {tail_percent} of positions",
        title="(b) length generalisation (dotted: training context)",
        # a rule that blows up beyond C (sigmoid: tens of thousands) flattens the rest on a linear axis
        yscale="log",
    )
    ax = axes[0, 2]
    medians_by_length(ax, samples, "max_weight", style)
    ls = np.array(sorted(samples[names[0]]["L"].unique()))
    ax.plot(ls, 1.0 / ls, color="0.5", ls="--", lw=1, label="1/L")
    length_axes(ax, ls, "median max weight", "(c) vanishing attention (Lemma 1)")
    ax = axes[1, 0]
    for n in names:
        c = censored_critical_n(critical[n])
        # found: the first pass of the list (N_crit / L, the paper's number), its cell below it
        # as a bar; censored: no N of the list passed, so N_crit / L is at least the open mark
        drawn = (
            pl.when(pl.col("censored")).then(pl.col("share_low")).otherwise(pl.col("share_high"))
        )
        c = c.with_columns(drawn=drawn)
        ax.plot(c["L"], c["drawn"], **{**style[n], "marker": None})
        found_n, cens = c.filter(~pl.col("censored")), c.filter(pl.col("censored"))
        ax.plot(found_n["L"], found_n["share_high"], ls="none", **{**style[n], "label": None})
        ax.vlines(
            found_n["L"], found_n["share_low"], found_n["share_high"], color=style[n]["color"], lw=1
        )
        ax.plot(cens["L"], cens["share_low"], ls="none", mfc="none", **{**style[n], "label": None})
    log_axis(ax, "x", ls)
    ax.set(
        xlabel="context length L",
        ylabel="N_crit / L",
        title="(e) distance collapse: KS critical N / L (bar: its cell; open: censored, >=)",
    )
    ax = axes[1, 1]
    for n in names:
        s = separability[n].group_by("N").agg(pl.col("ratio").mean()).sort("N")
        ax.plot(s["N"], s["ratio"], **style[n])
    sep_l = int(separability[names[0]]["L"][0])
    log_axis(ax, "x", sorted(separability[names[0]]["N"].unique()))
    ax.set(
        xlabel="N selected",
        ylabel="mean N_s / N",
        title=f"(f) separability (Thm 2) at L = {sep_l}",
        ylim=(0, 1.02),
    )
    ax = axes[1, 2]
    medians_by_length(ax, samples, "jacobian_norm", style)
    length_axes(ax, ls, "median ||d weights / d logits||", "(g) gradient vs L (Lemma 2)")
    ax = axes[0, 3]
    for n in names:
        g = medians(gradient[n], "T", "jacobian_norm", pl.col("bound").max())
        ax.plot(g["T"], g["jacobian_norm"], **style[n])
        # a bound with a learned parameter is one per row (per head), not a curve
        if g["bound"].is_finite().all() and not rule_table.get(rules[n]["kind"]).learned:
            ax.plot(g["T"], g["bound"], color=style[n]["color"], ls="--", lw=0.8)
    grad_l = int(gradient[names[0]]["L"][0])
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="temperature T (rule applied to z / T)",
        ylabel="median ||d weights / d z||",
        title=f"(d) gradient vs T at L = {grad_l} (dashed: bound)",
        ylim=GRADIENT_RANGE,
    )
    ax = axes[1, 3]
    for i, n in enumerate(names):
        ratios = heads[n]["ns_ratio"].to_numpy()
        jitter = np.linspace(-0.2, 0.2, ratios.size) if ratios.size > 1 else np.zeros(1)
        ax.scatter(i + jitter, ratios, s=12, color=style[n]["color"], marker=style[n]["marker"])
    threshold = p.ns_ratio_threshold[models[0]]
    ax.axhline(threshold, color="0.5", ls=":", lw=1)
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=7)
    heads_n, heads_l = int(heads[names[0]]["N"][0]), int(heads[names[0]]["L"][0])
    ax.set(
        ylabel=f"per-head mean N_s / N at N = {heads_n}",
        title=f"(h) heads at L = {heads_l} (dotted: saturation flag)",
        ylim=(0, 1.02),
    )
    handles, labels = axes[0, 2].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", fontsize=8)
    arch = study["architecture"]
    tr = study["training"]
    first = samples[names[0]]
    caption = (
        f"Study models: Llama, {arch['layers']} layers x {arch['heads']} heads "
        f"({arch['kv_heads']} KV), d={arch['hidden_size']}, identical but for the attention rule; "
        f"{tr['steps']} steps of {tr['batch_size']} x {tr['context']} tokens, seed {p.seed} (of {p.seeds or [p.seed]}). "
        f"(c)-(h): each model's own attention on held-out chunks, analysed row of each (layer, "
        f"chunk, head): {first.filter(pl.col('L') == l_max).height} rows per L. "
        f"(d): the rows of (g) at one L, the trained rule applied to z / T; "
        f"Scalable-Softmax's bound is per row (table); norms outside "
        f"{GRADIENT_RANGE[0]:g}-{GRADIENT_RANGE[1]:g} are off the axis. (h): one point per (layer, head)."
    )
    return fig, caption
