"""Small summary tables (per L / N / T aggregates, critical N) and bound-violation counts for one
analysis (attnlimits_workflow.assemble.summaries); the figure and table rules read only these."""

import polars as pl

from attnlimits_workflow.assemble.summaries import REPLICATED, SUMMARIES, replicates_of
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
# Table 1's intervals: the claims' summary columns on each resample of the heads (and chunks)
bootstrap = snakemake.params.bootstrap
source, by, statistics = REPLICATED[snakemake.params.kind]
timer = Timer()
replicates = replicates_of(frames[source], by, statistics, bootstrap)
write_table(replicates, snakemake.output.replicates)
log.info(
    "bootstrap: %d resamples of %d groups in %s (seed %d)",
    bootstrap["resamples"],
    replicates.height // bootstrap["resamples"],
    timer,
    bootstrap["seed"],
)
