"""Fig. 3: N_s/N across heads vs N (boxes) with Theorem 2's bounds and the paper's 0.70-0.85 band
(attnlimits_workflow.assemble.fig3)."""

import json

import polars as pl

from attnlimits_workflow.assemble.fig3 import fig3
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import save_run_figure, use_style

log = job_logger(snakemake, "fig3")
use_style(snakemake.input.style)
fig, note = fig3(
    pl.read_csv(snakemake.input.separability),
    json.load(open(snakemake.input.run)),
    pl.read_parquet(snakemake.input.replicates),
    snakemake.params.level,
    snakemake.params.zero_weight,
)
save_run_figure(fig, snakemake, note)
log.info("fig3 written")
