"""Decode the dumps once per L into memory-mappable arrays shared by that L's analysis jobs."""

from pathlib import Path

from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.dumps import load_samples, write_pack
from attnlimits_workflow.jobs import Timer, job_logger, provenance

log = job_logger(snakemake, "pack_samples")
timer = Timer()
L = int(snakemake.wildcards.length)
samples = load_samples(
    snakemake.input.dumps,
    L,
    snakemake.params.embedding,
    with_logits=True,
    with_norms=True,
    expected=provenance(snakemake.input.model, snakemake.input.tokens),
)
with atomic_path(snakemake.output[0]) as tmp:
    write_pack(samples, Path(tmp))
log.info("L=%d: %d samples, x %s, packed in %s", L, len(samples.layer), samples.x.shape, timer)
