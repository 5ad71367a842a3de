"""What the capture needs to know about a loaded model (torch; no file I/O).

Its shape (:class:`ModelShape`: layers, query and KV heads, positions, per-layer position
embeddings and query temperature), the modules that call the attention function
(:func:`attention_modules`), and DiffLlama's differential attention (its lambda and head pairs).

Separate from the capture (:mod:`attnlimits.attention_capture`) and from a trained model's
attention (:mod:`attnlimits.rule_attention`) because both read it and neither records anything
here: it only reads a model's config and modules.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .families import Family, family, layer_position_embeddings, temperature_tuning


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


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The modules that call the attention function: the innermost ones carrying a ``layer_idx``
    (GPT2Attention, BertSelfAttention, LlamaAttention, ...; a decoder layer that also carries one,
    as Gemma 3's, holds its attention module). The capture checks the guess: a layer whose attention
    was not among them is an error, not a missing vector."""
    tagged = [m for m in model.modules() if hasattr(m, "layer_idx")]
    return [
        m for m in tagged if not any(hasattr(c, "layer_idx") for c in m.modules() if c is not m)
    ]
