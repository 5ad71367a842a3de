"""Theorem 2 at one (L, N): N_s/N with its lower and upper bounds (Eqs. 10-12), per sample or
per head (attnlimits_workflow.analyses.separability)."""

import polars as pl

from attnlimits_workflow.analyses import separability
from attnlimits_workflow.analyses.common import start_job
from attnlimits_workflow.jobs import write_table

job = start_job(snakemake, "separability", separability.Settings)
source = snakemake.input.separation
table = separability.analyse(
    job.pack,
    int(snakemake.wildcards.n),
    job.settings,
    separation=pl.read_parquet(source) if job.settings.delta_over == "context" else None,
    source=source,
    log=job.log,
)
write_table(table, snakemake.output[0])
