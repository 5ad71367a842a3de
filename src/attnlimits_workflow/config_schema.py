"""The config's plumbing: ConfigError, overlaying a user's config on the defaults (mappings
replaced or merged key by key), typing command-line values by the schema, and the JSON schema's
own check with one line per problem. Every other config module builds on this one."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml


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


# Names that become a path segment (model.name, models keys, corpus.name, normalizer names): the
# schema's pattern. Not "." or ".." (a model named ".." planned results/../dumps), not starting
# with "." (hidden) or "-" (read as an option by command-line tools), at most 64 characters.
# A study normalizer's model is study-<name>-seed<seed> (seeds <= 99999): its names are 16
# characters shorter.
NAME_PATTERN = "^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
STUDY_NAME_PATTERN = "^[A-Za-z0-9_][A-Za-z0-9_.-]{0,47}$"
NAME_RULES = {
    pattern: f"1 to {most} letters, digits, '_', '.' or '-', not starting with '.' or '-' "
    "(it names a folder)"
    for pattern, most in ((NAME_PATTERN, 64), (STUDY_NAME_PATTERN, 48))
}
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


_SCHEMAS: dict[tuple[str, int], dict[str, Any]] = {}


def read_schema(path: str | Path) -> dict[str, Any]:
    """The schema file, parsed once per version of it (pure-Python YAML takes ~60 ms)."""
    import copy

    key = (str(path), Path(path).stat().st_mtime_ns)
    if key not in _SCHEMAS:
        _SCHEMAS[key] = yaml.safe_load(Path(path).read_text())
    return copy.deepcopy(_SCHEMAS[key])


def with_schema_defaults(schema: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """``defaults`` (config/config.yaml) with each key it does not hold that the schema gives a
    ``default:``, filled from the schema: a key added since the paper's setup (an analysis's own
    setting) is defined once, in the schema, as Snakemake's own validation would fill it.
    config_docs refuses a key with both."""
    import copy

    def fill(node: dict[str, Any], target: dict[str, Any]) -> bool:
        filled = False
        for name, sub in (resolve_ref(schema, node).get("properties") or {}).items():
            sub = resolve_ref(schema, sub)
            if "default" in sub:
                if name not in target:
                    target[name] = copy.deepcopy(sub["default"])
                    filled = True
            elif sub.get("properties"):
                child = target.get(name)
                if child is None:
                    child = {}
                    if fill(sub, child):
                        target[name], filled = child, True
                elif isinstance(child, dict):
                    filled = fill(sub, child) or filled
        return filled

    out = copy.deepcopy(defaults)
    fill(schema, out)
    return out


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
