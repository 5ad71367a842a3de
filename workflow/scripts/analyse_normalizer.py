"""One normalizer's diagnostics on the model's logits, for every L: its weights, max weight,
support, entropy and exact Jacobian norm; d~ and the Monte-Carlo expectation at N = n_fixed and
the critical N (KS test); N_s/N over the separability grid at its L. On a softmax model's logits
a what-if re-normalisation; on a model the study trained with this rule, its own attention (with
its learned per-head parameters, input ``model``)."""

import numpy as np
import polars as pl

from attnlimits import distance as dist
from attnlimits import normalizers as nz
from attnlimits.critical import critical_n_against_expectation
from attnlimits.separability import distinguishable, project_to_sphere
from attnlimits_workflow.jobs import Timer, blocks, job_logger, sample_keys, write_table
from attnlimits_workflow.packs import read_pack
from attnlimits_workflow.streams import Stream, stream_rng
from attnlimits_workflow.training import normalizer_arguments, read_learned

log = job_logger(snakemake, "normalizer")
timer = Timer()
name = snakemake.wildcards.normalizer
p = snakemake.params
entry = dict(p.entry)
kind = entry.pop("kind")
normalizer = nz.get(kind)
log.info("normalizer %s = %s(%s)", name, kind, entry)
trained = snakemake.input.get("model")
learned = read_learned(trained if isinstance(trained, str) else (trained[0] if trained else None))
for learned_name in (q.name for q in normalizer.learned if q.name in learned):
    log.info(
        "%s: the trained model's learned per-head values %s", learned_name, learned[learned_name]
    )

sample_frames, critical_rows, separability_frames = [], [], []
for pack_dir in snakemake.input.packs:
    pack = read_pack(pack_dir)
    L, S = pack.length, pack.weights.shape[0]
    # The same seeded subset of samples for every normalizer (the seed does not involve it).
    rng = stream_rng(p.seed, Stream.NORMALIZER_SAMPLES, L)
    keep = np.sort(rng.choice(S, size=min(S, p.max_samples), replace=False))
    logits = np.asarray(pack.logits[keep], dtype=np.float64)
    x = np.asarray(pack.x[keep])
    keys = sample_keys(pack)
    params = normalizer_arguments(
        {"kind": kind, **entry}, learned, keys["layer"][keep], keys["head"][keep]
    )
    weights = normalizer.weights(logits, L, **params)
    jacobian = normalizer.jacobian_norm(logits, L, **params)
    n = p.n_fixed  # < every L (config check)
    prepared = [
        (sl, dist.weighted(weights[sl], x[sl], zero_weight=p.zero_weight))
        for sl in blocks(len(keep), L, x.shape[2])
    ]
    d_tilde = np.empty(len(keep))
    expected = np.empty(len(keep))
    draw_rng = stream_rng(p.seed, Stream.NORMALIZER_MONTE_CARLO, L, n)
    for sl, w in prepared:
        d_tilde[sl] = dist.distance_to_context(w, n=n)
        expected[sl] = dist.monte_carlo_expected_distance(
            w, n=n, draws=p.mc_draws, rng=draw_rng
        ).mean
    sample_frames.append(
        pl.DataFrame(
            {
                "normalizer": name,
                "kind": kind,
                **{k: v[keep] for k, v in sample_keys(pack).items()},
                "L": np.full(len(keep), L, dtype=np.int32),
                "max_weight": weights.max(axis=1),
                "row_sum": weights.sum(axis=1),
                "support": (weights > 0).sum(axis=1).astype(np.int32),
                "entropy": nz.entropy(weights),
                "jacobian_norm": jacobian,
                "N": np.full(len(keep), n, dtype=np.int32),
                "distance": d_tilde,
                "mc_expectation": expected,
            }
        )
    )
    result = critical_n_against_expectation(
        prepared,
        len(keep),
        L - 1,
        p.ks_alpha,
        p.mc_draws,
        lambda m, L=L: stream_rng(p.seed, Stream.NORMALIZER_CRITICAL_N, L, m),
    )
    critical_rows.append(
        {
            "normalizer": name,
            "L": L,
            "N_crit": result.n_crit,
            "evaluations": len(result.evaluations),
            "samples": len(keep),
        }
    )
    if L == p.separability_length:
        on_sphere = dist.weighted(
            weights, project_to_sphere(x, p.radius), zero_weight=p.zero_weight
        )
        for m in p.n_grid:
            selected, inside, _ = distinguishable(on_sphere, None, n=m)
            # a sparse rule's zero weights in the top-m: never distinguishable (analysis.zero_weight)
            zero = on_sphere.zero_weight_in_top_n(m)
            separability_frames.append(
                pl.DataFrame(
                    {
                        "normalizer": name,
                        "L": np.full(len(keep), L, dtype=np.int32),
                        "N": np.full(len(keep), m, dtype=np.int32),
                        "ratio": inside.sum(axis=1) / m,
                        "zero_weight_selected": zero,
                        # of the tokens actually selected: what N_s/N would be without the
                        # support cap of a sparse rule (support < N)
                        "ratio_of_selected": inside.sum(axis=1)
                        / np.maximum(selected.sum(axis=1), 1),
                    }
                )
            )
    log.info(
        "L=%d: %d samples, median max weight %.3g, median ||J|| %.3g, N_crit %s (%s)",
        L,
        len(keep),
        np.median(weights.max(axis=1)),
        np.median(jacobian),
        result.n_crit,
        timer,
    )

write_table(pl.concat(sample_frames), snakemake.output.samples)
write_table(
    pl.DataFrame(critical_rows, schema_overrides={"N_crit": pl.Int64}), snakemake.output.critical_n
)
write_table(pl.concat(separability_frames), snakemake.output.separability)
log.info("done in %s", timer)
