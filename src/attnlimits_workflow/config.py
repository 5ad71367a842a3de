"""Configuration checks: the JSON schema first, then the cross-key rules a schema cannot say.

Every message starts with the offending key, so a user knows what to edit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SUPPORTED_MODEL_TYPES = ("gpt2", "bert")
POSITION_KEYS = ("n_positions", "max_position_embeddings")


class ConfigError(ValueError):
    """An invalid configuration; str() holds one line per problem."""


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` laid over ``base``, recursing into nested mappings (lists are replaced)."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _key(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def schema_errors(config: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """One concise line per schema violation, naming the key and the allowed values."""
    validator = jsonschema.Draft202012Validator(schema)
    lines = []
    for err in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        key = _key(err.absolute_path)
        if err.validator == "additionalProperties":
            allowed = sorted(err.schema.get("properties", {}))
            extra = sorted(set(err.instance) - set(allowed))
            lines.append(
                f"{_key([*err.absolute_path, extra[0]]) if extra else key}: unknown key; allowed keys here: {', '.join(allowed)}"
            )
        elif err.validator == "enum":
            lines.append(f"{key}: {err.instance!r} is not one of {err.validator_value}")
        elif err.validator == "required":
            lines.append(f"{key}: {err.message}")
        else:
            lines.append(f"{key}: {err.message}")
    return lines


def model_config(config: dict[str, Any]) -> dict[str, Any] | None:
    """The model's config.json (with random-init overrides) when it can be read without a download."""
    from .models import ModelSourceError, package_model_dir  # local: keeps import light

    model = config["model"]
    candidates = []
    try:
        if model.get("package"):
            candidates.append(package_model_dir(model["package"]) / "config.json")
    except ModelSourceError:
        return None
    if model.get("path"):
        candidates.append(Path(model["path"]) / "config.json")
    candidates.append(Path("resources/models") / model["name"] / "config.json")
    for c in candidates:
        if c.is_file():
            cfg = json.loads(c.read_text())
            if model.get("random_init"):
                cfg.update(model.get("config_overrides") or {})
            return cfg
    return None


def max_positions(model_cfg: dict[str, Any]) -> int | None:
    for key in POSITION_KEYS:
        if key in model_cfg:
            return int(model_cfg[key])
    return None


def semantic_errors(config: dict[str, Any]) -> list[str]:
    errs: list[str] = []
    a = config["analysis"]
    lengths = sorted(a["lengths"])
    chunk_length = config["chunking"]["chunk_length"]

    for i, L in enumerate(a["lengths"]):
        if L < 2:
            errs.append(f"analysis.lengths[{i}]: L={L}; every L must be >= 2")
        if L > chunk_length:
            errs.append(
                f"analysis.lengths[{i}]: L={L} exceeds chunking.chunk_length={chunk_length}"
            )

    def n_below(key: str, ns: list[int], length: int) -> None:
        for i, n in enumerate(ns):
            if n >= length:
                errs.append(f"{key}[{i}]: N={n} must be < L={length} (allowed: 1..{length - 1})")

    def in_lengths(key: str, value: int) -> None:
        if value not in lengths:
            errs.append(f"{key}: L={value} is not in analysis.lengths {lengths}")

    d = a["distance"]
    if d["n_fixed"] >= lengths[0]:
        errs.append(
            f"analysis.distance.n_fixed: N={d['n_fixed']} must be < every L in analysis.lengths (smallest {lengths[0]})"
        )
    in_lengths("analysis.distance.length_fixed", d["length_fixed"])
    n_below("analysis.distance.n_grid", d["n_grid"], d["length_fixed"])
    s = a["separability"]
    in_lengths("analysis.separability.length", s["length"])
    n_below("analysis.separability.n_grid", s["n_grid"], s["length"])
    in_lengths("analysis.gradient.length", a["gradient"]["length"])

    b = config["beyond"]
    if b["n"] not in s["n_grid"]:
        errs.append(
            f"beyond.n: N={b['n']} is not in analysis.separability.n_grid {sorted(s['n_grid'])}"
        )
    from attnlimits.normalizers import KINDS, parameters

    for name, entry in b["normalizers"].items():
        if entry["kind"] not in KINDS:
            errs.append(
                f"beyond.normalizers.{name}.kind: {entry['kind']!r} is not one of {sorted(KINDS)}"
            )
            continue
        allowed = parameters(entry["kind"])
        for key in sorted(set(entry) - {"kind"} - set(allowed)):
            errs.append(
                f"beyond.normalizers.{name}.{key}: not a parameter of {entry['kind']}; "
                f"allowed: {', '.join(allowed) or 'none'}"
            )

    corpus = config["corpus"]
    if corpus.get("path") and not Path(corpus["path"]).is_file():
        errs.append(f"corpus.path: {corpus['path']} does not exist or is not a file")
    style = config.get("figures", {}).get("style")
    if style and not Path(style).is_file():
        errs.append(f"figures.style: {style} does not exist or is not a file")
    model = config["model"]
    if model.get("path") and not (Path(model["path"]) / "config.json").is_file():
        errs.append(f"model.path: {model['path']} is not a model folder (no config.json)")
    if model.get("package"):
        from .models import ModelSourceError, package_model_dir

        try:
            package_model_dir(model["package"])
        except ModelSourceError as exc:
            errs.append(str(exc))
    if model.get("config_overrides") and not model.get("random_init"):
        errs.append(
            "model.config_overrides: only allowed with model.random_init: true (pretrained weights fix the architecture)"
        )

    mcfg = model_config(config)
    if mcfg is not None:
        kind = mcfg.get("model_type")
        if kind not in SUPPORTED_MODEL_TYPES:
            errs.append(
                f"model: model_type {kind!r} is not supported; allowed: {', '.join(SUPPORTED_MODEL_TYPES)}"
            )
        limit = max_positions(mcfg)
        if limit is not None:
            if chunk_length > limit:
                errs.append(
                    f"chunking.chunk_length: {chunk_length} exceeds the model's {limit} positions"
                )
            for i, L in enumerate(a["lengths"]):
                if L > limit:
                    errs.append(
                        f"analysis.lengths[{i}]: L={L} exceeds the model's {limit} positions (allowed: 2..{limit})"
                    )
        if kind == "gpt2" and config["extraction"]["query_row"] != "last":
            errs.append(
                "extraction.query_row: a causal model's length-L prefix ends at its last row; allowed: last"
            )
    return errs


def validate(config: dict[str, Any], schema_path: str | Path) -> None:
    """Raise ConfigError listing every problem; schema problems first (semantics need valid types)."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    errs = schema_errors(config, schema)
    if not errs:
        errs = semantic_errors(config)
    if errs:
        raise ConfigError("\n".join(errs))
