"""Configuration checks: the JSON schema first, then the cross-key rules a schema cannot say,
one function per section (SECTION_CHECKS, per model; name_errors and study_errors, per run).

Every message starts with the offending key, so a user knows what to edit.
"""

from __future__ import annotations

import codecs
import importlib
import json
import math
import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from attnlimits.families import UnsupportedModelError, family, sliding_windows
from attnlimits.families import max_positions as model_positions

from .corpus_io import MAX_CONTROL_FRACTION, control_fraction
from .corpus_names import clash_errors, corpus_file, named_corpus


class ConfigError(ValueError):
    """An invalid configuration; str() holds one line per problem."""


# Mappings keyed by names the user chooses: a user's mapping replaces the default one whole (a
# config listing one normalizer runs that one), where mappings of settings are overlaid key by key.
REPLACED_MAPPINGS = (("beyond", "normalizers"), ("models",), ("study", "normalizers"))


def command_line_hint(errors: str) -> str:
    """How to set the first key ``errors`` names (load_config's one line per problem, each
    ``key.path[index]: message``): on the command line with --config, whose value is YAML laid
    over the defaults, or in a file with --configfile."""
    first = errors.splitlines()[0] if errors else ""
    # "models.x -> analysis.lengths" (a model's own settings) is the key models.x.analysis.lengths
    key = ".".join(first.split(": ", 1)[0].split(" -> ")) if ": " in first else ""
    parts = [p for p in re.sub(r"\[\d+\]", "", key).split(".") if p]
    replaced = [m for m in REPLACED_MAPPINGS if tuple(parts[: len(m)]) == m]
    if replaced:
        mapping = ".".join(replaced[0])
        return (
            f"Set it in a file given with --configfile my.yaml, listing every entry of {mapping} "
            "(a user's mapping replaces the default one whole); config/README.md documents "
            "every key."
        )
    if not parts or not all(re.fullmatch(r"[A-Za-z0-9_.-]+", p) for p in parts):
        example = "--config 'corpus={path: war_and_peace.txt}'"
    else:
        value = "VALUE"
        for part in reversed(parts[1:]):
            value = f"{{{part}: {value}}}"
        example = f"--config '{parts[0]}={value}'"
    return (
        f"Set a key on the command line, e.g. {example} (YAML, laid over config/config.yaml), "
        "or in a file given with --configfile my.yaml; config/README.md documents every key."
    )


