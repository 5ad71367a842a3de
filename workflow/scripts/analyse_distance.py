"""Theorem 1 at one (L, N): true distance, fixed-set bound, paper's expectation term, epsilon
bound, and the Monte-Carlo expectation over uniformly random top-N sets."""

import numpy as np
import polars as pl

from attnlimits import distance as dist
from attnlimits.checks import RTOL_FLOAT64, VIOLATED, check_bound
from attnlimits_workflow.jobs import (
    Timer,
    blocks,
    job_logger,
    sample_keys,
    write_table,
)
from attnlimits_workflow.packs import read_pack

log = job_logger(snakemake, "distance")
timer = Timer()
L, N = int(snakemake.wildcards.length), int(snakemake.wildcards.n)
p = snakemake.params
samples = read_pack(snakemake.input.pack)
S = samples.weights.shape[0]
log.info("L=%d N=%d: %d samples loaded in %s", L, N, S, timer)
rng = np.random.default_rng([p.seed, 1, L, N])

cols = {
    k: np.empty(S)
    for k in (
        "distance",
        "upper_bound",
        "expectation_term",
        "epsilon_bound",
        "mc_expectation",
        "mc_stderr",
        "mc_draws_used",
        "selected_mass",
    )
}
for sl in blocks(S, L, samples.x.shape[2]):
    # The products every quantity shares, computed once per block.
    w = dist.weighted(samples.weights[sl], samples.x[sl])
    cols["distance"][sl] = dist.distance_to_context(w, n=N)
    cols["upper_bound"][sl] = dist.fixed_set_upper_bound(w, n=N)
    cols["expectation_term"][sl] = dist.expectation_term(w, n=N)
    cols["epsilon_bound"][sl] = dist.epsilon_bound(w, n=N)
    mc = dist.monte_carlo_expected_distance(
        w,
        n=N,
        draws=p.mc_draws,
        rng=rng,
        strata=p.mc_strata,
        max_draws=p.mc_max_draws,
        target_rel_stderr=p.mc_target_rel_stderr,
    )
    cols["mc_expectation"][sl], cols["mc_stderr"][sl], cols["mc_draws_used"][sl] = mc
    cols["selected_mass"][sl] = dist.selected_mass(w, n=N)

# Theorem 1.2 says E = term + eps with eps <= bound; E is known only up to Monte-Carlo error.
residual = cols["mc_expectation"] - cols["expectation_term"]
table = pl.DataFrame(
    {
        **sample_keys(samples),
        "L": np.full(S, L, dtype=np.int32),
        "N": np.full(S, N, dtype=np.int32),
        **cols,
        "upper_bound_check": check_bound(
            cols["distance"], cols["upper_bound"], upper=True, rtol=RTOL_FLOAT64, floor=0.0
        ).tolist(),
        "epsilon_bound_check": check_bound(
            residual - 3 * cols["mc_stderr"], cols["epsilon_bound"], upper=True, rtol=RTOL_FLOAT64
        ).tolist(),
    },
    strict=False,
)
write_table(table, snakemake.output[0])
log.info(
    "done in %s: fixed-set bound violated on %d of %d samples",
    timer,
    (table["upper_bound_check"] == VIOLATED).sum(),
    S,
)
