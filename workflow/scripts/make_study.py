"""The study's answer: table "normalizer x limit" with a verdict per cell, the figure, and
docs/study.md (attnlimits_workflow.assemble.study_report; prose from
workflow/resources/study_template.md, every number from this run)."""

import json
import shutil
from pathlib import Path

import polars as pl

from attnlimits import rules as rule_table
from attnlimits_workflow.assemble import study_effective_set as n_star
from attnlimits_workflow.assemble import study_report as report
from attnlimits_workflow.assemble.study_figure import study_figure
from attnlimits_workflow.assemble.study_prose import fill_template
from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.config_study import untrained_seeds as untrained_seeds_of
from attnlimits_workflow.effective_set import summarise
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import save, use_style
from attnlimits_workflow.study import limit_measures
from attnlimits_workflow.study_limits import ZERO_WEIGHT_ROWS_SHARE
from attnlimits_workflow.study_seeds import (
    seed_measures,
    untrained_comparison,
)
from attnlimits_workflow.tables import write_csv

log = job_logger(snakemake, "study_report")
inp, out, p = snakemake.input, snakemake.output, snakemake.params
models = list(p.models)
if not models:
    raise SystemExit("study.normalizers is empty: no model to train (config/README.md: study)")


trained, seed_of, untrained = dict(p.trained), dict(p.seeds), dict(p.untrained)
seeds = [sd for sd in p.study["seeds"] if sd in set(seed_of.values())]
first = seeds[0]  # the detailed sections (figure, gradient, heads) show the first seed's models


trained_models = [m for m in models if not untrained[m]]


def by_model(paths, read=pl.read_parquet, seed=first, initial=False):
    """Per rule, one input of its model of ``seed``: trained, or untrained when ``initial``
    (study.untrained_seeds). A list with one path per trained model only (coverage, heads,
    N*) is read against those."""
    pool = trained_models if len(paths) == len(trained_models) else models
    return {
        trained[m]: read(path)
        for m, path in zip(pool, paths, strict=True)
        if seed_of[m] == seed and untrained[m] == initial
    }


def read_json(path):
    return json.loads(Path(path).read_text())


tables = ("samples", "critical_n", "separability", "gradient", "coverage", "heads")
study = report.Study(
    **{name: by_model(getattr(inp, name)) for name in tables},
    histories=by_model(inp.histories, pl.read_csv),
    evaluations=by_model(inp.evaluations, read_json),
    timings=by_model(inp.timings, read_json),
    manifests=by_model(inp.models, lambda d: read_json(Path(d) / "attnlimits-model.json")),
    vocab_size=len(read_json(Path(inp.models[0], "tokenizer.json"))["model"]["vocab"]),
    **{k: getattr(p, k) for k in ("n_fixed", "ns_ratio_threshold", "command", "embedding")},
    seed=first,
    models=[m for m in models if seed_of[m] == first and not untrained[m]],
    settings=p.study,
    trained=trained,
    seeds=seeds,
)


def measures_of(seed, initial=False):
    """Per rule, limit_measures of its model of ``seed`` (untrained when ``initial``)."""
    tables = {
        k: by_model(getattr(inp, k), seed=seed, initial=initial)
        for k in ("samples", "critical_n", "separability", "gradient")
    }
    evaluations = by_model(inp.evaluations, read_json, seed=seed, initial=initial)
    out = {}
    for n in study.names:
        rule = rule_table.get(study.rules[n]["kind"])
        out[n] = limit_measures(
            tables["samples"][n],
            tables["critical_n"][n],
            tables["separability"][n],
            evaluations[n],
            tables["gradient"][n],
            study.sink_length,
            jacobian_bounded=rule.jacobian_bound is not None,
        )
        if rule.signed:
            out[n]["sink"] = None  # weights of either sign: no share on a key
    return out


# every seed's measures (limit_measures of each model), then their means and t-intervals
per_seed = {n: [] for n in study.names}
for sd in seeds:
    for n, m in measures_of(sd).items():
        per_seed[n].append(m)
study.per_seed = per_seed
study.over_seeds = seed_measures(
    per_seed, study.baseline, study.ratio, p.study["interval_level"], study.withheld_by
)
# the same comparisons on untrained weights (study.untrained_seeds; the first such seed)
untrained_seeds = [sd for sd in untrained_seeds_of(p.study) if sd in seeds]
if untrained_seeds:
    sd = untrained_seeds[0]
    init_measures = measures_of(sd, initial=True)
    study.untrained = untrained_comparison(
        init_measures, study.baseline, study.ratio, study.withheld_by
    )
    study.untrained_seed = sd
seeds_csv, _ = report.seeds_table(study)
write_csv(seeds_csv, out.seeds_csv)
write_csv(report.per_seed_table(per_seed, seeds), out.per_seed_csv)
table, table_md = report.limits_table(study)
write_csv(table, out.csv)
with atomic_path(out.md) as tmp:
    Path(tmp).write_text(report.limits_markdown(study, table_md))

# N* of every model (its (L, variant) jobs, in effective_set_tables_of's order), over the seeds
n_star_settings = p.study["effective_set"]
error = n_star.held_out_error(
    n_star_settings["windows"],
    max(p.study["evaluation"]["contexts"]),
    min(read_json(e)["held_out_tokens"] for e in inp.evaluations),
)
if error:
    raise SystemExit(error)
summaries, paths = {}, list(inp.effective_set)
for m in trained_models:  # N* of the trained models only
    section, boot = p.effective_set[m], p.bootstrap[m]
    count = len(section["lengths"]) * len(section["variants"])
    jobs, paths = paths[:count], paths[count:]
    summaries[(trained[m], seed_of[m])] = summarise(
        [pl.read_parquet(j) for j in jobs],
        section["tau"],
        boot["resamples"],
        boot["level"],
        p.seed,
        section["max_n"],
    )
n_star_per_seed = n_star.seeds_frame(summaries)
write_csv(n_star_per_seed, out.effective_set_per_seed)
n_star_table = n_star.over_seeds(
    n_star_per_seed,
    study.baseline,
    p.study["interval_level"],
    study.ratio,
    n_star_settings["variants"][0],
)
write_csv(n_star_table, out.effective_set)
tau = p.effective_set[study.models[0]]["tau"]
n_star_fields = {
    "n_star_tau": f"{tau:g}",
    "n_star_level": f"{p.study['interval_level']:.0%}",
    "n_star_windows": str(n_star_settings["windows"]),
    "n_star_longest": str(max(p.study["evaluation"]["contexts"])),
    "n_star_targets": str(n_star_settings["targets"]),
    "n_star_variant": n_star_settings["variants"][0],
    "n_star_table": n_star.markdown(n_star_table),
    "n_star_answer": n_star.answer(
        n_star_table,
        study.baseline,
        {
            n
            for n, ms in per_seed.items()
            if any(m.get("zero_weight_rows", 0.0) > ZERO_WEIGHT_ROWS_SHARE for m in ms)
        },
        p.study["interval_level"],
    ),
}

use_style(inp.style)
fig, caption = study_figure(study)
save(fig, out.pdf, out.png, caption)
try:
    page = fill_template(
        Path(inp.template).read_text(), report.page_fields(study, table_md) | n_star_fields
    )
except KeyError as missing:
    raise SystemExit(missing.args[0]) from None
with atomic_path(Path(out.figures)) as tmp:
    tmp.mkdir()
    shutil.copy(out.png, tmp / "normalizer_limits.png")
with atomic_path(out.page) as tmp:
    Path(tmp).write_text(page)
log.info("wrote %s, %s and %s", out.md, out.png, out.page)
