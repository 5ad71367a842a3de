"""Gradient sensitivity of softmax attention to its logits (Lemma 2, Corollary 3, Fig. 4)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.floating]


def softmax(logits: FloatArray, temperature: float = 1.0) -> NDArray[np.float64]:
    """softmax(l / T) along the last axis, shifted by the row maximum for stability."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    z = np.asarray(logits, dtype=np.float64) / temperature
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def random_unit_directions(
    n_directions: int, length: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """``n_directions`` directions uniform on the unit sphere of R^L (normalised Gaussians)."""
    u = rng.standard_normal((n_directions, length))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


def finite_difference_sensitivity(
    logits: FloatArray, temperature: float, eps: float, directions: FloatArray
) -> NDArray[np.float64]:
    """g(T, eps) = ||softmax((l + eps u)/T) - softmax(l/T)|| / eps for each sample and direction.

    logits (S, L), directions (K, L) with unit norm; returns (S, K).
    """
    if eps <= 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    base = softmax(logits, temperature)
    logit = np.asarray(logits, dtype=np.float64)
    out = np.empty((logit.shape[0], len(directions)))
    for k, u in enumerate(np.asarray(directions, dtype=np.float64)):
        moved = softmax(logit + eps * u[None, :], temperature)
        out[:, k] = np.linalg.norm(moved - base, axis=1) / eps
    return out


def largest_eigenvalue_diag_minus_rank_one(
    diagonal: FloatArray, v_squared: FloatArray, iterations: int = 200
) -> NDArray[np.float64]:
    """Largest eigenvalue of diag(d) - v v^T per row, without forming the matrix.

    Takes d and v**2 (S, L). The eigenvalues of a diagonal matrix minus a rank-one term
    interlace its diagonal, so the largest lies in [d_(2), d_(1)] and is the root there of the
    secular equation
        f(lam) = 1 - sum_i v_i^2 / (d_i - lam),
    which is strictly decreasing on that interval. Bisection in float64 finds it; a tie of the
    two largest d makes lam = d_(1) exactly. Entries with v_i = 0 drop out of f (their e_i is an
    eigenvector with eigenvalue d_i, which is then the answer only if it is the largest).
    """
    d = np.asarray(diagonal, dtype=np.float64)
    v2 = np.asarray(v_squared, dtype=np.float64)
    if d.ndim == 1:
        d, v2 = d[None, :], v2[None, :]
    top2 = (
        -np.sort(-d, axis=1)[:, :2] if d.shape[1] > 1 else np.concatenate([d, np.zeros_like(d)], 1)
    )
    lo, hi = top2[:, 1].copy(), top2[:, 0].copy()
    # d_(1) with v = 0 there is itself an eigenvalue and the largest.
    top_free = np.take_along_axis(v2, np.argmax(d, axis=1)[:, None], axis=1)[:, 0] == 0
    lo = np.where(top_free, hi, lo)
    # One non-zero v_i: the eigenvalues are d_i - v_i^2 and the other d_j, in closed form (a
    # one-token sparsemax/entmax support gives exactly 0, where bisection would creep towards it).
    single = (v2 > 0).sum(axis=1) == 1
    if single.any():
        i = np.argmax(v2[single], axis=1)[:, None]
        own = np.take_along_axis(d[single] - v2[single], i, axis=1)[:, 0]
        others = np.where(v2[single] > 0, -np.inf, d[single]).max(axis=1)
        lo[single] = hi[single] = np.maximum(own, others)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(v2 > 0, v2 / (d - mid[:, None]), 0.0)
        f = 1.0 - terms.sum(axis=1)
        go_up = f > 0  # root lies above mid
        lo = np.where(go_up, mid, lo)
        hi = np.where(go_up, hi, mid)
        if np.all(hi - lo <= 1e-15 * np.maximum(hi, 1e-300)):
            break
    return 0.5 * (lo + hi)


def softmax_jacobian_norm_from_weights(
    weights: FloatArray, iterations: int = 200
) -> NDArray[np.float64]:
    """Largest eigenvalue of J = diag(a) - a a^T (symmetric PSD, the softmax Jacobian at T = 1)."""
    a = np.asarray(weights, dtype=np.float64)
    return largest_eigenvalue_diag_minus_rank_one(a, a * a, iterations)


def softmax_jacobian_norm(logits: FloatArray, temperature: float) -> NDArray[np.float64]:
    """Exact ||d softmax(l/T) / d l||_2 = lambda_max(diag(a) - a a^T) / T at a = softmax(l/T)."""
    return softmax_jacobian_norm_from_weights(softmax(logits, temperature)) / temperature


def corollary3_bound(temperature: float | FloatArray) -> NDArray[np.float64]:
    """The paper's bound min{1/(4T), sqrt(2)} on ||grad_l alpha||_2 (Corollary 3), as printed."""
    return np.minimum(1.0 / (4.0 * np.asarray(temperature, dtype=np.float64)), np.sqrt(2.0))


def gershgorin_bound(temperature: float | FloatArray) -> NDArray[np.float64]:
    """A bound that always holds: ||J||_2 <= max_i 2 a_i (1 - a_i) / T <= 1/(2T) (Gershgorin).

    Tight at a two-way tie, where ||J||_2 = 1/(2T) > 1/(4T): see docs/paper-notes.md.
    """
    return 1.0 / (2.0 * np.asarray(temperature, dtype=np.float64))
