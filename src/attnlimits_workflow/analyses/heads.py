"""Per-head diagnostics and multi-head coverage at the separability L, from the model's own
attention: per (layer, head) the mean entropy, effective temperature, N_s/N at beyond.n and the
head's own critical N (KS test over its chunks); per (layer, chunk, N) the coverage of the heads'
combined top-N set against the independence predictions. Samples of the pack (the analysed rows
of the last-row protocol) whatever analysis.protocol."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import polars as pl
from numpy.typing import NDArray

from attnlimits import distance as dist
from attnlimits import normalizers as nz
from attnlimits.coverage import Coverage, head_coverage
from attnlimits.critical import ks_min_pvalue
from attnlimits.critical_search import cell_floor, critical_n_against_expectation, critical_n_list
from attnlimits.separability import distinguishable, project_to_sphere
from attnlimits_workflow.jobs import Timer, blocks
from attnlimits_workflow.packs import Pack
from attnlimits_workflow.streams import Stream, stream_rng

from .common import constant_columns

LOG = logging.getLogger("heads")


@dataclass(frozen=True)
class Settings:
    """beyond.n, analysis.separability.{n_grid, radius}, analysis.critical_n.{ks_alpha,
    mc_draws}, seed, analysis.zero_weight, analysis.all_rows.{critical_n_fractions,
    critical_n_band_edges} (Algorithm 3's N list, as Table 1's)."""

    n: int
    n_grid: Sequence[int]
    radius: float
    ks_alpha: float
    mc_draws: int
    seed: int
    zero_weight: str
    critical_n_fractions: Sequence[float]
    critical_n_band_edges: Sequence[float]


@dataclass
class HeadSamples:
    """The pack's samples in (layer, chunk, head) order (``order``: their indices in the pack)
    and the per-sample statistics the per-head report averages."""

    order: NDArray[np.intp]
    layer: NDArray
    chunk: NDArray
    head: NDArray
    n_heads: int
    entropy: NDArray[np.float64]
    max_weight: NDArray[np.float64]
    t_eff: NDArray[np.float64]
    ratio_at_n: NDArray[np.float64]


def coverage(
    pack: Pack, settings: Settings, log: logging.Logger = LOG
) -> tuple[pl.DataFrame, HeadSamples]:
    """The coverage table (one row per (layer, chunk, N) of settings.n_grid) and the per-sample
    statistics, a block of whole (layer, chunk) groups at a time: float64 weights and the per-N
    masks of every sample at once grew ~5 MB per chunk."""
    timer = Timer()
    L, S = pack.length, pack.weights.shape[0]
    order = np.lexsort((pack.head, pack.chunk, pack.layer))  # (layer, chunk, head)
    layer, chunk, head = pack.layer[order], pack.chunk[order], pack.head[order]
    n_heads = len(np.unique(head))
    n_groups = S // n_heads
    if n_groups * n_heads != S or not (head.reshape(n_groups, n_heads) == np.unique(head)).all():
        raise RuntimeError(f"samples at L={L} are not complete (layer, chunk) x head groups")
    log.info("L=%d: %d samples = %d (layer, chunk) groups x %d heads", L, S, n_groups, n_heads)
    group_coverage: dict[int, list] = {n: [] for n in settings.n_grid}
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
            project_to_sphere(np.asarray(pack.x[order[sl]]), settings.radius),
            zero_weight=settings.zero_weight,
        )
        for n in settings.n_grid:
            selected, inside, _ = distinguishable(w, None, n=n)
            shape = (groups.stop - groups.start, n_heads, L)
            group_coverage[n].append(head_coverage(selected.reshape(shape), inside.reshape(shape)))
            if n == settings.n:
                ratio_at_n[sl] = inside.sum(axis=1) / settings.n
        log.info("block %d:%d of %d (%s)", sl.start, sl.stop, S, timer)
    frames = []
    for n in settings.n_grid:
        cov = {
            field: np.concatenate([getattr(c, field) for c in group_coverage[n]])
            for field in (f.name for f in fields(Coverage))
        }
        frames.append(
            pl.DataFrame(
                {
                    "layer": layer[::n_heads].astype(np.int32),
                    "chunk": chunk[::n_heads].astype(np.int32),
                    **constant_columns(n_groups, L=L, N=n, heads=n_heads),
                    **cov,
                }
            )
        )
        log.info(
            "N=%d: mean coverage %.3f, mean p %.3f", n, cov["coverage"].mean(), cov["p"].mean()
        )
    stats = HeadSamples(order, layer, chunk, head, n_heads, entropy, max_weight, t_eff, ratio_at_n)
    return pl.concat(frames), stats


def per_head(
    pack: Pack, settings: Settings, stats: HeadSamples, log: logging.Logger = LOG
) -> pl.DataFrame:
    """One row per (layer, head): its chunks' mean entropy, max weight and N_s/N at beyond.n,
    median effective temperature, and its own critical N: Algorithm 3's first pass over its
    chunks on Table 1's N list (None when its chunks are too few for the KS test to reach
    analysis.critical_n.ks_alpha, or when the walk is censored: ``N_crit_censored``, no N of
    the list passed, up to N = L - 1)."""
    timer = Timer()
    L, layer, head = pack.length, stats.layer, stats.head
    rows = []
    chunks_per_head = len(layer) // stats.n_heads // len(np.unique(layer))
    min_p = ks_min_pvalue(chunks_per_head, chunks_per_head)
    grid = critical_n_list(L, settings.critical_n_fractions, settings.critical_n_band_edges)
    if min_p >= settings.ks_alpha:
        log.warning(
            "per-head critical N not computed: with %d chunks per head the KS test cannot reach "
            "p < %g (smallest attainable p = %.3g); use more chunks",
            chunks_per_head,
            settings.ks_alpha,
            min_p,
        )
    for lay in np.unique(layer):
        for h in np.unique(head):
            idx = np.nonzero((layer == lay) & (head == h))[0]
            at = stats.order[idx]
            w_h = np.asarray(pack.weights[at], dtype=np.float64)
            weighted = dist.weighted(w_h, np.asarray(pack.x[at]), zero_weight=settings.zero_weight)
            crit = (
                None
                if min_p >= settings.ks_alpha
                else critical_n_against_expectation(
                    [(slice(0, len(idx)), weighted)],
                    len(idx),
                    grid,
                    settings.ks_alpha,
                    settings.mc_draws,
                    lambda m, lay=lay, h=h: stream_rng(
                        settings.seed, Stream.HEAD_CRITICAL_N, lay, h, m
                    ),
                )
            )
            found = crit is not None and not crit.censored
            n_crit = crit.critical_n if found else None
            rows.append(
                {
                    "layer": int(lay),
                    "head": int(h),
                    "L": L,
                    "chunks": len(idx),
                    "entropy": float(stats.entropy[idx].mean()),
                    "entropy_uniform": float(np.log(L)),
                    "max_weight": float(stats.max_weight[idx].mean()),
                    "N": settings.n,
                    "ns_ratio": float(stats.ratio_at_n[idx].mean()),
                    "t_eff": float(np.median(stats.t_eff[idx])),
                    # the first pass of the list, known to its cell [N_crit_low, N_crit]
                    "N_crit": n_crit,
                    "N_crit_low": cell_floor(n_crit, [n for n, _ in crit.tried]) if found else None,
                    "N_crit_over_L": (n_crit / L) if found else None,
                    # searched and no N of the list passed, up to N = L - 1: N_crit >= L
                    "N_crit_censored": crit is not None and crit.censored,
                    "ks_evaluations": len(crit.tried) if crit is not None else 0,
                    "ks_min_pvalue": min_p,
                }
            )
        log.info("layer %d: %d heads done (%s)", lay, stats.n_heads, timer)
    return pl.DataFrame(rows, schema_overrides={"N_crit": pl.Int64, "N_crit_over_L": pl.Float64})
