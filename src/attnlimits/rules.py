"""The attention rules, one table: every normaliser the workflow knows, what it is set with, what a
model trained with it learns, its Jacobian, and which of the paper's limits it is meant to relax.

Both uses of a rule are looked up here by its name (the config's ``kind``):

- the what-if (:mod:`attnlimits.normalizers`, numpy): ``weights`` and ``jacobian_norm`` of a
  softmax model's logits, rows (S, L), keyword settings;
- the study's trained models (:mod:`attnlimits.attention_rules`, torch): the forward of the same
  name there, with the settings and the ``learned`` parameters, one value per head.

This module imports neither torch nor transformers: the workflow's planning and config checks
read it. Adding a rule: docs/extending.md ("Adding a normaliser").
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import normalizers as nz

# The keys of attnlimits_workflow.study.LIMITS (the study's measures), which a rule may target.
VANISHING, DISTANCE, SEPARABILITY = "vanishing", "distance", "separability"
GRADIENT, GRADIENT_LOW_T, LENGTH = "gradient", "gradient_low_t", "length"


@dataclass(frozen=True)
class Learned:
    """A parameter a model trained with the rule learns, one value per head and layer.

    ``name``: the keyword of the rule's ``weights`` / ``jacobian_norm`` (and torch forward) it
    fills, which the what-if then takes per row, shape (rows, 1), from each row's head;
    ``attribute``: the attention module's parameter holding it, shape (heads,) (the saved
    weights' key: changing it orphans trained models); ``init_setting``: the study config's
    setting that initialises it; ``init_default``: its value when unset, from the training
    context length.
    """

    name: str
    attribute: str
    init_setting: str
    init_default: Callable[[int], float]


@dataclass(frozen=True)
class Rule:
    """One attention rule. ``weights(logits, length, **settings)`` and
    ``jacobian_norm(logits, length, **settings)`` are numpy, rows (S, L) of logits, ``length``
    the rows' context length; their keyword parameters are the rule's settings (with defaults).

    ``jacobian_bound(length, outer, **settings)``: an upper bound on
    ||d weights(z / outer) / d z||_2 for every row (a number, or one per row where a
    learned parameter enters it), None where none is known. ``targets``: the limits (keys of
    attnlimits_workflow.study.LIMITS) the paper's Section 4 says the rule's family relaxes.
    ``sums_to_one`` is False for rules whose rows are not distributions. ``lemma1``: the
    assumption of the paper's Lemma 1 the rule breaks (Eq. 3's weights F(l_i) / sum_j F(l_j), F
    smooth, positive and independent of L, bounded logits), or why it breaks none.
    ``output_gate``: a model trained with the rule also has a sigmoid output gate (arXiv
    2505.06708), a trained parameter of each attention module (:data:`OUTPUT_GATE`) that scales
    weights @ v, after the weights: the weights, and every diagnostic of them, are the rule's own.
    """

    name: str
    weights: Callable[..., NDArray[np.float64]]
    jacobian_norm: Callable[..., NDArray[np.float64]]
    targets: tuple[str, ...]
    jacobian_bound: Callable[..., float | NDArray[np.float64]] | None = None
    learned: tuple[Learned, ...] = ()
    sums_to_one: bool = True
    lemma1: str = ""
    output_gate: bool = False
    # weights of either sign (a row's "share" on a key is then no share): the study's sink is n/a
    signed: bool = False
    # a recency window by construction (its rows keep their mass on the last keys): the study's
    # "which rule" entries say so beside the rule
    local: bool = False

    @property
    def settings(self) -> dict[str, Any]:
        """The what-if settings and their defaults: ``weights``' keyword parameters."""
        sig = inspect.signature(self.weights)
        return {k: p.default for k, p in sig.parameters.items() if k not in ("logits", "length")}

    @property
    def trained_settings(self) -> set[str]:
        """A study entry's settings: the what-if's, with each learned parameter replaced by the
        setting that initialises it."""
        learned = {p.name for p in self.learned}
        return {k for k in self.settings if k not in learned} | {
            p.init_setting for p in self.learned
        }


