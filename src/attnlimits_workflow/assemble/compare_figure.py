"""One claim of the paper with every configured model side by side (figures/compare/<claim>.pdf).

Each model's line comes from its own summary table and is labelled from its own recorded run
description (results/<model>/summary/run.json), so the figure says what each run was. Where the
model's bootstrap replicates of that summary are given (results/<model>/summary/<claim>_replicates
.parquet), an error bar per point draws the analysis.bootstrap.level percentile interval of the
plotted quantity, from the resamples Table 1's intervals are drawn from."""

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.figure import Figure

from ..plotting import log_axis
from .claims import MAXIMUM_CAVEAT
from .replicates import critical_n_band, percentile_band

# Per claim: the replicate column whose interval is drawn, and its name in the caption.
INTERVAL_OF = {
    "separability": ("ratio_median", "the median N_s / N"),
    "vanishing": ("max_weight_median", "the median largest weight"),
    "distance": ("distance_median", "the median distance d~"),
    "gradient": ("g_max_over_heads", "the largest g over heads"),
    "critical_n": ("N_crit", "N_crit / L, the search rerun on each resample"),
}
# Error bars of neighbouring entries sit this many decades apart along the (log) x axis, so ten
# entries at one x stay apart; more entries share DODGE_SPAN (+-0.055 decades: +-13 %, within a
# fifth of a factor 2 grid step, so a bar stays by its point).
DODGE_DECADES = 0.012
DODGE_SPAN = 0.11


def label(model: str, run: dict, claim: str) -> str:
    """A model's legend entry: its name, weights, heads and which rows it reads."""
    weights = "random weights" if run["weights"] == "random_init" else "trained"
    # Lemma 1's check reads the analysed row under either protocol (docs/protocols.md)
    every_row = run["protocol"] == "all_rows" and claim != "vanishing"
    rows = "every row" if every_row else "analysed row"
    return f"{model} ({weights}; {run['layers']}x{run['heads']} heads; {rows}; {run['corpus']})"


def median_band(
    ax,
    t: pl.DataFrame,
    x: str,
    value: str,
    colour: str,
    text: str,
    style: str = "-o",
    filled: bool = True,
) -> None:
    """One model's median line with its interquartile band (open markers unless ``filled``)."""
    mfc = colour if filled else "none"
    ax.plot(t[x], t[f"{value}_median"], style, color=colour, mfc=mfc, ms=4, label=text)
    ax.fill_between(t[x], t[f"{value}_q25"], t[f"{value}_q75"], color=colour, alpha=0.15, lw=0)


def dodge(x: np.ndarray, slot: int, slots: int) -> np.ndarray:
    """``x`` shifted along a log axis for entry ``slot`` of ``slots`` (centred: one slot is
    not shifted)."""
    step = min(DODGE_DECADES, DODGE_SPAN / max(slots - 1, 1))
    return np.asarray(x, dtype=float) * 10 ** (step * (slot - (slots - 1) / 2))


