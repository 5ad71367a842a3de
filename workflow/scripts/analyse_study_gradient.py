"""Lemma 2 on a study model's own rule at every temperature
(attnlimits_workflow.analyses.study_gradient)."""

from attnlimits_workflow.analyses import study_gradient
from attnlimits_workflow.analyses.common import start_job
from attnlimits_workflow.jobs import write_table
from attnlimits_workflow.training import read_learned

job = start_job(snakemake, "study_gradient", study_gradient.Settings)
model = snakemake.input.model
learned = read_learned(model)
table = study_gradient.analyse(job.pack, job.settings, learned, source=model, log=job.log)
write_table(table, snakemake.output[0])
job.log.info("done in %s", job.timer)
