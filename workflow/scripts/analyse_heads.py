"""Per-head diagnostics and multi-head coverage at the separability L, from the model's own
attention: per (layer, head) the mean entropy, effective temperature, N_s/N at beyond.n and the
head's own critical N (KS test over its chunks); per (layer, chunk, N) the coverage of the heads'
combined top-N set against the independence predictions."""

from dataclasses import fields

import numpy as np
import polars as pl

from attnlimits import distance as dist
from attnlimits import normalizers as nz
from attnlimits.coverage import Coverage, head_coverage
from attnlimits.critical import CriticalN, critical_n_against_expectation, ks_min_pvalue
from attnlimits.separability import distinguishable, project_to_sphere
from attnlimits_workflow.jobs import Timer, blocks, job_logger, write_table
from attnlimits_workflow.packs import read_pack
from attnlimits_workflow.streams import Stream, stream_rng

log = job_logger(snakemake, "heads")
timer = Timer()
p = snakemake.params
pack = read_pack(snakemake.input.pack)
L, S = pack.length, pack.weights.shape[0]
order = np.lexsort((pack.head, pack.chunk, pack.layer))  # (layer, chunk, head)
layer, chunk, head = pack.layer[order], pack.chunk[order], pack.head[order]
n_heads = len(np.unique(head))
n_groups = S // n_heads
if n_groups * n_heads != S or not (head.reshape(n_groups, n_heads) == np.unique(head)).all():
    raise RuntimeError(f"samples at L={L} are not complete (layer, chunk) x head groups")
log.info("L=%d: %d samples = %d (layer, chunk) groups x %d heads", L, S, n_groups, n_heads)

# --- multi-head coverage and the per-sample statistics, a block of whole (layer, chunk) groups at
# a time: float64 weights and the per-N masks of every sample at once grew ~5 MB per chunk
group_coverage: dict[int, list] = {n: [] for n in p.n_grid}
ratio_at_n = np.empty(S)
entropy, max_weight, t_eff = np.empty(S), np.empty(S), np.empty(S)
for groups in blocks(n_groups, L, pack.x.shape[2] * n_heads):
    sl = slice(groups.start * n_heads, groups.stop * n_heads)
    weights = np.asarray(pack.weights[order[sl]], dtype=np.float64)
    entropy[sl] = nz.entropy(weights)
    max_weight[sl] = weights.max(axis=1)
    t_eff[sl] = nz.effective_temperature(np.asarray(pack.logits[order[sl]], dtype=np.float64))
    # Projection and alpha_i x_i once per block, shared by every N.
    w = dist.weighted(
        weights,
        project_to_sphere(np.asarray(pack.x[order[sl]]), p.radius),
        zero_weight=p.zero_weight,
    )
    for n in p.n_grid:
        selected, inside, _ = distinguishable(w, None, n=n)
        shape = (groups.stop - groups.start, n_heads, L)
        group_coverage[n].append(head_coverage(selected.reshape(shape), inside.reshape(shape)))
        if n == p.n:
            ratio_at_n[sl] = inside.sum(axis=1) / p.n
    log.info("block %d:%d of %d (%s)", sl.start, sl.stop, S, timer)
coverage_frames = []
for n in p.n_grid:
    cov = {
        field: np.concatenate([getattr(c, field) for c in group_coverage[n]])
        for field in (f.name for f in fields(Coverage))
    }
    coverage_frames.append(
        pl.DataFrame(
            {
                "layer": layer[::n_heads].astype(np.int32),
                "chunk": chunk[::n_heads].astype(np.int32),
                "L": np.full(n_groups, L, dtype=np.int32),
                "N": np.full(n_groups, n, dtype=np.int32),
                "heads": np.full(n_groups, n_heads, dtype=np.int32),
                **cov,
            }
        )
    )
    log.info("N=%d: mean coverage %.3f, mean p %.3f", n, cov["coverage"].mean(), cov["p"].mean())
write_table(pl.concat(coverage_frames), snakemake.output.coverage)

# --- per-head report
rows = []
chunks_per_head = n_groups // len(np.unique(layer))
min_p = ks_min_pvalue(chunks_per_head, chunks_per_head)
if min_p >= p.ks_alpha:
    log.warning(
        "per-head critical N not computed: with %d chunks per head the KS test cannot reach "
        "p < %g (smallest attainable p = %.3g); use more chunks",
        chunks_per_head,
        p.ks_alpha,
        min_p,
    )
for lay in np.unique(layer):
    for h in np.unique(head):
        idx = np.nonzero((layer == lay) & (head == h))[0]
        x_h = np.asarray(pack.x[order[idx]])
        w_h = np.asarray(pack.weights[order[idx]], dtype=np.float64)
        prepared = [(slice(0, len(idx)), dist.weighted(w_h, x_h, zero_weight=p.zero_weight))]
        crit = (
            CriticalN(n_crit=None)
            if min_p >= p.ks_alpha
            else critical_n_against_expectation(
                prepared,
                len(idx),
                L - 1,
                p.ks_alpha,
                p.mc_draws,
                lambda m, lay=lay, h=h: stream_rng(p.seed, Stream.HEAD_CRITICAL_N, lay, h, m),
            )
        )
        rows.append(
            {
                "layer": int(lay),
                "head": int(h),
                "L": L,
                "chunks": len(idx),
                "entropy": float(entropy[idx].mean()),
                "entropy_uniform": float(np.log(L)),
                "max_weight": float(max_weight[idx].mean()),
                "N": p.n,
                "ns_ratio": float(ratio_at_n[idx].mean()),
                "t_eff": float(np.median(t_eff[idx])),
                "N_crit": crit.n_crit,
                "N_crit_over_L": (crit.n_crit / L) if crit.n_crit is not None else None,
                "ks_evaluations": len(crit.evaluations),
                "ks_min_pvalue": min_p,
            }
        )
    log.info("layer %d: %d heads done (%s)", lay, n_heads, timer)
write_table(
    pl.DataFrame(rows, schema_overrides={"N_crit": pl.Int64, "N_crit_over_L": pl.Float64}),
    snakemake.output.heads,
)
log.info("done in %s", timer)
