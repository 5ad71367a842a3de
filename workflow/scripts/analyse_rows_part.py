"""One part (a share of the layers) of every all-rows analysis at one L: each kernel's
per-sample means over the part's heads' rows (attnlimits_workflow.engine), for rule rows."""

from attnlimits_workflow.engine import run_part_job

run_part_job(snakemake)
