"""One normalizer's diagnostics on the model's logits, for every L: its weights, max weight,
weight on the first token (the attention sink), support, entropy and exact Jacobian norm; d~ and the Monte-Carlo expectation at N = n_fixed and
the critical N (KS test); N_s/N over the separability grid at its L. On a softmax model's logits
a what-if re-normalization; on a model the study trained with this rule, its own attention (with
its learned per-head parameters). Samples of the packs (analysed rows) whatever analysis.protocol."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from attnlimits import distance as dist
from attnlimits import normalizers as nz
from attnlimits import rules
from attnlimits.critical import ks_min_pvalue
from attnlimits.critical_search import cell_floor, critical_n_against_expectation, critical_n_list
from attnlimits.selection import resolvable
from attnlimits.separability import distinguishable, project_to_sphere
from attnlimits_workflow.jobs import Timer, blocks, sample_keys
from attnlimits_workflow.packs import Pack
from attnlimits_workflow.streams import Stream, stream_rng
from attnlimits_workflow.training import normalizer_arguments

from .common import constant_columns

LOG = logging.getLogger("normalizer")


@dataclass(frozen=True)
class Settings:
    """The normalizer's entry (beyond.normalizers.<name>), beyond.max_samples,
    analysis.distance.n_fixed, analysis.zero_weight, analysis.critical_n.{ks_alpha, mc_draws},
    analysis.all_rows.{critical_n_fractions, critical_n_band_edges} (Algorithm 3's N list, as
    Table 1's), analysis.separability.{length, n_grid, radius}, seed."""

    entry: Mapping[str, Any]
    max_samples: int
    n_fixed: int
    zero_weight: str
    ks_alpha: float
    mc_draws: int
    separability_length: int
    n_grid: Sequence[int]
    radius: float
    seed: int
    critical_n_fractions: Sequence[float]
    critical_n_band_edges: Sequence[float]


@dataclass
class NormalizerTables:
    samples: pl.DataFrame  # one row per analysed sample and L
    critical_n: pl.DataFrame  # one row per L
    separability: pl.DataFrame  # one row per sample and N, at the separability L


def kept_samples(pack: Pack, seed: int, max_samples: int) -> np.ndarray:
    """The seeded subset of a pack's samples every normalizer (and study_gradient) analyses at
    its L: the seed does not involve the normalizer."""
    S = pack.weights.shape[0]
    rng = stream_rng(seed, Stream.NORMALIZER_SAMPLES, pack.length)
    return np.sort(rng.choice(S, size=min(S, max_samples), replace=False))


def analyse(
    packs: Iterable[Pack],
    name: str,
    settings: Settings,
    learned: Mapping[str, Any],
    log: logging.Logger = LOG,
) -> NormalizerTables:
    """Normalizer ``name`` (settings.entry) on every pack of ``packs``, with a trained model's
    ``learned`` per-head parameters (attnlimits_workflow.training.read_learned; {} for none)."""
    timer = Timer()
    p = settings
    entry = dict(p.entry)
    kind = entry.pop("kind")
    normalizer = rules.get(kind)
    sample_frames, critical_rows, separability_frames = [], [], []
    for pack in packs:
        L = pack.length
        keep = kept_samples(pack, p.seed, p.max_samples)
        logits = np.asarray(pack.logits[keep], dtype=np.float64)
        x = np.asarray(pack.x[keep])
        keys = {k: v[keep] for k, v in sample_keys(pack).items()}
        params = normalizer_arguments({"kind": kind, **entry}, learned, keys["layer"], keys["head"])
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
                    **keys,
                    **constant_columns(len(keep), L=L),
                    "max_weight": weights.max(axis=1),
                    # the attention sink: the weight on the chunk's first token (key 0)
                    "first_weight": weights[:, 0],
                    "row_sum": weights.sum(axis=1),
                    "support": (weights > 0).sum(axis=1).astype(np.int32),
                    # the weights above float32's resolution of the row's peak (selection)
                    "resolvable_support": resolvable(weights, "not_selected")
                    .sum(axis=1)
                    .astype(np.int32),
                    "entropy": nz.entropy(weights),
                    "jacobian_norm": jacobian,
                    **constant_columns(len(keep), N=n),
                    "distance": d_tilde,
                    "mc_expectation": expected,
                }
            )
        )
        # With so few samples that the KS test's smallest p is >= alpha every N "passes": the
        # search would print N_crit = 1, a fact about the sample count (review 29). No N_crit
        # then, and the row says why (neither found nor censored).
        min_p = ks_min_pvalue(len(keep), len(keep))
        testable = min_p < p.ks_alpha
        result = (
            critical_n_against_expectation(
                prepared,
                len(keep),
                critical_n_list(L, p.critical_n_fractions, p.critical_n_band_edges),
                p.ks_alpha,
                p.mc_draws,
                lambda m, L=L: stream_rng(p.seed, Stream.NORMALIZER_CRITICAL_N, L, m),
            )
            if testable
            else None
        )
        found = result is not None and not result.censored
        critical_rows.append(
            {
                "normalizer": name,
                "L": L,
                # the first pass of the list, known to its cell [N_crit_low, N_crit]
                "N_crit": result.critical_n if found else None,
                "N_crit_low": cell_floor(result.critical_n, [n for n, _ in result.tried])
                if found
                else None,
                # the largest N tried: L - 1, the list's top, where censored
                "top_N": result.top_n if result else None,
                "evaluations": len(result.tried) if result else 0,
                "samples": len(keep),
                "ks_samples": len(keep),
                "ks_min_pvalue": min_p,
                "ks_testable": testable,
            }
        )
        if L == p.separability_length:
            on_sphere = dist.weighted(
                weights, project_to_sphere(x, p.radius), zero_weight=p.zero_weight
            )
            for m in p.n_grid:
                selected, inside, _ = distinguishable(on_sphere, None, n=m)
                separability_frames.append(
                    pl.DataFrame(
                        {
                            "normalizer": name,
                            **constant_columns(len(keep), L=L, N=m),
                            "ratio": inside.sum(axis=1) / m,
                            # a sparse rule's zero weights in the top-m: never distinguishable
                            # (analysis.zero_weight)
                            "zero_weight_selected": on_sphere.zero_weight_in_top_n(m),
                            # ... or below float32's resolution of the row's peak: ties too
                            "negligible_weight_selected": on_sphere.negligible_weight_in_top_n(m),
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
            (
                (f"{result.critical_n}" if found else f"> {result.top_n} (censored)")
                if result
                else f"not testable (KS smallest p {min_p:.3g})"
            ),
            timer,
        )
    return NormalizerTables(
        pl.concat(sample_frames),
        pl.DataFrame(
            critical_rows,
            schema_overrides={"N_crit": pl.Int64, "N_crit_low": pl.Int64, "top_N": pl.Int64},
        ),
        pl.concat(separability_frames),
    )
