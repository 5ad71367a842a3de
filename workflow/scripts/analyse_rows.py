"""Every all-rows analysis at one L: the tables of distance, separability, critical N and
gradient from the parts' per-sample means, into the job's folder (attnlimits_workflow.engine)."""

from attnlimits_workflow.engine import run_job

run_job(snakemake)
