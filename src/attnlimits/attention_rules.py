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

The numpy references the tests hold them against are in :mod:`attnlimits.normalizers` (same
kind names) and, for sparsemax and entmax15, the entmax package itself.
"""

from __future__ import annotations

from typing import Any

import torch

RULES = (
    "softmax",
    "sparsemax",
    "entmax15",
    "scalable_softmax",
    "self_adjust_softmax_raw",
    "self_adjust_softmax",
)
# What masked keys hold for the sparse rules: far below any real score (|z| is O(10)), finite so
# that their sort-and-cumsum thresholds stay finite.
_SPARSE_MASK = -1.0e4


def parameters(spec: dict[str, Any]) -> dict[str, Any]:
    """A rule's settings without its kind; refuses unknown kinds and settings."""
    kind = spec.get("kind")
    if kind not in RULES:
        raise ValueError(f"unknown attention rule {kind!r}; known: {', '.join(RULES)}")
    allowed = {
        "softmax": {"temperature"},
        "sparsemax": {"temperature"},
        "entmax15": {"temperature"},
        "scalable_softmax": {"s_init"},
        "self_adjust_softmax_raw": set(),
        "self_adjust_softmax": set(),
    }[kind]
    params = {k: v for k, v in spec.items() if k != "kind"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"attention rule {kind}: unknown settings {unknown}; allowed: {allowed}")
    return params


def normalize(
    scores: torch.Tensor,
    visible: torch.Tensor,
    spec: dict[str, Any],
    s: torch.Tensor | None = None,
) -> torch.Tensor:
    """Weights of ``scores`` (..., heads, queries, keys) under the rule ``spec``.

    ``visible`` (broadcastable to scores, bool): the keys each query attends to; the others get
    weight 0. ``s`` (heads,): Scalable-Softmax's per-head scale (required for that rule).
    """
    kind = spec["kind"]
    params = parameters(spec)
    if kind in ("softmax", "sparsemax", "entmax15"):
        z = scores / float(params.get("temperature", 1.0))
        if kind == "softmax":
            return torch.softmax(z.masked_fill(~visible, float("-inf")), dim=-1)
        import entmax

        z = z.masked_fill(~visible, _SPARSE_MASK)
        weights = entmax.sparsemax(z, dim=-1) if kind == "sparsemax" else entmax.entmax15(z, dim=-1)
        return weights.masked_fill(~visible, 0.0)
    if kind == "scalable_softmax":
        if s is None:
            raise ValueError("scalable_softmax needs the per-head scale s")
        n = visible.sum(dim=-1, keepdim=True).clamp(min=1).to(scores.dtype)
        scale = s.to(scores.dtype)[:, None, None] * torch.log(n)
        return torch.softmax((scale * scores).masked_fill(~visible, float("-inf")), dim=-1)
    p = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    z = scores.masked_fill(~visible, 0.0)
    if kind == "self_adjust_softmax_raw":
        return z * p
    big = torch.finfo(scores.dtype).max
    low = torch.clamp(scores.masked_fill(~visible, big).amin(dim=-1, keepdim=True), max=0.0)
    high = torch.clamp(scores.masked_fill(~visible, -big).amax(dim=-1, keepdim=True), min=0.0)
    span = high - low
    g = (z - low) / torch.where(span > 0, span, torch.ones_like(span))
    return (g * p).masked_fill(~visible, 0.0)


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
