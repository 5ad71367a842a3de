"""Representation distance between the selected context vector and the rest (Theorem 1).

Notation (paper, Section 2.1): alpha (S, L) attention weights, x (S, L, d) token embeddings,
I_N the top-N set, s = sum_{i in I_N} alpha_i x_i the context vector and

    d~ = sum_{i not in I_N} || alpha_i x_i - s ||                                     (7)

All sums are accumulated in float64: distances at L = 1024 add up ~10^3 small terms.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .selection import random_subset_mask, top_n_mask

FloatArray = NDArray[np.floating]


def _as_float64(
    alpha: FloatArray, x: FloatArray
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    alpha = np.asarray(alpha, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    if alpha.ndim != 2 or x.ndim != 3 or x.shape[:2] != alpha.shape:
        raise ValueError(f"expected alpha (S, L) and x (S, L, d); got {alpha.shape} and {x.shape}")
    return alpha, x


def context_vector(
    alpha: FloatArray, x: FloatArray, mask: NDArray[np.bool_]
) -> NDArray[np.float64]:
    """s = sum over the masked indices of alpha_i x_i, shape (S, d)."""
    alpha, x = _as_float64(alpha, x)
    weights = np.where(mask, alpha, 0.0)
    return np.einsum("sl,sld->sd", weights, x)


def distance_for_mask(
    alpha: FloatArray, x: FloatArray, mask: NDArray[np.bool_]
) -> NDArray[np.float64]:
    """d~ of Eq. (7) for an arbitrary selected set given as a mask (S, L); shape (S,)."""
    alpha, x = _as_float64(alpha, x)
    s = context_vector(alpha, x, mask)
    scaled = alpha[:, :, None] * x
    dist = np.linalg.norm(scaled - s[:, None, :], axis=2)
    return np.where(mask, 0.0, dist).sum(axis=1)


def distance_to_context(alpha: FloatArray, x: FloatArray, n: int) -> NDArray[np.float64]:
    """The true distance d~ (Eq. 7) for the top-``n`` set of each sample; shape (S,)."""
    return distance_for_mask(alpha, x, top_n_mask(alpha, n))


def fixed_set_upper_bound(alpha: FloatArray, x: FloatArray, n: int) -> NDArray[np.float64]:
    """Theorem 1.1: (1 - a_N) d1 + max_{j in I_N} ||x_j|| (a_N (L - N) - (1 - a_N)).

    a_N is the selected mass and d1 = max_{i not in I_N, j in I_N} ||x_i - x_j||.
    For N = L there is no non-selected token; d1 is taken as 0 and the bound is returned as is.
    """
    alpha, x = _as_float64(alpha, x)
    length = alpha.shape[1]
    mask = top_n_mask(alpha, n)
    mass = np.where(mask, alpha, 0.0).sum(axis=1)
    norms = np.linalg.norm(x, axis=2)
    max_selected_norm = np.where(mask, norms, -np.inf).max(axis=1)
    d1 = _max_cross_distance(x, mask)
    return (1.0 - mass) * d1 + max_selected_norm * (mass * (length - n) - (1.0 - mass))


def _max_cross_distance(x: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
    """max over i not selected, j selected of ||x_i - x_j||, per sample (0 if a side is empty).

    Uses ||x_i - x_j||^2 = |x_i|^2 + |x_j|^2 - 2 x_i.x_j with the N selected rows only, so the
    cost is O(L N d) rather than O(L^2 d).
    """
    out = np.zeros(x.shape[0])
    sq = np.einsum("sld,sld->sl", x, x)
    for row in range(x.shape[0]):
        sel = mask[row]
        if sel.all() or not sel.any():
            continue
        xs, xo = x[row, sel], x[row, ~sel]
        d2 = sq[row, ~sel][:, None] + sq[row, sel][None, :] - 2.0 * xo @ xs.T
        out[row] = np.sqrt(max(d2.max(), 0.0))
    return out


def expectation_term(alpha: FloatArray, x: FloatArray, n: int) -> NDArray[np.float64]:
    """Theorem 1.2's closed-form term, exactly as printed in the paper:

        (L - N)/L * sum_i || (alpha_i + N/(L-1)) x_i - xbar ||,   xbar = sum_i alpha_i x_i.

    See docs/paper-notes.md: this term does not approach the true expectation for N << L.
    """
    alpha, x = _as_float64(alpha, x)
    length = alpha.shape[1]
    xbar = np.einsum("sl,sld->sd", alpha, x)
    coef = alpha + n / (length - 1)
    dist = np.linalg.norm(coef[:, :, None] * x - xbar[:, None, :], axis=2)
    return (length - n) / length * dist.sum(axis=1)


def epsilon_bound(alpha: FloatArray, x: FloatArray, n: int) -> NDArray[np.float64]:
    """Theorem 1.2's bound on the residual epsilon, as printed:

        1/2 (1 - N/L) sum_i N/(L-1) * sum_{j != i} alpha_j^2 ||x_j||^2
                                   / || alpha_i x_i - N/(L-1) sum_{j != i} alpha_j x_j ||.

    A zero denominator gives +inf (the bound says nothing for that sample).
    """
    alpha, x = _as_float64(alpha, x)
    length = alpha.shape[1]
    c = n / (length - 1)
    scaled = alpha[:, :, None] * x
    total = scaled.sum(axis=1)  # (S, d) = xbar
    sq = np.einsum("sld,sld->sl", scaled, scaled)  # alpha_j^2 ||x_j||^2
    numer = sq.sum(axis=1, keepdims=True) - sq
    denom = np.linalg.norm(scaled - c * (total[:, None, :] - scaled), axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(denom > 0, numer / denom, np.where(numer > 0, np.inf, 0.0))
    return 0.5 * (1.0 - n / length) * c * ratio.sum(axis=1)


def monte_carlo_expected_distance(
    alpha: FloatArray, x: FloatArray, n: int, draws: int, rng: np.random.Generator
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The true E = E_{I_N ~ U}[d~] (Eq. 8), estimated with ``draws`` uniform subsets per sample.

    Returns (mean, standard error of the mean) per sample; the error is 0 for a single draw.

    Distances are expanded as |a_i|^2 - 2 a_i.s + |s|^2 (a_i = alpha_i x_i) so that each draw
    costs two batched mat-vecs instead of materialising (S, L, d) differences.
    """
    alpha, x = _as_float64(alpha, x)
    if draws < 1:
        raise ValueError(f"draws must be >= 1, got {draws}")
    n_samples, length = alpha.shape
    scaled = alpha[:, :, None] * x
    sq = np.einsum("sld,sld->sl", scaled, scaled)
    acc = np.zeros(n_samples)
    acc2 = np.zeros(n_samples)
    for _ in range(draws):
        mask = random_subset_mask(n_samples, length, n, rng)
        s = np.matmul(mask[:, None, :].astype(np.float64), scaled)[:, 0, :]  # (S, d)
        cross = np.matmul(scaled, s[:, :, None])[:, :, 0]  # (S, L)
        d2 = np.maximum(sq - 2.0 * cross + np.einsum("sd,sd->s", s, s)[:, None], 0.0)
        d = np.where(mask, 0.0, np.sqrt(d2)).sum(axis=1)
        acc += d
        acc2 += d * d
    mean = acc / draws
    if draws == 1:
        return mean, np.zeros(n_samples)
    var = np.maximum(acc2 / draws - mean**2, 0.0) * draws / (draws - 1)
    return mean, np.sqrt(var / draws)
