"""Attention normalizers a model can be *trained* with (torch, differentiable), for the study.

:mod:`attnlimits.normalizers` re-normalizes logits a softmax model learned (a what-if, numpy);
here each rule is the model's own attention, used in its forward, in training and in the
capture. Every rule maps scores (..., queries, keys) -- q k^T times the model's scaling, with
masked keys at -inf -- to weights of the same shape, zero at masked keys:

- ``softmax``: softmax(z / T);
- ``sparsemax``, ``entmax15``: the ``entmax`` package's functions of z / T;
- ``scalable_softmax``: softmax(s log(n) z) (Nakanishi, arXiv 2501.19399), n the keys the row
  sees (t + 1 for causal row t, not the padded length), s learned per head;
- ``self_adjust_softmax_raw``: z * softmax(z) (Zheng et al., arXiv 2502.18277, Eq. 3);
- ``self_adjust_softmax``: its normalized variant (z - min(z_min, 0)) / (max(z_max, 0) -
  min(z_min, 0)) * softmax(z), min and max over the visible keys;
- ``sigmoid_attention``: sigma(z - log n) (arXiv 2409.04431), n the visible keys;
- ``softpick``: relu(e^z - 1) / sum |e^z - 1| over the visible keys (arXiv 2504.20966);
- ``softmax_sink``: softmax over the visible keys and a learned per-head sink logit, the sink's
  weight dropped (gpt-oss);
- ``entmax_alpha``: alpha-entmax, alpha = 1 + sigmoid(pre_alpha) learned per head (the
  ``entmax`` package's entmax_bisect);
- ``log_length_softmax``: softmax(scale z), scale = 1 + beta log(floor(n / floor_scale) + 1)
  (Llama 4's attention temperature tuning; n = t + 1 on a causal row);
- ``stick_breaking``: sigma(z_j) prod_{k > j visible} (1 - sigma(z_k)) (arXiv 2410.17980);
- ``gated_softmax``: softmax(z / T), the weights of gated attention (arXiv 2505.06708), whose
  trained output gate (:func:`gated_output`) acts on weights @ v, after the weights.

The rules' table is :mod:`attnlimits.rules` (torch-free): it names each rule, its settings and
learned parameters; :data:`FORWARDS` holds the torch forward of each of its rules, and the tests
hold every one equal to the table's numpy weights (the what-if) on the same logits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from . import rules

# What masked keys hold for the sparse rules: far below any real score (|z| is O(10)), finite so
# that their sort-and-cumsum thresholds stay finite.
_SPARSE_MASK = -1.0e4


def parameters(spec: dict[str, Any]) -> dict[str, Any]:
    """A rule's settings without its kind; refuses unknown kinds and settings."""
    return rules.trained_settings(spec)


def _softmax(scores, visible, temperature=1.0):
    z = scores / float(temperature)
    return torch.softmax(z.masked_fill(~visible, float("-inf")), dim=-1)


def _entmax(name: str):
    def forward(scores, visible, temperature=1.0):
        import entmax

        z = (scores / float(temperature)).masked_fill(~visible, _SPARSE_MASK)
        return getattr(entmax, name)(z, dim=-1).masked_fill(~visible, 0.0)

    return forward


def _scalable_softmax(scores, visible, s):
    n = visible.sum(dim=-1, keepdim=True).clamp(min=1).to(scores.dtype)
    scale = s.to(scores.dtype)[:, None, None] * torch.log(n)
    return torch.softmax((scale * scores).masked_fill(~visible, float("-inf")), dim=-1)


def _self_adjust_softmax_raw(scores, visible):
    p = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    return scores.masked_fill(~visible, 0.0) * p


def _self_adjust_softmax(scores, visible):
    p = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    z = scores.masked_fill(~visible, 0.0)
    big = torch.finfo(scores.dtype).max
    low = torch.clamp(scores.masked_fill(~visible, big).amin(dim=-1, keepdim=True), max=0.0)
    high = torch.clamp(scores.masked_fill(~visible, -big).amax(dim=-1, keepdim=True), min=0.0)
    span = high - low
    g = (z - low) / torch.where(span > 0, span, torch.ones_like(span))
    return (g * p).masked_fill(~visible, 0.0)


def _visible_count(scores, visible):
    return visible.sum(dim=-1, keepdim=True).clamp(min=1).to(scores.dtype)


def _sigmoid_attention(scores, visible):
    z = scores.masked_fill(~visible, 0.0)
    return torch.sigmoid(z - torch.log(_visible_count(scores, visible))).masked_fill(~visible, 0.0)


def _softpick(scores, visible):
    # (e^z - 1) e^(-m), m = max(z_max, 0), each branch finite everywhere (torch.where
    # differentiates both); masked keys hold 0, whose term e^0 - 1 = 0 adds nothing.
    z = scores.masked_fill(~visible, 0.0)
    m = torch.clamp(z.amax(dim=-1, keepdim=True), min=0.0)
    positive = torch.exp(z - m) * -torch.expm1(-torch.clamp(z, min=0.0))
    negative = torch.exp(-m) * torch.expm1(torch.clamp(z, max=0.0))
    e = torch.where(z >= 0, positive, negative)
    total = e.abs().sum(dim=-1, keepdim=True)
    # a row of zeros is 0 / 0: weights 0, and a safe denominator keeps its gradient finite
    return torch.relu(e) / torch.where(total > 0, total, torch.ones_like(total))