# The attention module's output gate (Rule.output_gate): a bias-free linear map of the module's
# input (the hidden states after the layer's norm, the x of q = f_q(x)) to heads x head_dim gate
# scores; the saved weights' key (changing it orphans trained models).
OUTPUT_GATE = "attention_output_gate"


# ------------------------------------------------------------------------------- Jacobian bounds
# Each is bound(length, outer, **settings): a bound on ||d weights(z / outer) / d z||_2, the
# rule's own settings (and learned values) as the weights function takes them.
def softmax_bound(length: int, outer: float, temperature: float = 1.0) -> float:
    """softmax(z / (T0 T)): 1 / (2 T0 T) -- Gershgorin, the row sums of |J| are 2 a_i (1 - a_i)
    over T0 T."""
    return 1.0 / (2.0 * float(temperature) * outer)


def sparse_bound(length: int, outer: float, temperature: float = 1.0) -> float:
    """sparsemax and 1.5-entmax of z / (T0 T): 1 / (T0 T) -- T0 T J is an orthogonal projection
    (sparsemax), or diag(g) - g g^T / sum(g) with g = sqrt(p) <= 1, positive semi-definite and at
    most diag(g) (1.5-entmax)."""
    return 1.0 / (float(temperature) * outer)


def scalable_softmax_bound(length: int, outer: float, s) -> NDArray[np.float64]:
    """softmax(s log(n) z / T): |s log n| / (2 T) per row (a learned s may be negative); ``s`` one
    number or one per row."""
    scale = np.asarray(s, dtype=np.float64).reshape(-1) * np.log(length)
    return np.abs(scale) / (2.0 * outer)


def sigmoid_bound(length: int, outer: float) -> float:
    """sigma(z / T0 - log n): J = diag(s (1 - s)) / T0, and s (1 - s) <= 1/4."""
    return 1.0 / (4.0 * outer)


def softmax_sink_bound(length: int, outer: float, sink) -> float:
    """Softmax with a sink, of z / T0: 1 / (2 T0), Gershgorin as for softmax: row i of
    |diag(w) - w w^T| sums to w_i (1 - w_i) + w_i sum_{j != i} w_j <= 2 w_i (1 - w_i), whatever
    the sink."""
    return 1.0 / (2.0 * outer)


def entmax_alpha_bound(length: int, outer: float, pre_alpha) -> float:
    """alpha-entmax of z / T0, 1 < alpha <= 2: 1 / T0, as 1.5-entmax's (diag(g) - g g^T / sum g
    is positive semi-definite and at most diag(g), g = p^(2 - alpha) <= 1)."""
    return 1.0 / outer


def log_length_softmax_bound(
    length: int, outer: float, floor_scale: float = 8192.0, beta: float = 0.1
) -> float:
    """softmax(scale z / T0): scale / (2 T0), scale the row's log-length factor."""
    return float(nz.log_length_scale(length, floor_scale, beta)) / (2.0 * outer)


# ------------------------------------------------------------------------------------- the table
_SCALE = Learned(
    "s", "attention_scale", "s_init", lambda context: 1.0 / math.log(context)
)  # Nakanishi's s, initialised so that s log(C) = 1 at the training context C
_SINK = Learned(
    "sink", "attention_sink", "sink_init", lambda context: 0.0
)  # gpt-oss's per-head sink logit (its models learn it from 0-mean initial values)
_PRE_ALPHA = Learned(
    "pre_alpha", "attention_pre_alpha", "pre_alpha_init", lambda context: 0.0
)  # alpha = 1 + sigmoid(pre_alpha), the entmax package's EntmaxAlpha; 0 starts at 1.5-entmax

