"""The families table (attnlimits.families) without a model forward: models with layers that have
no softmax attention are refused by name, with the reason, by the one validation pass that runs
before any job; and the table imports nothing heavy, so that pass stays torch-free."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import yaml
from project import REPO, tiny_config

from attnlimits.families import (
    FAMILIES,
    NO_SOFTMAX_LAYERS,
    UnsupportedModelError,
    family,
    layer_position_embeddings,
)
from attnlimits_workflow.config import ConfigError, load_config

pytestmark = pytest.mark.unit

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
DEFAULTS = yaml.safe_load((REPO / "config/config.yaml").read_text())


def test_every_refused_hybrid_is_a_transformers_model_type():
    """A misspelt name would refuse nothing: each one is a model_type transformers knows."""
    from transformers import CONFIG_MAPPING

    missing = sorted(t for t in NO_SOFTMAX_LAYERS if t not in CONFIG_MAPPING)
    assert not missing
    assert not set(NO_SOFTMAX_LAYERS) & set(FAMILIES)


@pytest.mark.parametrize("model_type", ["qwen3_next", "jamba", "falcon_h1", "lfm2", "mamba"])
def test_a_hybrid_is_refused_by_name_with_its_reason(model_type):
    with pytest.raises(UnsupportedModelError) as err:
        family(model_type)
    message = str(err.value)
    assert f"model_type {model_type!r} is not supported" in message
    assert NO_SOFTMAX_LAYERS[model_type] in message
    assert "without softmax attention weights" in message


def test_a_hybrid_fails_the_config_check_before_any_job(tmp_path):
    """load_config (the validation pass the Snakefile runs before any job) refuses a model folder
    whose config.json names a hybrid, naming its model_type and its linear-attention layers."""
    cfg = tiny_config(tmp_path)
    folder = tmp_path / "qwen3-next-src"
    folder.mkdir()
    settings = {
        "model_type": "qwen3_next",
        "num_hidden_layers": 4,
        "max_position_embeddings": 64,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    }
    (folder / "config.json").write_text(json.dumps(settings))
    cfg["model"] = {"name": "hybrid", "path": str(folder), "random_init": True}
    with pytest.raises(ConfigError) as err:
        load_config(DEFAULTS, cfg, SCHEMA, tmp_path)
    message = str(err.value)
    assert "model: model_type 'qwen3_next' is not supported" in message
    assert "gated DeltaNet linear-attention layers" in message


@pytest.mark.parametrize(
    ("settings", "want"),
    [
        ({"model_type": "gpt2", "n_layer": 2}, ["absolute", "absolute"]),
        ({"model_type": "bert", "num_hidden_layers": 1}, ["absolute"]),
        ({"model_type": "llama", "num_hidden_layers": 2}, ["rotary", "rotary"]),
        # no_rope_layers: 1 applies RoPE, 0 is a NoPE layer
        (
            {"model_type": "smollm3", "num_hidden_layers": 3, "no_rope_layers": [1, 0, 1]},
            ["rotary", "none", "rotary"],
        ),
        # without the list, every interval-th layer (1-based) is NoPE, as SmolLM3's config fills it
        (
            {"model_type": "smollm3", "num_hidden_layers": 5, "no_rope_layer_interval": 4},
            ["rotary", "rotary", "rotary", "none", "rotary"],
        ),
    ],
)
def test_layer_position_embeddings(settings, want):
    assert layer_position_embeddings(settings) == want


def test_a_chunked_layer_counts_its_chunk_as_its_window():
    from attnlimits.families import sliding_windows

    settings = {
        "model_type": "llama4_text",
        "num_hidden_layers": 3,
        "attention_chunk_size": 16,
        "layer_types": ["chunked_attention", "chunked_attention", "full_attention"],
    }
    assert sliding_windows(settings) == [16, 16, None]


@pytest.mark.parametrize(
    ("position", "want"),
    # log(1 + floor((position + 1) / 8)) * 0.5 + 1, by hand
    [(0, 1.0), (6, 1.0), (7, 1 + 0.5 * math.log(2)), (15, 1 + 0.5 * math.log(3))],
)
def test_query_temperature(position, want):
    from attnlimits.families import query_temperature

    assert query_temperature(position, 8, 0.5) == pytest.approx(want, rel=1e-15)


def test_temperature_tuning_is_on_llama4s_nope_layers_only():
    from attnlimits.families import temperature_tuning

    settings = {
        "model_type": "llama4_text",
        "num_hidden_layers": 2,
        "no_rope_layers": [1, 0],
        "attn_temperature_tuning": True,
        "floor_scale": 8192,
        "attn_scale": 0.1,
    }
    assert temperature_tuning(settings) == [None, {"floor_scale": 8192.0, "attn_scale": 0.1}]
    assert temperature_tuning({**settings, "attn_temperature_tuning": False}) == [None, None]
    smollm3 = {"model_type": "smollm3", "num_hidden_layers": 2, "no_rope_layers": [1, 0]}
    assert temperature_tuning(smollm3) == [None, None]


def test_layer_position_embeddings_match_smollm3s_own_config():
    """transformers fills SmolLM3's no_rope_layers from the interval the same way."""
    from transformers import SmolLM3Config

    cfg = SmolLM3Config(num_hidden_layers=9, no_rope_layer_interval=3)
    settings = {k: v for k, v in cfg.to_dict().items() if k != "no_rope_layers"}
    assert layer_position_embeddings(settings) == layer_position_embeddings(cfg.to_dict())
    assert layer_position_embeddings(cfg.to_dict()).count("none") == 3


