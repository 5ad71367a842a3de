"""The attention rules deployed since the paper (issue 34): sigmoid attention, softpick, softmax
with a sink logit, alpha-entmax with a learned alpha, Llama 4's log-length query scaling and
stick-breaking attention. Each as :mod:`attnlimits.normalizers` holds the paper's: its numpy
weights and Jacobian norm, its Jacobian bound and its :class:`~attnlimits.rule_record.Rule`
record, side by side; :mod:`attnlimits.normalizers` collects the records into the table.

Torch-free: alpha-entmax imports the ``entmax`` package (built on torch) inside its functions.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from . import gradient
from .gradient import (
    largest_eigenvalue_diag_minus_rank_one,
    largest_singular_value,
    softmax,
    sum_of_others,
)
from .rule_record import DISTANCE, GRADIENT_LOW_T, LENGTH, SEPARABILITY, VANISHING, Learned, Rule

FloatArray = NDArray[np.floating]


# Rules whose rows are not distributions (sigmoid, softpick, a sink, stick-breaking): the study's
# diagnostics read their weights as they are, with no renormalization (as for
# self_adjust_softmax_raw): the peak weight, the top-N selection and the Jacobian are of the
# rule's own weights, and the context sum_i w_i x_i is not rescaled, so the missing (or, for
# sigmoid, extra) mass counts as weight on no token; the normalizer job keeps each row's sum
# (row_sum); only the entropy renormalizes a row (``entropy``). Each rule breaks Lemma 1's
# assumption -- a positive normalizer, the same function of the logits at every length L -- its
# own way.
def _log_sigmoid(x: FloatArray) -> NDArray[np.float64]:
    return -np.logaddexp(0.0, -np.asarray(x, dtype=np.float64))


def _sigmoid(x: FloatArray) -> NDArray[np.float64]:
    return np.exp(_log_sigmoid(x))


def sigmoid_attention_weights(logits: FloatArray, length: int):
    """Sigmoid attention (Ramapuram et al., arXiv 2409.04431): sigma(z - log n), n = ``length``,
    the keys the row sees; each weight on its own, no normalizer. Rows sum to anything in (0, n)
    (about 1 when the logits are near 0): the extra or missing mass is left as it is."""
    return _sigmoid(np.asarray(logits, dtype=np.float64) - np.log(length))


def sigmoid_attention_jacobian_norm(logits: FloatArray, length: int):
    """J = diag(s (1 - s)), s = sigma(z - log n): its norm is max_i s_i (1 - s_i) <= 1/4."""
    x = np.asarray(logits, dtype=np.float64) - np.log(length)
    return (_sigmoid(x) * _sigmoid(-x)).max(axis=1)


def sigmoid_bound(length: int, outer: float) -> float:
    """sigma(z / T0 - log n): J = diag(s (1 - s)) / T0, and s (1 - s) <= 1/4."""
    return 1.0 / (4.0 * outer)


# Sigmoid attention: no normalizer at all, a bias -log n that depends on L; each weight is
# sigma(z - log n), so a key's weight need not fall as 1/L ("dense distributions").
SIGMOID_ATTENTION = Rule(
    "sigmoid_attention",
    sigmoid_attention_weights,
    sigmoid_attention_jacobian_norm,
    (VANISHING, DISTANCE, LENGTH),
    sigmoid_bound,
    sums_to_one=False,
    lemma1="Eq. 3's form and F independent of L: sigma(l - log n), no normalizer, a bias in L",
    formula="sigma(l - log L) (Ramapuram et al., arXiv 2409.04431); rows sum to anything in (0, L)",
    jacobian_text="max_i s_i (1 - s_i) (J is diagonal); bound 1/4",
    summary="σ(z − log n)",
)


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
    return largest_singular_value(
        lambda v: a * v - w * (c * v).sum(axis=1, keepdims=True),
        lambda u: a * u - c * (w * u).sum(axis=1, keepdims=True),
        z.shape,
        iterations,
        rtol,
    )


# Softpick: a rectified numerator, exact zeros ("sparsity-inducing") and rows that need not sum
# to one, so no key must take mass ("vanishing").
SOFTPICK = Rule(
    "softpick",
    softpick_weights,
    softpick_jacobian_norm,
    (VANISHING, DISTANCE),
    sums_to_one=False,
    lemma1="Eq. 3's form and F positive: relu(e^l - 1) / sum |e^l - 1|, exact zeros, rows below one",
    formula="relu(e^l - 1) / sum |e^l - 1| (Zuhri et al., arXiv 2504.20966), scaled by "
    "e^-max(l_max, 0), expm1 near 0; a row of zeros gets 0",
    jacobian_text="largest singular value of diag(a) - w c^T by power iteration; no known bound",
    summary="relu(e^z − 1) / Σ|e^z − 1|",
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


def softmax_sink_bound(length: int, outer: float, sink) -> float:
    """Softmax with a sink, of z / T0: 1 / (2 T0), Gershgorin as for softmax: row i of
    |diag(w) - w w^T| sums to w_i (1 - w_i) + w_i sum_{j != i} w_j <= 2 w_i (1 - w_i), whatever
    the sink."""
    return 1.0 / (2.0 * outer)


# A sink logit: the normalizer gains a learned term that can absorb the mass, so the real keys'
# weights need not spread over L ("vanishing-attention").
SOFTMAX_SINK = Rule(
    "softmax_sink",
    softmax_sink_weights,
    softmax_sink_jacobian_norm,
    (VANISHING,),
    softmax_sink_bound,
    # gpt-oss's per-head sink logit (its models learn it from 0-mean initial values)
    learned=(Learned("sink", "attention_sink", "sink_init", lambda context: 0.0),),
    sums_to_one=False,
    lemma1="Eq. 3's form: a learned sink term joins the sum; with bounded logits the 1/L bounds still hold",
    formula="e^l / (e^sink + sum e^l) (gpt-oss); rows sum to < 1",
    jacobian_text="lambda_max(diag(w) - w w^T); bound 1/2",
    summary="`sink_init`: the learned per-head sink logit starts there; default 0",
)


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


def entmax_alpha_bound(length: int, outer: float, pre_alpha) -> float:
    """alpha-entmax of z / T0, 1 < alpha <= 2: 1 / T0, as 1.5-entmax's (diag(g) - g g^T / sum g
    is positive semi-definite and at most diag(g), g = p^(2 - alpha) <= 1)."""
    return 1.0 / outer


# alpha-entmax, alpha learned per head: a sparsity-inducing rule ("exact zeros") whose sparsity
# each head sets.
ENTMAX_ALPHA = Rule(
    "entmax_alpha",
    entmax_alpha_weights,
    entmax_alpha_jacobian_norm,
    (VANISHING, DISTANCE, GRADIENT_LOW_T),
    entmax_alpha_bound,
    # alpha = 1 + sigmoid(pre_alpha), the entmax package's EntmaxAlpha; 0 starts at 1.5-entmax
    learned=(Learned("pre_alpha", "attention_pre_alpha", "pre_alpha_init", lambda context: 0.0),),
    lemma1="Eq. 3's form: alpha-entmax thresholds all logits; exact zeros (F not positive)",
    formula="alpha-entmax, alpha = clamp(1 + sigmoid(pre_alpha), 1.01, 2) (`entmax.entmax_bisect`, "
    "the package's EntmaxAlpha; trained models bisect to their dtype's resolution, 25 halvings in "
    "float32 where the package takes 50: `attention_rules.bisection_steps`)",
    jacobian_text="diag(g) - g g^T / sum g, g = p^(2 - alpha) on the support; bound 1",
    summary="`pre_alpha_init`: α = 1 + sigmoid(pre_alpha) learned per head starts there; "
    "default 0, α = 1.5",
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


def log_length_softmax_bound(
    length: int, outer: float, floor_scale: float = 8192.0, beta: float = 0.1
) -> float:
    """softmax(scale z / T0): scale / (2 T0), scale the row's log-length factor."""
    return float(log_length_scale(length, floor_scale, beta)) / (2.0 * outer)


