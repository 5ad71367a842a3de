"""Theorem 2 at one (L, N): N_s/N with its lower and upper bounds (Eqs. 10-12), per sample."""

import numpy as np
import polars as pl

from attnlimits.checks import RTOL_FLOAT64, check_bound
from attnlimits.selection import top_n_indices
from attnlimits.separability import min_pairwise_distance, project_to_sphere, separability
from attnlimits_workflow.jobs import (
    Timer,
    blocks,
    job_logger,
    sample_keys,
    write_table,
)
from attnlimits_workflow.packs import read_pack

log = job_logger(snakemake, "separability")
timer = Timer()
L, N = int(snakemake.wildcards.length), int(snakemake.wildcards.n)
p = snakemake.params
samples = read_pack(snakemake.input.pack)
S = samples.weights.shape[0]
keys = sample_keys(samples)

if p.delta_over == "context":
    sep = pl.read_parquet(snakemake.input.separation)
    for k, v in keys.items():  # same reader, same order; refuse a stale or reordered table
        if not np.array_equal(sep[k].to_numpy(), v):
            raise SystemExit(
                f"{snakemake.input.separation}: sample order differs from the dumps; rerun pairwise_separation"
            )
    delta = sep["delta"].to_numpy()
else:
    delta = np.empty(S)

fields = {
    k: []
    for k in (
        "n_distinguishable",
        "ratio",
        "radius",
        "lower_bound",
        "upper_bound",
        "no_outside_token",
        "zero_radius",
        "negative_xi_square",
    )
}
for sl in blocks(S, L, samples.x.shape[2]):
    x = project_to_sphere(samples.x[sl], p.radius)
    if p.delta_over == "selected":
        idx = top_n_indices(samples.weights[sl], N)
        delta[sl] = (
            min_pairwise_distance(np.take_along_axis(x, idx[:, :, None], axis=1))
            if N > 1
            else np.nan
        )
    res = separability(samples.weights[sl], x, n=N, delta=delta[sl], radius_m=p.radius)
    for k in fields:
        fields[k].append(getattr(res, k))
cols = {k: np.concatenate(v) for k, v in fields.items()}
table = pl.DataFrame(
    {
        **keys,
        "L": np.full(S, L, dtype=np.int32),
        "N": np.full(S, N, dtype=np.int32),
        "delta": delta,
        **cols,
        # N_s/N lies in [0, 1]: a lower bound <= 0 or an upper bound >= 1 cannot fail.
        "lower_bound_check": check_bound(
            cols["ratio"], cols["lower_bound"], upper=False, rtol=RTOL_FLOAT64, floor=0.0
        ).tolist(),
        "upper_bound_check": check_bound(
            cols["ratio"], cols["upper_bound"], upper=True, rtol=RTOL_FLOAT64, ceiling=1.0
        ).tolist(),
    },
    strict=False,
)
write_table(table, snakemake.output[0])
log.info(
    "L=%d N=%d: median N_s/N %.3f; degenerate: r=0 %d, xi^2<0 %d; done in %s",
    L,
    N,
    np.median(cols["ratio"]),
    cols["zero_radius"].sum(),
    cols["negative_xi_square"].sum(),
    timer,
)
