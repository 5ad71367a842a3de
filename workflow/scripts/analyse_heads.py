"""Per-head diagnostics and multi-head coverage at the separability L, from the model's own
attention: per (layer, head) the mean entropy, effective temperature, N_s/N at beyond.n and the
head's own critical N (KS test over its chunks); per (layer, chunk, N) the coverage of the heads'
combined top-N set against the independence predictions."""

import numpy as np
import polars as pl

from attnlimits import distance as dist
from attnlimits import normalizers as nz
from attnlimits.coverage import head_coverage
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

weights = np.asarray(pack.weights, dtype=np.float64)[order]
logits = np.asarray(pack.logits, dtype=np.float64)[order]

# --- multi-head coverage and N_s/N per sample, for every N of the separability grid
selected = {n: np.zeros((S, L), dtype=bool) for n in p.n_grid}
inside = {n: np.zeros((S, L), dtype=bool) for n in p.n_grid}
for sl in blocks(S, L, pack.x.shape[2]):
    # Projection and alpha_i x_i once per block, shared by every N.
    w = dist.weighted(weights[sl], project_to_sphere(np.asarray(pack.x[order[sl]]), p.radius))
    for n in p.n_grid:
        selected[n][sl], inside[n][sl], _ = distinguishable(w, None, n=n)
    log.info("block %d:%d of %d (%s)", sl.start, sl.stop, S, timer)
coverage_frames = []
for n in p.n_grid:
    cov = head_coverage(
        selected[n].reshape(n_groups, n_heads, L), inside[n].reshape(n_groups, n_heads, L)
    )
    coverage_frames.append(
        pl.DataFrame(
            {
                "layer": layer[::n_heads].astype(np.int32),
                "chunk": chunk[::n_heads].astype(np.int32),
                "L": np.full(n_groups, L, dtype=np.int32),
                "N": np.full(n_groups, n, dtype=np.int32),
                "heads": np.full(n_groups, n_heads, dtype=np.int32),
                "union_selected": cov.union_selected,
                "union_distinguishable": cov.union_distinguishable,
                "coverage": cov.coverage,
                "p": cov.p,
                "predicted_paper": cov.predicted_paper,
                "predicted_overlap": cov.predicted_overlap,
            }
        )
    )
    log.info("N=%d: mean coverage %.3f, mean p %.3f", n, cov.coverage.mean(), cov.p.mean())
ratio_at_n = inside[p.n].sum(axis=1) / p.n
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
        prepared = [(slice(0, len(idx)), dist.weighted(weights[idx], x_h))]
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
        t_eff = nz.effective_temperature(logits[idx])
        rows.append(
            {
                "layer": int(lay),
                "head": int(h),
                "L": L,
                "chunks": len(idx),
                "entropy": float(nz.entropy(weights[idx]).mean()),
                "entropy_uniform": float(np.log(L)),
                "max_weight": float(weights[idx].max(axis=1).mean()),
                "N": p.n,
                "ns_ratio": float(ratio_at_n[idx].mean()),
                "t_eff": float(np.median(t_eff)),
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
