"""One claim of the paper with every configured model side by side (figures/compare/<claim>.pdf;
attnlimits_workflow.assemble.compare_figure), each model's points with their bootstrap intervals
(summary/<claim>_replicates.parquet)."""

import json

import polars as pl

from attnlimits_workflow.assemble.compare_figure import compare_figure
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import save, use_style

log = job_logger(snakemake, "compare")
use_style(snakemake.input.style)
claim = snakemake.wildcards.claim
models = list(snakemake.params.models)
tables = {m: pl.read_csv(p) for m, p in zip(models, snakemake.input.summaries, strict=True)}
replicates = {
    m: pl.read_parquet(p) for m, p in zip(models, snakemake.input.replicates, strict=True)
}
runs = {m: json.load(open(p)) for m, p in zip(models, snakemake.input.runs, strict=True)}
p = snakemake.params
fig, caption = compare_figure(
    claim, tables, runs, p.ks_alpha, p.n_fixed, replicates, p.level, p.unit
)
save(fig, snakemake.output.pdf, snakemake.output.png, caption)
log.info("%s: %d models", claim, len(models))
