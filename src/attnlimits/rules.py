"""The attention rules, one table: every normalizer the workflow knows, what it is set with, what a
model trained with it learns, its Jacobian, and which of the paper's limits it is meant to relax.

Both uses of a rule are looked up here by its name (the config's ``kind``):

- the what-if (numpy): ``weights`` and ``jacobian_norm`` of a softmax model's logits, rows (S, L),
  keyword settings;
- the study's trained models (:mod:`attnlimits.attention_rules`, torch): the forward of the same
  name there, with the settings and the ``learned`` parameters, one value per head.

Each rule's record (:class:`~attnlimits.rule_record.Rule`) stands beside its numpy functions and
its Jacobian bound in :mod:`attnlimits.normalizers` (the paper's rules, and the table
:data:`RULES` that collects them all) or :mod:`attnlimits.deployed_rules` (those deployed since);
this module is the lookup. It imports neither torch nor transformers: the workflow's planning and
config checks read it. Adding a rule: docs/extending.md ("Adding a normalizer").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .normalizers import RULES
from .rule_record import (
    DISTANCE,
    GRADIENT,
    GRADIENT_LOW_T,
    LENGTH,
    OUTPUT_GATE,
    SEPARABILITY,
    VANISHING,
    Learned,
    Rule,
)

# The table and the lookups, and the record types and constants the table's callers import here.
__all__ = [
    "DISTANCE",
    "GRADIENT",
    "GRADIENT_LOW_T",
    "LENGTH",
    "OUTPUT_GATE",
    "RULES",
    "SEPARABILITY",
    "VANISHING",
    "Learned",
    "Rule",
    "get",
    "jacobian_bound",
    "parameters",
    "trained_settings",
    "what_if_entry",
]


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
