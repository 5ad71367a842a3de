"""Fig. 4: max finite-difference sensitivity g(T, eps) across heads vs T, the exact Jacobian norm,
and the paper's bound (attnlimits_workflow.assemble.fig4)."""

import json

import polars as pl

from attnlimits_workflow.assemble.fig4 import fig4
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import save_run_figure, use_style

log = job_logger(snakemake, "fig4")
use_style(snakemake.input.style)
fig, note = fig4(pl.read_csv(snakemake.input.gradient), json.load(open(snakemake.input.run)))
save_run_figure(fig, snakemake, note)
log.info("fig4 written")
