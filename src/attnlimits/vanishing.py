"""Vanishing attention (Lemma 1, Corollary 1): weights pinned near 1/L by bounded logits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.floating]


@dataclass(frozen=True)
class Vanishing:
    """Per-sample extremes of L * alpha_i and the Corollary-1 bounds exp(+-2 Delta / T).

    The log-space columns are what the bound checks compare: log(L alpha_i) = log L + l_i -
    logsumexp(l) from float64 logits, so a weight far below float32's range (4e-49 where the
    bound is 5e-74) is compared as it is, not as an underflowed 0 or against an absolute slack.
    """

    max_scaled: NDArray[np.float64]  # L * max_i alpha_i
    min_scaled: NDArray[np.float64]  # L * min_i alpha_i
    max_weight: NDArray[np.float64]  # max_i alpha_i
    log_max_scaled: NDArray[np.float64]  # log(L max_i alpha_i)
    log_min_scaled: NDArray[np.float64]  # log(L min_i alpha_i)
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


def vanishing(logits: FloatArray, *, delta_over_t: FloatArray) -> Vanishing:
    """Corollary 1 per sample: exp(-2 Delta/T) <= L alpha_i <= exp(2 Delta/T), alpha =
    softmax(logits), every weight taken from the float64 logits in log space."""
    logit = np.asarray(logits, dtype=np.float64)
    length = logit.shape[1]
    d = np.asarray(delta_over_t, dtype=np.float64)
    top = logit.max(axis=1)
    log_total = top + np.log(np.exp(logit - top[:, None]).sum(axis=1))  # logsumexp
    log_max = np.log(length) + top - log_total
    log_min = np.log(length) + logit.min(axis=1) - log_total
    with np.errstate(over="ignore"):  # exp(2 Delta/T) beyond float64 is +inf: no bound at all
        upper_bound = np.exp(2.0 * d)
    return Vanishing(
        max_scaled=np.exp(log_max),
        min_scaled=np.exp(log_min),
        max_weight=np.exp(top - log_total),
        log_max_scaled=log_max,
        log_min_scaled=log_min,
        lower_bound=np.exp(-2.0 * d),
        upper_bound=upper_bound,
        logit_span=np.abs(logit).max(axis=1),
    )
