"""The capture: the attention function that records q, k, v and the analysed rows (torch).

:func:`capture_attention`, registered with transformers' AttentionInterface as :data:`CAPTURE`
(:func:`register_capture`), receives q and k exactly as the model scores them, v, the scaling,
the soft-cap, the mask and any sink logits. Inside :func:`attnlimits.extraction.extract_chunk` it
hands them to the active recorder, which scores the analysed query rows in float32 as the model
does (:func:`score_row`, :func:`visible_keys`, :func:`soft_capped`), then delegates to the model's
own attention: SDPA, :func:`blockwise_attention` for soft-caps and sinks (which SDPA lacks), or a
trained model's normalizer (:mod:`attnlimits.rule_attention`).

Separate from :mod:`attnlimits.extraction`, which drives the forward passes and hands out the
per-layer captures, because the effective-set intervention (:mod:`attnlimits.effective_set`)
reuses this attention and its row scoring without any extraction.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from . import attention_rules
from .families import NO_POSITION, ROTARY
from .model_structure import _is_differential, differential_lambda
from .rule_attention import model_rule, rule_attention, rule_learned

CAPTURE = "attnlimits_capture"
# Keyword arguments that add terms to the scores which the capture does not reproduce. (``s_aux``,
# GPT-OSS's learned per-head sink logits, it does: see score_row.)
_UNREPRODUCED = ("sinks", "position_bias", "alibi", "attention_bias")
# Query rows per block when the capture computes attention itself (soft-capped models, sinks).
ATTENTION_BLOCK = 256


def analysed_position(length: int, query_row: str) -> int:
    """Which query row of a length-L context is analysed: 'last' (L-1) or 'first' (0)."""
    if query_row == "last":
        return length - 1
    if query_row == "first":
        return 0
    raise ValueError(f"query_row must be 'last' or 'first', got {query_row!r}")


def soft_capped(scores: torch.Tensor, softcap: float | None) -> torch.Tensor:
    """Gemma's logit soft-capping, c * tanh(s / c), as its eager attention applies it."""
    return scores if softcap is None else torch.tanh(scores / softcap) * softcap


