"""delta of Assumption 2 at one L: the minimum pairwise distance of the sphere-projected
embeddings of each sample (attnlimits_workflow.analyses.separability.pairwise_separation)."""

import numpy as np

from attnlimits_workflow.analyses.common import start_job
from attnlimits_workflow.analyses.separability import pairwise_separation
from attnlimits_workflow.jobs import write_table

job = start_job(snakemake, "separation")
table = pairwise_separation(job.pack, snakemake.params.radius)
write_table(table, snakemake.output[0])
delta = table["delta"].to_numpy()
job.log.info(
    "L=%d: delta for %d samples in %s (median %.4g, min %.4g)",
    job.pack.length,
    len(delta),
    job.timer,
    np.median(delta),
    delta.min(),
)
