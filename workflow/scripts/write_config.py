"""The merged, validated configuration of this run, for the report."""

import yaml

from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.jobs import job_logger

log = job_logger(snakemake, "effective_config")
with atomic_path(snakemake.output[0]) as tmp:
    tmp.write_text(yaml.safe_dump(dict(snakemake.params.config), sort_keys=False))
log.info("wrote %s", snakemake.output[0])