RULES: dict[str, Rule] = {
    rule.name: rule
    for rule in (
        Rule(
            "softmax",
            nz.softmax_weights,
            nz.softmax_normalizer_jacobian_norm,
            (),
            softmax_bound,
            lemma1="none: F = exp(l / T), smooth, positive, the same at every L (Corollary 1)",
        ),
        # Targets, from the paper's Section 4: "sparse or length-aware rules can improve
        # long-context performance" (the distance bound); "normalisers that decouple selectivity
        # from gradient health (e.g. Sparsemax, SS-Max, or SA-Softmax)" (T <= 0.1); and per family:
        # sparsity-inducing: "exact zeros", against softmax's "dense distributions" (vanishing)
        Rule(
            "sparsemax",
            nz.sparsemax_weights,
            nz.sparsemax_jacobian_norm,
            (VANISHING, DISTANCE, GRADIENT_LOW_T),
            sparse_bound,
            lemma1="Eq. 3's form: a projection onto the simplex, no F(l_i) / sum F; exact zeros (F not positive)",
        ),
        Rule(
            "entmax15",
            nz.entmax15_weights,
            nz.entmax15_jacobian_norm,
            (VANISHING, DISTANCE, GRADIENT_LOW_T),
            sparse_bound,
            lemma1="Eq. 3's form: [l_i / 2 - tau]_+^2, tau set by all logits; exact zeros (F not positive)",
        ),
        # length-aware: "alleviating the vanishing-attention problem"; "switching to a
        # length-aware normaliser can restore separability"; and its own length claim
        Rule(
            "scalable_softmax",
            nz.scalable_softmax_weights,
            nz.scalable_softmax_jacobian_norm,
            (VANISHING, DISTANCE, SEPARABILITY, GRADIENT_LOW_T, LENGTH),
            scalable_softmax_bound,
            learned=(_SCALE,),
            lemma1="F independent of L: exp(s log(n) l), the scale grows with the keys n",
        ),
        # gradient-controlled: "keeping the Jacobian spectrum in a healthy band"
        Rule(
            "self_adjust_softmax_raw",
            nz.self_adjust_softmax_raw_weights,
            nz.self_adjust_softmax_raw_jacobian_norm,
            (GRADIENT, GRADIENT_LOW_T),
            sums_to_one=False,
            lemma1="Eq. 3's form: l_i e^(l_i) / sum e^(l_j), numerator and sum differ; weights of either sign",
            signed=True,
        ),
        Rule(
            "self_adjust_softmax",
            nz.self_adjust_softmax_weights,
            nz.self_adjust_softmax_jacobian_norm,
            (GRADIENT, GRADIENT_LOW_T),
            sums_to_one=False,
            lemma1="Eq. 3's form: a min-max rescaled logit times softmax, the rescaling set by the whole row",
        ),
        # The rules deployed since the paper (issue 34). Each breaks Lemma 1's assumption -- a
        # positive normaliser, the same function of the logits at every length L -- its own way.
        # Sigmoid attention: no normaliser at all, a bias -log n that depends on L; each weight
        # is sigma(z - log n), so a key's weight need not fall as 1/L ("dense distributions").
        Rule(
            "sigmoid_attention",
            nz.sigmoid_attention_weights,
            nz.sigmoid_attention_jacobian_norm,
            (VANISHING, DISTANCE, LENGTH),
            sigmoid_bound,
            sums_to_one=False,
            lemma1="Eq. 3's form and F independent of L: sigma(l - log n), no normaliser, a bias in L",
        ),
        # Softpick: a rectified numerator, exact zeros ("sparsity-inducing") and rows that need
        # not sum to one, so no key must take mass ("vanishing").
        Rule(
            "softpick",
            nz.softpick_weights,
            nz.softpick_jacobian_norm,
            (VANISHING, DISTANCE),
            sums_to_one=False,
            lemma1="Eq. 3's form and F positive: relu(e^l - 1) / sum |e^l - 1|, exact zeros, rows below one",
        ),
        # A sink logit: the normaliser gains a learned term that can absorb the mass, so the
        # real keys' weights need not spread over L ("vanishing-attention").
        Rule(
            "softmax_sink",
            nz.softmax_sink_weights,
            nz.softmax_sink_jacobian_norm,
            (VANISHING,),
            softmax_sink_bound,
            learned=(_SINK,),
            sums_to_one=False,
            lemma1="Eq. 3's form: a learned sink term joins the sum; with bounded logits the 1/L bounds still hold",
        ),
        # alpha-entmax, alpha learned per head: a sparsity-inducing rule ("exact zeros") whose
        # sparsity each head sets.
        Rule(
            "entmax_alpha",
            nz.entmax_alpha_weights,
            nz.entmax_alpha_jacobian_norm,
            (VANISHING, DISTANCE, GRADIENT_LOW_T),
            entmax_alpha_bound,
            learned=(_PRE_ALPHA,),
            lemma1="Eq. 3's form: alpha-entmax thresholds all logits; exact zeros (F not positive)",
        ),
        # Llama 4's log-length query scaling: length-aware as SSMax, the scale grows with log L
        # ("switching to a length-aware normaliser can restore separability").
        Rule(
            "log_length_softmax",
            nz.log_length_softmax_weights,
            nz.log_length_softmax_jacobian_norm,
            (VANISHING, SEPARABILITY, LENGTH),
            log_length_softmax_bound,
            lemma1="F independent of L: exp(scale(n) l), the scale grows with log floor(n / floor_scale)",
        ),
        # Stick-breaking: no shared normaliser, each weight depends on the later keys only (a
        # recency bias), rows sum to < 1; its paper's claim is length generalisation.
        Rule(
            "stick_breaking",
            nz.stick_breaking_weights,
            nz.stick_breaking_jacobian_norm,
            (VANISHING, DISTANCE, LENGTH),
            sums_to_one=False,
            lemma1="Eq. 3's form: sigma(l_j) prod_{k > j} (1 - sigma(l_k)), no shared normaliser",
            local=True,
        ),
        # Gated attention (arXiv 2505.06708, Qwen3-Next): softmax's weights, then a trained
        # elementwise sigmoid gate of the layer input, per head, on weights @ v before the output
        # projection. The gate acts after the weights, so Lemma 1 and every diagnostic of the
        # weights are softmax's by construction; its paper's claim is the attention sink.
        Rule(
            "gated_softmax",
            nz.softmax_weights,
            nz.softmax_normalizer_jacobian_norm,
            (),
            softmax_bound,
            lemma1="none: softmax's weights; the gate scales weights @ v, after the weights",
            output_gate=True,
        ),
    )
}


