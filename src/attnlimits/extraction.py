"""Per-head Q/K/V and analysed attention rows from one model pass (torch; no file I/O).

The model runs its own fast attention (SDPA). Forward hooks capture what the Q/K/V projections
produce; only the analysed query rows are then scored here, in float32, exactly as the model
scores them (scaling included), so no L x L matrix is ever materialised.

One adapter per model family knows where the projections live and how the model scales its
scores. Causal decoders (GPT-2 family) need one forward per chunk: with a causal mask, row L-1
of a full-chunk pass *is* the attention of the length-L prefix. Bidirectional encoders (BERT
family) see the whole sequence, so they need one forward per analysed length L.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class LayerCapture:
    """One layer of one forward pass over ``context_length`` tokens (tensors on CPU, float32).

    q, k, v: (heads, positions, head_dim); hidden: (positions, d_model) or None;
    rows: analysed length L -> (query_position, logits (heads, L), weights (heads, L)).
    """

    layer: int
    context_length: int
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    hidden: torch.Tensor | None
    rows: dict[int, tuple[int, torch.Tensor, torch.Tensor]]


class FamilyAdapter:
    """What the pipeline needs to know about a model family."""

    causal: bool

    def __init__(self, model: nn.Module):
        self.model = model
        self.config = model.config

    @property
    def n_layers(self) -> int:
        raise NotImplementedError

    @property
    def n_heads(self) -> int:
        raise NotImplementedError

    @property
    def head_dim(self) -> int:
        raise NotImplementedError

    @property
    def max_positions(self) -> int:
        raise NotImplementedError

    def score_scale(self, layer: int) -> float:
        """Factor the model multiplies q.k by before softmax."""
        raise NotImplementedError

    def blocks(self) -> Sequence[nn.Module]:
        raise NotImplementedError

    def hook_qkv(self, layer: int, store: dict) -> list:
        """Register hooks that put (B, T, H*dh) tensors into store['q'|'k'|'v']."""
        raise NotImplementedError

    def run(self, input_ids: torch.Tensor) -> None:
        raise NotImplementedError


class GPT2Adapter(FamilyAdapter):
    causal = True

    def __init__(self, model: nn.Module):
        super().__init__(model)
        self.transformer = model.transformer if hasattr(model, "transformer") else model

    n_layers = property(lambda self: self.config.n_layer)
    n_heads = property(lambda self: self.config.n_head)
    head_dim = property(lambda self: self.config.n_embd // self.config.n_head)
    max_positions = property(lambda self: self.config.n_positions)

    def score_scale(self, layer: int) -> float:
        scale = 1.0
        if self.config.scale_attn_weights:
            scale /= math.sqrt(self.head_dim)
        if getattr(self.config, "scale_attn_by_inverse_layer_idx", False):
            scale /= float(layer + 1)
        return scale

    def blocks(self):
        return self.transformer.h

    def hook_qkv(self, layer, store):
        width = self.config.n_embd

        def grab(_module, _inputs, output):
            store["q"], store["k"], store["v"] = output.split(width, dim=2)

        return [self.transformer.h[layer].attn.c_attn.register_forward_hook(grab)]

    def run(self, input_ids):
        self.transformer(input_ids=input_ids, use_cache=False)


class BertAdapter(FamilyAdapter):
    causal = False

    def __init__(self, model: nn.Module):
        super().__init__(model)
        self.bert = model.bert if hasattr(model, "bert") else model
        kind = getattr(self.config, "position_embedding_type", "absolute")
        if kind != "absolute":
            # Relative position terms are added to the scores inside the attention; they are not
            # reproduced by q.k here, so refuse rather than dump wrong logits.
            raise ValueError(
                f"BERT position_embedding_type={kind!r} is not supported (only 'absolute')"
            )

    n_layers = property(lambda self: self.config.num_hidden_layers)
    n_heads = property(lambda self: self.config.num_attention_heads)
    head_dim = property(lambda self: self.config.hidden_size // self.config.num_attention_heads)
    max_positions = property(lambda self: self.config.max_position_embeddings)

    def score_scale(self, layer: int) -> float:
        return 1.0 / math.sqrt(self.head_dim)

    def blocks(self):
        return self.bert.encoder.layer

    def hook_qkv(self, layer, store):
        attn = self.bert.encoder.layer[layer].attention.self
        handles = []
        for name in ("query", "key", "value"):

            def grab(_m, _i, output, key=name[0]):
                store[key] = output

            handles.append(getattr(attn, name).register_forward_hook(grab))
        return handles

    def run(self, input_ids):
        self.bert(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))


FAMILIES: dict[str, type[FamilyAdapter]] = {"gpt2": GPT2Adapter, "bert": BertAdapter}


def adapter_for(model: nn.Module) -> FamilyAdapter:
    """The family adapter for a loaded model, by ``config.model_type``."""
    kind = model.config.model_type
    if kind not in FAMILIES:
        raise ValueError(f"model_type {kind!r} is not supported; supported: {sorted(FAMILIES)}")
    return FAMILIES[kind](model)


def analysed_position(length: int, query_row: str) -> int:
    """Which query row of a length-L context is analysed: 'last' (L-1) or 'first' (0)."""
    if query_row == "last":
        return length - 1
    if query_row == "first":
        return 0
    raise ValueError(f"query_row must be 'last' or 'first', got {query_row!r}")


def _heads(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(1, T, H*dh) -> (H, T, dh), float32 and contiguous."""
    _, length, width = t.shape
    return t[0].reshape(length, n_heads, width // n_heads).transpose(0, 1).float().contiguous()


def score_row(
    q: torch.Tensor, k: torch.Tensor, position: int, length: int, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits and softmax weights of query ``position`` over keys 0..length-1, per head (float32)."""
    logits = torch.einsum("hd,hld->hl", q[:, position], k[:, :length]) * scale
    return logits, torch.softmax(logits, dim=-1)


def extract_chunk(
    adapter: FamilyAdapter,
    token_ids: torch.Tensor,
    lengths: Sequence[int],
    query_row: str = "last",
    store_hidden: bool = False,
) -> Iterator[LayerCapture]:
    """Yield one :class:`LayerCapture` per (forward pass, layer) for a 1-D chunk of token ids.

    Causal models: one forward over the whole chunk, analysed rows at L-1 for every L.
    Encoders: one forward per L over the first L tokens, analysed row chosen by ``query_row``.
    """
    if adapter.causal and query_row != "last":
        raise ValueError("a causal model's prefix of length L is only complete at its last row")
    device = next(adapter.model.parameters()).device
    passes = [int(token_ids.numel())] if adapter.causal else sorted(int(L) for L in lengths)
    for context in passes:
        ids = token_ids[:context].to(device)[None, :]
        captured: list[dict] = [{} for _ in range(adapter.n_layers)]
        handles = []
        for layer in range(adapter.n_layers):
            handles += adapter.hook_qkv(layer, captured[layer])
            if store_hidden:

                def grab_hidden(_m, args, kwargs, store=captured[layer]):
                    h = args[0] if args else kwargs["hidden_states"]
                    store["hidden"] = h

                handles.append(
                    adapter.blocks()[layer].register_forward_pre_hook(grab_hidden, with_kwargs=True)
                )
        try:
            with torch.inference_mode():
                adapter.run(ids)
        finally:
            for h in handles:
                h.remove()
        wanted = [L for L in lengths if L <= context] if adapter.causal else [context]
        for layer, store in enumerate(captured):
            q, k, v = (_heads(store[name], adapter.n_heads) for name in ("q", "k", "v"))
            rows = {}
            for L in wanted:
                pos = analysed_position(L, query_row)
                logits, weights = score_row(q, k, pos, L, adapter.score_scale(layer))
                rows[L] = (pos, logits.cpu(), weights.cpu())
            hidden = store["hidden"][0].float().cpu() if store_hidden else None
            yield LayerCapture(layer, context, q.cpu(), k.cpu(), v.cpu(), hidden, rows)
