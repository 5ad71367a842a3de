"""Alternative attention normalizers applied to a model's logits, with their Jacobian norms.

A what-if: the logits were learned under softmax, and each normalizer here re-normalises them
(paper, Section 4: sparsity-inducing, length-aware and gradient-controlled rules). Every
normalizer maps logits (S, L) to weights (S, L) and knows the spectral norm of its Jacobian
d weights / d logits per row. The functions are here; the rules' table, which names them (and
the torch forward of a model trained with each), is :mod:`attnlimits.rules`; :func:`get` looks a
rule up there (docs/extending.md, "Adding a normaliser").

Sparsemax and 1.5-entmax come from the ``entmax`` package (Peters, Niculae and Martins), which is
built on torch: only their functions import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from . import gradient
from .gradient import largest_eigenvalue_diag_minus_rank_one, softmax, sum_of_others

if TYPE_CHECKING:
    from .rules import Rule

FloatArray = NDArray[np.floating]


# ---------------------------------------------------------------------------------- softmax(l/T)
def softmax_weights(logits: FloatArray, length: int, temperature: float = 1.0):
    return softmax(logits, temperature)


def softmax_normalizer_jacobian_norm(logits: FloatArray, length: int, temperature: float = 1.0):
    """lambda_max(diag(a) - a a^T) / T at a = softmax(l/T): gradient.softmax_jacobian_norm in the
    normalizers' (logits, length, **settings) signature."""
    return gradient.softmax_jacobian_norm(logits, temperature)


# ------------------------------------------------------------------------- sparsemax, 1.5-entmax
def _entmax_call(name: str, logits: FloatArray, temperature: float) -> NDArray[np.float64]:
    import entmax  # torch-based; imported only by the jobs that need it
    import torch

    z = torch.from_numpy(np.asarray(logits, dtype=np.float64) / temperature)
    with torch.no_grad():
        return getattr(entmax, name)(z, dim=-1).numpy()


def sparsemax_weights(logits: FloatArray, length: int, temperature: float = 1.0):
    """Euclidean projection of l/T onto the simplex (Martins and Astudillo, 2016), via entmax."""
    return _entmax_call("sparsemax", logits, temperature)


def sparsemax_jacobian_norm(logits: FloatArray, length: int, temperature: float = 1.0):
    """J = (diag(s) - s s^T / |S|) / T with s the support indicator: a projection onto the
    support's zero-sum subspace, so ||J|| = 1/T when the support has two or more tokens, else 0."""
    p = sparsemax_weights(logits, length, temperature)
    support = (p > 0).astype(np.float64)
    k = support.sum(axis=1, keepdims=True)
    return largest_eigenvalue_diag_minus_rank_one(support, support / np.sqrt(k)) / temperature


def entmax15_weights(logits: FloatArray, length: int, temperature: float = 1.0):
    """1.5-entmax of l/T (Peters et al., 2019), via entmax."""
    return _entmax_call("entmax15", logits, temperature)


def entmax15_jacobian_norm(logits: FloatArray, length: int, temperature: float = 1.0):
    """alpha-entmax has J = (diag(g) - g g^T / sum g) / T with g_i = p_i^(2 - alpha) on the
    support (Peters et al., 2019, Prop. 1); for alpha = 1.5, g = sqrt(p)."""
    p = entmax15_weights(logits, length, temperature)
    g = np.sqrt(p)
    total = g.sum(axis=1, keepdims=True)
    # d - v^2 = g (sum g - g) / sum g, from the other entries (no cancellation when near one-hot)
    return (
        largest_eigenvalue_diag_minus_rank_one(
            g, g / np.sqrt(total), diagonal_minus_v_squared=g * sum_of_others(g) / total
        )
        / temperature
    )


# ------------------------------------------------------------------------------ Scalable-Softmax
def scalable_softmax_weights(logits: FloatArray, length: int, s: float | FloatArray = 0.43):
    """SSMax (Nakanishi, 2025): softmax(s log(L) l), L the row's context length. ``s`` is one
    number or one per row, shape (rows, 1) (a trained model's per-head scales). One key (L = 1)
    gets weight 1: the scale log(1) = 0 makes every logit 0."""
    return softmax(np.asarray(s) * np.log(length) * np.asarray(logits, dtype=np.float64))


def scalable_softmax_jacobian_norm(logits: FloatArray, length: int, s: float | FloatArray = 0.43):
    """||d softmax(s log(L) l) / d l|| = |s log(L)| ||J_softmax|| at the scaled logits (a learned
    s may be negative)."""
    scale = np.asarray(s, dtype=np.float64) * np.log(length)
    norm = gradient.softmax_jacobian_norm(scale * np.asarray(logits, dtype=np.float64), 1.0)
    return np.abs(scale.reshape(-1) if scale.ndim else scale) * norm


# ---------------------------------------------------------------------------- Self-Adjust Softmax
def _largest_singular_value(jv, jtu, shape, iterations: int, rtol: float):
    """Per row, the largest singular value of J (given as v -> J v and u -> J^T u, row-wise) by
    power iteration on J^T J; stops when every estimate changes by less than ``rtol`` relative."""
    n_rows, n = shape
    # A fixed start with every component non-zero (deterministic, not orthogonal to the answer
    # except on a measure-zero set).
    v = 1.0 + np.arange(n, dtype=np.float64)[None, :].repeat(n_rows, axis=0) / n
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    sigma = np.zeros(n_rows)
    for _ in range(iterations):
        u = jv(v)
        new_sigma = np.linalg.norm(u, axis=1)
        v = jtu(u)
        norm = np.linalg.norm(v, axis=1, keepdims=True)
        v = np.where(norm > 0, v / np.where(norm > 0, norm, 1.0), v)
        done = np.abs(new_sigma - sigma) <= rtol * np.maximum(new_sigma, 1e-300)
        sigma = new_sigma
        if done.all():
            break
    return sigma


