"""Attention normalisers a model can be *trained* with (torch, differentiable), for the study.

:mod:`attnlimits.normalizers` re-normalises logits a softmax model learned (a what-if, numpy);
here each rule is the model's own attention, used in its forward, in training and in the
capture. Every rule maps scores (..., queries, keys) -- q k^T times the model's scaling, with
masked keys at -inf -- to weights of the same shape, zero at masked keys:

- ``softmax``: softmax(z / T);
- ``sparsemax``, ``entmax15``: the ``entmax`` package's functions of z / T;
- ``scalable_softmax``: softmax(s log(n) z) (Nakanishi, arXiv 2501.19399), n the keys the row
  sees (t + 1 for causal row t, not the padded length), s learned per head;
- ``self_adjust_softmax_raw``: z * softmax(z) (Zheng et al., arXiv 2502.18277, Eq. 3);
- ``self_adjust_softmax``: its normalised variant (z - min(z_min, 0)) / (max(z_max, 0) -
  min(z_min, 0)) * softmax(z), min and max over the visible keys.

The rules' table is :mod:`attnlimits.rules` (torch-free): it names each rule, its settings and
learned parameters; :data:`FORWARDS` holds the torch forward of each of its rules, and the tests
hold every one equal to the table's numpy weights (the what-if) on the same logits.
"""

from __future__ import annotations

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


# forward(scores, visible, **settings, **learned): the rule of the same name in attnlimits.rules,
# its learned parameters one value per head, shape (heads,).
FORWARDS: dict[str, Callable[..., torch.Tensor]] = {
    "softmax": _softmax,
    "sparsemax": _entmax("sparsemax"),
    "entmax15": _entmax("entmax15"),
    "scalable_softmax": _scalable_softmax,
    "self_adjust_softmax_raw": _self_adjust_softmax_raw,
    "self_adjust_softmax": _self_adjust_softmax,
}


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
