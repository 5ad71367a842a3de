"""Vanishing attention (Lemma 1, Corollary 1): weights pinned near 1/L by bounded logits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.floating]


@dataclass(frozen=True)
class Vanishing:
    """Per-sample extremes of L * alpha_i and the Corollary-1 bounds exp(+-2 Delta / T)."""

    max_scaled: NDArray[np.float64]  # L * max_i alpha_i
    min_scaled: NDArray[np.float64]  # L * min_i alpha_i
    max_weight: NDArray[np.float64]  # max_i alpha_i
    lower_bound: NDArray[np.float64]  # exp(-2 Delta / T)
    upper_bound: NDArray[np.float64]  # exp(+2 Delta / T)
    logit_span: NDArray[np.float64]  # max_i |l_i|, the tightest a of Lemma 1


def corollary1_delta(query: FloatArray, keys: FloatArray, scale: float) -> NDArray[np.float64]:
    """Delta / T for logits l_i = scale * q.k_i: scale * ||q|| * max_i ||k_i||.

    The paper writes Delta = ||q|| ||k||; taking the largest key norm makes |l_i| <= Delta / T hold
    for every i (Cauchy-Schwarz), which is what the proof needs. query (S, d), keys (S, L, d).
    """
    qn = np.linalg.norm(np.asarray(query, dtype=np.float64), axis=-1)
    kn = np.linalg.norm(np.asarray(keys, dtype=np.float64), axis=-1).max(axis=-1)
    return corollary1_delta_from_norms(qn, kn, scale)


def corollary1_delta_from_norms(
    query_norm: FloatArray, key_norm_max: FloatArray, scale
) -> NDArray[np.float64]:
    """The same Delta / T from ||q|| and max_i ||k_i|| (what the dumps store per row)."""
    return (
        np.asarray(scale, dtype=np.float64)
        * np.asarray(query_norm, dtype=np.float64)
        * np.asarray(key_norm_max, dtype=np.float64)
    )


def vanishing(alpha: FloatArray, logits: FloatArray, delta_over_t: FloatArray) -> Vanishing:
    """Corollary 1 per sample: exp(-2 Delta/T) <= L alpha_i <= exp(2 Delta/T)."""
    alpha = np.asarray(alpha, dtype=np.float64)
    length = alpha.shape[1]
    d = np.asarray(delta_over_t, dtype=np.float64)
    return Vanishing(
        max_scaled=length * alpha.max(axis=1),
        min_scaled=length * alpha.min(axis=1),
        max_weight=alpha.max(axis=1),
        lower_bound=np.exp(-2.0 * d),
        upper_bound=np.exp(2.0 * d),
        logit_span=np.abs(np.asarray(logits, dtype=np.float64)).max(axis=1),
    )
