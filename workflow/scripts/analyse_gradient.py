"""Lemma 2 / Corollary 3 at one temperature, on the pack at analysis.gradient.length
(attnlimits_workflow.analyses.gradient)."""

from attnlimits_workflow.analyses import gradient
from attnlimits_workflow.analyses.common import start_job
from attnlimits_workflow.jobs import write_table

job = start_job(snakemake, "gradient", gradient.Settings)
temperature = float(snakemake.wildcards.temperature)
write_table(gradient.analyse(job.pack, temperature, job.settings, job.log), snakemake.output[0])
job.log.info("done in %s", job.timer)
