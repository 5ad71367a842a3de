"""Fig. 2: (a) distance vs L at fixed N, (b) vs N at fixed L, (c) critical N vs L
(attnlimits_workflow.assemble.fig2)."""

import json
from pathlib import Path

import polars as pl

from attnlimits_workflow.assemble.fig2 import fig2
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import save_run_figure, use_style

log = job_logger(snakemake, "fig2")
use_style(snakemake.input.style)
run = json.loads(Path(snakemake.input.run).read_text())
# every row analysed: the Monte-Carlo E on mc_rows of them (sampled rows: on every drawn row)
every_row = run.get("protocol") == "all_rows" and run.get("all_rows_rows") in (None, "all")
fig, note = fig2(
    pl.read_csv(snakemake.input.distance),
    pl.read_csv(snakemake.input.critical_n),
    snakemake.params.distance,
    snakemake.params.masked,
    pl.read_parquet(snakemake.input.critical_n_replicates),
    snakemake.params.level,
    snakemake.params.ks_alpha,
    snakemake.params.mc_rows if every_row else None,
)
save_run_figure(fig, snakemake, note)
log.info("fig2 written")