def _softmax_sink(scores, visible, sink):
    z = scores.masked_fill(~visible, float("-inf"))
    column = sink.to(scores.dtype)[:, None, None].expand(*z.shape[:-1], 1)
    return torch.softmax(torch.cat([z, column], dim=-1), dim=-1)[..., :-1]


def bisection_steps(dtype: torch.dtype) -> int:
    """Halvings of entmax_bisect's threshold bracket (width at most 1 in its scaled units) that
    reach the dtype's resolution: 25 in float32, 54 in float64. The package's fixed 50 spends
    half a float32 training step's attention on halvings below rounding (docs/performance.md)."""
    return round(-math.log2(torch.finfo(dtype).eps)) + 2


def _entmax_alpha(scores, visible, pre_alpha):
    import entmax

    alpha = torch.clamp(1.0 + torch.sigmoid(pre_alpha.to(scores.dtype)), 1.01, 2.0)
    alpha = alpha[:, None, None].expand(*scores.shape[:-1], 1)
    z = scores.masked_fill(~visible, _SPARSE_MASK)
    weights = entmax.entmax_bisect(z, alpha, dim=-1, n_iter=bisection_steps(scores.dtype))
    return weights.masked_fill(~visible, 0.0)


def _log_length_softmax(scores, visible, floor_scale=8192.0, beta=0.1):
    n = _visible_count(scores, visible)
    scale = 1.0 + float(beta) * torch.log(torch.floor(n / float(floor_scale)) + 1.0)
    return torch.softmax((scale * scores).masked_fill(~visible, float("-inf")), dim=-1)


def _stick_breaking(scores, visible):
    z = scores.masked_fill(~visible, 0.0)
    log_rest = torch.nn.functional.logsigmoid(-z).masked_fill(~visible, 0.0)  # log(1 - beta)
    later = torch.flip(torch.cumsum(torch.flip(log_rest, [-1]), -1), [-1]) - log_rest
    log_w = torch.nn.functional.logsigmoid(z) + later
    return torch.exp(log_w).masked_fill(~visible, 0.0)


# forward(scores, visible, **settings, **learned): the rule of the same name in attnlimits.rules,
# its learned parameters one value per head, shape (heads,).
FORWARDS: dict[str, Callable[..., torch.Tensor]] = {
    "softmax": _softmax,
    "sparsemax": _entmax("sparsemax"),
    "entmax15": _entmax("entmax15"),
    "scalable_softmax": _scalable_softmax,
    "self_adjust_softmax_raw": _self_adjust_softmax_raw,
    "self_adjust_softmax": _self_adjust_softmax,
    "sigmoid_attention": _sigmoid_attention,
    "softpick": _softpick,
    "softmax_sink": _softmax_sink,
    "entmax_alpha": _entmax_alpha,
    "log_length_softmax": _log_length_softmax,
    "stick_breaking": _stick_breaking,
    "gated_softmax": _softmax,  # the weights are softmax's; the gate is gated_output
}


def gated_output(output: torch.Tensor, gate_scores: torch.Tensor) -> torch.Tensor:
    """Gated attention's output (arXiv 2505.06708, its head-specific elementwise gate after the
    attention): Y * sigmoid(X W_g), Y = weights @ v, (..., queries, heads, head_dim), and
    ``gate_scores`` = X W_g, (..., queries, heads * head_dim), from the attention's input X; each
    head's block of scores gates that head's output. The weights are not touched."""
    return output * torch.sigmoid(gate_scores).reshape(output.shape)


def normalize(
    scores: torch.Tensor,
    visible: torch.Tensor,
    spec: dict[str, Any],
    learned: Mapping[str, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Weights of ``scores`` (..., heads, queries, keys) under the rule ``spec``.

    ``visible`` (broadcastable to scores, bool): the keys each query attends to; the others get
    weight 0. ``learned``: the rule's learned parameters by name (attnlimits.rules), each (heads,);
    required for the rules that have them (Scalable-Softmax's s).
    """
    kind = spec["kind"]
    settings = parameters(spec)
    for p in rules.get(kind).learned:
        settings.pop(p.init_setting, None)  # the trained value replaces its initialiser
        if learned is None or p.name not in learned:
            raise ValueError(f"{kind} needs the learned {p.name}")
        settings[p.name] = learned[p.name]
    return FORWARDS[kind](scores, visible, **settings)


def visible_from_mask(
    mask: torch.Tensor | None, is_causal: bool, n_queries: int, n_keys: int, device
) -> torch.Tensor:
    """(batch or 1, 1, queries, keys) bool: True where a query attends to a key, from the mask the
    model passes its attention (bool True = attend, or additive float), or the causal flag."""
    if mask is not None:
        if mask.dtype != torch.bool:
            mask = mask > torch.finfo(mask.dtype).min / 2
        return mask[..., :n_queries, :n_keys]
    if is_causal and n_queries > 1:
        q = torch.arange(n_keys - n_queries, n_keys, device=device)[:, None]
        return (torch.arange(n_keys, device=device)[None, :] <= q)[None, None]
    return torch.ones(1, 1, n_queries, n_keys, dtype=torch.bool, device=device)
