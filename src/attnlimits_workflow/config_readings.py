"""The paper's open readings (analysis.readings): each a derived run <model>~<reading> whose
settings differ from its source run's in the reading's keys only."""

from __future__ import annotations

from typing import Any

from .config_schema import ConfigError
from .config_sections import model_errors, validate_run

# The paper's open choices a run can also be scored under (analysis.readings): each reading is a
# derived run <model>~<reading> of the model's own dumps and packs (workflow/rules/common.smk).
# analysis.all_rows.masked is not one of them: both of its readings are measured in the same jobs
# and scored side by side in every Table 1 (claim ids ...:non_selected, ...:prefix).
READING_KEYS = {"embedding": ("embedding",), "temperature_on": ("gradient", "temperature_on")}
READING_SEPARATOR = "~"
DEFAULT_READING = "default"


def reading_config(cfg: dict[str, Any], reading: str) -> dict[str, Any]:
    """Run config ``cfg`` under its reading ``reading`` (a key of analysis.readings): the reading's
    overrides laid over its analysis section, and no readings of its own."""
    import copy

    out = copy.deepcopy(cfg)
    for key, value in cfg["analysis"]["readings"][reading].items():
        *path, last = READING_KEYS[key]
        node = out["analysis"]
        for part in path:
            node = node[part]
        node[last] = value
    out["analysis"]["readings"] = {}
    return out


def reading_run_name(model: str, reading: str) -> str:
    """The derived run of ``model`` under ``reading``: <model>~<reading> ('~' is in no model's
    name, so a derived run never collides with a configured one)."""
    return f"{model}{READING_SEPARATOR}{reading}"


def reading_runs(runs: dict[str, dict]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """Every run's readings (analysis.readings) as derived runs: name -> (the run whose dumps
    and packs it reads, the reading, its config, whose model.name is the derived run's)."""
    derived = {}
    for name, cfg in runs.items():
        for reading in cfg["analysis"].get("readings") or {}:
            label = reading_run_name(name, reading)
            rcfg = reading_config(cfg, reading)
            rcfg["model"] = {**rcfg["model"], "name": label}
            derived[label] = (name, reading, rcfg)
    return derived


def reading_changes(cfg: dict[str, Any], reading: str) -> set[str]:
    """The keys of READING_KEYS whose value ``reading`` changes from the run's own."""
    overrides = cfg["analysis"]["readings"][reading]
    return {k for k, v in overrides.items() if reading_setting(cfg, k) != v}


def reading_setting(cfg: dict[str, Any], key: str) -> Any:
    node = cfg["analysis"]
    for part in READING_KEYS[key]:
        node = node[part]
    return node


def readings_errors(cfg: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """analysis.readings: each reading changes at least one key from the run's own value, and the
    run under it passes every check (an embedding the model family or extraction.vectors refuses
    is named under the reading's key)."""
    errs = []
    for reading, overrides in (cfg["analysis"].get("readings") or {}).items():
        key = f"analysis.readings.{reading}"
        if reading == DEFAULT_READING:
            errs.append(
                f"{key}: {DEFAULT_READING!r} names the run's own reading; choose another name"
            )
            continue
        if not reading_changes(cfg, reading):
            errs.append(
                f"{key}: {overrides} is the run's own reading; a reading changes "
                f"{' or '.join(READING_KEYS)}"
            )
            continue
        try:
            validate_run(reading_config(cfg, reading), schema)
        except ConfigError as exc:
            errs += [f"{key} -> {line}" for line in str(exc).splitlines()]
    return errs


def readings_model_errors(
    config: dict[str, Any], mcfg: dict[str, Any], base: dict[str, Any] | None = None
) -> list[str]:
    """model_errors of the run and of each of its readings (analysis.readings), named under the
    reading's key: the fetch job's checks once a hub model's config.json arrives."""
    errs = model_errors(config, mcfg, base)
    for reading in config["analysis"].get("readings") or {}:
        errs += [
            f"analysis.readings.{reading} -> {line}"
            for line in model_errors(reading_config(config, reading), mcfg, base)
            if line not in errs
        ]
    return errs
