"""Decode the dumps once per L into memory-mappable arrays shared by that L's analysis jobs."""

from pathlib import Path

from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.dumps.pack import pack_dumps
from attnlimits_workflow.jobs import Timer, chunk_ids, job_logger, provenance

log = job_logger(snakemake, "pack_samples")
timer = Timer()
L = int(snakemake.wildcards.length)
with atomic_path(snakemake.output[0]) as tmp:
    # Streamed one dump file at a time into the memory-mapped .npy files.
    n_samples, x_shape = pack_dumps(
        snakemake.input.dumps,
        L,
        snakemake.params.embedding,
        Path(tmp),
        expected=provenance(snakemake.input.model, snakemake.input.tokens),
        expected_chunks=chunk_ids(snakemake.input.tokens),
        row_chunks=snakemake.params.row_chunks,
        extra_embeddings=snakemake.params.extra_embeddings,
    )
log.info("L=%d: %d samples, x %s, packed in %s", L, n_samples, x_shape, timer)
