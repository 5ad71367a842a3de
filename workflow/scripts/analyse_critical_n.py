"""Critical top-N at one L: the smallest N where a KS test cannot tell d~ from the expected
distance (attnlimits_workflow.analyses.critical_n)."""

from attnlimits_workflow.analyses import critical_n
from attnlimits_workflow.analyses.common import start_job
from attnlimits_workflow.jobs import write_table

job = start_job(snakemake, "critical_n", critical_n.Settings)
job.log.info("L=%d: %d samples loaded in %s", job.pack.length, len(job.pack.layer), job.timer)
write_table(critical_n.analyse(job.pack, job.settings, job.log), snakemake.output[0])
job.log.info("done in %s", job.timer)
