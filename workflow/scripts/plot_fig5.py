"""Fig. 5: the paper's diagnostics under other normalizers of the same logits, one line each
(attnlimits_workflow.assemble.fig5)."""

import polars as pl

from attnlimits_workflow.assemble.fig5 import fig5
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import save_run_figure, use_style

log = job_logger(snakemake, "fig5")
use_style(snakemake.input.style)
by_length = pl.read_csv(snakemake.input.by_length)
fig, note = fig5(by_length, pl.read_csv(snakemake.input.separability))
save_run_figure(fig, snakemake, note, analysed_rows=True)
log.info("fig5 written: %d normalizers", by_length["normalizer"].n_unique())
