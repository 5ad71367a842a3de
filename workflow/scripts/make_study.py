"""The study's answer: table "normaliser x limit" with a verdict per cell, the figure, and
docs/study.md (prose from workflow/resources/study_template.md, every number from this run)."""

import json
import re
import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.ticker import NullFormatter, ScalarFormatter

from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import save, use_style
from attnlimits_workflow.study import LIMITS, gradient_bound, limit_measures, verdict
from attnlimits_workflow.tables import markdown_table, write_csv

log = job_logger(snakemake, "study_report")
inp, out, p = snakemake.input, snakemake.output, snakemake.params
study = p.study
models = list(p.models)
if not models:
    raise SystemExit("study.normalizers is empty: no model to train (config/README.md: study)")
names = [m.removeprefix("study-") for m in models]
rules = {n: study["normalizers"][n] for n in names}
baseline = study["baseline"]
ratio = study["relax_ratio"]


def by_model(paths, read):
    return {n: read(path) for n, path in zip(names, paths, strict=True)}


samples = by_model(inp.samples, pl.read_parquet)
critical = by_model(inp.critical_n, pl.read_parquet)
separability = by_model(inp.separability, pl.read_parquet)
histories = by_model(inp.histories, pl.read_csv)
evaluations = by_model(inp.evaluations, lambda f: json.loads(Path(f).read_text()))
timings = by_model(inp.timings, lambda f: json.loads(Path(f).read_text()))
manifests = by_model(
    inp.models, lambda d: json.loads((Path(d) / "attnlimits-model.json").read_text())
)
measures = {
    n: limit_measures(samples[n], critical[n], separability[n], evaluations[n]) for n in names
}
l_max = int(samples[names[0]]["L"].max())
n_max = int(separability[names[0]]["N"].max())
contexts = sorted(c["context"] for c in evaluations[names[0]]["contexts"])
tail_percent = f"{study['evaluation']['tail_fraction']:.0%}"
headers = {
    k: t.format(l_max=l_max, n_max=n_max, c_max=f"{contexts[-1]} tokens") for k, t in LIMITS.items()
}


def rule_text(rule):
    params = ", ".join(f"{k}={v:g}" for k, v in rule.items() if k != "kind")
    return f"{rule['kind']}({params})" if params else rule["kind"]


def bound_check(n):
    bound = gradient_bound(rules[n])
    norms = samples[n]["jacobian_norm"].to_numpy()
    if bound is None:
        return "no known bound", None
    over = int((norms > bound * (1 + 1e-9)).sum())
    return f"{over} of {norms.size} rows above {bound:g}", over


rows, csv_rows = [], []
for n in names:
    m, base = measures[n], measures[baseline]
    cells, record = [], {"normalizer": n, "rule": rule_text(rules[n])}
    for key in LIMITS:
        v = "baseline" if n == baseline else verdict(m[key], base[key], ratio)
        shown = "n/a" if m[key] is None else f"{m[key]:.3g}"
        cells.append(f"{v} ({shown})")
        record[f"{key}"] = m[key]
        record[f"{key}_verdict"] = v
    text, over = bound_check(n)
    record.update(
        {
            "max_weight_slope_in_L": m["vanishing_slope"],
            "critical_n_lengths": m["distance_lengths"],
            "gradient_bound_violations": over,
            "perplexity_at_training_context": m["perplexity"],
            "perplexity_at_longest_context": m["perplexity_longest"],
            "tail_perplexity_at_training_context": m["tail_perplexity"],
            "tail_perplexity_at_longest_context": m["tail_perplexity_longest"],
            "final_training_loss": float(histories[n]["loss"][-1]),
        }
    )
    csv_rows.append(record)
    rows.append(
        [
            n,
            rule_text(rules[n]),
            f"{m['perplexity']:.1f}",
            *cells,
            f"{m['vanishing_slope']:.2f}",
            text,
        ]
    )
columns = [
    "normaliser",
    "rule",
    f"held-out ppl @ {contexts[0]}",
    *headers.values(),
    "max-weight slope in L",
    "||J|| bound",
]
table_md = markdown_table(columns, rows)
write_csv(pl.DataFrame(csv_rows), out.csv)
with atomic_path(out.md) as tmp:
    Path(tmp).write_text(
        f"Normaliser x limit on the study's trained models (verdicts against {baseline}, "
        f"ratio {ratio:g}; docs/study.md)\n\n{table_md}"
    )


# ------------------------------------------------------------------------------------- figure
def log_axis(ax, axis, ticks=None):
    """A log axis labelled with plain numbers (at ``ticks`` when given), no minor labels."""
    scale = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    if ticks is not None:
        (ax.set_xticks if axis == "x" else ax.set_yticks)(list(ticks))
    scale.set_major_formatter(ScalarFormatter())
    scale.set_minor_formatter(NullFormatter())


use_style(inp.style)
fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), constrained_layout=True)
colors = plt.get_cmap("tab10")
markers = "osD^v<>px"
style = {
    n: dict(color=colors(i % 10), marker=markers[i % len(markers)], ms=4, label=n)
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
)
ax = axes[0, 2]
for n in names:
    per_l = samples[n].group_by("L").agg(pl.col("max_weight").median()).sort("L")
    ax.plot(per_l["L"], per_l["max_weight"], **style[n])
