"""docs/findings.md: what the paper's claims look like on the configured models, from this run's
run descriptions, configs and cross-model scorecard (attnlimits_workflow.assemble.findings)."""

import json
import shutil
from pathlib import Path

import polars as pl
import yaml

from attnlimits_workflow.assemble.findings import MissingCell, findings_page
from attnlimits_workflow.assemble.findings_functional import functional_section
from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.jobs import job_logger

log = job_logger(snakemake, "findings")
inp, out = snakemake.input, snakemake.output
models = list(snakemake.params.models)
runs = {m: json.load(open(p)) for m, p in zip(models, inp.runs, strict=True)}
configs = {m: yaml.safe_load(open(p)) for m, p in zip(models, inp.configs, strict=True)}
score = pl.read_csv(inp.scorecard)
readings = {
    m: pl.read_csv(p, infer_schema_length=None)
    for m, p in zip(snakemake.params.read_models, inp.readings, strict=True)
}
figures = Path(out.figures)
figures.mkdir(parents=True, exist_ok=True)
for png in inp.figures:
    shutil.copyfile(png, figures / Path(png).name)
n_star_models = list(snakemake.params.n_star_models)
for m, png in zip(n_star_models, inp.effective_set_figures, strict=True):
    shutil.copyfile(png, figures / f"{m}.effective_set.png")
functional = functional_section(
    {m: pl.read_csv(t) for m, t in zip(n_star_models, inp.effective_set, strict=True)},
    {m: pl.read_csv(t) for m, t in zip(n_star_models, inp.effective_set_correlations, strict=True)},
    dict(snakemake.params.tau),
)
try:
    page = findings_page(
        Path(inp.template).read_text(),
        score,
        runs,
        configs,
        snakemake.params.command,
        readings,
        functional,
    )
except MissingCell as missing:
    raise SystemExit(str(missing)) from None
with atomic_path(out.page) as tmp:
    Path(tmp).write_text(page)
log.info("findings page: %d models, %d claims", len(models), score.height)
