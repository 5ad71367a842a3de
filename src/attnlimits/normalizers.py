"""The attention rules: each normalizer's numpy functions, its Jacobian bound and its record,
side by side, collected at the end into the table :data:`RULES`, with the records of the rules
deployed since the paper (:mod:`attnlimits.deployed_rules`, written the same way). The table is
looked up by :mod:`attnlimits.rules`; the torch forward of a model trained with each rule is in
:mod:`attnlimits.attention_rules`. A new rule goes here: docs/extending.md, "Adding a normalizer".

A what-if: the logits were learned under softmax, and each normalizer here re-normalizes them
(paper, Section 4: sparsity-inducing, length-aware and gradient-controlled rules). Every
normalizer maps logits (S, L) to weights (S, L) and knows the spectral norm of its Jacobian
d weights / d logits per row. Each Jacobian bound is bound(length, outer, **settings): a bound on
||d weights(z / outer) / d z||_2, the rule's own settings (and learned values) as the weights
function takes them.

Sparsemax and 1.5-entmax come from the ``entmax`` package (Peters, Niculae and Martins), which is
built on torch: only their functions import it (this module is torch-free).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from . import gradient
from .deployed_rules import (
    ENTMAX_ALPHA,
    LOG_LENGTH_SOFTMAX,
    SIGMOID_ATTENTION,
    SOFTMAX_SINK,
    SOFTPICK,
    STICK_BREAKING,
)
from .gradient import (
    largest_eigenvalue_diag_minus_rank_one,
    largest_singular_value,
    softmax,
    sum_of_others,
)
from .rule_record import (
    DISTANCE,
    GRADIENT,
    GRADIENT_LOW_T,
    LENGTH,
    SEPARABILITY,
    VANISHING,
    Learned,
    Rule,
)

FloatArray = NDArray[np.floating]


# ---------------------------------------------------------------------------------- softmax(l/T)
def softmax_weights(logits: FloatArray, length: int, temperature: float = 1.0):
    return softmax(logits, temperature)


def softmax_normalizer_jacobian_norm(logits: FloatArray, length: int, temperature: float = 1.0):
    """lambda_max(diag(a) - a a^T) / T at a = softmax(l/T): gradient.softmax_jacobian_norm in the
    normalizers' (logits, length, **settings) signature."""
    return gradient.softmax_jacobian_norm(logits, temperature)


def softmax_bound(length: int, outer: float, temperature: float = 1.0) -> float:
    """softmax(z / (T0 T)): 1 / (2 T0 T) -- Gershgorin, the row sums of |J| are 2 a_i (1 - a_i)
    over T0 T."""
    return 1.0 / (2.0 * float(temperature) * outer)


SOFTMAX = Rule(
    "softmax",
    softmax_weights,
    softmax_normalizer_jacobian_norm,
    (),
    softmax_bound,
    lemma1="none: F = exp(l / T), smooth, positive, the same at every L (Corollary 1)",
    formula="softmax(l / T)",
    jacobian_text="lambda_max(diag(a) - a a^T) / T, a secular-equation root (no L x L matrix)",
    summary="setting `temperature`, default 1",
)


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


def sparse_bound(length: int, outer: float, temperature: float = 1.0) -> float:
    """sparsemax and 1.5-entmax of z / (T0 T): 1 / (T0 T) -- T0 T J is an orthogonal projection
    (sparsemax), or diag(g) - g g^T / sum(g) with g = sqrt(p) <= 1, positive semi-definite and at
    most diag(g) (1.5-entmax)."""
    return 1.0 / (float(temperature) * outer)


# Targets, from the paper's Section 4: "sparse or length-aware rules can improve long-context
# performance" (the distance bound); "normalizers that decouple selectivity from gradient health
# (e.g. Sparsemax, SS-Max, or SA-Softmax)" (T <= 0.1); and per family: sparsity-inducing: "exact
# zeros", against softmax's "dense distributions" (vanishing)
SPARSEMAX = Rule(
    "sparsemax",
    sparsemax_weights,
    sparsemax_jacobian_norm,
    (VANISHING, DISTANCE, GRADIENT_LOW_T),
    sparse_bound,
    lemma1="Eq. 3's form: a projection onto the simplex, no F(l_i) / sum F; exact zeros (F not positive)",
    formula="Euclidean projection of l/T onto the simplex (`entmax.sparsemax`)",
    jacobian_text="J = (diag(s) - s s^T / |S|) / T, s the support indicator: 1/T with two or more "
    "tokens in the support, else 0",
    summary="setting `temperature`, default 1",
)


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