def get(kind: str) -> Rule:
    """The rule ``kind`` of the table: its weights, jacobian_norm, settings."""
    try:
        return RULES[kind]
    except KeyError:
        raise ValueError(f"unknown normalizer kind {kind!r}; known: {sorted(RULES)}") from None


def parameters(kind: str) -> list[str]:
    """The keyword parameters a kind takes (besides logits and length), for config checks."""
    return list(get(kind).settings)


def trained_settings(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A study entry's settings without its kind (``{"kind": ..., **settings}``); refuses unknown
    kinds and settings."""
    kind = spec.get("kind")
    if kind not in RULES:
        raise ValueError(f"unknown attention rule {kind!r}; known: {', '.join(RULES)}")
    allowed = RULES[kind].trained_settings
    params = {k: v for k, v in spec.items() if k != "kind"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"attention rule {kind}: unknown settings {unknown}; allowed: {allowed}")
    return params


def what_if_entry(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The what-if entry (beyond.normalizers) of a trained model's own rule: its settings but the
    learned parameters' initialisers, since the model's learned values replace them. An unknown
    kind is kept whole (trained_settings reports it)."""
    rule = RULES.get(spec["kind"])
    inits = {p.init_setting for p in rule.learned} if rule else set()
    return {k: v for k, v in spec.items() if k not in inits}


def jacobian_bound(
    kind: str, outer: float, length: int, arguments: Mapping[str, Any]
) -> float | NDArray[np.float64] | None:
    """The rule's bound on ||d rule(z / outer) / d z||_2 at rows of context ``length``, with the
    weights' keyword ``arguments`` (its settings and learned values); None where none is known."""
    rule = get(kind)
    if rule.jacobian_bound is None:
        return None
    missing = [p.name for p in rule.learned if p.name not in arguments]
    if missing:
        raise ValueError(f"the {rule.name} bound needs the learned {', '.join(missing)}")
    return rule.jacobian_bound(length, outer, **arguments)
