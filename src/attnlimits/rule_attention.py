"""The attention of a model trained with another normalizer than softmax (torch; no file I/O).

A model trained in the study carries its attention rule in its config (attribute
:data:`RULE_KEY`, e.g. ``{"kind": "sparsemax"}``); its attention, registered with transformers as
:data:`RULE_ATTENTION`, scores q k^T as softmax attention does and normalizes the scores with that
rule's torch forward (:mod:`attnlimits.attention_rules`), gated by the output gate of a rule that
has one. The rule's learned per-head parameters (Scalable-Softmax's s) are parameters of each
attention module, named by :mod:`attnlimits.rules` (``Learned.attribute``).

Separate from the capture (:mod:`attnlimits.attention_capture`), which delegates here for such
models, because training and evaluation use it without any capture.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from . import attention_rules, rules
from .model_structure import attention_modules

# The attention of a model trained with another normalizer (config attribute RULE_KEY, e.g.
# {"kind": "sparsemax"}); a rule's learned per-head parameters (Scalable-Softmax's s) are
# parameters of each attention module, named by attnlimits.rules (Learned.attribute).
RULE_ATTENTION = "attnlimits_rule"
RULE_KEY = "attnlimits_attention"


def model_rule(module: nn.Module) -> dict[str, Any] | None:
    """The normalizer a trained model's attention uses (None: the family's own softmax)."""
    config = getattr(module, "config", None)
    return getattr(config, RULE_KEY, None) if config is not None else None


def rule_learned(
    module: nn.Module, rule: dict[str, Any], detach: bool = False
) -> dict[str, torch.Tensor]:
    """The rule's learned parameters (attnlimits.rules) the attention module holds, by name;
    ``detach``: as float32 values out of the graph (the capture)."""
    found = {}
    for p in rules.get(rule["kind"]).learned:
        value = getattr(module, p.attribute, None)
        if value is not None:
            found[p.name] = value.detach().float() if detach else value
    return found


# Where an attention module with an output gate keeps its input between its forward pre-hook and
# its attention call (the gate reads X, the attention function only q, k, v).
_GATE_INPUT = "_attnlimits_gate_input"


def _keep_gate_input(module: nn.Module, args: tuple, kwargs: dict) -> None:
    """Forward pre-hook: the hidden states the attention module was called with (its x)."""
    module.__dict__[_GATE_INPUT] = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]


def add_output_gates(model: nn.Module, n_heads: int, head_dim: int, std: float) -> None:
    """Give every attention module of ``model`` gated attention's output gate (arXiv
    2505.06708): a bias-free linear map of the module's input to n_heads x head_dim scores
    (parameter rules.OUTPUT_GATE, initialised N(0, std^2)) and the pre-hook that keeps that input
    for :func:`rule_attention`, which gates the output with it."""
    for module in attention_modules(model):
        hidden = module.q_proj.in_features
        gate = nn.Linear(hidden, n_heads * head_dim, bias=False)
        nn.init.normal_(gate.weight, mean=0.0, std=std)
        module.add_module(rules.OUTPUT_GATE, gate)
        module.register_forward_pre_hook(_keep_gate_input, with_kwargs=True)


def rule_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
):
    """Attention under the model's own normalizer (attnlimits.attention_rules): weights =
    rule(q k^T * scaling) over the keys the mask lets each query see, then weights @ v, gated by
    the module's output gate for a rule that has one (rules.Rule.output_gate).
    Materialises queries x keys per head: meant for the study's small models. Registered as
    RULE_ATTENTION for training; the capture delegates here for such models."""
    rule = model_rule(module)
    if rule is None:
        raise ValueError(f"{RULE_ATTENTION} attention needs config.{RULE_KEY} (a normalizer)")
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    is_causal = kwargs.get("is_causal")
    is_causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    group = query.shape[1] // key.shape[1]
    keys = key.repeat_interleave(group, dim=1) if group > 1 else key
    values = value.repeat_interleave(group, dim=1) if group > 1 else value
    scores = query @ keys.transpose(-1, -2) * scaling
    visible = attention_rules.visible_from_mask(
        attention_mask, is_causal, query.shape[2], keys.shape[2], query.device
    )
    weights = attention_rules.normalize(scores, visible, rule, rule_learned(module, rule))
    if dropout and module.training:
        weights = nn.functional.dropout(weights, p=dropout)
    output = (weights @ values).transpose(1, 2).contiguous()
    return gated_rule_output(module, output, rule), weights


def gated_rule_output(
    module: nn.Module, output: torch.Tensor, rule: dict[str, Any]
) -> torch.Tensor:
    """The attention output (batch, queries, heads, head_dim) gated by the module's output gate
    for a rule that has one (rules.Rule.output_gate), as is otherwise. After the weights: they
    stay the rule's own."""
    if not rules.get(rule["kind"]).output_gate:
        return output
    x = module.__dict__.pop(_GATE_INPUT, None)
    if x is None or not hasattr(module, rules.OUTPUT_GATE):
        raise RuntimeError(
            f"{rule['kind']} needs the attention module's output gate "
            "(attnlimits.extraction.add_output_gates)"
        )
    return attention_rules.gated_output(output, getattr(module, rules.OUTPUT_GATE)(x))


def register_rule_attention() -> str:
    """Register :func:`rule_attention` (SDPA's mask format) with transformers; return its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(RULE_ATTENTION, rule_attention)
    AttentionMaskInterface.register(RULE_ATTENTION, sdpa_mask)
    return RULE_ATTENTION
