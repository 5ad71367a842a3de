"""Lemma 1 / Corollary 1 at one L: extremes of L * alpha_i against exp(+-2 Delta/T), compared in
log space from the float64 logits."""

import numpy as np
import polars as pl

from attnlimits.checks import RTOL_FLOAT32, check_bound
from attnlimits.vanishing import corollary1_delta_from_norms, vanishing
from attnlimits_workflow.jobs import Timer, job_logger, sample_keys, write_table
from attnlimits_workflow.packs import read_pack

log = job_logger(snakemake, "vanishing")
timer = Timer()
L = int(snakemake.wildcards.length)
samples = read_pack(snakemake.input.pack)
S = samples.weights.shape[0]
delta = corollary1_delta_from_norms(samples.query_norm, samples.key_norm_max, samples.score_scale)
res = vanishing(samples.logits, delta_over_t=delta)
# log(L alpha) against -+2 Delta/T: logits and norms come from separate float32 computations.
# L max alpha <= L whatever the logits, so an upper bound exp(2 Delta/T) >= L cannot be exceeded
# (vacuous); L min alpha <= 1, so only a uniform row meets the lower bound's ceiling exp(0).
lower = check_bound(
    res.log_min_scaled, -2.0 * delta, upper=False, rtol=RTOL_FLOAT32, bound_ceiling=0.0
)
upper = check_bound(
    res.log_max_scaled, 2.0 * delta, upper=True, rtol=RTOL_FLOAT32, ceiling=float(np.log(L))
)
table = pl.DataFrame(
    {
        **sample_keys(samples),
        "L": np.full(S, L, dtype=np.int32),
        "max_weight": res.max_weight,
        "max_scaled": res.max_scaled,
        "min_scaled": res.min_scaled,
        "log_max_scaled": res.log_max_scaled,
        "log_min_scaled": res.log_min_scaled,
        "delta_over_t": delta,
        "logit_span": res.logit_span,
        "lower_bound": res.lower_bound,
        "upper_bound": res.upper_bound,
        "lower_bound_check": lower.tolist(),
        "upper_bound_check": upper.tolist(),
    },
    strict=False,
)
write_table(table, snakemake.output[0])
log.info("L=%d: median max weight %.4g; done in %s", L, np.median(res.max_weight), timer)
