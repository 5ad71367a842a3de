"""The effective attention set size N*: how many keys per query a model needs (torch).

The protocol of Mudarisov, Burtsev and State, "Retrieval Capacity of Self-Attention Under
Competition" (2026), the follow-up of the paper this workflow reproduces:

- **The intervention.** At every query, head and layer keep only the N keys of highest attention
  weight (``selection="attention"``), of highest contribution alpha_i ||v_i||
  (``"contribution"``), or N drawn uniformly among the visible keys (``"random"``, the control).
  The kept weights stay as they are (``mode="delete"``) or are scaled back to the row's mass
  (``"renormalize"``: for a softmax row, divided by their own mass). The selection is recomputed
  from the current activations throughout the intervened forward pass. A query with at most N
  visible keys keeps them all.
- **The measure.** dNLL_rel(N) = (NLL(M_N) - NLL(M)) / NLL(M) on the same scored targets.
- **N*_tau** = min {N >= 1 : dNLL_rel(N) <= tau}: powers of two first, then the crossing refined
  to an integer (:func:`attnlimits.effective_search.search_n_star`).

The intervention is an attention function registered with transformers' AttentionInterface
(:func:`register_intervention`), as the capture is. Without an active intervention, or where N is
at least the number of keys (then every query keeps every key it sees), it is the capture's own
attention (attnlimits.attention_capture.capture_attention: SDPA, soft-caps, sinks, a trained
model's normalizer), so the plain forward is unchanged bit for bit. Otherwise it scores ``block``
query rows at a time: memory per layer is heads x block x keys, never keys x keys.

Ties: among keys of equal score the lower index is kept (a stable sort), so the selection is a
function of the scores alone. The plain reference of one attention call is
:func:`attnlimits.reference.top_n_attention` (numpy).
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from . import attention_rules, rules
from .attention_capture import _UNREPRODUCED, ATTENTION_BLOCK, capture_attention, soft_capped
from .effective_search import MODES, SELECTIONS
from .model_structure import _is_differential
from .rule_attention import gated_rule_output, model_rule, rule_learned

INTERVENTION = "attnlimits_top_n"


@dataclass(frozen=True)
class Intervention:
    """Keep ``n`` keys per query row, chosen by ``selection``, their weights kept or scaled back
    (``mode``); ``seed`` seeds the random selection (one generator per :func:`intervene` context
    and device, drawn in the order the layers and blocks run: callers open one context per
    forward pass); ``block`` query rows are scored at a time."""

    n: int
    selection: str = "attention"
    mode: str = "delete"
    seed: int = 0
    block: int = ATTENTION_BLOCK

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"the intervention keeps N >= 1 keys per query, got N = {self.n}")
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection {self.selection!r} is not one of {SELECTIONS}")
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r} is not one of {MODES}")
        if self.block < 1:
            raise ValueError(f"block must be >= 1 query rows, got {self.block}")


@dataclass
class _Active:
    intervention: Intervention
    generators: dict[str, torch.Generator]

    def generator(self, device: torch.device) -> torch.Generator:
        """The random selection's generator on ``device`` (draws stay on the device)."""
        key = str(device)
        if key not in self.generators:
            self.generators[key] = torch.Generator(device=device).manual_seed(
                self.intervention.seed
            )
        return self.generators[key]


_ACTIVE: contextvars.ContextVar[_Active | None] = contextvars.ContextVar(
    "attnlimits_intervention", default=None
)


@contextmanager
def intervene(intervention: Intervention | None) -> Iterator[None]:
    """Every forward pass run inside goes through ``intervention`` (None: the plain model) in a
    model loaded with ``attn_implementation=register_intervention()``; the random selection's
    generators start from ``intervention.seed`` here."""
    active = None if intervention is None else _Active(intervention, {})
    token = _ACTIVE.set(active)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def kept_keys(
    weights: torch.Tensor,
    visible: torch.Tensor,
    n: int,
    selection: str,
    value_norms: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    signed: bool = False,
) -> torch.Tensor:
    """(..., queries, keys) bool: the ``n`` visible keys each query keeps (all of them where it
    sees at most n). ``value_norms`` (..., keys): ||v_i|| per key, for ``"contribution"``;
    ``generator`` (on the weights' device) draws ``"random"``'s uniform scores, float32.
    ``signed``: the rule's weights take either sign (raw Self-Adjust Softmax), and the N of
    largest |weight| are kept (the largest weights alone would delete the most negative
    first, however large their part in the output)."""
    magnitude = weights.abs() if signed else weights
    if selection == "attention":
        score = magnitude
    elif selection == "contribution":
        if value_norms is None:
            raise ValueError("the contribution selection needs the values' norms")
        score = magnitude * value_norms[..., None, :]
    elif selection == "random":
        score = torch.rand(
            weights.shape, generator=generator, dtype=torch.float32, device=weights.device
        )
    else:
        raise ValueError(f"selection {selection!r} is not one of {SELECTIONS}")
    visible = visible.expand(weights.shape)
    if n >= weights.shape[-1]:
        return visible
    return top_n_mask(score.masked_fill(~visible, -math.inf), n) & visible


def top_n_mask(score: torch.Tensor, n: int) -> torch.Tensor:
    """(..., keys) bool: the ``n`` largest scores of each row, the lower index first among equal
    scores (what a stable descending sort's first n are), 0 < n < keys. By the n-th largest
    value (topk) rather than a sort: O(keys) passes per row instead of a sort per row."""
    kth = torch.topk(score, n, dim=-1, sorted=False).values.amin(dim=-1, keepdim=True)
    above = score > kth
    tied = score == kth
    # the tied keys fill what the larger ones leave of n, by index
    room = n - above.sum(dim=-1, keepdim=True)
    return above | (tied & (tied.cumsum(dim=-1) <= room))


