"""Theorem 1 at one (L, N): true distance, fixed-set bound, paper's expectation term, epsilon
bound, and the Monte-Carlo expectation over uniformly random top-N sets
(attnlimits_workflow.analyses.distance)."""

from attnlimits_workflow.analyses import distance
from attnlimits_workflow.analyses.common import start_job
from attnlimits_workflow.jobs import write_table

job = start_job(snakemake, "distance", distance.Settings)
table = distance.analyse(job.pack, int(snakemake.wildcards.n), job.settings, job.log)
write_table(table, snakemake.output[0])
