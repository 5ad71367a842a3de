"""The model's own config.json, read before any job runs (a local folder, a GGUF file's metadata,
an installed package or the hub's cache), for the checks that need the architecture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .config_schema import ConfigError


def model_config(config: dict[str, Any], with_overrides: bool = True) -> dict[str, Any] | None:
    """The model's config.json (with random-init overrides) when it can be read without a download."""
    from .models import ModelSourceError, package_model_dir  # local: keeps import light

    model = config["model"]
    if model.get("trained"):  # built by the study's train_model job, from study.architecture
        arch = config["study"]["architecture"]
        return {
            "model_type": "llama",
            "max_position_embeddings": arch["max_positions"],
            "num_hidden_layers": arch["layers"],
            "num_attention_heads": arch["heads"],
            "num_key_value_heads": arch["kv_heads"],
        }
    fetched = Path("resources/models") / model["name"] / "config.json"
    if model.get("gguf_file"):
        from .models import gguf_config, gguf_path

        try:
            path = gguf_path(model)
            return read_model_config(fetched, model) if is_file(fetched) else gguf_config(path)
        except ModelSourceError:
            return None
    candidates = []
    try:
        if model.get("package"):
            candidates.append(package_model_dir(model["package"]) / "config.json")
    except ModelSourceError:
        return None
    if model.get("path"):
        candidates.append(Path(model["path"]) / "config.json")
    candidates.append(Path("resources/models") / model["name"] / "config.json")
    if not model.get("path") and not model.get("package") and model.get("hf_id"):
        candidates += hub_cached_configs(model["hf_id"])
    for c in candidates:
        if is_file(c):
            cfg = read_model_config(c, model)
            if model.get("random_init") and with_overrides:
                cfg.update(model.get("config_overrides") or {})
            return cfg
    return None


def read_model_config(path: Path, model: dict[str, Any]) -> dict[str, Any]:
    """A model's config.json as a mapping; a damaged one raises ConfigError naming the file and
    the key that led to it (model.path, model.package, the fetched folder, the hub cache)."""
    from .models import json_problem, one_line

    why = json_problem(path)
    if why is None:
        return json.loads(path.read_text())
    fetched = Path("resources/models") / model["name"]
    if path.parent == fetched:
        key, fix = "model.name", f"delete {fetched} and rerun to fetch it again"
    elif model.get("path") and path.parent == Path(model["path"]):
        key, fix = (
            "model.path",
            "restore the file (a model folder's config.json is one JSON object)",
        )
    elif model.get("package"):
        key, fix = "model.package", f"reinstall {model['package']}"
    else:
        key, fix = "model.hf_id", "delete that snapshot from the Hugging Face cache"
    raise ConfigError(f"{key}: {path} is damaged ({one_line(why)}); {fix}")


def hub_cached_configs(hf_id: str) -> list[Path]:
    """config.json of ``hf_id`` in the local Hugging Face cache, if a download left one there: the
    position checks then apply to hub models before any job, without the network."""
    import os

    roots = [os.environ.get("HF_HUB_CACHE")]
    home = os.environ.get("HF_HOME")
    roots.append(os.path.join(home, "hub") if home else None)
    roots.append(os.path.join(os.path.expanduser("~"), ".cache", "huggingface", "hub"))
    folder = "models--" + hf_id.replace("/", "--")
    found = []
    for root in filter(None, roots):
        base = Path(root) / folder
        ref = base / "refs" / "main"
        if ref.is_file():
            found.append(base / "snapshots" / ref.read_text().strip() / "config.json")
        found += sorted(base.glob("snapshots/*/config.json"))
    return found


def model_config_keys(model_cfg: dict[str, Any]) -> set[str]:
    """Every setting a config of this model_type has (transformers' defaults and the file's)."""
    from transformers import AutoConfig  # only when overrides are given: the import is slow

    try:
        defaults = AutoConfig.for_model(model_cfg.get("model_type")).to_dict()
    except ValueError:
        defaults = {}
    return set(defaults) | set(model_cfg)


def is_file(path: str | Path) -> bool:
    """Path.is_file, False also for a name the system refuses (over 255 bytes: "File name too
    long", which Path.is_file raises) or cannot hold (a NUL)."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False