def test_the_table_imports_neither_torch_nor_transformers():
    code = (
        "import sys, attnlimits.families; "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def gpt_oss_config(tmp_path, protocol):
    cfg = tiny_config(tmp_path)
    folder = tmp_path / "gpt-oss-src"
    folder.mkdir(exist_ok=True)
    settings = {"model_type": "gpt_oss", "num_hidden_layers": 2, "max_position_embeddings": 64}
    (folder / "config.json").write_text(json.dumps(settings))
    cfg["model"] = {"name": "sinks", "path": str(folder), "random_init": True}
    cfg["analysis"]["protocol"] = protocol
    return cfg


def test_a_sink_model_is_refused_under_the_all_rows_protocol(tmp_path):
    """The all-rows protocol recomputes rows from q and k alone, which would leave GPT-OSS's sink
    out of every row: refused before any job, naming the key; the last-row protocol passes."""
    with pytest.raises(ConfigError) as err:
        load_config(DEFAULTS, gpt_oss_config(tmp_path, "all_rows"), SCHEMA, tmp_path)
    assert "analysis.protocol: gpt_oss's learned attention sinks" in str(err.value)
    load_config(DEFAULTS, gpt_oss_config(tmp_path, "last_row"), SCHEMA, tmp_path)


def test_differential_attention_needs_an_embedding_its_softmax_weighs(tmp_path):
    """DiffLlama's head softmax weighs two value heads side by side, not the one v the dumps
    resolve for it: analysis.embedding value is refused by name before any job; key passes."""
    cfg = tiny_config(tmp_path)
    folder = tmp_path / "diffllama-src"
    folder.mkdir()
    settings = {
        "model_type": "diffllama",
        "num_hidden_layers": 2,
        "max_position_embeddings": 64,
    }
    (folder / "config.json").write_text(json.dumps(settings))
    cfg["model"] = {"name": "differential", "path": str(folder), "random_init": True}
    cfg["analysis"]["embedding"] = "value"
    with pytest.raises(ConfigError) as err:
        load_config(DEFAULTS, cfg, SCHEMA, tmp_path)
    assert "analysis.embedding: each diffllama head's softmax weighs two value heads" in str(
        err.value
    )
    cfg["analysis"]["embedding"] = "key"
    load_config(DEFAULTS, cfg, SCHEMA, tmp_path)
