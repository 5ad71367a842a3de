"""Small summary tables (per L / N / T aggregates, critical N) and bound-violation counts for one
analysis with a summary rule of its own (its module's summarise_inputs and REPLICATED_FROM,
attnlimits_workflow.analyses.<kind>); the figure and table rules read only these."""

import polars as pl

from attnlimits_workflow.analyses.generic import analysis_module
from attnlimits_workflow.assemble.summaries import replicates_of
from attnlimits_workflow.jobs import Timer, job_logger, write_table

log = job_logger(snakemake, "summarise")
timer = Timer()
frames = {
    name: pl.concat([pl.read_parquet(p) for p in paths], how="vertical_relaxed")
    for name, paths in snakemake.input.items()
}
module = analysis_module(snakemake.params.kind)
for name, table in module.summarise_inputs(**frames).items():
    write_table(table, getattr(snakemake.output, name))
log.info("%s summary written in %s", snakemake.params.kind, timer)
# Table 1's intervals: the claims' summary columns on each resample of the heads (and chunks)
bootstrap = snakemake.params.bootstrap
source, by, statistics = module.REPLICATED_FROM
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