# Llama 4's log-length query scaling: length-aware as SSMax, the scale grows with log L
# ("switching to a length-aware normalizer can restore separability").
LOG_LENGTH_SOFTMAX = Rule(
    "log_length_softmax",
    log_length_softmax_weights,
    log_length_softmax_jacobian_norm,
    (VANISHING, SEPARABILITY, LENGTH),
    log_length_softmax_bound,
    lemma1="F independent of L: exp(scale(n) l), the scale grows with log floor(n / floor_scale)",
    formula="softmax(c l), c = 1 + beta log(floor(L / floor_scale) + 1) (Llama 4's attention "
    "temperature tuning)",
    jacobian_text="c times the softmax Jacobian at c l; bound c / 2",
    summary="Llama 4's query scaling 1 + beta ln(⌊n / floor_scale⌋ + 1); `floor_scale` default "
    "8192, `beta` default 0.1, Llama 4's",
)


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

    return largest_singular_value(jv, jtu, z.shape, iterations, rtol)


# Stick-breaking: no shared normalizer, each weight depends on the later keys only (a recency
# bias), rows sum to < 1; its paper's claim is length generalisation.
STICK_BREAKING = Rule(
    "stick_breaking",
    stick_breaking_weights,
    stick_breaking_jacobian_norm,
    (VANISHING, DISTANCE, LENGTH),
    sums_to_one=False,
    lemma1="Eq. 3's form: sigma(l_j) prod_{k > j} (1 - sigma(l_k)), no shared normalizer",
    local=True,
    formula="sigma(l_j) prod_{k > j} (1 - sigma(l_k)) from the last key back (Tan et al., arXiv "
    "2410.17980); rows sum to < 1",
    jacobian_text="largest singular value of the upper-triangular J by power iteration "
    "(cumulative sums); no known bound",
    summary="σ(z_j) Π_{k>j}(1 − σ(z_k))",
)