ls = np.array(sorted(samples[names[0]]["L"].unique()))
ax.plot(ls, 1.0 / ls, color="0.5", ls="--", lw=1, label="1/L")
log_axis(ax, "x", ls)
ax.set(
    yscale="log",
    xlabel="context length L",
    ylabel="median max weight",
    title="(c) vanishing attention (Lemma 1)",
)
ax = axes[1, 0]
for n in names:
    c = critical[n].drop_nulls("N_crit").sort("L")
    ax.plot(c["L"], c["N_crit"] / c["L"], **style[n])
log_axis(ax, "x", ls)
ax.set(
    xlabel="context length L",
    ylabel="N_crit / L",
    title="(d) distance collapse: KS critical N / L",
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
    title=f"(e) separability (Thm 2) at L = {sep_l}",
    ylim=(0, 1.02),
)
ax = axes[1, 2]
for n in names:
    g = samples[n].group_by("L").agg(pl.col("jacobian_norm").median()).sort("L")
    ax.plot(g["L"], g["jacobian_norm"], **style[n])
log_axis(ax, "x", ls)
ax.set(
    yscale="log",
    xlabel="context length L",
    ylabel="median ||d weights / d logits||",
    title="(f) gradient (Lemma 2)",
)
handles, labels = axes[0, 2].get_legend_handles_labels()
fig.legend(handles, labels, loc="outside right center", fontsize=8)
arch = study["architecture"]
tr = study["training"]
first = samples[names[0]]
caption = (
    f"Study models: Llama, {arch['layers']} layers x {arch['heads']} heads "
    f"({arch['kv_heads']} KV), d={arch['hidden_size']}, identical but for the attention rule; "
    f"{tr['steps']} steps of {tr['batch_size']} x {tr['context']} tokens, seed {p.seed}. "
    f"(c)-(f): each model's own attention on held-out chunks, analysed row of each (layer, "
    f"chunk, head): {first.filter(pl.col('L') == l_max).height} rows per L; N = "
    f"{p.n_fixed[models[0]]} for (d)."
)
save(fig, out.pdf, out.png, caption)


# ---------------------------------------------------------------------------------- docs page
def answer(key):
    found = {"relaxes": [], "tightens": [], "no change": [], "not measured": []}
    for r in csv_rows:
        if r["normalizer"] != baseline:
            found[r[f"{key}_verdict"]].append(
                f"{r['normalizer']} ({r[key]:.3g})" if r[key] is not None else r["normalizer"]
            )
    base = measures[baseline][key]
    parts = [
        f"**{headers[key]}** -- {baseline}: {base:.3g}."
        if base is not None
        else f"**{headers[key]}**."
    ]
    for v in ("relaxes", "tightens", "no change", "not measured"):
        if found[v]:
            parts.append(f"{v.capitalize()}: {', '.join(found[v])}.")
    return " ".join(parts)


tok = json.loads(Path(inp.models[0], "tokenizer.json").read_text())
setup_rows = [
    [
        n,
        rule_text(rules[n]),
        f"{manifests[n]['parameters']:,}",
        f"{timings[n]['seconds']:.0f} s",
        f"{timings[n]['tokens_per_s']:,.0f}",
        f"{float(histories[n]['loss'][-1]):.3f}",
        " / ".join(
            f"{c['perplexity']:.1f} ({c['tail_perplexity']:.1f})"
            for c in sorted(evaluations[n]["contexts"], key=lambda c: c["context"])
        ),
    ]
    for n in names
]
fields = {
    "command": p.command,
    "vocab_size": str(len(tok["model"]["vocab"])),
    "training_tokens": f"{manifests[names[0]]['training_tokens']:,}",
    "held_out_tokens": f"{manifests[names[0]]['held_out_tokens']:,}",
    "architecture": (
        f"{arch['layers']} layers, {arch['heads']} heads ({arch['kv_heads']} KV heads), "
        f"d = {arch['hidden_size']}, MLP {arch['intermediate_size']}, RoPE (theta "
        f"{arch['rope_theta']:g}), {arch['max_positions']} positions"
    ),
    "budget": (
        f"{tr['steps']} steps x {tr['batch_size']} windows x {tr['context']} tokens = "
        f"{tr['steps'] * tr['batch_size'] * tr['context']:,} tokens, AdamW (lr "
        f"{tr['learning_rate']:g}, warm-up {tr['warmup_steps']}, cosine), seed {p.seed}"
    ),
    "training_table": markdown_table(
        [
            "normaliser",
            "rule",
            "parameters",
            "training time",
            "tokens/s",
            "final training loss",
            "held-out ppl (last " + tail_percent + ") @ " + " / ".join(map(str, contexts)),
        ],
        setup_rows,
    ),
    "table": table_md,
    "baseline": baseline,
    "ratio": f"{ratio:g}",
    "answers": "\n".join(f"- {answer(k)}" for k in LIMITS),
    "l_max": str(l_max),
    "contexts": " / ".join(map(str, contexts)),
    "tail_percent": tail_percent,
    "evaluation_tokens": f"{contexts[-1] * evaluations[names[0]]['contexts'][-1]['windows']:,}",
}


def fill(match):
    key = match.group(1)
    if key not in fields:
        raise SystemExit(f"study template: unknown field [[{key}]]")
    return fields[key]


page = re.sub(r"\[\[([a-z_]+)\]\]", fill, Path(inp.template).read_text())
figures = Path(out.figures)
with atomic_path(figures) as tmp:
    tmp.mkdir()
    shutil.copy(out.png, tmp / "normalizer_limits.png")
with atomic_path(out.page) as tmp:
    Path(tmp).write_text(page)
log.info("wrote %s, %s and %s", out.md, out.png, out.page)
