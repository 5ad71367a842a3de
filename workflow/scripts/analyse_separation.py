"""delta of Assumption 2 at one L: the minimum pairwise distance of the sphere-projected
embeddings of each sample (computed once per L, shared by every N)."""

import numpy as np
import polars as pl

from attnlimits.separability import min_pairwise_distance, project_to_sphere
from attnlimits_workflow.jobs import Timer, blocks, job_logger, sample_keys, write_table
from attnlimits_workflow.packs import read_pack

log = job_logger(snakemake, "separation")
timer = Timer()
L = int(snakemake.wildcards.length)
samples = read_pack(snakemake.input.pack)
S = samples.weights.shape[0]
delta = np.empty(S)
for sl in blocks(S, L, samples.x.shape[2]):
    delta[sl] = min_pairwise_distance(project_to_sphere(samples.x[sl], snakemake.params.radius))
write_table(
    pl.DataFrame({**sample_keys(samples), "L": np.full(S, L, dtype=np.int32), "delta": delta}),
    snakemake.output[0],
)
log.info(
    "L=%d: delta for %d samples in %s (median %.4g, min %.4g)",
    L,
    S,
    timer,
    np.median(delta),
    delta.min(),
)
