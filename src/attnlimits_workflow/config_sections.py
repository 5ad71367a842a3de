"""The cross-key rules of one model's config that a schema cannot say, one function per section
(:data:`SECTION_CHECKS`, in the order their problems are listed). This is the one place a
cross-key rule is run from: a section's rule is its check here, and an analysis's own section
analysis.<name> has its rule in its record of the registry (``config_errors``,
attnlimits_workflow.registry), which :func:`analysis_errors` runs. Every message starts with the
offending key."""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

import yaml

from attnlimits.families import UnsupportedModelError, family, sliding_windows
from attnlimits.families import max_positions as model_positions

from . import registry
from .config_schema import (
    MODEL_SOURCES,
    ConfigError,
    _key,
    non_finite_errors,
    one_line_each,
    periodic_name_error,
    schema_errors,
)
from .corpus_io import MAX_CONTROL_FRACTION, control_fraction
from .model_probe import is_file, model_config, model_config_keys

# No model has more layers (the largest have ~100s); a config.json saying more is damaged.
MAX_MODEL_LAYERS = 100_000
# Snakemake's job graph grows with the extraction jobs: 100,000 of them kept it building for
# minutes. The whole of War and Peace is 834 chunks of 1024 GPT-2 tokens.
MAX_BATCHES = 2000


def most_chunks(chunking: dict[str, Any]) -> int:
    """The most chunks a run can cut: chunking.n_chunks, or max_chunks where it is ``auto``."""
    n_chunks = chunking["n_chunks"]
    return chunking["max_chunks"] if n_chunks == "auto" else n_chunks


def chunks_key(chunking: dict[str, Any]) -> str:
    """The key :func:`most_chunks` reads, as an error message names it."""
    if chunking["n_chunks"] == "auto":
        return "chunking.max_chunks (n_chunks: auto)"
    return "chunking.n_chunks"


def extraction_errors(config: dict[str, Any]) -> list[str]:
    """extraction: the number of extraction jobs chunking and chunks_per_batch make."""
    n_chunks, per_batch = most_chunks(config["chunking"]), config["extraction"]["chunks_per_batch"]
    batches = -(-n_chunks // per_batch)
    if batches > MAX_BATCHES:
        return [
            f"extraction.chunks_per_batch: {n_chunks} chunks in batches of {per_batch} make "
            f"{batches} extraction jobs (at most {MAX_BATCHES}); raise chunks_per_batch to "
            f"{-(-n_chunks // MAX_BATCHES)} or more"
        ]
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


def analysis_errors(config: dict[str, Any]) -> list[str]:
    """Each analysis's own cross-key rules (analysis.<name>): its record's ``config_errors`` in
    the registry (attnlimits_workflow.registry), in the registry's order."""
    return [
        problem
        for analysis in registry.REGISTRY
        if analysis.config_errors is not None
        for problem in analysis.config_errors(config)
    ]


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
    if a["all_rows"]["chunks"] > most_chunks(config["chunking"]):
        errs.append(
            f"analysis.all_rows.chunks: {a['all_rows']['chunks']} exceeds "
            f"{chunks_key(config['chunking'])} {most_chunks(config['chunking'])}"
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


def effective_set_errors(config: dict[str, Any]) -> list[str]:
    """effective_set: its variants, targets and lengths (attnlimits_workflow.effective_set)."""
    from .effective_set import config_errors

    return config_errors(config["effective_set"], config["chunking"]["chunk_length"])


# The cross-key rules of one model's config, by section, in the order their problems are listed.
SECTION_CHECKS = (
    extraction_errors,
    lengths_errors,
    analysis_errors,
    beyond_errors,
    effective_set_errors,
    protocol_errors,
    corpus_errors,
    figures_errors,
    model_source_errors,
    model_config_errors,
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