ENTMAX15 = Rule(
    "entmax15",
    entmax15_weights,
    entmax15_jacobian_norm,
    (VANISHING, DISTANCE, GRADIENT_LOW_T),
    sparse_bound,
    lemma1="Eq. 3's form: [l_i / 2 - tau]_+^2, tau set by all logits; exact zeros (F not positive)",
    formula="1.5-entmax of l/T (`entmax.entmax15`)",
    jacobian_text="J = (diag(g) - g g^T / sum g) / T with g = sqrt(p) on the support (Peters et "
    "al., 2019): the same secular solver",
    summary="setting `temperature`, default 1",
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


def scalable_softmax_bound(length: int, outer: float, s) -> NDArray[np.float64]:
    """softmax(s log(n) z / T): |s log n| / (2 T) per row (a learned s may be negative); ``s`` one
    number or one per row."""
    scale = np.asarray(s, dtype=np.float64).reshape(-1) * np.log(length)
    return np.abs(scale) / (2.0 * outer)


# length-aware: "alleviating the vanishing-attention problem"; "switching to a length-aware
# normalizer can restore separability"; and its own length claim
SCALABLE_SOFTMAX = Rule(
    "scalable_softmax",
    scalable_softmax_weights,
    scalable_softmax_jacobian_norm,
    (VANISHING, DISTANCE, SEPARABILITY, GRADIENT_LOW_T, LENGTH),
    scalable_softmax_bound,
    # Nakanishi's s, initialised so that s log(C) = 1 at the training context C
    learned=(Learned("s", "attention_scale", "s_init", lambda context: 1.0 / math.log(context)),),
    lemma1="F independent of L: exp(s log(n) l), the scale grows with the keys n",
    formula="softmax(s log(L) l), L the row's own context length (Nakanishi, 2025)",
    jacobian_text="the softmax Jacobian at T = 1 / (s log L)",
    summary="`s_init`: the learned per-head s starts there; default 1/ln(`training.context`)",
)


# ---------------------------------------------------------------------------- Self-Adjust Softmax
def _self_adjust_parts(logits: FloatArray):
    z = np.asarray(logits, dtype=np.float64)
    low = np.minimum(z.min(axis=1), 0.0)
    high = np.maximum(z.max(axis=1), 0.0)
    span = high - low
    safe = np.where(span > 0, span, 1.0)
    g = (z - low[:, None]) / safe[:, None]  # in [0, 1]; all-zero rows (span 0) give g = 0
    return z, low, high, span, safe, g, softmax(z)


def self_adjust_softmax_weights(logits: FloatArray, length: int):
    """Normalized SA-Softmax (Zheng et al., 2025): (z - min(z_min, 0)) / (max(0, z_max) -
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

    sigma = largest_singular_value(jv, jtu, z.shape, iterations, rtol)
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
    return largest_singular_value(
        lambda v: diag * v - w * (p * v).sum(axis=1, keepdims=True),
        lambda u: diag * u - p * (w * u).sum(axis=1, keepdims=True),
        z.shape,
        iterations,
        rtol,
    )


# gradient-controlled: "keeping the Jacobian spectrum in a healthy band"
SELF_ADJUST_SOFTMAX_RAW = Rule(
    "self_adjust_softmax_raw",
    self_adjust_softmax_raw_weights,
    self_adjust_softmax_raw_jacobian_norm,
    (GRADIENT, GRADIENT_LOW_T),
    sums_to_one=False,
    lemma1="Eq. 3's form: l_i e^(l_i) / sum e^(l_j), numerator and sum differ; weights of either sign",
    signed=True,
    formula="l * softmax(l), SA-Softmax as first written (Zheng et al., 2025, Eq. 3); weights of "
    "either sign, rows need not sum to one",
    jacobian_text="largest singular value of diag(p + w) - w p^T, w = l p, by power iteration "
    "with O(L) products, to 1e-10 relative",
    summary="z·softmax(z)",
)
SELF_ADJUST_SOFTMAX = Rule(
    "self_adjust_softmax",
    self_adjust_softmax_weights,
    self_adjust_softmax_jacobian_norm,
    (GRADIENT, GRADIENT_LOW_T),
    sums_to_one=False,
    lemma1="Eq. 3's form: a min-max rescaled logit times softmax, the rescaling set by the whole row",
    formula="(l - min(l_min, 0)) / (max(0, l_max) - min(l_min, 0)) * softmax(l), the normalized "
    "SA-Softmax (Zheng et al., 2025)",
    jacobian_text="largest singular value of its non-symmetric Jacobian (diagonal plus rank "
    "three), by power iteration with O(L) products, to 1e-10 relative",
    summary="normalized variant",
)


# Gated attention (arXiv 2505.06708, Qwen3-Next): softmax's weights, then a trained elementwise
# sigmoid gate of the layer input, per head, on weights @ v before the output projection. The
# gate acts after the weights, so Lemma 1 and every diagnostic of the weights are softmax's by
# construction; its paper's claim is the attention sink.
GATED_SOFTMAX = Rule(
    "gated_softmax",
    softmax_weights,
    softmax_normalizer_jacobian_norm,
    (),
    softmax_bound,
    lemma1="none: softmax's weights; the gate scales weights @ v, after the weights",
    output_gate=True,
    formula="softmax(l / T): gated attention's weights (Qiu et al., arXiv 2505.06708; Qwen3-Next). "
    "Its trained models also gate each head's output, Y * sigmoid(x W_g) elementwise with x the "
    "layer input, after the weights (`attention_rules.gated_output`)",
    jacobian_text="softmax's",
    summary="gated attention, arXiv 2505.06708: softmax's weights, setting `temperature`, and a "
    "trained sigmoid gate of the layer input, elementwise per head, on weights·v; the weights' "
    "diagnostics are softmax's by construction",
)


# ------------------------------------------------------------------------------------- the table
# Every rule the workflow knows, in the order its tables and lists show them.
RULES: dict[str, Rule] = {
    rule.name: rule
    for rule in (
        SOFTMAX,
        SPARSEMAX,
        ENTMAX15,
        SCALABLE_SOFTMAX,
        SELF_ADJUST_SOFTMAX_RAW,
        SELF_ADJUST_SOFTMAX,
        SIGMOID_ATTENTION,
        SOFTPICK,
        SOFTMAX_SINK,
        ENTMAX_ALPHA,
        LOG_LENGTH_SOFTMAX,
        STICK_BREAKING,
        GATED_SOFTMAX,
    )
}


# ------------------------------------------------------------------ diagnostics of any rule's rows
def entropy(weights: FloatArray) -> NDArray[np.float64]:
    """Shannon entropy (nats) of each row renormalized to sum 1 (0 log 0 = 0); NaN for a zero row."""
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
