"""Lemma 1 / Corollary 1 at one L (attnlimits_workflow.analyses.vanishing)."""

import numpy as np

from attnlimits_workflow.analyses import vanishing
from attnlimits_workflow.analyses.common import start_job
from attnlimits_workflow.jobs import write_table

job = start_job(snakemake, "vanishing")
table = vanishing.last_row(job.pack)
write_table(table, snakemake.output[0])
job.log.info(
    "L=%d: median max weight %.4g; done in %s",
    job.pack.length,
    np.median(table["max_weight"].to_numpy()),
    job.timer,
)
