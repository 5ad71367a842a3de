"""Per-head diagnostics and multi-head coverage at the separability L
(attnlimits_workflow.analyses.heads)."""

from attnlimits_workflow.analyses import heads
from attnlimits_workflow.analyses.common import start_job
from attnlimits_workflow.jobs import write_table

job = start_job(snakemake, "heads", heads.Settings)
coverage, stats = heads.coverage(job.pack, job.settings, job.log)
write_table(coverage, snakemake.output.coverage)
write_table(heads.per_head(job.pack, job.settings, stats, job.log), snakemake.output.heads)
job.log.info("done in %s", job.timer)
