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
    return f"{model} ({weights}; {run['layers']}x{run['heads']} heads; {rows}; {run['corpus']})"


def median_band(
    ax, t: pl.DataFrame, x: str, value: str, colour: str, text: str, style: str = "-o"
) -> None:
    """One model's median line with its interquartile band."""
    ax.plot(t[x], t[f"{value}_median"], style, color=colour, ms=4, label=text)
    ax.fill_between(t[x], t[f"{value}_q25"], t[f"{value}_q75"], color=colour, alpha=0.15, lw=0)


# What makes two entries one model: all of a run description but its name and its text.
SAME_MODEL = ("model_type", "weights", "layers", "heads", "protocol", "chunk_length", "chunks")


def colours_and_texts(runs: dict[str, dict]) -> tuple[dict[str, int], dict[str, int]]:
    """Per entry, the colour index of its model (entries that differ only in their text share
    one) and the index of its text among the run's texts (solid lines for the first text, dashed
    for the next; config/findings.yaml reads each model on two texts)."""
    models: list[tuple] = []
    texts: list[str] = []
    colour, text = {}, {}
    for m, run in runs.items():
        key = tuple(run.get(k) for k in SAME_MODEL)
        if key not in models:
            models.append(key)
        corpus = run.get("corpus", "")
        if corpus not in texts:
            texts.append(corpus)
        colour[m], text[m] = models.index(key), texts.index(corpus)
    return colour, text


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
    colour_of, text_of = colours_and_texts(runs)
    several_texts = len(set(text_of.values())) > 1
    for model in models:
        t, colour = tables[model], colours[colour_of[model] % len(colours)]
        line = ("-", "--", ":", "-.")[text_of[model] % 4]
        marker = ("o", "^", "s", "v")[text_of[model] % 4]
        if claim == "critical_n":
            # the reading of a causal row's masked keys the model's figures draw (an encoder: "both")
            reading = [runs[model].get("masked", "non_selected"), "both"]
            # the expectation by line style, the text by marker
            for kind, style in (("monte_carlo", "-"), ("closed_form", "--")):
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
                        style + marker,
                        color=colour,
                        mfc=colour if text_of[model] == 0 else "none",
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
            median_band(
                ax,
                t.sort("N"),
                "N",
                "ratio",
                colour,
                label(model, runs[model], claim),
                line + marker,
            )
            ax.set(xlabel="N (top-N selected)", ylabel="N_s / N (median, IQR band)")
            title = "Geometric separability (Theorem 2)"
        elif claim == "gradient":
            eps = t["eps"].min()
            t = t.filter(pl.col("eps") == eps).sort("T")
            ax.plot(
                t["T"],
                t["g_max_over_heads"],
                line + marker,
                color=colour,
                ms=4,
                label=f"{label(model, runs[model], claim)}, eps {eps:g}",
            )
            ax.plot(t["T"], t["jacobian_norm_max"], ":", color=colour, lw=1)
            ax.set(yscale="log", xlabel="temperature T", ylabel="max g over heads")
            title = "Gradient sensitivity (Lemma 2, Corollary 3); dotted: max exact ||J||"
        elif claim == "vanishing":
            median_band(
                ax,
                t.sort("L"),
                "L",
                "max_weight",
                colour,
                label(model, runs[model], claim),
                line + marker,
            )
            ax.set(yscale="log", xlabel="L", ylabel="largest attention weight (median)")
            title = "Vanishing attention (Lemma 1)"
        elif claim == "distance":
            n = n_fixed[model]
            t = t.filter(pl.col("N") == n).sort("L")
            median_band(
                ax,
                t,
                "L",
                "distance",
                colour,
                f"{label(model, runs[model], claim)}, N = {n}",
                line + marker,
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
    if several_texts:
        caption += (
            " One colour per model; its text by line style and marker (solid, filled: the first "
            "text; dashed, open: the next)."
        )
    if claim == "vanishing":
        caption += (
            " Lemma 1 is checked on each (layer, chunk, head)'s analysed row under either protocol, so"
            " two entries of one model coincide."
        )
    if notes:
        caption += " " + "; ".join(notes) + "."
    return fig, caption
