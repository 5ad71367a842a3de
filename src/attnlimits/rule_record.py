"""What the table of attention rules holds: one :class:`Rule` record per rule, its :class:`Learned`
parameters, the limits a rule may target and the name of the output gate's weights.

The records themselves stand beside each rule's functions in :mod:`attnlimits.normalizers`, which
collects them into the table; :mod:`attnlimits.rules` looks a rule up there. Torch-free, as both:
the workflow's planning and config checks read the table.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

# The keys of attnlimits_workflow.study.LIMITS (the study's measures), which a rule may target.
VANISHING, DISTANCE, SEPARABILITY = "vanishing", "distance", "separability"
GRADIENT, GRADIENT_LOW_T, LENGTH = "gradient", "gradient_low_t", "length"

# The attention module's output gate (Rule.output_gate): a bias-free linear map of the module's
# input (the hidden states after the layer's norm, the x of q = f_q(x)) to heads x head_dim gate
# scores; the saved weights' key (changing it orphans trained models).
OUTPUT_GATE = "attention_output_gate"


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

    The pages users read are written from the last three (``python -m
    attnlimits_workflow.config_docs --write``): ``formula``, the weights with their citation, and
    ``jacobian_text``, its Jacobian norm (and bound), are its row of docs/normalizers.md's table;
    ``summary``, a few words on the rule as a trained model's (its study settings), follows its
    kind in config/README.md's ``study.normalizers`` row (rules in a row with the same summary
    share it).
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
    formula: str = ""
    jacobian_text: str = ""
    summary: str = ""

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