def deep_merge(
    base: dict[str, Any], override: dict[str, Any], _path: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``override`` laid over ``base``, recursing into nested mappings, except those named in
    REPLACED_MAPPINGS, which ``override`` replaces; lists and scalars are replaced."""
    out = dict(base)
    for key, value in override.items():
        path = (*_path, key)
        if (
            isinstance(value, dict)
            and isinstance(out.get(key), dict)
            and path not in REPLACED_MAPPINGS
        ):
            out[key] = deep_merge(out[key], value, path)
        else:
            out[key] = value
    return out


# Names that become a path segment (model.name, models keys, corpus.name, normaliser names): the
# schema's pattern. Not "." or ".." (a model named ".." planned results/../dumps), not starting
# with "." (hidden) or "-" (read as an option by command-line tools), at most 64 characters.
# A study normaliser's model is study-<name>-seed<seed> (seeds <= 99999): its names are 16
# characters shorter.
NAME_PATTERN = "^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
STUDY_NAME_PATTERN = "^[A-Za-z0-9_][A-Za-z0-9_.-]{0,47}$"
NAME_RULES = {
    pattern: f"1 to {most} letters, digits, '_', '.' or '-', not starting with '.' or '-' "
    "(it names a folder)"
    for pattern, most in ((NAME_PATTERN, 64), (STUDY_NAME_PATTERN, 48))
}
# Folders the workflow's shared outputs use next to the per-model ones (figures/compare/,
# tables/study/, logs/default_model/, logs/figures/fig1.log, logs/download_corpus/): a model of
# one of these names would write into them.
RESERVED_MODEL_NAMES = ("compare", "study", "default_model", "figures", "download_corpus")


# Snakemake refuses a wildcard value that ends in one block repeated 20 times or more (it reads
# it as a rule matching its own output without end): PeriodicWildcardError while planning.
PERIODIC = re.compile(r"(?P<unit>.+?)(?P=unit){19,}$")


def periodic_name_error(key: str, name: str, label: str | None = None) -> list[str]:
    """A name (``label``, e.g. study-<name>, as the wildcard sees it) Snakemake cannot plan."""
    found = PERIODIC.search(label or name)
    if not found:
        return []
    unit = found.group("unit")
    return [
        f"{key}: {name!r} ends in {unit!r} repeated {len(found.group(0)) // len(unit)} times, "
        "which Snakemake refuses as a wildcard value (at most 19 repeats)"
    ]


def reserved_name_errors(runs: dict[str, dict], several: bool) -> list[str]:
    """A configured model named like a shared output folder (RESERVED_MODEL_NAMES)."""
    key = "models" if several else "model.name"
    return [
        f"{key}: {name!r} is a folder the workflow's shared outputs use; choose another name "
        f"(reserved: {', '.join(RESERVED_MODEL_NAMES)})"
        for name in runs
        if name in RESERVED_MODEL_NAMES
    ]


# Where a model comes from, in the order the fetch rule tries them (config/README.md: model).
MODEL_SOURCES = ("gguf_file", "package", "path", "hf_id")

# What a `models:` entry may set; the seed and the figure style are shared by the run. An entry's
# own corpus makes the same model on another text one more entry (config/findings.yaml).
MODEL_SECTIONS = (
    "model",
    "corpus",
    "chunking",
    "extraction",
    "analysis",
    "beyond",
    "effective_set",
)


def overlay(
    base: dict[str, Any], user: dict[str, Any], model_defaults: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``user`` laid over ``base`` (deep_merge), except that a ``model`` section naming a source
    (MODEL_SOURCES) describes another model: it is laid over ``model_defaults`` (else ``base``'s
    model) with every other source dropped. A model from a package then records no ``hf_id: gpt2``
    from the defaults, nor another model's ``random_init`` or ``config_overrides``."""
    merged = deep_merge(base, user)
    named = user.get("model")
    if isinstance(named, dict) and any(named.get(key) for key in MODEL_SOURCES):
        start = model_defaults if model_defaults is not None else base.get("model") or {}
        merged["model"] = {
            **start,
            **{key: None for key in MODEL_SOURCES},
            **named,
        }
    return merged


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


STUDY_PREFIX = "study-"


def study_model_name(name: str, seed: int) -> str:
    """The model of study normaliser ``name`` trained with ``seed``: study-<name>-seed<seed>.
    Keyed by the seed, so that a changed study.seeds plans only the new seeds' models."""
    return f"{STUDY_PREFIX}{name}-seed{int(seed)}"


def study_normalizer(rule: dict[str, Any]) -> dict[str, Any]:
    """The beyond.normalizers entry (attnlimits.normalizers) that is a trained model's own
    attention on its dumped logits (q k^T times the scaling): the rule with its settings, except
    its learned parameters' initialisers (Scalable-Softmax's s_init): the normalizer job reads
    the learned values from the model's learned.json."""
    from attnlimits.rules import what_if_entry

    return what_if_entry(rule)


def study_effective_set(section: dict[str, Any], study: dict[str, Any]) -> dict[str, Any]:
    """A study model's effective_set section: N* at every evaluation context, on the study's
    held-out windows (rule study_effective_windows), with study.effective_set's targets and
    variants. Not `enabled`: the study report, not `all`, asks for its jobs."""
    n_star = study.get("effective_set") or {}
    return {
        **section,
        "enabled": False,
        "lengths": sorted(study["evaluation"]["contexts"]),
        **{k: n_star[k] for k in ("targets", "variants") if k in n_star},
    }


def study_runs(config: dict[str, Any], defaults: dict[str, Any]) -> dict[str, dict]:
    """One run per study normaliser, named study-<normaliser>: the run's shared keys (corpus,
    seed, figures), the *default* chunking, extraction, analysis and beyond sections with
    study.diagnostics laid over them (so a paper run's own settings never reach, or break, the
    study), a model trained by the workflow (model.trained names the normaliser) and, as its only
    normalizer job, its own rule (study_normalizer)."""
    study = config.get("study") or {}
    shared = {k: v for k, v in config.items() if k not in ("models", "default_model")}
    # the study trains on the run's shared corpus: only the model's own sections are the defaults'
    own = [k for k in MODEL_SECTIONS if k not in ("model", "corpus") and k in defaults]
    base = {**shared, **{k: defaults[k] for k in own}}
    runs = {}
    for seed in study.get("seeds") or []:
        for name, rule in (study.get("normalizers") or {}).items():
            label = study_model_name(name, seed)
            cfg = deep_merge(base, study["diagnostics"])
            cfg["model"] = {
                **defaults["model"],
                **{key: None for key in MODEL_SOURCES},
                "random_init": False,
                "config_overrides": {},
                "name": label,
                "trained": name,
                # the training seed: initial weights and batches, shared by the seed's models
                "study_seed": int(seed),
            }
            cfg["beyond"] = {**cfg["beyond"], "normalizers": {name: study_normalizer(rule)}}
            cfg["effective_set"] = study_effective_set(cfg["effective_set"], study)
            runs[label] = cfg
    return runs


def study_errors(config: dict[str, Any]) -> list[str]:
    """The study's cross-key rules: known attention rules and their settings, the baseline, the
    evaluation contexts within the model's positions, training windows within them."""
    from attnlimits.rules import trained_settings

    study = config.get("study") or {}
    rules = study.get("normalizers") or {}
    errs = []
    for name, rule in rules.items():
        try:
            trained_settings(rule)
        except ValueError as exc:
            errs.append(f"study.normalizers.{name}: {exc}")
    if rules and study.get("baseline") not in rules:
        errs.append(f"study.baseline: {study.get('baseline')!r} is not one of study.normalizers")
    positions = study["architecture"]["max_positions"]
    for i, c in enumerate(study["evaluation"]["contexts"]):
        if c > positions:
            errs.append(
                f"study.evaluation.contexts[{i}]: {c} exceeds study.architecture.max_positions="
                f"{positions}"
            )
    contexts = sorted(study["evaluation"]["contexts"])
    if contexts and contexts[0] != study["training"]["context"]:
        # the length measure reads the first context as the training one
        errs.append(
            f"study.evaluation.contexts: the smallest, {contexts[0]}, must be "
            f"study.training.context={study['training']['context']} (length generalisation "
            "compares the longer contexts with it)"
        )
    if study.get("relax_ratio", 2.0) <= 1.0:
        errs.append(f"study.relax_ratio: {study['relax_ratio']} must be above 1")
    if study["training"]["context"] > positions:
        errs.append(
            f"study.training.context: {study['training']['context']} exceeds "
            f"study.architecture.max_positions={positions}"
        )
    n_star = study.get("effective_set") or {}
    if contexts and n_star.get("targets", 0) >= contexts[0]:
        errs.append(
            f"study.effective_set.targets: {n_star['targets']} scored tokens need every context "
            f"above it; the smallest of study.evaluation.contexts is {contexts[0]}"
        )
    from .effective_set import parse_variant

    for variant in n_star.get("variants") or []:
        try:
            parse_variant(variant)
        except ValueError as exc:
            errs.append(f"study.effective_set.variants: {exc}")
    arch = study["architecture"]
    if arch["heads"] % arch["kv_heads"] or arch["hidden_size"] % arch["heads"]:
        errs.append(
            "study.architecture: heads must divide hidden_size and be a multiple of kv_heads"
        )
    return errs


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
        if cfg["model"].get("trained") is not None or cfg["model"].get("study_seed") is not None
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


_SCHEMAS: dict[tuple[str, int], dict[str, Any]] = {}


def read_schema(path: str | Path) -> dict[str, Any]:
    """The schema file, parsed once per version of it (pure-Python YAML takes ~60 ms)."""
    import copy

    key = (str(path), Path(path).stat().st_mtime_ns)
    if key not in _SCHEMAS:
        _SCHEMAS[key] = yaml.safe_load(Path(path).read_text())
    return copy.deepcopy(_SCHEMAS[key])


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


def resolve_ref(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its ``$ref`` (into the schema's definitions) filled in."""
    ref = node.get("$ref")
    if ref:
        target = schema
        for part in ref.removeprefix("#/").split("/"):
            target = target[part]
        return resolve_ref(schema, {**target, **{k: v for k, v in node.items() if k != "$ref"}})
    return node


def _types(node: dict[str, Any]) -> set[str]:
    kind = node.get("type")
    return set(kind) if isinstance(kind, list) else ({kind} if kind else set())


def _typed(value: str, types: set[str]) -> Any:
    """A command-line string as the schema's type, when it reads as one; else unchanged."""
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    if isinstance(parsed, bool):
        ok = "boolean" in types
    elif isinstance(parsed, int):
        ok = bool(types & {"integer", "number"})
    elif isinstance(parsed, float):
        ok = "number" in types
    elif parsed is None:
        ok = "null" in types
    elif isinstance(parsed, list):
        ok = "array" in types
    else:
        ok = False
    return parsed if ok else value


def coerce_command_line_values(config: Any, schema: dict[str, Any], node=None) -> Any:
    """Snakemake reads nested ``--config 'chunking={n_chunks: 2}'`` values as strings; give each
    string the type the schema asks for at its key, so the command line works like a file."""
    node = resolve_ref(schema, node if node is not None else schema)
    if isinstance(config, dict):
        props = node.get("properties", {})
        extra = node.get("additionalProperties")
        out = {}
        for key, value in config.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            out[key] = value if sub is None else coerce_command_line_values(value, schema, sub)
        return out
    if isinstance(config, list):
        items = node.get("items")
        return [coerce_command_line_values(v, schema, items) if items else v for v in config]
    if isinstance(config, str):
        alternatives = [resolve_ref(schema, a) for a in node.get("oneOf", node.get("anyOf", []))]
        if any(a.get("const") == config for a in alternatives):
            return config  # a word the schema names (analysis.all_rows.rows: all)
        types = _types(node).union(*(_types(a) for a in alternatives))
        if "null" in types and config in ("null", "Null", "NULL", "~"):
            return None
        if types and "string" not in types:
            value = _typed(config, types)
            return (
                coerce_command_line_values(value, schema, node)
                if isinstance(value, list)
                else value
            )
    return config


def non_finite_errors(config: Any, path: tuple = ()) -> list[str]:
    """Every .inf or .nan in the config, by key: no setting of this workflow means one."""
    if isinstance(config, dict):
        return [e for k, v in config.items() for e in non_finite_errors(v, (*path, k))]
    if isinstance(config, list):
        return [e for i, v in enumerate(config) for e in non_finite_errors(v, (*path, i))]
    if isinstance(config, float) and not math.isfinite(config):
        return [f"{_key(path)}: {config} is not a finite number"]
    return []


def _key(path) -> str:
    out = ""
    for part in path:
        if not isinstance(part, int) and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", part):
            part = repr(part)  # an empty or odd key ('', 'a b', 'x: y') shown as itself
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


# JSON Schema counts 2.0 (and 4.5e128) as an integer; no integer setting here means a float: a
# float chunk count or layer count reached range() and list sizes as a traceback.
StrictValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
    ),
)


def one_line_each(errors: list[str]) -> str:
    """The problems, one per line: characters that would break or hide a line (a newline, a NUL,
    a file separator inside a value the user gave) are written as escapes."""
    return "\n".join(
        "".join(c if c.isprintable() else repr(c)[1:-1] for c in line) for line in errors
    )


def schema_errors(config: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """One concise line per schema violation, naming the key and the allowed values."""
    validator = StrictValidator(schema)
    lines = []
    for err in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        key = _key(err.absolute_path)
        if err.validator == "additionalProperties":
            allowed = sorted(err.schema.get("properties", {}))
            extra = sorted(set(err.instance) - set(allowed))
            lines.append(
                f"{_key([*err.absolute_path, extra[0]]) if extra else key}: unknown key; allowed keys here: {', '.join(allowed)}"
            )
        elif err.validator == "pattern" and err.validator_value in NAME_RULES:
            # a mapping's key (models, *.normalizers) or a name's value (model.name, corpus.name)
            what = "key " if "propertyNames" in err.schema_path else ""
            lines.append(
                f"{key}: {what}{err.instance!r} is not a usable name: "
                f"{NAME_RULES[err.validator_value]}"
            )
        elif err.validator == "enum":
            lines.append(f"{key}: {err.instance!r} is not one of {err.validator_value}")
        elif err.validator == "required":
            lines.append(f"{key}: {err.message}")
        else:
            lines.append(f"{key}: {err.message}")
    return lines


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


# No model has more layers (the largest have ~100s); a config.json saying more is damaged.
MAX_MODEL_LAYERS = 100_000

# Snakemake's job graph grows with the extraction jobs: 100,000 of them kept it building for
# minutes. The whole of War and Peace is 834 chunks of 1024 GPT-2 tokens.
MAX_BATCHES = 2000


def is_file(path: str | Path) -> bool:
    """Path.is_file, False also for a name the system refuses (over 255 bytes: "File name too
    long", which Path.is_file raises) or cannot hold (a NUL)."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def temperature_name(t: float) -> str:
    """The T of a gradient job's file name (6 significant digits)."""
    return f"{float(t):g}"


def extraction_errors(config: dict[str, Any]) -> list[str]:
    """extraction: the number of extraction jobs chunking and chunks_per_batch make."""
    n_chunks, per_batch = config["chunking"]["n_chunks"], config["extraction"]["chunks_per_batch"]
    batches = -(-n_chunks // per_batch)
    if batches > MAX_BATCHES:
        return [
            f"extraction.chunks_per_batch: {n_chunks} chunks in batches of {per_batch} make "
            f"{batches} extraction jobs (at most {MAX_BATCHES}); raise chunks_per_batch to "
            f"{-(-n_chunks // MAX_BATCHES)} or more"
        ]
    return []


def n_below_errors(key: str, ns: list[int], length: int) -> list[str]:
    """Each N of a grid below the L it is drawn from."""
    return [
        f"{key}[{i}]: N={n} must be < L={length} (allowed: 1..{length - 1})"
        for i, n in enumerate(ns)
        if n >= length
    ]


def in_lengths_errors(key: str, value: int, lengths: list[int]) -> list[str]:
    """An analysis's L, which must be one of analysis.lengths (its dumps are made there)."""
    if value not in lengths:
        return [f"{key}: L={value} is not in analysis.lengths {sorted(lengths)}"]
    return []


def lengths_errors(config: dict[str, Any]) -> list[str]:
    """analysis.lengths: each L at least 2 and within a chunk."""
    chunk_length = config["chunking"]["chunk_length"]
    errs = []
    for i, L in enumerate(config["analysis"]["lengths"]):
        if L < 2:
            errs.append(f"analysis.lengths[{i}]: L={L}; every L must be >= 2")
        if L > chunk_length:
            errs.append(
                f"analysis.lengths[{i}]: L={L} exceeds chunking.chunk_length={chunk_length}"
            )
    return errs


def distance_errors(config: dict[str, Any]) -> list[str]:
    """analysis.distance: N below every L of the scan over L, the scan over N at a dumped L."""
    lengths = sorted(config["analysis"]["lengths"])
    d = config["analysis"]["distance"]
    errs = []
    if d["n_fixed"] >= lengths[0]:
        errs.append(
            f"analysis.distance.n_fixed: N={d['n_fixed']} must be < every L in analysis.lengths (smallest {lengths[0]})"
        )
    errs += in_lengths_errors("analysis.distance.length_fixed", d["length_fixed"], lengths)
    return errs + n_below_errors("analysis.distance.n_grid", d["n_grid"], d["length_fixed"])


def separability_errors(config: dict[str, Any]) -> list[str]:
    """analysis.separability: the scan over N at a dumped L."""
    s = config["analysis"]["separability"]
    errs = in_lengths_errors(
        "analysis.separability.length", s["length"], config["analysis"]["lengths"]
    )
    return errs + n_below_errors("analysis.separability.n_grid", s["n_grid"], s["length"])


def gradient_errors(config: dict[str, Any]) -> list[str]:
    """analysis.gradient: a dumped L, and temperatures that name different jobs."""
    g = config["analysis"]["gradient"]
    errs = in_lengths_errors("analysis.gradient.length", g["length"], config["analysis"]["lengths"])
    named: dict[str, float] = {}
    for i, t in enumerate(g["temperatures"]):
        name = temperature_name(t)
        if name in named:
            errs.append(
                f"analysis.gradient.temperatures[{i}]: {t!r} and {named[name]!r} name the same job "
                f"T{name} (temperatures must differ in their first 6 significant digits)"
            )
        named.setdefault(name, t)
    return errs


def beyond_errors(config: dict[str, Any]) -> list[str]:
    """beyond: n on the separability grid, known normalizers with their own parameters."""
    b = config["beyond"]
    n_grid = config["analysis"]["separability"]["n_grid"]
    errs = []
    if b["n"] not in n_grid:
        errs.append(f"beyond.n: N={b['n']} is not in analysis.separability.n_grid {sorted(n_grid)}")
    from attnlimits.rules import RULES as KINDS
    from attnlimits.rules import parameters

    for name, entry in b["normalizers"].items():
        errs += periodic_name_error("beyond.normalizers", name)
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
    return errs


def protocol_errors(config: dict[str, Any]) -> list[str]:
    """analysis.protocol and analysis.embedding: the chunks and dumped vectors they read."""
    a = config["analysis"]
    vectors = config["extraction"]["vectors"]
    errs = []
    if a["all_rows"]["chunks"] > config["chunking"]["n_chunks"]:
        errs.append(
            f"analysis.all_rows.chunks: {a['all_rows']['chunks']} exceeds chunking.n_chunks "
            f"{config['chunking']['n_chunks']}"
        )
    if a["protocol"] == "all_rows" and a["separability"]["delta_over"] != "context":
        errs.append(
            "analysis.separability.delta_over: the all_rows protocol uses the head's context "
            "delta for every row; allowed with it: context"
        )
    if a["protocol"] == "all_rows" and not {"q", "k"} <= set(vectors):
        errs.append(
            f"extraction.vectors: analysis.protocol all_rows recomputes every row from q and k, "
            f"which {vectors} leaves out of the dumps; add them or use protocol last_row"
        )
    # attention_input and hidden are d_model wide, stored apart from extraction.vectors whenever
    # analysis.embedding names them (workflow/rules/extract.smk): they need no vector here
    needs = {"value": "v", "key": "k"}.get(a["embedding"])
    if needs and needs not in vectors:
        errs.append(
            f"extraction.vectors: analysis.embedding {a['embedding']!r} reads {needs}, which "
            f"{vectors} leaves out of the dumps; add {needs!r}"
        )
    return errs


def corpus_errors(config: dict[str, Any]) -> list[str]:
    """corpus: an encoding Python knows, a local file that exists and is text."""
    corpus = config["corpus"]
    errs = []
    try:
        codecs.lookup(corpus["encoding"])
    except (LookupError, ValueError):  # ValueError: a NUL in the name
        errs.append(
            f"corpus.encoding: {corpus['encoding']!r} is not an encoding Python knows (e.g. utf-8, latin-1)"
        )
    if corpus.get("path") and not is_file(corpus["path"]):
        errs.append(f"corpus.path: {corpus['path']} does not exist or is not a file")
    elif corpus.get("path"):
        with open(corpus["path"], "rb") as fh:
            head = fh.read(1 << 20)
        share = control_fraction(head)
        if share > MAX_CONTROL_FRACTION:
            errs.append(
                f"corpus.path: {corpus['path']} is not text: {100 * share:.0f}% of its first "
                f"{len(head):,} bytes are NULs or control characters"
            )
    return errs


def figures_errors(config: dict[str, Any]) -> list[str]:
    """figures: a style file that exists."""
    style = config.get("figures", {}).get("style")
    if style and not is_file(style):
        return [f"figures.style: {style} does not exist or is not a file"]
    return []


def model_source_errors(config: dict[str, Any]) -> list[str]:
    """model: a source, and one that is there (a folder with weights, a whole GGUF file, an
    installed package), random weights only where the source allows them."""
    model = config["model"]
    errs = []
    if not model.get("trained") and not any(model.get(key) for key in MODEL_SOURCES):
        errs.append(
            f"model: no source; set one of {', '.join(f'model.{k}' for k in MODEL_SOURCES)}"
        )
    if model.get("path") and not is_file(Path(model["path"]) / "config.json"):
        errs.append(f"model.path: {model['path']} is not a model folder (no config.json)")
    elif model.get("path") and not model.get("random_init"):
        from .models import WEIGHT_SUFFIXES

        if not any(p.suffix in WEIGHT_SUFFIXES for p in Path(model["path"]).iterdir()):
            errs.append(
                f"model.path: {model['path']} has no weights (*.safetensors / *.bin); "
                "set model.random_init: true to use its architecture with random weights"
            )
    if model.get("gguf_file"):
        from .models import ModelSourceError, damaged_gguf, gguf_path

        try:
            gguf = gguf_path(model)
            if not is_file(gguf):
                errs.append(f"model.gguf_file: {gguf} does not exist")
            elif damaged := damaged_gguf(gguf):
                errs.append(str(damaged))
        except ModelSourceError as exc:
            errs.append(str(exc))
        if model.get("random_init"):
            errs.append(
                "model.gguf_file: a GGUF file brings its weights; random_init must be false"
            )
    elif model.get("package"):
        from .models import ModelSourceError, package_model_dir

        try:
            package_model_dir(model["package"])
        except ModelSourceError as exc:
            errs.append(str(exc))
    if model.get("config_overrides") and not model.get("random_init"):
        errs.append(
            "model.config_overrides: only allowed with model.random_init: true (pretrained weights fix the architecture)"
        )
    return errs


def model_config_errors(config: dict[str, Any]) -> list[str]:
    """The checks of model_errors, when the model's config.json can be read without a download."""
    try:
        mcfg = model_config(config)
    except ConfigError as exc:
        return [str(exc)]
    if mcfg is None:
        return []
    try:
        return model_errors(config, mcfg)
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
        # a config.json that parses but holds the wrong kinds of values (a hand edit)
        return [
            f"model: its config.json has a setting of an unexpected kind ({exc!r}); "
            "check the file the model comes from"
        ]


# The analysis modules (attnlimits_workflow.analyses.<name>), whose own cross-key rules sit beside
# their code.
ANALYSES_DIR = Path(__file__).parent / "analyses"


def analysis_module_errors(config: dict[str, Any]) -> list[str]:
    """The rules an analysis module states for its own keys: for each analysis.<name> section
    whose module defines ``config_errors(config) -> list[str]``, its problems (so a new analysis
    edits no file here). Only those modules are imported, and none imports torch."""
    errs = []
    for name, section in config["analysis"].items():
        path = ANALYSES_DIR / f"{name}.py"
        if isinstance(section, dict) and path.is_file():
            if "\ndef config_errors(" in path.read_text():
                module = importlib.import_module(f"attnlimits_workflow.analyses.{name}")
                errs += module.config_errors(config)
    return errs


def effective_set_errors(config: dict[str, Any]) -> list[str]:
    """effective_set: its variants, targets and lengths (attnlimits_workflow.effective_set)."""
    from .effective_set import config_errors

    return config_errors(config["effective_set"], config["chunking"]["chunk_length"])


# The cross-key rules of one model's config, by section, in the order their problems are listed.
SECTION_CHECKS = (
    extraction_errors,
    lengths_errors,
    distance_errors,
    separability_errors,
    gradient_errors,
    beyond_errors,
    effective_set_errors,
    protocol_errors,
    corpus_errors,
    figures_errors,
    model_source_errors,
    model_config_errors,
    analysis_module_errors,
)


def semantic_errors(config: dict[str, Any]) -> list[str]:
    """The cross-key rules a schema cannot say, for one model's schema-valid config."""
    return [problem for check in SECTION_CHECKS for problem in check(config)]


def model_errors(
    config: dict[str, Any], mcfg: dict[str, Any], base: dict[str, Any] | None = None
) -> list[str]:
    """The checks that need the model's config.json (``mcfg``, with any random-init overrides;
    ``base`` without them): family, positions, sliding window, query row, config_overrides keys.
    Run before any job when the config can be read without a download, and by the fetch job as
    soon as a hub model's config arrives, before its weights."""
    errs: list[str] = []
    model = config["model"]
    a = config["analysis"]
    lengths = sorted(a["lengths"])
    chunk_length = config["chunking"]["chunk_length"]
    layers = [mcfg.get(k) for k in ("num_hidden_layers", "n_layer", "num_layers")]
    if any(isinstance(n, int | float) and n > MAX_MODEL_LAYERS for n in layers):
        # every check below sizes a list by it (a damaged or hand-edited config.json)
        return [
            f"model: its config.json gives {max(n for n in layers if n)} layers; at most "
            f"{MAX_MODEL_LAYERS}"
        ]
    if model.get("random_init") and model.get("config_overrides"):
        known = model_config_keys(base or model_config(config, with_overrides=False) or mcfg)
        for key in sorted(set(model["config_overrides"]) - known):
            errs.append(
                f"{_key(('model', 'config_overrides', key))}: not a setting of "
                f"{mcfg.get('model_type')} configs"
            )
    kind = mcfg.get("model_type")
    try:
        causal = family(kind).causal
        if family(kind).attention_sinks and a["protocol"] == "all_rows":
            errs.append(
                f"analysis.protocol: {kind}'s learned attention sinks take part of every row's "
                "weight, and the all_rows protocol recomputes rows from q and k without them "
                "(docs/paper-notes.md section 12); allowed: last_row, which reads the dumped rows"
            )
        if family(kind).differential and a["embedding"] == "value":
            errs.append(
                f"analysis.embedding: each {kind} head's softmax weighs two value heads side by "
                "side, not the one v the dumps resolve for it (docs/paper-notes.md section 13); "
                "allowed: key, attention_input, hidden"
            )
    except UnsupportedModelError as exc:
        errs.append(f"model: {exc}")
        causal = None
    if mcfg.get("position_embedding_type", "absolute") not in ("absolute", None):
        errs.append(
            f"model: position_embedding_type {mcfg['position_embedding_type']!r} adds "
            "relative position terms the capture does not reproduce; only 'absolute'"
        )
    windows = [w for w in sliding_windows(mcfg) if w is not None]
    if windows and max(lengths) > min(windows):
        errs.append(
            f"analysis.lengths: L={max(lengths)} exceeds the model's sliding window of "
            f"{min(windows)} keys, so that row would not see every key (allowed: 2..{min(windows)})"
        )
    limit = model_positions(mcfg)
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
    if causal is False and config["chunking"]["special_tokens"] == "auto" and lengths[0] < 3:
        errs.append(
            f"analysis.lengths: L={lengths[0]} leaves no text between an encoder's special tokens "
            "([CLS] ... [SEP], chunking.special_tokens: auto); every L must be >= 3"
        )
    if causal and config["extraction"]["query_row"] != "last":
        errs.append(
            "extraction.query_row: a causal model's length-L prefix ends at its last row; allowed: last"
        )
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


def validate(config: dict[str, Any], schema_path: str | Path) -> None:
    """Raise ConfigError listing every problem of one model's config; schema problems first
    (semantics need valid types)."""
    validate_run(config, yaml.safe_load(Path(schema_path).read_text()))


def validate_run(config: dict[str, Any], schema: dict[str, Any]) -> None:
    errs = non_finite_errors(config) + schema_errors(config, schema)
    if not errs:
        errs = semantic_errors(config)
    if errs:
        raise ConfigError(one_line_each(errs))
