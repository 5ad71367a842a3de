"""Per-head q, k, v and analysed attention rows from one model pass (torch; no file I/O).

One capture serves every family in :mod:`attnlimits.families`: a function registered with
transformers' AttentionInterface receives q and k exactly as the model scores them (after rotary
embeddings and any q/k norm), v, the scaling, the soft-cap, the mask (causal, sliding window) and
any learned per-head sink logits (GPT-OSS).
It records them and delegates to the model's fast attention (SDPA), so no L x L matrix is ever
materialised; only the analysed query rows are scored here, in float32, as the model scores them.

Grouped-query attention: k and v are kept once per KV head, with the query-head -> KV-head map.

The paper's x_i (Eq. 1: q = f_q(x), k = f_k(x), v = f_v(x)) is each layer's attention input, the
tensor its q, k and v projections read: after GPT-2's ln_1 or Llama's input_layernorm, and for BERT
(post-norm) the layer's input. A forward pre-hook on each attention module records it in the same
pass (``store_attention_input``). ``store_hidden`` keeps the residual stream entering the layer,
before that norm, which is not Eq. 1's x_i in a pre-norm model.

Causal decoders need one forward per chunk: with a causal mask, row L-1 of a full-chunk pass *is*
the attention of the length-L prefix. Bidirectional encoders see the whole sequence, so they need
one forward per analysed length L.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from . import attention_rules, rules
from .families import (
    NO_POSITION,
    ROTARY,
    Family,
    family,
    layer_position_embeddings,
    temperature_tuning,
)

CAPTURE = "attnlimits_capture"
# The attention of a model trained with another normaliser (config attribute RULE_KEY, e.g.
# {"kind": "sparsemax"}); a rule's learned per-head parameters (Scalable-Softmax's s) are
# parameters of each attention module, named by attnlimits.rules (Learned.attribute).
RULE_ATTENTION = "attnlimits_rule"
RULE_KEY = "attnlimits_attention"
# Keyword arguments that add terms to the scores which the capture does not reproduce. (``s_aux``,
# GPT-OSS's learned per-head sink logits, it does: see score_row.)
_UNREPRODUCED = ("sinks", "position_bias", "alibi", "attention_bias")
# Query rows per block when the capture computes attention itself (soft-capped models, sinks).
ATTENTION_BLOCK = 256


@dataclass
class LayerCapture:
    """One layer of one forward pass over ``context_length`` tokens (tensors on CPU, float32).

    q: (heads, positions, head_dim); k, v: (kv_heads, positions, head_dim), each KV head once;
    hidden: (positions, d_model) or None: the residual stream entering the layer, before its norm;
    attention_input: (positions, d_model) or None: the input of the layer's attention module,
    which its q, k and v projections read (the paper's x_i, Eq. 1);
    rows: analysed length L -> (query_position, logits (heads, L), weights (heads, L)); keys the
    model masks (sliding window) have logit -inf and weight 0;
    sink_logits: (heads,) or None: a learned sink logit per query head that joins each row's
    softmax as one more key with no value (GPT-OSS); the weights over the real keys then sum to
    1 - sink weight, which :func:`sink_weight` recomputes from a row's logits.
    differential_lambda: DiffLlama's lambda, or None: query head h < heads/2 attends with
    softmax_h - lambda * softmax_(h + heads/2) (:func:`differential_pairs`); each head's own
    softmax row is in ``rows``, and v holds the layer's value heads (v_proj's output).
    """

    layer: int
    context_length: int
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    hidden: torch.Tensor | None
    rows: dict[int, tuple[int, torch.Tensor, torch.Tensor]]
    scaling: float
    softcap: float | None = None
    sliding_window: int | None = None
    attention_input: torch.Tensor | None = None
    sink_logits: torch.Tensor | None = None
    differential_lambda: float | None = None


@dataclass(frozen=True)
class ModelShape:
    """What extraction and the dumps need to know about a loaded model."""

    model_type: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    max_positions: int
    causal: bool
    # per layer: how its q and k carry positions (attnlimits.families.layer_position_embeddings)
    position_embeddings: tuple[str, ...] = ()
    # per layer: Llama 4's query temperature parameters (attnlimits.families.temperature_tuning)
    temperature_tuning: tuple[dict[str, float] | None, ...] = ()

    @property
    def kv_head_of_query(self) -> tuple[int, ...]:
        """Query head h reads KV head h // (n_heads / n_kv_heads), as transformers' repeat_kv."""
        group = self.n_heads // self.n_kv_heads
        return tuple(h // group for h in range(self.n_heads))


def model_shape(model: nn.Module) -> ModelShape:
    """The shape of a loaded model; refuses a family the capture does not support."""
    cfg = model.config
    fam: Family = family(cfg.model_type)
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    n_heads = int(text.num_attention_heads)
    n_kv = int(getattr(text, "num_key_value_heads", None) or n_heads)
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // n_heads
    positions = next(
        int(getattr(text, k)) for k in fam.position_keys if getattr(text, k, None) is not None
    )
    if n_heads % n_kv:
        raise ValueError(f"{n_heads} query heads are not a multiple of {n_kv} KV heads")
    return ModelShape(
        model_type=cfg.model_type,
        n_layers=int(text.num_hidden_layers),
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=int(head_dim),
        max_positions=positions,
        causal=fam.causal,
        position_embeddings=tuple(layer_position_embeddings(text.to_dict())),
        temperature_tuning=tuple(temperature_tuning(text.to_dict())),
    )


def analysed_position(length: int, query_row: str) -> int:
    """Which query row of a length-L context is analysed: 'last' (L-1) or 'first' (0)."""
    if query_row == "last":
        return length - 1
    if query_row == "first":
        return 0
    raise ValueError(f"query_row must be 'last' or 'first', got {query_row!r}")


def _is_differential(module: nn.Module) -> bool:
    return hasattr(module, "lambda_q1") and hasattr(module, "lambda_init")


def differential_lambda(module: nn.Module) -> float | None:
    """DiffLlama's lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) + lambda_init,
    as its attention computes it (in float32); None for any other attention."""
    if not _is_differential(module):
        return None
    with torch.no_grad():
        first = torch.exp(torch.sum(module.lambda_q1 * module.lambda_k1, dtype=torch.float32))
        second = torch.exp(torch.sum(module.lambda_q2 * module.lambda_k2, dtype=torch.float32))
    return float(first - second + module.lambda_init)


def differential_pairs(n_heads: int) -> list[tuple[int, int]]:
    """Differential attention's head pairs: (h, h + n_heads/2), combined as softmax_h - lambda *
    softmax_(h + n_heads/2) (DiffLlama chunks its heads' outputs in two halves)."""
    half = n_heads // 2
    return [(h, h + half) for h in range(half)]


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
            if rule is not None:  # the model's own normaliser, on the same logits
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


def model_rule(module: nn.Module) -> dict[str, Any] | None:
    """The normaliser a trained model's attention uses (None: the family's own softmax)."""
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
    """Attention under the model's own normaliser (attnlimits.attention_rules): weights =
    rule(q k^T * scaling) over the keys the mask lets each query see, then weights @ v, gated by
    the module's output gate for a rule that has one (rules.Rule.output_gate).
    Materialises queries x keys per head: meant for the study's small models. Registered as
    RULE_ATTENTION for training; the capture delegates here for such models."""
    rule = model_rule(module)
    if rule is None:
        raise ValueError(f"{RULE_ATTENTION} attention needs config.{RULE_KEY} (a normaliser)")
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


def register_rule_attention() -> str:
    """Register :func:`rule_attention` (SDPA's mask format) with transformers; return its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(RULE_ATTENTION, rule_attention)
    AttentionMaskInterface.register(RULE_ATTENTION, sdpa_mask)
    return RULE_ATTENTION


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The modules that call the attention function: the innermost ones carrying a ``layer_idx``
    (GPT2Attention, BertSelfAttention, LlamaAttention, ...; a decoder layer that also carries one,
    as Gemma 3's, holds its attention module). The capture checks the guess: a layer whose attention
    was not among them is an error, not a missing vector."""
    tagged = [m for m in model.modules() if hasattr(m, "layer_idx")]
    return [
        m for m in tagged if not any(hasattr(c, "layer_idx") for c in m.modules() if c is not m)
    ]


def extract_chunk(
    model: nn.Module,
    token_ids: torch.Tensor,
    lengths: Sequence[int],
    query_row: str = "last",
    store_hidden: bool = False,
    closing_tokens: Sequence[int] = (),
    store_attention_input: bool = False,
) -> Iterator[LayerCapture]:
    """Yield one :class:`LayerCapture` per (forward pass, layer) for a 1-D chunk of token ids.

    ``model`` must be loaded with ``attn_implementation=register_capture()``.
    Causal models: one forward over the whole chunk, analysed rows at L-1 for every L.
    Encoders: one forward per L over the first L tokens, analysed row chosen by ``query_row``.
    ``closing_tokens``: the tokens that end the chunk (an encoder's [SEP], see
    attnlimits.corpus.wrap_chunks); each encoder pass of length L then ends with them too:
    the chunk's first L - len(closing_tokens) tokens, then the closing tokens.
    ``store_hidden``: keep each layer's input residual stream (``hidden``, before the layer's
    norm); ``store_attention_input``: keep each layer's attention input (``attention_input``, what
    its q, k and v projections read: the paper's x_i).
    """
    shape = model_shape(model)
    if model.config._attn_implementation != CAPTURE:
        raise ValueError(
            f"the model runs {model.config._attn_implementation!r} attention; load it with "
            f"attn_implementation={CAPTURE!r} (attnlimits.extraction.register_capture())"
        )
    if shape.causal and query_row != "last":
        raise ValueError("a causal model's prefix of length L is only complete at its last row")
    device = next(model.parameters()).device
    passes = [int(token_ids.numel())] if shape.causal else sorted(int(L) for L in lengths)
    closing = torch.as_tensor(list(closing_tokens), dtype=token_ids.dtype)
    if closing.numel() and not shape.causal and min(passes) <= closing.numel():
        raise ValueError(f"every L must exceed the {closing.numel()} closing tokens")
    for context in passes:
        if closing.numel() and not shape.causal and context < token_ids.numel():
            ids = torch.cat([token_ids[: context - closing.numel()], closing])
        else:
            ids = token_ids[:context]
        ids = ids.to(device)[None, :]
        wanted = [L for L in lengths if L <= context] if shape.causal else [context]
        recorder = _Recorder(
            wanted,
            query_row,
            shape.kv_head_of_query,
            store_attention_input,
            shape.position_embeddings,
            shape.temperature_tuning,
        )
        hooks = (
            [
                m.register_forward_pre_hook(recorder.see_input, with_kwargs=True)
                for m in attention_modules(model)
            ]
            if store_attention_input
            else []
        )
        token = _ACTIVE.set(recorder)
        try:
            with torch.inference_mode():
                out = model(input_ids=ids, use_cache=False, output_hidden_states=store_hidden)
        finally:
            _ACTIVE.reset(token)
            for hook in hooks:
                hook.remove()
        if device.type == "cuda":  # the captures' asynchronous copies (_to_host) have landed
            torch.cuda.current_stream(device).synchronize()
        if sorted(recorder.layers) != list(range(shape.n_layers)):
            raise RuntimeError(
                f"the capture saw layers {sorted(recorder.layers)} of {shape.n_layers}: "
                f"{shape.model_type} does not route every attention through the AttentionInterface"
            )
        for layer in range(shape.n_layers):
            rec = recorder.layers[layer]
            if "second_value" in rec and not rec["second_value"]:
                raise RuntimeError(
                    f"layer {layer}'s differential attention called the attention function once, "
                    "not twice: its second softmax and values were not seen"
                )
            hidden = out.hidden_states[layer][0].float().cpu() if store_hidden else None
            yield LayerCapture(
                layer=layer,
                context_length=context,
                q=rec["q"],
                k=rec["k"],
                v=rec["v"],
                hidden=hidden,
                rows=rec["rows"],
                scaling=rec["scaling"],
                softcap=rec["softcap"],
                sliding_window=rec["sliding_window"],
                attention_input=rec["attention_input"],
                sink_logits=rec["sink_logits"],
                differential_lambda=rec["differential_lambda"],
            )
