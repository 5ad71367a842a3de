"""Configuration checks: the JSON schema first, then the cross-key rules a schema cannot say,
one function per section (SECTION_CHECKS, per model; name_errors and study_errors, per run).

Every message starts with the offending key, so a user knows what to edit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

# The config API the Snakefile, the scripts and the tests use, defined in the modules by concern
# (config_schema, config_sections, config_readings, config_study, model_probe) and gathered here.
from .config_readings import (
    DEFAULT_READING as DEFAULT_READING,
)
from .config_readings import (
    reading_changes as reading_changes,
)
from .config_readings import (
    reading_run_name as reading_run_name,
)
from .config_readings import (
    reading_runs as reading_runs,
)
from .config_readings import (
    readings_errors,
)
from .config_readings import (
    readings_model_errors as readings_model_errors,
)
from .config_schema import (
    MODEL_SECTIONS,
    ConfigError,
    coerce_command_line_values,
    non_finite_errors,
    one_line_each,
    overlay,
    periodic_name_error,
    read_schema,
    reserved_name_errors,
    schema_errors,
    with_schema_defaults,
)
from .config_schema import (
    NAME_PATTERN as NAME_PATTERN,
)
from .config_schema import (
    command_line_hint as command_line_hint,
)
from .config_schema import (
    deep_merge as deep_merge,
)
from .config_sections import (
    MAX_BATCHES as MAX_BATCHES,
)
from .config_sections import (
    model_errors as model_errors,
)
from .config_sections import (
    validate as validate,
)
from .config_sections import validate_run
from .config_study import (
    STUDY_PREFIX,
    study_errors,
    study_model_name,
    study_runs,
)
from .corpus_names import clash_errors, corpus_file, named_corpus
from .model_probe import is_file
from .registry import temperature_name as temperature_name


def model_overlay(name: str, entry: Any, base_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """One ``models:`` entry as an overlay: a file name (an overlay such as config/minilm.yaml,
    relative to the working directory or else to the repository), or a mapping of sections, which
    may name such a file under ``configfile`` and then add to it."""
    key = f"models.{name}"
    if entry is None:
        return {}, []
    if isinstance(entry, str):
        entry = {"configfile": entry}
    if not isinstance(entry, dict):
        return {}, [f"{key}: expected a file name or a mapping of {', '.join(MODEL_SECTIONS)}"]
    entry = dict(entry)
    errs: list[str] = []
    layers: list[dict[str, Any]] = []
    if "configfile" in entry:
        ref = entry.pop("configfile")
        path = Path(ref) if isinstance(ref, str) and is_file(ref) else base_dir / str(ref)
        if not isinstance(ref, str) or not is_file(path):
            return {}, [
                f"{key}.configfile: {ref} does not exist (relative paths: to the working "
                f"directory, then to {base_dir})"
            ]
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            return {}, [f"{key}.configfile: {ref} is not YAML ({str(exc).splitlines()[0]})"]
        if not isinstance(loaded, dict):
            return {}, [f"{key}.configfile: {ref} does not hold a mapping"]
        for section in sorted(set(loaded) - set(MODEL_SECTIONS)):
            errs.append(
                f"{key}.configfile: {ref} sets {section}, which every model of a run shares; "
                f"set it at the top level (a models entry may set {', '.join(MODEL_SECTIONS)})"
            )
        layers.append(loaded)
    for section in sorted(set(entry) - set(MODEL_SECTIONS)):
        errs.append(
            f"{key}.{section}: unknown key; a models entry may set "
            f"{', '.join(MODEL_SECTIONS)} and configfile"
        )
    layers.append(entry)
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = overlay(merged, {k: v for k, v in layer.items() if k in MODEL_SECTIONS})
    return merged, errs


def model_runs(
    config: dict[str, Any], base_dir: str | Path, model_defaults: dict[str, Any] | None = None
) -> tuple[dict[str, dict], str, list[str]]:
    """Every configured model's own full config, the default model's name, and the problems.

    Without ``models:`` the run has one model, ``model.name``, with the config as given. With it,
    each entry's sections are laid over the shared config (every key outside ``models``), its key
    becomes its ``model.name``, and its config holds no other model's settings: an entry whose
    ``model`` names a source starts from ``model_defaults`` (config/config.yaml's)."""
    shared = {k: v for k, v in config.items() if k not in ("models", "default_model")}
    entries = config.get("models") or {}
    if not entries:
        name = shared["model"]["name"]
        default = config.get("default_model") or name
        errs = (
            [f"default_model: {default!r} is not the configured model {name!r}"]
            if default != name
            else []
        )
        return {name: shared}, name, errs
    runs: dict[str, dict] = {}
    errs = []
    for name, entry in entries.items():
        over, problems = model_overlay(name, entry, Path(base_dir))
        errs += problems
        cfg = overlay(shared, over, model_defaults)
        cfg["model"] = {**cfg["model"], "name": name}
        # an entry's own text, without a name of its own, is named after the source it reads
        if "corpus" in over:
            own = over["corpus"] if isinstance(over["corpus"], dict) else {}
            if (own.get("bundled") or own.get("url")) and "path" not in own:
                if cfg["corpus"].get("path") not in (None, "null"):
                    errs.append(
                        f"models.{name}.corpus: sets {'bundled' if own.get('bundled') else 'url'}"
                        f", but corpus.path {cfg['corpus']['path']} (from the shared corpus) is "
                        "read first; add path: null to this entry's corpus"
                    )
            cfg["corpus"] = named_corpus(cfg["corpus"], over["corpus"])
        runs[name] = cfg
    default = config.get("default_model") or next(iter(entries))
    if default not in runs:
        errs.append(f"default_model: {default!r} is not one of models {list(runs)}")
    return runs, default, errs


def name_errors(config: dict[str, Any], runs: dict[str, dict]) -> list[str]:
    """The names the run's paths are made of (models, corpus.name, study.normalizers), and a
    model.trained set by hand."""
    several = bool(config.get("models"))
    errs = reserved_name_errors(runs, several)
    for name in runs:
        errs += periodic_name_error("models" if several else "model.name", name)
    errs += periodic_name_error("corpus.name", config["corpus"]["name"])
    errs += corpus_name_errors(config, runs)
    study = config.get("study") or {}
    for name in study.get("normalizers") or {}:
        errs += periodic_name_error("study.normalizers", name, STUDY_PREFIX + name)
        for seed in study.get("seeds") or []:
            label = study_model_name(name, seed)
            if len(label) > 64:
                errs.append(
                    f"study.normalizers.{name}: its model {label!r} for seed {seed} is longer "
                    "than 64 characters (it names a folder); shorten the name"
                )
    return errs + [
        f"models.{name} -> model.trained: set by the workflow for the study's models only; "
        "remove it (a model to train is an entry of study.normalizers)"
        if several
        else "model.trained: set by the workflow for the study's models only; remove it (a "
        "model to train is an entry of study.normalizers)"
        for name, cfg in runs.items()
        if cfg["model"].get("trained") is not None
        or cfg["model"].get("study_seed") is not None
        or cfg["model"].get("untrained")
    ]


def corpus_name_errors(config: dict[str, Any], runs: dict[str, dict]) -> list[str]:
    """Two texts under one corpus.name: the text lands in resources/corpus/<name>.txt, so one name
    must mean one corpus section (the shared one, or a models entry's own)."""
    seen = {config["corpus"]["name"]: ("corpus", config["corpus"])}
    errs = []
    for name, cfg in runs.items():
        corpus = cfg.get("corpus") or config["corpus"]
        if corpus["name"] not in seen:
            seen[corpus["name"]] = (f"models.{name}.corpus", corpus)
            errs += periodic_name_error(f"models.{name}.corpus.name", corpus["name"])
        label, first = seen[corpus["name"]]
        if first != corpus:
            texts = (
                f" ({corpus['path']} and {first['path']} both land as "
                f"{corpus_file(corpus['name'])})"
                if corpus.get("path") and first.get("path") and corpus["path"] != first["path"]
                else ""
            )
            errs.append(
                f"models.{name}.corpus: names {corpus['name']!r} like {label} but sets it "
                f"differently{texts}; give this text its own corpus.name"
            )
    return errs + clash_errors({n: (f"{key}.path", c) for n, (key, c) in seen.items()})


def resolve_runs(
    defaults: dict[str, Any],
    user: dict[str, Any],
    schema: dict[str, Any],
    base_dir: str | Path,
) -> tuple[dict[str, Any], dict[str, dict], str]:
    """The run's config (defaults, then the user's overlay with the schema's types), each model's
    own config (typed the same way: --config 'models={a: {analysis: ...}}' arrives as strings,
    and the schema of models says only "a mapping") and the default model. Raises ConfigError on
    schema problems and bad models entries; each model's own rules are load_config's."""
    config = coerce_command_line_values(overlay(defaults, user), schema)
    # a text the user names no name for is filed under its own (corpus_names), once typed
    config["corpus"] = named_corpus(config.get("corpus"), user.get("corpus"))
    errs = non_finite_errors(config) + schema_errors(config, schema)
    if errs:
        raise ConfigError(one_line_each(errs))
    runs, default, errs = model_runs(config, base_dir, defaults.get("model"))
    errs += name_errors(config, runs)
    errs += study_errors(config)
    trained = study_runs(config, defaults)
    errs += [
        f"models.{name}: the study's trained models use this name"
        for name in runs
        if name in trained
    ]
    if errs:
        raise ConfigError(one_line_each(errs))
    runs = {**runs, **trained}
    runs = {name: coerce_command_line_values(cfg, schema) for name, cfg in runs.items()}
    return config, runs, default


def load_config(
    defaults: dict[str, Any],
    user: dict[str, Any],
    schema_path: str | Path,
    base_dir: str | Path,
) -> tuple[dict[str, Any], dict[str, dict], str]:
    """resolve_runs, then every model's checks: the one validation pass, run before any job.
    Raises ConfigError with one line per problem, each naming its key (``models.<name> -> ...``
    for a problem of one model of several)."""
    schema = read_schema(schema_path)
    defaults = with_schema_defaults(schema, defaults)
    config, runs, default = resolve_runs(defaults, user, schema, base_dir)
    errs: list[str] = []
    several = bool(config.get("models"))
    for name, cfg in runs.items():
        try:
            validate_run(cfg, schema)
            problems = readings_errors(cfg, schema)
            if problems:
                raise ConfigError(one_line_each(problems))
        except ConfigError as exc:
            lines = str(exc).splitlines()
            if cfg["model"].get("trained"):
                # every trained model shares study.diagnostics: report each problem once
                lines = [f"study.diagnostics -> {line}" for line in lines]
                errs += [line for line in lines if line not in errs]
            else:
                errs += [f"models.{name} -> {line}" for line in lines] if several else lines
    if errs:
        raise ConfigError(one_line_each(errs))
    return config, runs, default