def interval_bars(
    ax, band: pl.DataFrame, x: str, colour: str, slot: int, slots: int, ceiling: float = np.inf
) -> bool:
    """One entry's percentile intervals (``band``: x, low, high) as capped error bars from low
    to high at its dodged x; a high above ``ceiling`` is drawn up to it. Whether one was."""
    band = band.filter(pl.col("low").is_finite())
    if band.height == 0:
        return False
    low = band["low"].to_numpy()
    high = np.minimum(band["high"].to_numpy(), ceiling)
    ax.errorbar(
        dodge(band[x].to_numpy(), slot, slots),
        low,
        yerr=[np.zeros_like(low), high - low],
        fmt="none",
        ecolor=colour,
        elinewidth=1.0,
        capsize=2.5,
        alpha=0.9,
    )
    return True


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
    replicates: dict[str, pl.DataFrame] | None = None,
    level: dict[str, float] | None = None,
    units: dict[str, str] | None = None,
) -> tuple[Figure, str]:
    """The figure and its caption for ``claim``: per model (``tables``: its summary of the
    claim, in drawing order) one line; ``ks_alpha`` and ``n_fixed`` are the models' settings;
    ``replicates``: per model its bootstrap replicates of the summary (empty or absent: no
    interval drawn), whose ``level`` (analysis.bootstrap.level) percentile interval of the
    plotted quantity each point's error bar draws."""
    models = list(tables)
    replicates = replicates or {}
    level = level or {}
    column, quantity = INTERVAL_OF.get(claim, (None, None))
    # (level, resamples) of each model whose intervals are drawn
    intervals: dict[str, tuple[float, int]] = {}
    open_top = False
    slots = len(models) * (2 if claim == "critical_n" else 1)

    def reps_of(model: str) -> pl.DataFrame | None:
        r = replicates.get(model)
        return None if r is None or r.height == 0 or column not in r.columns else r

    def draw_interval(model: str, reps: pl.DataFrame, x: str, slot: int, colour: str, **kw) -> None:
        band = percentile_band(reps, (x,), column, level[model])
        if interval_bars(ax, band, x, colour, slot, slots, **kw):
            intervals[model] = (level[model], reps["replicate"].n_unique())

    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    # room below the axes for the legend: two entries per model for critical N
    per_model = 0.36 if claim == "critical_n" else 0.22
    fig, ax = plt.subplots(figsize=(6.4, 3.4 + per_model * len(models)))

    notes = []
    colour_of, text_of = colours_and_texts(runs)
    several_texts = len(set(text_of.values())) > 1
    for index, model in enumerate(models):
        t, colour = tables[model], colours[colour_of[model] % len(colours)]
        reps = reps_of(model) if column is not None else None
        line = ("-", "--", ":", "-.")[text_of[model] % 4]
        marker = ("o", "^", "s", "v")[text_of[model] % 4]
        filled = text_of[model] == 0  # the first text's markers filled, the next texts' open
        if claim == "critical_n":
            # the reading of a causal row's masked keys the model's figures draw (an encoder: "both")
            reading = [runs[model].get("masked", "non_selected"), "both"]
            # the expectation by line style, the text by marker
            for k, (kind, style) in enumerate((("monte_carlo", "-"), ("closed_form", "--"))):
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
                        mfc=colour if filled else "none",
                        ms=4,
                        label=f"{label(model, runs[model], claim)}: {'MC E' if kind == 'monte_carlo' else 'Thm 1.2 term'}",
                    )
                    if "N_crit_low" in found.columns:
                        # the first pass is known to its list cell (review 41)
                        cells = found.filter(pl.col("N_crit_low") < pl.col("N_crit"))
                        ax.vlines(
                            cells["L"],
                            cells["N_crit_low"] / cells["L"],
                            cells["N_crit_over_L"],
                            color=colour,
                            lw=0.8,
                        )
                r = (
                    None
                    if reps is None
                    else reps.filter(
                        pl.col("masked").is_in(reading)
                        & (pl.col("expectation") == kind)
                        & pl.col("L").is_in(f["L"].implode())
                    )
                )
                if r is not None and r.height:
                    # as Fig. 2c: a censored resample's N_crit is above its top N (+inf); a bar
                    # that reaches it is drawn up to N_crit / L = 1 (N_crit <= L always)
                    band = critical_n_band(r, level[model]).with_columns(
                        pl.col("low", "high") / pl.col("L")
                    )
                    if interval_bars(ax, band, "L", colour, 2 * index + k, slots, ceiling=1.0):
                        intervals[model] = (level[model], r["replicate"].n_unique())
                        open_top = open_top or bool(np.isinf(band["high"].to_numpy()).any())
                if found.height < f.height:
                    notes.append(
                        f"{model} ({kind}): censored (no pass up to N = L - 1) at "
                        f"{f.height - found.height} of {f.height} L"
                    )
            # log: a bar drawn up to 1 (censored resamples) would flatten the points near 0.06
            ax.set(yscale="log", xlabel="L", ylabel="N_crit / L")
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
                filled,
            )
            if reps is not None:
                draw_interval(model, reps, "N", index, colour)
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
                mfc=colour if filled else "none",
                ms=4,
                label=f"{label(model, runs[model], claim)}, eps {eps:g}",
            )
            ax.plot(t["T"], t["jacobian_norm_max"], ":", color=colour, lw=1)
            if reps is not None:
                draw_interval(model, reps.filter(pl.col("eps") == eps), "T", index, colour)
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
                filled,
            )
            if reps is not None:
                draw_interval(model, reps, "L", index, colour)
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
                filled,
            )
            if reps is not None:
                draw_interval(model, reps.filter(pl.col("N") == n), "L", index, colour)
            ax.set(yscale="log", xlabel="L", ylabel="distance d~ (median)")
            title = "Distance of the selected set (Theorem 1)"
        else:
            raise ValueError(f"unknown claim {claim!r}")
    # The paper's values, once however many models are drawn.
    if claim == "critical_n":
        ax.axhline(0.06, color="0.5", lw=0.8, ls=":", label="paper: N_crit / L = 0.06")
    elif claim == "separability":
        ax.axhspan(0.70, 0.85, color="0.85", alpha=0.5, lw=0, label="paper: 0.70-0.85")
    if intervals:
        # one grey key for every model's bars (their colour is the model's)
        levels = {lvl for lvl, _ in intervals.values()}
        percent = f"{100 * levels.pop():g} % " if len(levels) == 1 else ""
        ax.plot([], [], "|", color="0.3", ms=9, mew=1.0, label=f"bars: {percent}bootstrap interval")
    if claim in ("separability", "vanishing", "distance"):
        ax.fill_between([], [], [], color="0.3", alpha=0.15, lw=0, label="bands: IQR across heads")
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
        "critical_n": "points: N_crit / L, the first N of Algorithm 3's list where the KS test "
        "does not reject, drawn at its list cell's top with a bar down to the cell's least N "
        "(solid: Monte-Carlo E, dashed: Theorem 1.2's closed-form term); intervals over the "
        "resamples' cells",
        "gradient": "solid: the largest g over heads at the smallest eps; dotted: the largest exact ||J||",
    }.get(claim, "lines: medians, bands: interquartile ranges")
    caption = f"Models side by side; {drawn}; each model from its own run."
    if several_texts and claim == "critical_n":  # the line style is the expectation's here
        caption += (
            " One colour per model; its text by marker (filled circles: the first text; open "
            "triangles: the next)."
        )
    elif several_texts:
        caption += (
            " One colour per model; its text by line style and marker (solid, filled: the first "
            "text; dashed, open: the next)."
        )
    if claim == "vanishing":
        caption += (
            " Lemma 1 is checked on each (layer, chunk, head)'s analysed row under either protocol, so"
            " two entries of one model coincide."
        )
    if intervals:
        caption += " " + interval_caption(claim, quantity, intervals, slots > 1, open_top, units)
    # an empty replicate table, or none at the points drawn
    without = [m for m in models if m not in intervals]
    if column is not None and without:
        caption += (
            " Drawn without interval (no bootstrap replicates of the points drawn): "
            f"{', '.join(without)}."
        )
    if notes:
        caption += " " + "; ".join(notes) + "."
    return fig, caption


