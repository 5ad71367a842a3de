"""Lemma 2 / Corollary 3 at one temperature: finite-difference sensitivity g(T, eps) over seeded
random unit directions, the exact Jacobian norm of softmax(l/T), and the paper's bound."""

import numpy as np
import polars as pl

from attnlimits.checks import RTOL_FLOAT64, check_bound
from attnlimits.gradient import (
    corollary3_bound,
    finite_difference_sensitivity,
    gershgorin_bound,
    random_unit_directions,
    softmax_jacobian_norm,
)
from attnlimits_workflow.jobs import Timer, job_logger, sample_keys, write_table
from attnlimits_workflow.packs import read_pack

log = job_logger(snakemake, "gradient")
timer = Timer()
T = float(snakemake.wildcards.temperature)
p = snakemake.params
samples = read_pack(snakemake.input.pack)  # analysis.gradient.length (config-checked to be packed)
logits = np.asarray(samples.logits, dtype=np.float64)
if p.temperature_on == "raw_scores":
    # T then divides q.k itself: T = 1/scale (sqrt(d_head) for GPT-2) is the model's own attention.
    logits = logits / samples.score_scale[:, None]
S, L = logits.shape
# The same directions for every T (seed does not involve T), so the curves over T are comparable.
directions = random_unit_directions(p.directions, L, np.random.default_rng([p.seed, 3, L]))
jac = softmax_jacobian_norm(logits, T)
paper = float(corollary3_bound(T))
frames = []
for eps in p.epsilons:
    g = finite_difference_sensitivity(logits, temperature=T, eps=eps, directions=directions)
    frames.append(
        pl.DataFrame(
            {
                **sample_keys(samples),
                "T": np.full(S, T),
                "eps": np.full(S, float(eps)),
                "g_max": g.max(axis=1),
                "g_mean": g.mean(axis=1),
                "jacobian_norm": jac,
                "paper_bound": np.full(S, paper),
                "gershgorin_bound": np.full(S, float(gershgorin_bound(T))),
                "jacobian_paper_check": check_bound(
                    jac, paper, upper=True, rtol=RTOL_FLOAT64
                ).tolist(),
                "g_paper_check": check_bound(
                    g.max(axis=1), paper, upper=True, rtol=RTOL_FLOAT64
                ).tolist(),
                "jacobian_gershgorin_check": check_bound(
                    jac, gershgorin_bound(T), upper=True, rtol=RTOL_FLOAT64
                ).tolist(),
            },
            strict=False,
        )
    )
table = pl.concat(frames)
write_table(table, snakemake.output[0])
log.info("T=%g: max ||J|| %.4g vs paper bound %.4g; done in %s", T, jac.max(), paper, timer)
