"""One claim of the paper with every configured model side by side (figures/compare/<claim>.pdf).

Each model's line comes from its own summary table and is labelled from its own recorded run
description (results/<model>/summary/run.json), so the figure says what each run was."""

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.figure import Figure

from ..plotting import log_axis


def label(model: str, run: dict, claim: str) -> str:
    """A model's legend entry: its name, weights, heads and which rows it reads."""
    weights = "random weights" if run["weights"] == "random_init" else "trained"
    # Lemma 1's check reads the analysed row under either protocol (docs/protocols.md)
    every_row = run["protocol"] == "all_rows" and claim != "vanishing"
    rows = "every row" if every_row else "analysed row"
    return f"{model} ({weights}; {run['layers']}x{run['heads']} heads; {rows})"


def median_band(ax, t: pl.DataFrame, x: str, value: str, colour: str, text: str) -> None:
    """One model's median line with its interquartile band."""
    ax.plot(t[x], t[f"{value}_median"], "-o", color=colour, ms=4, label=text)
    ax.fill_between(t[x], t[f"{value}_q25"], t[f"{value}_q75"], color=colour, alpha=0.15, lw=0)


def compare_figure(
    claim: str,
    tables: dict[str, pl.DataFrame],
    runs: dict[str, dict],
    ks_alpha: dict[str, float],
    n_fixed: dict[str, int],
) -> tuple[Figure, str]:
    """The figure and its caption for ``claim``: per model (``tables``: its summary of the
    claim, in drawing order) one line; ``ks_alpha`` and ``n_fixed`` are the models' settings."""
    models = list(tables)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(6.4, 3.4 + 0.22 * len(models)))

    notes = []
    for i, model in enumerate(models):
        t, colour = tables[model], colours[i % len(colours)]
        if claim == "critical_n":
            # the reading of a causal row's masked keys the model's figures draw (an encoder: "both")
            reading = [runs[model].get("masked", "non_selected"), "both"]
            for kind, style in (("monte_carlo", "-o"), ("closed_form", "--s")):
                f = t.filter(pl.col("masked").is_in(reading) & (pl.col("expectation") == kind))
                f = f.sort("L")
                # Where KS over so few values cannot reject at alpha, every N "passes": no N_crit.
                blind = f.filter(pl.col("ks_min_pvalue") >= ks_alpha[model])
                if blind.height:
                    notes.append(
                        f"{model} ({kind}): KS cannot reject at {blind.height} of {f.height} L (not testable, not drawn)"
                    )
                f = f.filter(pl.col("ks_min_pvalue") < ks_alpha[model])
                found = f.filter(pl.col("N_crit_over_L").is_not_null())
                if found.height:
                    ax.plot(
                        found["L"],
                        found["N_crit_over_L"],
                        style,
                        color=colour,
                        ms=4,
                        label=f"{label(model, runs[model], claim)}: {'MC E' if kind == 'monte_carlo' else 'Thm 1.2 term'}",
                    )
                if found.height < f.height:
                    notes.append(
                        f"{model} ({kind}): censored (no pass up to N = L - 1) at "
                        f"{f.height - found.height} of {f.height} L"
                    )
            ax.set(xlabel="L", ylabel="N_crit / L")
            title = "Critical N (Theorem 1, KS test)"
        elif claim == "separability":
            median_band(ax, t.sort("N"), "N", "ratio", colour, label(model, runs[model], claim))
            ax.set(xlabel="N (top-N selected)", ylabel="N_s / N (median, IQR band)")
            title = "Geometric separability (Theorem 2)"
        elif claim == "gradient":
            eps = t["eps"].min()
            t = t.filter(pl.col("eps") == eps).sort("T")
            ax.plot(
                t["T"],
                t["g_max_over_heads"],
                "-o",
                color=colour,
                ms=4,
                label=f"{label(model, runs[model], claim)}, eps {eps:g}",
            )
            ax.plot(t["T"], t["jacobian_norm_max"], ":", color=colour, lw=1)
            ax.set(yscale="log", xlabel="temperature T", ylabel="max g over heads")
            title = "Gradient sensitivity (Lemma 2, Corollary 3); dotted: max exact ||J||"
        elif claim == "vanishing":
            median_band(
                ax, t.sort("L"), "L", "max_weight", colour, label(model, runs[model], claim)
            )
            ax.set(yscale="log", xlabel="L", ylabel="largest attention weight (median)")
            title = "Vanishing attention (Lemma 1)"
        elif claim == "distance":
            n = n_fixed[model]
            t = t.filter(pl.col("N") == n).sort("L")
            median_band(
                ax, t, "L", "distance", colour, f"{label(model, runs[model], claim)}, N = {n}"
            )
            ax.set(yscale="log", xlabel="L", ylabel="distance d~ (median)")
            title = "Distance of the selected set (Theorem 1)"
        else:
            raise ValueError(f"unknown claim {claim!r}")
    # The paper's values, once however many models are drawn.
    if claim == "critical_n":
        ax.axhline(0.06, color="0.5", lw=0.8, ls=":", label="paper: N_crit / L = 0.06")
    elif claim == "separability":
        ax.axhspan(0.70, 0.85, color="0.85", alpha=0.5, lw=0, label="paper: 0.70-0.85")
    x_column = {"separability": "N", "gradient": "T"}.get(claim, "L")
    grid = sorted({x for t in tables.values() for x in t[x_column].to_list()})
    if claim == "vanishing":
        lengths = np.array(grid, dtype=float)
        ax.plot(lengths, 1 / lengths, color="0.5", lw=0.8, ls=":", label="1/L (uniform attention)")
    log_axis(ax, "x", grid)
    if ax.get_yscale() == "log":
        log_axis(ax, "y")
    ax.set_title(title, fontsize=9)
    # Below the axes: the labels are long (one per model and line) and would cover the data.
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(0.0, -0.16), frameon=False)
    fig.tight_layout()
    drawn = {
        "critical_n": "points: N_crit / L where the KS test rejects (solid: Monte-Carlo E, dashed: "
        "Theorem 1.2's closed-form term)",
        "gradient": "solid: the largest g over heads at the smallest eps; dotted: the largest exact ||J||",
    }.get(claim, "lines: medians, bands: interquartile ranges")
    caption = f"Models side by side; {drawn}; each model from its own run."
    if claim == "vanishing":
        caption += (
            " Lemma 1 is checked on each (layer, chunk, head)'s analysed row under either protocol, so"
            " two entries of one model coincide."
        )
    if notes:
        caption += " " + "; ".join(notes) + "."
    return fig, caption
