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

import numpy as np
from numpy.typing import NDArray

from . import gradient
from .gradient import largest_eigenvalue_diag_minus_rank_one, softmax, sum_of_others

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


# -------------------------------------------------------------------------- 2026 rules (issue 34)
# Rules whose rows are not distributions (sigmoid, softpick, a sink, stick-breaking): the study's
# diagnostics read their weights as they are, with no renormalisation (as for
# self_adjust_softmax_raw): the peak weight, the top-N selection and the Jacobian are of the
# rule's own weights, and the context sum_i w_i x_i is not rescaled, so the missing (or, for
# sigmoid, extra) mass counts as weight on no token; the normalizer job keeps each row's sum
# (row_sum); only the entropy renormalises a row (``entropy``).
def _log_sigmoid(x: FloatArray) -> NDArray[np.float64]:
    return -np.logaddexp(0.0, -np.asarray(x, dtype=np.float64))


def _sigmoid(x: FloatArray) -> NDArray[np.float64]:
    return np.exp(_log_sigmoid(x))


def sigmoid_attention_weights(logits: FloatArray, length: int):
    """Sigmoid attention (Ramapuram et al., arXiv 2409.04431): sigma(z - log n), n = ``length``,
    the keys the row sees; each weight on its own, no normaliser. Rows sum to anything in (0, n)
    (about 1 when the logits are near 0): the extra or missing mass is left as it is."""
    return _sigmoid(np.asarray(logits, dtype=np.float64) - np.log(length))


def sigmoid_attention_jacobian_norm(logits: FloatArray, length: int):
    """J = diag(s (1 - s)), s = sigma(z - log n): its norm is max_i s_i (1 - s_i) <= 1/4."""
    x = np.asarray(logits, dtype=np.float64) - np.log(length)
    return (_sigmoid(x) * _sigmoid(-x)).max(axis=1)


def _softpick_terms(z: NDArray[np.float64]) -> NDArray[np.float64]:
    """(e^z - 1) e^(-m), m = max(z_max, 0) per row, with no overflow and no cancellation near 0:
    e^(z - m) (1 - e^(-z)) for z >= 0, e^(-m) (e^z - 1) for z < 0, via expm1."""
    m = np.maximum(z.max(axis=1, keepdims=True), 0.0)
    positive = np.exp(z - m) * -np.expm1(-np.maximum(z, 0.0))
    negative = np.exp(-m) * np.expm1(np.minimum(z, 0.0))
    return np.where(z >= 0, positive, negative)


def softpick_weights(logits: FloatArray, length: int):
    """Softpick (Zuhri et al., arXiv 2504.20966): relu(e^z - 1) / sum_j |e^z_j - 1|, computed as
    both scaled by e^(-max(z_max, 0)). Rows sum to at most 1 (exactly 1 when no logit is
    negative); negative logits get weight 0 and take mass from the row, the missing mass that
    the diagnostics leave unassigned. A row of zeros is 0 / 0: weights 0 here (the paper adds
    an epsilon to the denominator, which gives the same 0)."""
    e = _softpick_terms(np.asarray(logits, dtype=np.float64))
    total = np.abs(e).sum(axis=1, keepdims=True)
    return np.maximum(e, 0.0) / np.where(total > 0, total, 1.0)


def softpick_jacobian_norm(
    logits: FloatArray, length: int, iterations: int = 500, rtol: float = 1e-10
):
    """Largest singular value of J = diag(a) - w c^T, a_i = [z_i > 0] e^z_i / D,
    c_j = sign(z_j) e^z_j / D, D = sum |e^z - 1| (w = relu(e^z - 1) / D), by power iteration
    with J applied in O(L). At z_i = 0 the one-sided derivatives relu'(0) = sign(0) = 0 (torch's);
    a row of zeros has norm 0."""
    z = np.asarray(logits, dtype=np.float64)
    e = _softpick_terms(z)
    total = np.abs(e).sum(axis=1, keepdims=True)
    safe = np.where(total > 0, total, 1.0)
    scaled_exp = np.exp(z - np.maximum(z.max(axis=1, keepdims=True), 0.0)) / safe
    w = np.maximum(e, 0.0) / safe
    a = np.where(z > 0, scaled_exp, 0.0)
    c = np.sign(z) * scaled_exp
    return _largest_singular_value(
        lambda v: a * v - w * (c * v).sum(axis=1, keepdims=True),
        lambda u: a * u - c * (w * u).sum(axis=1, keepdims=True),
        z.shape,
        iterations,
        rtol,
    )