def score_row(
    q: torch.Tensor,
    k: torch.Tensor,
    kv_head_of_query: Sequence[int],
    position: int,
    length: int,
    scaling: float,
    *,
    softcap: float | None = None,
    visible: torch.Tensor | None = None,
    sinks: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits and softmax weights of query ``position`` over keys 0..length-1, per query head.

    ``visible`` (length,) bool marks the keys the model's mask lets the query see; the others get
    logit -inf and weight 0. ``sinks`` (heads,): each head's sink logit joins the softmax as one
    more key, whose weight is then dropped (GPT-OSS's eager attention), so a row sums to less
    than one.
    """
    keys = k[list(kv_head_of_query), :length].float()
    logits = soft_capped(
        torch.einsum("hd,hld->hl", q[:, position].float(), keys) * scaling, softcap
    )
    if visible is not None:
        logits = logits.masked_fill(~visible, float("-inf"))
    if sinks is None:
        return logits, torch.softmax(logits, dim=-1)
    with_sink = torch.cat([logits, sinks.float().to(logits.device)[:, None]], dim=-1)
    return logits, torch.softmax(with_sink, dim=-1)[:, :-1]


def sink_weight(logits: torch.Tensor, sink_logits: torch.Tensor) -> torch.Tensor:
    """The weight a row gives its sink: exp(s) / (exp(s) + sum_j exp(logit_j)), per row of
    ``logits`` (..., L) with the sink logit ``sink_logits`` (...,) of its head."""
    s = sink_logits.to(logits.dtype)[..., None]
    return torch.softmax(torch.cat([logits, s], dim=-1), dim=-1)[..., -1]


def visible_keys(
    mask: torch.Tensor | None, causal: bool, position: int, length: int
) -> torch.Tensor | None:
    """Keys 0..length-1 that query ``position`` attends to, from the mask the model passed to its
    attention (boolean, True = attend; None = SDPA's causal flag or no mask). None means all."""
    if mask is not None:
        row = mask[0, 0, position, :length] if mask.shape[2] > 1 else mask[0, 0, 0, :length]
        if row.dtype != torch.bool:  # an additive float mask: 0 attends, -inf does not
            row = row > torch.finfo(row.dtype).min / 2
        return None if bool(row.all()) else row.cpu()
    if causal and position < length - 1:
        return torch.arange(length) <= position
    return None


def _to_host(t: torch.Tensor) -> torch.Tensor:
    """A CPU copy of ``t``. From a GPU, an asynchronous copy into pinned memory (PyTorch's host
    allocator caches those blocks), so the forward is not stopped at every layer to wait for its
    copies; extract_chunk synchronises once, after the forward, before handing the captures out."""
    if t.device.type != "cuda":
        return t.cpu()
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    host.copy_(t, non_blocking=True)
    return host


class _Recorder:
    """Collects what the capture sees during one forward, keyed by layer index."""

    def __init__(
        self,
        lengths: Sequence[int],
        query_row: str,
        kv_map: Sequence[int],
        store_attention_input: bool = False,
        position_embeddings: Sequence[str] = (),
        temperature_tuning: Sequence[dict[str, float] | None] = (),
    ):
        self.lengths = list(lengths)
        self.query_row = query_row
        self.kv_map = list(kv_map)
        self.position_embeddings = list(position_embeddings)
        self.temperature_tuning = list(temperature_tuning)
        self.store_attention_input = store_attention_input
        # attention module -> the input its pre-hook saw, until that module calls the capture
        self.attention_inputs: dict[nn.Module, torch.Tensor] = {}
        self.layers: dict[int, dict[str, Any]] = {}

    def see_input(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        """Forward pre-hook of an attention module: keep the hidden_states it was called with."""
        hidden_states = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        self.attention_inputs[module] = hidden_states

    def record(self, module, query, key, value, mask, scaling, is_causal, kwargs) -> None:
        layer = int(module.layer_idx)
        if layer in self.layers:
            if _is_differential(module) and self.layers[layer].get("second_value") is None:
                self._record_second_softmax_call(layer, query, key, value)
                return
            raise RuntimeError(f"layer {layer} called its attention twice in one forward")
        found = [k for k in _UNREPRODUCED if kwargs.get(k) is not None]
        if found:
            raise RuntimeError(
                f"layer {layer} passes {found} to its attention: terms the capture does not "
                "reproduce, so its rows would be wrong"
            )
        uses_rope = getattr(module, "use_rope", None)  # SmolLM3's and Llama 4's per-layer flag
        if uses_rope is not None and self.position_embeddings:
            expected = self.position_embeddings[layer]
            if expected != (ROTARY if uses_rope else NO_POSITION):
                raise RuntimeError(
                    f"layer {layer}'s attention has use_rope={bool(uses_rope)}, the config's "
                    f"no_rope_layers say {expected!r}: the dump would mislabel it"
                )
        tuned = bool(getattr(module, "attn_temperature_tuning", False)) and not uses_rope
        if tuned != (bool(self.temperature_tuning) and self.temperature_tuning[layer] is not None):
            raise RuntimeError(
                f"layer {layer}'s attention scales its queries by temperature: {tuned}, the "
                "config says otherwise: the dump would mislabel it"
            )
        q, k, v = (t[0].float().contiguous() for t in (query, key, value))  # (heads, T, dh)
        context = q.shape[1]
        softcap = kwargs.get("softcap")
        sinks = kwargs.get("s_aux")
        sinks = None if sinks is None else sinks.detach().float()
        rule = model_rule(module)
        attention_input = self.attention_inputs.pop(module, None)
        if self.store_attention_input and attention_input is None:
            raise RuntimeError(
                f"layer {layer}'s attention module ({type(module).__name__}) ran without the "
                "pre-hook that records its input: it is not the innermost module with a layer_idx"
            )
        rows = {}
        for L in self.lengths:
            if L > context:
                continue
            pos = analysed_position(L, self.query_row)
            visible = visible_keys(mask, bool(is_causal), pos, L)
            logits, weights = score_row(
                q, k, self.kv_map, pos, L, scaling, softcap=softcap, visible=visible, sinks=sinks
            )
            if rule is not None:  # the model's own normalizer, on the same logits
                seen = torch.isfinite(logits)[:, None, :]
                weights = attention_rules.normalize(
                    logits[:, None, :], seen, rule, rule_learned(module, rule, detach=True)
                )[:, 0, :]
            rows[L] = (pos, _to_host(logits), _to_host(weights))
        self.layers[layer] = {
            "q": _to_host(q),
            "k": _to_host(k),
            "v": _to_host(v),
            "rows": rows,
            "scaling": float(scaling),
            "softcap": None if softcap is None else float(softcap),
            "sliding_window": kwargs.get("sliding_window"),
            "attention_input": None
            if attention_input is None
            else _to_host(attention_input[0].float().contiguous()),
            "sink_logits": None if sinks is None else _to_host(sinks),
            "differential_lambda": differential_lambda(module),
        }
        if _is_differential(module):  # its second call must score the same q and k
            self.layers[layer]["query_key"] = (query, key)
            self.layers[layer]["second_value"] = None

    def _record_second_softmax_call(self, layer: int, query, key, value) -> None:
        """DiffLlama's second attention call: the same q and k (so the same softmax rows) on the
        second half of its value heads. The first call saw the first half, each KV head twice
        (v1 = [v_a, v_a]), this one the second (v2 = [v_b, v_b]): the layer's own value heads,
        v_proj's output, are [v_a, v_b]."""
        rec = self.layers[layer]
        first_query, first_key = rec.pop("query_key")
        if not (torch.equal(query, first_query) and torch.equal(key, first_key)):
            raise RuntimeError(f"layer {layer}'s second attention call scores other q and k")
        half = value.shape[1] // 2
        first = rec["v"][:half].to(value.device)
        rec["v"] = _to_host(torch.cat([first, value[0, :half].float()]).contiguous())
        rec["second_value"] = True


_ACTIVE: contextvars.ContextVar[_Recorder | None] = contextvars.ContextVar(
    "attnlimits_recorder", default=None
)


def blockwise_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    scaling: float,
    softcap: float | None,
    is_causal: bool,
    block: int = ATTENTION_BLOCK,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """softmax(softcap(q k^T * scaling) + mask) v, ``block`` query rows at a time, as the eager
    attention of soft-capped models computes it (SDPA has no soft-cap): memory is
    heads x block x keys, never keys x keys. ``sinks`` (heads,): a sink logit per head joins each
    row's softmax and its weight is dropped (GPT-OSS; SDPA has no sinks either).
    Returns (batch, queries, heads, head_dim)."""
    _, heads, n_q, _ = query.shape
    group = heads // key.shape[1]
    keys = key.repeat_interleave(group, dim=1) if group > 1 else key
    values = value.repeat_interleave(group, dim=1) if group > 1 else value
    out = torch.empty_like(query)
    kv_pos = torch.arange(keys.shape[2], device=query.device)
    for start in range(0, n_q, block):
        stop = min(start + block, n_q)
        scores = soft_capped(query[:, :, start:stop] @ keys.transpose(-1, -2) * scaling, softcap)
        if mask is not None:
            part = mask[:, :, start:stop] if mask.shape[2] > 1 else mask
            if part.dtype == torch.bool:
                scores = scores.masked_fill(~part, float("-inf"))
            else:
                scores = scores + part
        elif is_causal:
            q_pos = torch.arange(start, stop, device=query.device)[:, None]
            scores = scores.masked_fill(kv_pos[None, :] > q_pos, float("-inf"))
        if sinks is None:
            weights = torch.softmax(scores.float(), dim=-1)
        else:
            sink = sinks.float().reshape(1, -1, 1, 1).expand(*scores.shape[:3], 1)
            weights = torch.softmax(torch.cat([scores.float(), sink], dim=-1), dim=-1)[..., :-1]
        out[:, :, start:stop] = weights.to(values.dtype) @ values
    return out.transpose(1, 2).contiguous()


def capture_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
):
    """The registered attention function: record (inside :func:`extract_chunk`), then delegate."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if scaling is None:  # SDPA's default, which the model then gets
        scaling = query.shape[-1] ** -0.5
    is_causal = kwargs.pop("is_causal", None)
    is_causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    recorder = _ACTIVE.get()
    if recorder is not None:
        recorder.record(module, query, key, value, attention_mask, scaling, is_causal, kwargs)
    if model_rule(module) is not None:
        return rule_attention(
            module, query, key, value, attention_mask, scaling, dropout, is_causal=is_causal
        )
    softcap = kwargs.pop("softcap", None)
    sinks = kwargs.pop("s_aux", None)
    if softcap is not None or sinks is not None:
        causal_here = is_causal and attention_mask is None and query.shape[2] > 1
        return blockwise_attention(
            query, key, value, attention_mask, scaling, softcap, causal_here, sinks=sinks
        ), None
    return sdpa_attention_forward(
        module,
        query,
        key,
        value,
        attention_mask,
        dropout=dropout,
        scaling=scaling,
        is_causal=is_causal,
        **kwargs,
    )


def register_capture() -> str:
    """Register the capture (and SDPA's mask format for it) with transformers; return its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(CAPTURE, capture_attention)
    AttentionMaskInterface.register(CAPTURE, sdpa_mask)
    return CAPTURE