def kept_weights(weights: torch.Tensor, keep: torch.Tensor, mode: str) -> torch.Tensor:
    """The weights of the kept keys, the others 0: as they were (``"delete"``), or scaled so
    that each row keeps its mass (``"renormalize"``; a row that kept no mass stays 0)."""
    kept = torch.where(keep, weights, torch.zeros((), dtype=weights.dtype))
    if mode == "delete":
        return kept
    if mode != "renormalize":
        raise ValueError(f"mode {mode!r} is not one of {MODES}")
    mass = weights.sum(dim=-1, keepdim=True)
    kept_mass = kept.sum(dim=-1, keepdim=True)
    scale = torch.where(kept_mass > 0, mass / kept_mass.clamp_min(torch.finfo(kept.dtype).tiny), 0)
    # exactly the plain weights where nothing was dropped
    return torch.where((keep | (weights == 0)).all(dim=-1, keepdim=True), weights, kept * scale)


def _visible_rows(
    mask: torch.Tensor | None, is_causal: bool, start: int, stop: int, n_q: int, n_k: int, device
) -> torch.Tensor:
    """(batch or 1, 1, stop - start, keys) bool: the keys query rows start..stop-1 attend to."""
    if mask is not None:
        rows = mask[..., start:stop, :n_k] if mask.shape[-2] > 1 else mask[..., :n_k]
        if rows.dtype != torch.bool:  # additive: 0 attends, -inf does not
            rows = rows > torch.finfo(rows.dtype).min / 2
        return rows
    if is_causal and n_q > 1:
        q_pos = torch.arange(n_k - n_q + start, n_k - n_q + stop, device=device)[:, None]
        return (torch.arange(n_k, device=device)[None, :] <= q_pos)[None, None]
    return torch.ones(1, 1, stop - start, n_k, dtype=torch.bool, device=device)


def _block_weights(
    module: nn.Module,
    scores: torch.Tensor,
    visible: torch.Tensor,
    rule: Mapping | None,
    softcap: float | None,
    sinks: torch.Tensor | None,
) -> torch.Tensor:
    """The weights the model gives a block of rows: its trained normalizer, or its softmax (after
    any soft-cap, with any sink key, whose weight is dropped), float32 as the model computes."""
    if rule is not None:
        return attention_rules.normalize(scores, visible, rule, rule_learned(module, rule))
    scores = soft_capped(scores, softcap).masked_fill(~visible, -math.inf).float()
    if sinks is None:
        return torch.softmax(scores, dim=-1)
    sink = sinks.float().reshape(1, -1, 1, 1).expand(*scores.shape[:3], 1)
    return torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]


def intervened_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
):
    """The registered attention function (module docstring): the capture's attention, or the
    top-N intervention of the active :class:`Intervention`, ``block`` query rows at a time."""
    active = _ACTIVE.get()
    n_keys = key.shape[2]
    if active is None or active.intervention.n >= n_keys:
        return capture_attention(
            module, query, key, value, attention_mask, scaling, dropout, **kwargs
        )
    spec = active.intervention
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    is_causal = kwargs.pop("is_causal", None)
    is_causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    softcap = kwargs.pop("softcap", None)
    sinks = kwargs.pop("s_aux", None)
    unreproduced = [k for k in _UNREPRODUCED if kwargs.get(k) is not None]
    if unreproduced:
        raise NotImplementedError(f"the intervention does not reproduce {unreproduced}")
    if _is_differential(module) and spec.selection != "attention":
        # DiffLlama calls the attention twice per head, with the same q and k and each half of
        # the values: weight ranks agree across the calls, but ||v|| and fresh draws would not,
        # and a head would keep up to 2N keys
        raise NotImplementedError(
            f"the {spec.selection} selection on differential attention (a head's two calls would "
            "keep different keys); use the attention selection"
        )
    rule = model_rule(module)
    signed = rule is not None and rules.get(rule["kind"]).signed
    if signed and spec.mode == "renormalize":
        # a row of either sign can have a kept mass near 0, or of the other sign than its own
        raise NotImplementedError(
            f"the renormalize mode on {rule['kind']}, whose weights take either sign; use delete"
        )
    _, heads, n_q, _ = query.shape
    group = heads // key.shape[1]
    keys = key.repeat_interleave(group, dim=1) if group > 1 else key
    values = value.repeat_interleave(group, dim=1) if group > 1 else value
    value_norms = values.float().norm(dim=-1) if spec.selection == "contribution" else None
    out = torch.empty(query.shape[:3] + (values.shape[-1],), dtype=query.dtype, device=query.device)
    for start in range(0, n_q, spec.block):
        stop = min(start + spec.block, n_q)
        scores = query[:, :, start:stop] @ keys.transpose(-1, -2) * scaling
        visible = _visible_rows(attention_mask, is_causal, start, stop, n_q, n_keys, query.device)
        weights = _block_weights(module, scores, visible, rule, softcap, sinks)
        generator = active.generator(query.device) if spec.selection == "random" else None
        keep = kept_keys(weights, visible, spec.n, spec.selection, value_norms, generator, signed)
        out[:, :, start:stop] = kept_weights(weights, keep, spec.mode).to(values.dtype) @ values
    output = out.transpose(1, 2).contiguous()
    if rule is not None:
        output = gated_rule_output(module, output, rule)
    return output, None


def register_intervention() -> str:
    """Register :func:`intervened_attention` (SDPA's mask format) with transformers; return its
    name, for ``attn_implementation``."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(INTERVENTION, intervened_attention)
    AttentionMaskInterface.register(INTERVENTION, sdpa_mask)
    return INTERVENTION