def softmax_sink_weights(logits: FloatArray, length: int, sink: float | FloatArray = 0.0):
    """Softmax with a sink logit (as in the gpt-oss models): e^z_i / (e^sink + sum_j e^z_j), the
    sink an extra logit inside the softmax whose weight is dropped. ``sink`` one number or one
    per row, shape (rows, 1) (a trained model's per-head values). Rows sum to 1 - e^sink / (...)
    < 1: the sink's share is the missing mass, left unassigned by the diagnostics."""
    z = np.asarray(logits, dtype=np.float64)
    sink = np.broadcast_to(np.asarray(sink, dtype=np.float64), (z.shape[0], 1))
    extended = np.concatenate([z, sink], axis=1)
    return softmax(extended)[:, :-1]


def softmax_sink_jacobian_norm(logits: FloatArray, length: int, sink: float | FloatArray = 0.0):
    """J = diag(w) - w w^T (the softmax Jacobian of the extended row, restricted to the real
    keys): lambda_max, with w_i (1 - w_i) from the others' and the sink's weights."""
    z = np.asarray(logits, dtype=np.float64)
    sink = np.broadcast_to(np.asarray(sink, dtype=np.float64), (z.shape[0], 1))
    full = softmax(np.concatenate([z, sink], axis=1))
    w = full[:, :-1]
    rest = sum_of_others(full)[:, :-1]  # 1 - w_i, the sink's weight included
    return largest_eigenvalue_diag_minus_rank_one(w, w, diagonal_minus_v_squared=w * rest)


def entmax_alpha(pre_alpha: float | FloatArray) -> NDArray[np.float64]:
    """alpha = 1 + sigmoid(pre_alpha), clamped to [1.01, 2]: the ``entmax`` package's
    EntmaxAlpha (Correia et al., 2019, "Adaptively Sparse Transformers"), a learned per-head
    alpha between softmax (1) and sparsemax (2)."""
    return np.clip(1.0 + _sigmoid(pre_alpha), 1.01, 2.0)


def entmax_alpha_weights(logits: FloatArray, length: int, pre_alpha: float | FloatArray = 0.0):
    """alpha-entmax (Peters et al., 2019) with alpha = entmax_alpha(pre_alpha), one number or one
    per row (rows, 1), by the ``entmax`` package's bisection; pre_alpha 0 is 1.5-entmax."""
    import entmax  # torch-based; imported only by the jobs that need it
    import torch

    z = np.asarray(logits, dtype=np.float64)
    alpha = np.broadcast_to(entmax_alpha(pre_alpha), (z.shape[0], 1)).copy()
    with torch.no_grad():
        return entmax.entmax_bisect(torch.from_numpy(z), torch.from_numpy(alpha), dim=-1).numpy()


def entmax_alpha_jacobian_norm(
    logits: FloatArray, length: int, pre_alpha: float | FloatArray = 0.0
):
    """J = diag(g) - g g^T / sum g, g_i = p_i^(2 - alpha) on the support, 0 off it (Peters et
    al., 2019, Prop. 1): as entmax15_jacobian_norm with the row's alpha."""
    p = entmax_alpha_weights(logits, length, pre_alpha)
    alpha = np.broadcast_to(entmax_alpha(pre_alpha), (p.shape[0], 1))
    g = np.where(p > 0, np.power(p, 2.0 - alpha, where=p > 0, out=np.zeros_like(p)), 0.0)
    total = g.sum(axis=1, keepdims=True)
    return largest_eigenvalue_diag_minus_rank_one(
        g, g / np.sqrt(total), diagonal_minus_v_squared=g * sum_of_others(g) / total
    )