def _self_adjust_parts(logits: FloatArray):
    z = np.asarray(logits, dtype=np.float64)
    low = np.minimum(z.min(axis=1), 0.0)
    high = np.maximum(z.max(axis=1), 0.0)
    span = high - low
    safe = np.where(span > 0, span, 1.0)
    g = (z - low[:, None]) / safe[:, None]  # in [0, 1]; all-zero rows (span 0) give g = 0
    return z, low, high, span, safe, g, softmax(z)


def self_adjust_softmax_weights(logits: FloatArray, length: int):
    """Normalised SA-Softmax (Zheng et al., 2025): (z - min(z_min, 0)) / (max(0, z_max) -
    min(z_min, 0)) * softmax(z). Rows sum to at most 1, not to 1."""
    *_, g, p = _self_adjust_parts(logits)
    return g * p


def self_adjust_softmax_jacobian_norm(
    logits: FloatArray, length: int, iterations: int = 500, rtol: float = 1e-10
):
    """Largest singular value of the (non-symmetric) SA-Softmax Jacobian, by power iteration on
    J^T J with J applied in O(L): with p = softmax(z), w = g p, c = p / span,

        J = diag(c + w) - c [z_min < 0] e_a^T - (w / span)([z_max > 0] e_b - [z_min < 0] e_a)^T
            - w p^T,

    a = argmin z, b = argmax z (the first one on ties: min and max are not differentiable there,
    this is a one-sided derivative). Rows with span 0 (all logits 0) have weights 0 and get
    norm 0. Stops when the estimate changes by less than ``rtol`` relative.
    """
    z, low, high, span, safe, g, p = _self_adjust_parts(logits)
    n_rows = z.shape[0]
    w = g * p
    c = p / safe[:, None]
    rows = np.arange(n_rows)
    a = np.argmin(z, axis=1)
    b = np.argmax(z, axis=1)
    has_low = (z.min(axis=1) < 0).astype(np.float64)
    has_high = (z.max(axis=1) > 0).astype(np.float64)
    diag = c + w

    def jv(v):
        va, vb = v[rows, a] * has_low, v[rows, b] * has_high
        return (
            diag * v
            - c * va[:, None]
            - (w / safe[:, None]) * (vb - va)[:, None]
            - w * (p * v).sum(axis=1, keepdims=True)
        )

    def jtu(u):
        cu = (c * u).sum(axis=1)
        wu = (w * u).sum(axis=1)
        out = diag * u - p * wu[:, None]
        out[rows, a] -= has_low * (cu - wu / safe)
        out[rows, b] -= has_high * wu / safe
        return out

    sigma = _largest_singular_value(jv, jtu, z.shape, iterations, rtol)
    return np.where(span > 0, sigma, 0.0)


def self_adjust_softmax_raw_weights(logits: FloatArray, length: int):
    """SA-Softmax as first written (Zheng et al., 2025, Eq. 3): z * softmax(z). Weights may be
    negative, and rows need not sum to 1."""
    z = np.asarray(logits, dtype=np.float64)
    return z * softmax(z)


def self_adjust_softmax_raw_jacobian_norm(
    logits: FloatArray, length: int, iterations: int = 500, rtol: float = 1e-10
):
    """Largest singular value of J = diag(p + w) - w p^T, w = z p, p = softmax(z) (d(z_i p_i) /
    d z_j = delta_ij p_i + z_i p_i (delta_ij - p_j)), by power iteration with J applied in O(L)."""
    z = np.asarray(logits, dtype=np.float64)
    p = softmax(z)
    w = z * p
    diag = p + w
    return _largest_singular_value(
        lambda v: diag * v - w * (p * v).sum(axis=1, keepdims=True),
        lambda u: diag * u - p * (w * u).sum(axis=1, keepdims=True),
        z.shape,
        iterations,
        rtol,
    )


# attnlimits.rules imports this module's functions for its table, hence the lookups at call time.
def get(kind: str) -> Rule:
    """The rule ``kind`` of the table (attnlimits.rules): its weights, jacobian_norm, settings."""
    from .rules import get as get_rule

    return get_rule(kind)


def parameters(kind: str) -> list[str]:
    """The keyword parameters a kind takes (besides logits and length), for config checks."""
    return list(get(kind).settings)


def __getattr__(name: str):
    if name == "KINDS":  # the table's rules by name, as config checks and tests list them
        from .rules import RULES

        return RULES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def entropy(weights: FloatArray) -> NDArray[np.float64]:
    """Shannon entropy (nats) of each row renormalised to sum 1 (0 log 0 = 0); NaN for a zero row."""
    w = np.asarray(weights, dtype=np.float64)
    total = w.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = w / total
        terms = np.where(q > 0, q * np.log(q), 0.0)
    return np.where(total[:, 0] > 0, -terms.sum(axis=1), np.nan)


def effective_temperature(logits: FloatArray) -> NDArray[np.float64]:
    """1 / std(l) per row: softmax(l) = softmax(l_std / T_eff) with l_std the row's logits
    standardised to unit variance, so a head whose logits spread over more than 10 units acts as a
    unit-scale softmax at T < 0.1 (the paper's "overly sharp" regime). inf for constant rows."""
    sd = np.asarray(logits, dtype=np.float64).std(axis=1)
    with np.errstate(divide="ignore"):
        return np.where(sd > 0, 1.0 / sd, np.inf)
