"""Figure helpers: style, caption line and atomic PDF+PNG output."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .atomic import atomic_path  # noqa: E402

# No creation or modification date in the files, so two runs give byte-identical figures.
FIXED_METADATA = {"pdf": {"CreationDate": None, "ModDate": None}, "png": {}}


def use_style(path: str | Path) -> None:
    plt.style.use(str(path))


def log_axis(ax, axis: str, ticks=None) -> None:
    """A log ``axis`` ("x" or "y") labelled with plain numbers, at ``ticks`` when given, and no
    minor labels: matplotlib's default labels the minor ticks of a short log axis "3x10^1 4x10^1",
    which run into each other."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    scale = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    if ticks is not None:
        (ax.set_xticks if axis == "x" else ax.set_yticks)([float(t) for t in ticks])
    # "%g": 0.001, 0.00316, 31.6, 1024 (a ScalarFormatter rounds 0.001 and 0.00316 to "0.00")
    scale.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    scale.set_minor_formatter(NullFormatter())


def protocol_text(run: dict, analysed_rows: bool = False) -> str:
    """Which protocol produced the numbers, in a caption's words. ``analysed_rows``: the figure
    is one of those that always use the analysed rows (beyond the paper, Lemma 1)."""
    if analysed_rows and run.get("protocol") == "all_rows":
        return (
            "the analysed row of each (layer, chunk, head), as every beyond-the-paper analysis "
            "uses whatever analysis.protocol (this run's paper analyses: every query row)"
        )
    if run.get("protocol") == "all_rows":
        masked = (
            ""  # an encoder's rows see every key
            if not run.get("causal", True)
            else "; a causal row's masked keys count as non-selected"
            if run["masked"] == "non_selected"
            else "; a causal row counts only its visible keys"
        )
        used = run.get("all_rows_chunks", run["chunks"])
        sequences = "the first chunk" if used == 1 else f"the first {used} chunks"
        drawn = run.get("all_rows_rows", "all")
        if drawn in (None, "all"):
            return (
                f"paper's protocol (Appendix B): every query row of {sequences}, mean over rows, "
                f"one value per (layer, head): {run['heads_per_L']} per L{masked}"
            )
        return (
            f"paper's protocol (Appendix B) on sampled rows: where L > {drawn}, {drawn} query rows "
            f"of {sequences} per head (the first {int(drawn) // 2} and the last kept, the rest "
            f"drawn at random between; analysis.all_rows.rows), their weighted mean one estimate "
            f"per (layer, head), its row-sampling standard error in the tables' _se columns and "
            f"inside the bootstrap intervals of means and medians over heads (not of maxima, nor "
            f"of the critical N, which leans low); checks count the analysed rows; every row "
            f"where L <= {drawn}: {run['heads_per_L']} per L{masked}"
        )
    return f"last-row protocol: the analysed row of each (layer, chunk, head), {run['samples_per_L']} samples per L"


def run_caption(run_json: str | Path, extra: str = "", analysed_rows: bool = False) -> str:
    run = json.loads(Path(run_json).read_text())
    weights = " (seeded random weights)" if run["weights"] == "random_init" else ""
    text = (
        f"{run['model']}{weights}, {run['layers']} layers x {run['heads']} heads; corpus {run['corpus']}, "
        f"{run['chunks']} chunks of {run['chunk_length']} tokens; {protocol_text(run, analysed_rows)} "
        f"(x_i = {run['embedding']} vectors)"
    )
    return f"{text}. {extra}" if extra else text


def save(fig, pdf: str | Path, png: str | Path, caption: str, caption_y: float = -0.02) -> None:
    fig.text(0.01, caption_y, caption, ha="left", va="top", fontsize=7, wrap=True, color="0.3")
    for path, fmt in ((pdf, "pdf"), (png, "png")):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, metadata=FIXED_METADATA[fmt])
    plt.close(fig)


def save_run_figure(fig, snakemake, extra: str = "", analysed_rows: bool = False) -> None:
    """Save a rule's figure to its ``pdf`` and ``png`` outputs, captioned with the run description
    (its ``run`` input) followed by ``extra``; ``analysed_rows`` as in :func:`protocol_text`."""
    caption = run_caption(snakemake.input.run, extra, analysed_rows)
    save(fig, snakemake.output.pdf, snakemake.output.png, caption)
