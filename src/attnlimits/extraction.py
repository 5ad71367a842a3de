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

This module drives the forward passes and hands out one :class:`LayerCapture` per layer
(:func:`extract_chunk`). The attention function that records and its row scoring live in
:mod:`attnlimits.attention_capture`, a trained model's own normalizer in
:mod:`attnlimits.rule_attention`, and what is read off a loaded model (its shape, its attention
modules, differential attention) in :mod:`attnlimits.model_structure`; their public names are
re-exported here, where the workflow, tests and benchmarks import them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from .attention_capture import _ACTIVE, CAPTURE, _Recorder
from .attention_capture import ATTENTION_BLOCK as ATTENTION_BLOCK
from .attention_capture import analysed_position as analysed_position
from .attention_capture import blockwise_attention as blockwise_attention
from .attention_capture import capture_attention as capture_attention
from .attention_capture import register_capture as register_capture
from .attention_capture import score_row as score_row
from .attention_capture import sink_weight as sink_weight
from .attention_capture import soft_capped as soft_capped
from .attention_capture import visible_keys as visible_keys
from .model_structure import ModelShape as ModelShape
from .model_structure import attention_modules, model_shape
from .model_structure import differential_lambda as differential_lambda
from .model_structure import differential_pairs as differential_pairs
from .rule_attention import RULE_ATTENTION as RULE_ATTENTION
from .rule_attention import RULE_KEY as RULE_KEY
from .rule_attention import add_output_gates as add_output_gates
from .rule_attention import gated_rule_output as gated_rule_output
from .rule_attention import model_rule as model_rule
from .rule_attention import register_rule_attention as register_rule_attention
from .rule_attention import rule_attention as rule_attention
from .rule_attention import rule_learned as rule_learned


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
