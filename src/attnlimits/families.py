"""The model families the capture supports: one table, read by the config check and by extraction.

A family is supported when its attention goes through transformers' AttentionInterface and adds
nothing to q k^T beyond what the capture reproduces (scaling, soft-capping, causal and
sliding-window masks, learned per-head sink logits), and tests/test_families.py holds its dumped
rows against the model's own eager attention. Models with layers that have no softmax attention
are refused by name (NO_SOFTMAX_LAYERS). Models with ALiBi or relative position biases (bloom,
mpt, falcon, t5, deberta, ...) add terms the capture cannot see and are refused. This module
imports nothing heavy, so the config check can read it before any job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# How a layer's q and k carry positions (the dumps' per-layer ``position_embedding``):
ROTARY = "rotary"  # rotated by position before scoring (RoPE)
NO_POSITION = "none"  # a NoPE layer: no position embedding of its own, between rotary layers
ABSOLUTE = "absolute"  # learned positions added to the model's input; the layer adds none


@dataclass(frozen=True)
class Family:
    causal: bool
    # config.json keys holding the number of positions, first match wins
    position_keys: tuple[str, ...] = ("max_position_embeddings",)
    # every layer's position embedding, unless the config's ``no_rope_layers`` names NoPE layers
    position_embedding: str = ROTARY
    # a learned sink logit per head joins each row's softmax (docs/paper-notes.md section 12)
    attention_sinks: bool = False
    # differential attention: each head's softmax weighs both halves of the value heads,
    # concatenated, not its own KV head's v (docs/paper-notes.md section 13)
    differential: bool = False


FAMILIES: dict[str, Family] = {
    "gpt2": Family(
        causal=True,
        position_keys=("n_positions", "max_position_embeddings"),
        position_embedding=ABSOLUTE,
    ),
    "bert": Family(causal=False, position_embedding=ABSOLUTE),
    "llama": Family(causal=True),
    "mistral": Family(causal=True),
    "qwen2": Family(causal=True),
    "qwen3": Family(causal=True),
    "gemma2": Family(causal=True),
    "gemma3_text": Family(causal=True),
    "olmo2": Family(causal=True),
    # OLMo 3: OLMo 2's q/k norms, sliding layers between full ones (``layer_types``)
    "olmo3": Family(causal=True),
    # Phi-3: one fused qkv projection, split before the rotary embedding
    "phi3": Family(causal=True),
    # Granite: the scaling is config.attention_multiplier, not head_dim ** -0.5
    "granite": Family(causal=True),
    # SmolLM3: RoPE-free (NoPE) layers between rotary ones, per ``no_rope_layers``
    "smollm3": Family(causal=True),
    # GPT-OSS: a learned sink logit per head joins every row's softmax, so the weights over the
    # real keys sum to less than one; the dumps record the sink logits (docs/paper-notes.md)
    "gpt_oss": Family(causal=True, attention_sinks=True),
    # DiffLlama: differential attention, head h's softmax minus lambda times head h + H/2's; each
    # head's own softmax is an ordinary row, and the dumps record lambda and the pairs
    "diffllama": Family(causal=True, differential=True),
    # Llama 4's text model: NoPE layers (``no_rope_layers``) whose queries are scaled by a
    # log-length temperature (query_temperature), chunked attention on its rotary layers
    "llama4_text": Family(causal=True),
}


# Models with layers that mix tokens without a softmax attention: hybrids of attention and linear
# attention, state-space or convolution layers, and models with no attention at all. The paper's
# objects (a row of softmax weights over the keys) do not exist in those layers, so the whole model
# is refused by name before any job, rather than analysed on a subset of its layers.
# model_type (as in transformers 5.24's CONFIG_MAPPING) -> the layers that have no softmax.
_LINEAR = "gated DeltaNet linear-attention layers"
_MAMBA = "Mamba state-space layers"
_CONV = "short-convolution layers"
NO_SOFTMAX_LAYERS: dict[str, str] = {
    "qwen3_next": _LINEAR,
    "qwen3_5": _LINEAR,
    "qwen3_5_text": _LINEAR,
    "qwen3_5_moe": _LINEAR,
    "qwen3_5_moe_text": _LINEAR,
    "olmo_hybrid": _LINEAR,
    "lara_mini": _LINEAR,
    "qwen4_exp": _LINEAR,
    "qwen4_exp_text": _LINEAR,
    "kimi_linear": "Kimi delta-attention (linear-attention) layers",
    "glm5_next": "linear-attention layers",
    "glm5_next_text": "linear-attention layers",
    "bailing_hybrid": "linear-attention layers",
    "minimax": "lightning (linear) attention layers",
    "jamba": _MAMBA,
    "bamba": _MAMBA,
    "granitemoehybrid": _MAMBA,
    "nemotron_h": _MAMBA,
    "zamba": _MAMBA,
    "zamba2": _MAMBA,
    "falcon_h1": "a Mamba-2 mixer beside the attention in every layer",
    "lfm2": _CONV,
    "lfm2_moe": _CONV,
    "lfm3": _CONV,
    "recurrent_gemma": "RG-LRU recurrent blocks",
    "mamba": "only Mamba state-space layers (no attention)",
    "mamba2": "only Mamba-2 state-space layers (no attention)",
    "falcon_mamba": "only Mamba state-space layers (no attention)",
    "rwkv": "only RWKV recurrent layers (no attention)",
    "xlstm": "only xLSTM recurrent layers (no attention)",
}


class UnsupportedModelError(ValueError):
    """A model whose attention the capture cannot reproduce; the message names its model_type."""


def family(model_type: str | None) -> Family:
    if model_type in NO_SOFTMAX_LAYERS:
        raise UnsupportedModelError(
            f"model_type {model_type!r} is not supported: it has {NO_SOFTMAX_LAYERS[model_type]}, "
            "which mix tokens without softmax attention weights, so those layers have no rows "
            "for the paper's analyses; the workflow refuses such models rather than analysing "
            "some of their layers"
        )
    if model_type not in FAMILIES:
        raise UnsupportedModelError(
            f"model_type {model_type!r} is not supported: its attention does not go through "
            "transformers' AttentionInterface or adds terms (ALiBi, relative position biases) "
            f"that the capture cannot reproduce; supported: {', '.join(FAMILIES)}"
        )
    return FAMILIES[model_type]


def max_positions(model_config: dict[str, Any]) -> int | None:
    """The number of positions a config.json declares, or None when it declares none."""
    fam = FAMILIES.get(model_config.get("model_type"))
    keys = fam.position_keys if fam else ("n_positions", "max_position_embeddings")
    for key in keys:
        if model_config.get(key) is not None:
            return int(model_config[key])
    return None


def sliding_windows(model_config: dict[str, Any]) -> list[int | None]:
    """Per layer, the sliding window a config.json declares (None: the layer sees every key).

    Gemma 2 alternates sliding and global layers; Gemma 3, Qwen and Mistral name each layer's
    kind in ``layer_types`` (Qwen's ``use_sliding_window`` switches the window off). Llama 4's
    ``chunked_attention`` layers count their ``attention_chunk_size`` as their window.
    """
    n_layers = int(
        model_config.get("num_hidden_layers")
        or model_config.get("n_layer")
        or model_config.get("num_layers")
        or 0
    )
    kinds = model_config.get("layer_types")
    chunk = model_config.get("attention_chunk_size")
    if chunk and kinds and "chunked_attention" in kinds:
        # Llama 4's chunked layers: a row sees only the keys of its own chunk of that many
        # positions, so as for a window, every L must be at most the chunk size
        return [int(chunk) if k == "chunked_attention" else None for k in kinds]
    window = model_config.get("sliding_window")
    if not window or model_config.get("use_sliding_window") is False:
        return [None] * n_layers
    if kinds:
        return [int(window) if k == "sliding_attention" else None for k in kinds]
    if model_config.get("model_type") == "gemma2":
        return [int(window) if i % 2 == 0 else None for i in range(n_layers)]
    return [int(window)] * n_layers


def layer_position_embeddings(model_config: dict[str, Any]) -> list[str]:
    """Per layer, how its q and k carry positions: ROTARY, NO_POSITION or ABSOLUTE.

    SmolLM3 and Llama 4 list per layer in ``no_rope_layers`` whether it applies RoPE (1) or not
    (0: a NoPE layer); without the list, every ``no_rope_layer_interval``-th layer is NoPE, as
    their configs fill it in.
    """
    n_layers = int(
        model_config.get("num_hidden_layers")
        or model_config.get("n_layer")
        or model_config.get("num_layers")
        or 0
    )
    fam = family(model_config.get("model_type"))
    if fam.position_embedding != ROTARY:
        return [fam.position_embedding] * n_layers
    uses_rope = model_config.get("no_rope_layers")
    if not uses_rope and "no_rope_layer_interval" in model_config:
        interval = int(model_config["no_rope_layer_interval"])
        uses_rope = [int((i + 1) % interval != 0) for i in range(n_layers)]
    if not uses_rope:
        return [ROTARY] * n_layers
    if len(uses_rope) != n_layers:
        raise ValueError(f"no_rope_layers has {len(uses_rope)} entries for {n_layers} layers")
    return [ROTARY if use else NO_POSITION for use in uses_rope]


def query_temperature(position: int, floor_scale: float, attn_scale: float) -> float:
    """Llama 4's attention-temperature tuning on its NoPE layers: the query at ``position``
    (0-based) is multiplied by log(1 + floor((position + 1) / floor_scale)) * attn_scale + 1
    before scoring, so its logits are that much sharper at long context."""
    return math.log1p(math.floor((position + 1) / floor_scale)) * attn_scale + 1.0


def temperature_tuning(model_config: dict[str, Any]) -> list[dict[str, float] | None]:
    """Per layer, the parameters of :func:`query_temperature` when the layer scales its queries
    (Llama 4: ``attn_temperature_tuning`` on its NoPE layers), else None."""
    kinds = layer_position_embeddings(model_config)
    if model_config.get("model_type") != "llama4_text" or not model_config.get(
        "attn_temperature_tuning"
    ):
        return [None] * len(kinds)
    tuning = {
        "floor_scale": float(model_config["floor_scale"]),
        "attn_scale": float(model_config["attn_scale"]),
    }
    return [dict(tuning) if kind == NO_POSITION else None for kind in kinds]
