"""Small summary tables (per L / N / T aggregates, critical N) and bound-violation counts for one
analysis (attnlimits_workflow.assemble.summaries); the figure and table rules read only these."""

import polars as pl

from attnlimits_workflow.assemble.summaries import SUMMARIES
from attnlimits_workflow.jobs import Timer, job_logger, write_table

log = job_logger(snakemake, "summarise")
timer = Timer()
frames = {
    name: pl.concat([pl.read_parquet(p) for p in paths], how="vertical_relaxed")
    for name, paths in snakemake.input.items()
}
for name, table in SUMMARIES[snakemake.params.kind](**frames).items():
    write_table(table, getattr(snakemake.output, name))
log.info("%s summary written in %s", snakemake.params.kind, timer)