def interval_caption(
    claim: str,
    quantity: str,
    intervals: dict[str, tuple[float, int]],
    dodged: bool,
    open_top: bool,
    units: dict[str, str] | None = None,
) -> str:
    """The caption's sentence on the error bars: which interval, at what level over how many
    resamples, resampling what (``units``: each model's analysis.bootstrap.unit; per model
    where the models differ)."""
    settings = set(intervals.values())
    if len(settings) == 1:
        ((lvl, n),) = settings
        how = f"{100 * lvl:g} % percentile bootstrap interval over {n} resamples"
    else:
        how = (
            "percentile bootstrap interval ("
            + "; ".join(
                f"{m}: {100 * lvl:g} % over {n} resamples" for m, (lvl, n) in intervals.items()
            )
            + ")"
        )
    resampled = (
        # the critical N's replicates redraw the KS test's units (analyses.critical_n.unit_draws)
        {
            "head": "its KS test's units one by one (a head's mean under all_rows, a row under "
            "last_row; the chunks held fixed)",
            "layer": "whole layers (the chunks held fixed)",
        }
        if claim == "critical_n"
        else {
            "head": "heads (and chunks)",
            "layer": "layers (every head of a drawn layer together) and the chunks",
        }
    )
    kinds = {m: (units or {}).get(m, "head") for m in intervals}
    if len(set(kinds.values())) <= 1:
        what = f"each model's {resampled[next(iter(kinds.values()), 'head')]}"
    else:
        what = "; ".join(f"{m}: {resampled[u]}" for m, u in kinds.items())
    text = (
        f"Error bars (in the model's colour): the {how} of {quantity}, resampling {what} "
        "(analysis.bootstrap)"
    )
    if claim != "gradient" and claim != "critical_n":
        text += "; shaded bands: interquartile ranges across heads, not intervals"
    if claim == "gradient":
        text += f"; {MAXIMUM_CAVEAT}"
    if claim == "critical_n" and open_top:
        text += "; a bar drawn up to 1 holds censored resamples (N_crit above their top N)"
    if dodged:
        text += "; bars shifted slightly along x per entry so that they stay apart"
    return text + "."