def log_length_scale(length, floor_scale: float = 8192.0, beta: float = 0.1):
    """Llama 4's attention temperature tuning: 1 + beta log(floor((t + 1) / floor_scale) + 1) for
    the query at position t; here t + 1 = ``length``, the keys the row sees (the same for a
    causal row). Llama 4's defaults: floor_scale 8192, beta (its attn_scale) 0.1."""
    return 1.0 + beta * np.log(np.floor(np.asarray(length, dtype=np.float64) / floor_scale) + 1.0)


def log_length_softmax_weights(
    logits: FloatArray, length: int, floor_scale: float = 8192.0, beta: float = 0.1
):
    """softmax(scale z), scale = log_length_scale(length): queries scaled up with log length
    (Llama 4; 1 below floor_scale keys, so at the defaults a short context is plain softmax)."""
    scale = log_length_scale(length, floor_scale, beta)
    return softmax(scale * np.asarray(logits, dtype=np.float64))


def log_length_softmax_jacobian_norm(
    logits: FloatArray, length: int, floor_scale: float = 8192.0, beta: float = 0.1
):
    """scale ||J_softmax|| at the scaled logits (scale >= 1 > 0)."""
    scale = log_length_scale(length, floor_scale, beta)
    return scale * gradient.softmax_jacobian_norm(scale * np.asarray(logits, dtype=np.float64), 1.0)


def _stick_breaking_parts(logits: FloatArray):
    z = np.asarray(logits, dtype=np.float64)
    log_rest = _log_sigmoid(-z)  # log(1 - beta_k)
    # sum over the later keys k > j: the reverse inclusive cumulative sum minus the key's own
    later = np.flip(np.cumsum(np.flip(log_rest, axis=1), axis=1), axis=1) - log_rest
    w = np.exp(_log_sigmoid(z) + later)
    return z, _sigmoid(z), w


def stick_breaking_weights(logits: FloatArray, length: int):
    """Stick-breaking attention (Tan et al., arXiv 2410.17980): beta_j = sigma(z_j),
    w_j = beta_j prod_{k > j} (1 - beta_k), the product over the row's later keys: the stick is
    broken from the most recent key (the last column) backwards. Log-space, as the paper's
    stable form. The paper's query i breaks the stick over the keys j < i ("for each token
    before the current"); here over the keys the row sees, which under the study's causal mask
    include the query's own (its last key takes sigma(z_t) first). Rows sum to 1 - prod_k (1 - beta_k) < 1: the stick left over is the missing
    mass, left unassigned by the diagnostics."""
    return _stick_breaking_parts(logits)[2]


def stick_breaking_jacobian_norm(
    logits: FloatArray, length: int, iterations: int = 500, rtol: float = 1e-10
):
    """Largest singular value of the upper-triangular J: d w_j / d z_j = w_j (1 - beta_j),
    d w_j / d z_k = -w_j beta_k for k > j, 0 for k < j; power iteration with J applied in O(L)
    by cumulative sums."""
    z, beta, w = _stick_breaking_parts(logits)
    diag = w * (1.0 - beta)

    def jv(v):  # (J v)_j = diag_j v_j - w_j sum_{k > j} beta_k v_k
        bv = beta * v
        later = np.flip(np.cumsum(np.flip(bv, axis=1), axis=1), axis=1) - bv
        return diag * v - w * later

    def jtu(u):  # (J^T u)_k = diag_k u_k - beta_k sum_{j < k} w_j u_j
        wu = w * u
        return diag * u - beta * (np.cumsum(wu, axis=1) - wu)

    return _largest_singular_value(jv, jtu, z.shape, iterations, rtol)


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
