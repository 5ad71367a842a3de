"""Per-head saturation report: tables/heads.csv with the paper's diagnostic flags, and heatmaps
(layers x heads) (attnlimits_workflow.assemble.heads_report)."""

import polars as pl

from attnlimits_workflow.assemble.heads_report import flag_heads, heads_figure
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import save_run_figure, use_style
from attnlimits_workflow.tables import write_csv

log = job_logger(snakemake, "heads")
use_style(snakemake.input.style)
p = snakemake.params
heads = flag_heads(
    pl.read_parquet(snakemake.input.heads), p.ns_ratio_threshold, p.temperature_threshold
)
write_csv(heads, snakemake.output.csv)
fig, note = heads_figure(heads, p.ns_ratio_threshold, p.temperature_threshold)
save_run_figure(fig, snakemake, note, analysed_rows=True)
log.info("heads: %d of %d flagged", int(heads["saturated"].sum()), heads.height)
