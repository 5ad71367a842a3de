"""Hostile names and unbounded resources are refused before any job; no planned output leaves its
folder; damaged model files, token chunks and sample packs get one line naming the file."""

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from project import REPO, snakemake, tiny_config, write_config

from attnlimits_workflow.config import ConfigError, deep_merge, load_config
from attnlimits_workflow.integrity import write_checksums

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
DEFAULTS = yaml.safe_load((REPO / "config/config.yaml").read_text())
TINY = REPO / ".test/data/tiny-gpt2"

# Names that would leave their folder, hide it, read as an option, or overflow a file name.
# "ab" * 20: Snakemake refuses a wildcard value ending in 20 repeats of one block.
HOSTILE_NAMES = [".", "..", ".hidden", "-rf", "x" * 65, "a/b", "..\\..", "", "ab" * 20]
# Every key whose value (or whose mapping's keys) becomes a path segment.
NAME_KEYS = ["model.name", "models", "corpus.name", "beyond.normalizers", "study.normalizers"]


def named(cfg, key, name):
    """The config with ``name`` at the name ``key`` (a value, or a key of a mapping)."""
    cfg = json.loads(json.dumps(cfg))
    if key == "model.name":
        cfg["model"]["name"] = name
    elif key == "corpus.name":
        cfg["corpus"]["name"] = name
    elif key == "models":
        cfg["models"] = {name: None}
    elif key == "beyond.normalizers":
        cfg["beyond"] = {"normalizers": {name: {"kind": "softmax"}}}
    else:
        cfg["study"] = {"normalizers": {name: {"kind": "softmax"}}, "baseline": name}
    return cfg


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    return tmp, tiny_config(tmp)


@pytest.mark.unit
@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=repr)
@pytest.mark.parametrize("key", NAME_KEYS)
def test_a_name_that_is_no_folder_name_is_refused_naming_its_key(tiny, key, name):
    _, cfg = tiny
    with pytest.raises(ConfigError) as err:
        load_config(DEFAULTS, named(cfg, key, name), SCHEMA, REPO)
    lines = str(err.value).splitlines()
    assert any(line.startswith(f"{key}:") and repr(name) in line for line in lines), lines


@pytest.mark.unit
@pytest.mark.parametrize("name", ["compare", "study", "default_model"])
def test_a_model_named_like_a_shared_folder_is_refused(tiny, name):
    _, cfg = tiny
    with pytest.raises(ConfigError, match=f"models: '{name}' is a folder the workflow's shared"):
        load_config(DEFAULTS, named(cfg, "models", name), SCHEMA, REPO)


@pytest.mark.unit
def test_model_trained_is_never_set_by_hand(tiny):
    _, cfg = tiny
    user = deep_merge(cfg, {"model": {"trained": "softmax"}})
    with pytest.raises(ConfigError, match="model.trained: set by the workflow"):
        load_config(DEFAULTS, user, SCHEMA, REPO)


def rule_names() -> set[str]:
    names = set()
    for path in [REPO / "Snakefile", *sorted((REPO / "workflow/rules").glob("*.smk"))]:
        names |= set(re.findall(r"^(?:rule|checkpoint) (\w+):", path.read_text(), re.M))
    return names


# Folders the shared (not per-model) outputs use, under each top-level folder.
SHARED = {
    "figures": {"compare", "study"},
    "tables": {"compare", "study"},
    "logs": {"compare", "study", "default_model", "figures", "download_corpus"},
    "docs": {"findings", "study"},
    "resources": {"corpus"},
    "results": {"study"},
}


def assert_inside(path: str, models: set[str], corpus: str, normalizers: set[str]) -> None:
    parts = Path(path).parts
    assert os.path.normpath(path) == path and not {".", ".."} & set(parts), path
    assert not any(p.startswith(("-", ".")) for p in parts), path
    top = parts[0]
    assert top in {"results", "resources", "logs", "figures", "tables", "docs"}, path
    if len(parts) == 2:  # figures/fig1.pdf, tables/table1.csv, docs/study.md
        assert top in {"figures", "tables", "docs"}, path
        return
    if top == "resources":
        assert parts[1] in {"models", "corpus"}, path
        if parts[1] == "models":
            assert parts[2] in models and len(parts) == 3, path
        else:
            assert parts[2] in {f"{corpus}.txt", "study"}, path
        return
    owner = parts[1]
    assert owner in models or owner in SHARED.get(top, set()), path
    if top == "results" and "normalizers" in parts:
        assert parts[parts.index("normalizers") + 1] in normalizers, path
    if top == "logs" and owner == "download_corpus":
        assert parts[2] == f"{corpus}.log", path


@pytest.mark.workflow
def test_every_rules_planned_outputs_stay_in_their_own_folders(tiny, tmp_path):
    """A dry run of every target (all, study, findings) with names at the edges of what is
    allowed ('..' inside a name, '_', 64 characters): every output and log of every job of every
    rule of the workflow stays in its own folder."""
    _, cfg = tiny
    long_name = "m" * 63 + "."
    # a reading of the longest name: its derived run <model>~<reading> reads that model's dumps
    readings = {"analysis": {"readings": {"r..1": {"embedding": "key"}}}}
    # one model under the paper's protocol, so the row engine's rules are planned too
    # ... and N*'s search
    n_star = {"enabled": True, "lengths": [64], "targets": 16}
    all_rows = {"analysis": {"protocol": "all_rows"}, "effective_set": n_star}
    models = {"_": None, "a..b": all_rows, long_name: readings}
    normalizers = {"n..1": {"kind": "softmax"}, "_x": {"kind": "sparsemax"}}
    study = {"s..1": {"kind": "softmax"}, "s" + "0123456789" * 4 + "abcdefg": {"kind": "sparsemax"}}
    user = {
        **cfg,
        "corpus": {**cfg["corpus"], "name": "c..d"},
        "models": models,
        "beyond": {"normalizers": normalizers},
        "study": {"normalizers": study, "baseline": "s..1", "seeds": [0, 99999]},
    }
    user["analysis"]["gradient"]["temperatures"] = [0.1, 1.0]
    proc = snakemake(tmp_path, write_config(tmp_path, user), "-n", "all", "study", "findings")
    out = proc.stdout + proc.stderr
    planned = set(re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):", out, re.M))
    assert planned == rule_names()  # every rule of the workflow is in this plan
    paths = []
    for line in out.splitlines():
        field, _, value = line.strip().partition(": ")
        if field in ("output", "log"):
            paths += [p.strip() for p in value.split(",") if p.strip()]
    trained = {f"study-{n}-seed{seed}" for n in study for seed in (0, 99999)}
    trained |= {f"study-{n}-init0" for n in study}  # study.untrained_seeds: the first seed's
    assert max(map(len, trained)) == 64
    derived = {f"{long_name}~r..1"}
    everyone = set(models) | trained
    assert len(paths) > 300
    for path in paths:
        assert_inside(path, everyone | derived, "c..d", set(normalizers) | set(study))
    for model in everyone:  # each model has its own folders
        assert f"resources/models/{model}" in paths
        assert any(p.startswith(f"results/{model}/dumps/") for p in paths)
    for run in derived:  # a reading has its own analyses and tables, its model's dumps
        assert any(p.startswith(f"results/{run}/analysis/") for p in paths)
        assert f"tables/{long_name}/robustness.csv" in paths
        assert not any(
            p.startswith((f"results/{run}/dumps/", f"resources/models/{run}")) for p in paths
        )


@pytest.mark.workflow
def test_hostile_names_stop_the_dry_run_before_any_path_is_planned(tiny, tmp_path):
    _, cfg = tiny
    user = {**cfg, "models": {"..": None}, "corpus": {**cfg["corpus"], "name": ".."}}
    user["model"] = {**cfg["model"], "name": ".."}
    proc = snakemake(tmp_path, write_config(tmp_path, user), "-n", "all", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out
    assert "models: key '..' is not a usable name" in out
    assert "corpus.name: '..' is not a usable name" in out
    assert "../" not in out.split("Invalid configuration:")[0]
    assert not (tmp_path / "results").exists() and not (tmp_path / "resources").exists()


# ---- bounded resources ----

UNBOUNDED = [
    ("extraction.threads", 100000),
    ("study.training.threads", 100000),
    ("extraction.mem_mb", 10**9),
    ("analysis.critical_n.cache_mb", 10**9),
    ("chunking.n_chunks", 10**9),
    ("extraction.chunks_per_batch", 10**9),
    ("chunking.chunk_length", 10**9),
    ("analysis.lengths", list(range(2, 1000))),
    ("analysis.gradient.temperatures", [1.0 + i for i in range(1000)]),
    ("seed", 2**70),
]


@pytest.mark.unit
@pytest.mark.parametrize(("key", "value"), UNBOUNDED, ids=[u[0] for u in UNBOUNDED])
def test_resources_have_upper_limits(tiny, key, value):
    _, cfg = tiny
    cfg = json.loads(json.dumps(cfg))
    node = cfg
    *head, last = key.split(".")
    for k in head:
        node = node.setdefault(k, {})
    node[last] = value
    with pytest.raises(ConfigError) as err:
        load_config(DEFAULTS, cfg, SCHEMA, REPO)
    assert any(line.startswith(f"{key}:") for line in str(err.value).splitlines()), str(err.value)


BOUNDED_LEAVES = (
    "threads",
    "mem_mb",
    "cache_mb",
    "n_chunks",
    "max_chunks",
    "chunks_per_batch",
    "seed",
)


@pytest.mark.unit
def test_every_thread_memory_and_chunk_setting_has_a_documented_maximum():
    schema = yaml.safe_load(SCHEMA.read_text())
    readme = (REPO / "config/README.md").read_text()

    def resolve(node):
        if "$ref" in node:
            return schema["definitions"][node["$ref"].rsplit("/", 1)[1]]
        return node

    def walk(node, path):
        node = resolve(node)
        for key, sub in (node.get("properties") or {}).items():
            yield from walk(sub, (*path, key))
        if path:
            yield ".".join(path), node

    bounded = {}
    for key, node in walk(schema, ()):
        leaf = key.rsplit(".", 1)[-1]
        if leaf in BOUNDED_LEAVES:
            # a count or a word (chunking.n_chunks: auto): the count has its maximum
            counts = [a for a in map(resolve, node.get("oneOf", [node])) if "const" not in a]
            assert counts and all("maximum" in a for a in counts), key
            bounded[key] = counts[0]["maximum"]
        if node.get("type") == "array" and "enum" not in node["items"]:  # each enum value once
            assert "maxItems" in node, key
        if node.get("propertyNames"):
            assert "maxProperties" in node, key
    assert {key.rsplit(".", 1)[-1] for key in bounded} == set(BOUNDED_LEAVES)
    assert len(bounded) >= 8
    for value in set(bounded.values()):  # each limit is in config/README.md
        assert f"{value:,}" in readme or str(value) in readme, value


# ---- damaged model files ----


def folder_with(tmp, files: dict[str, bytes] | None = None, weights: str | None = None) -> Path:
    """A copy of .test/data/tiny-gpt2 (config.json and tokenizer files); ``weights``
    'safetensors' or 'bin' adds seeded random weights in that format."""
    folder = tmp / "model"
    shutil.copytree(TINY, folder)
    if weights:
        import torch
        from transformers import AutoConfig, AutoModel

        torch.manual_seed(0)
        model = AutoModel.from_config(AutoConfig.from_pretrained(folder))
        if weights == "safetensors":
            model.save_pretrained(folder)
        else:  # a PyTorch checkpoint, as older hub models ship
            torch.save(model.state_dict(), folder / "pytorch_model.bin")
        (folder / "config.json").write_text((TINY / "config.json").read_text())
    for name, data in (files or {}).items():
        (folder / name).write_bytes(data)
    return folder


def tiny_run(tmp, folder, random_init=True, **model):
    return {
        **tiny_config(tmp),
        "model": {"name": "tiny", "path": str(folder), "random_init": random_init, **model},
    }


@pytest.mark.integration
@pytest.mark.parametrize(
    "content", [b'{"model_type": "gpt2", "n_layer"', b"[1, 2]", b"\xff\xfe\x00"], ids=repr
)
def test_a_damaged_config_json_is_one_line_naming_it(tmp_path, content):
    folder = folder_with(tmp_path, {"config.json": content})
    with pytest.raises(ConfigError) as err:
        load_config(DEFAULTS, tiny_run(tmp_path, folder), SCHEMA, REPO)
    lines = str(err.value).splitlines()
    assert lines == [line for line in lines if "Traceback" not in line]
    assert any(f"model.path: {folder / 'config.json'} is damaged" in line for line in lines), lines


def tiny_gguf(path: Path) -> Path:
    """A GGUF file of two float32 tensors (gguf's own writer)."""
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_context_length(64)
    writer.add_tensor("token_embd.weight", np.arange(4096, dtype=np.float32).reshape(64, 64))
    writer.add_tensor("output_norm.weight", np.ones(64, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.integration
def test_a_truncated_gguf_is_named_damaged_before_any_job_and_by_the_fetch(tmp_path):
    from attnlimits_workflow.models import ModelSourceError, fetch_model, gguf_problem

    whole = tiny_gguf(tmp_path / "whole.gguf")
    assert gguf_problem(whole) is None
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size - 5000])
    model = {"name": "g", "gguf_file": str(cut), "path": None, "hf_id": None, "random_init": False}
    user = {**tiny_config(tmp_path), "model": model}
    with pytest.raises(ConfigError) as err:
        load_config(DEFAULTS, user, SCHEMA, REPO)
    assert f"model.gguf_file: {cut} is damaged or incomplete (a tensor's data runs past" in str(
        err.value
    )
    with pytest.raises(ModelSourceError) as err:
        fetch_model(model, 0, tmp_path / "out")
    assert len(str(err.value).splitlines()) == 1 and "is damaged or incomplete" in str(err.value)


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["safetensors", "bin"])
def test_truncated_weights_fail_the_fetch_before_its_manifest(tmp_path, kind):
    from attnlimits_workflow.models import MANIFEST, ModelSourceError, fetch_model

    folder = folder_with(tmp_path, weights=kind)
    name = {"safetensors": "model.safetensors", "bin": "pytorch_model.bin"}[kind]
    data = (folder / name).read_bytes()
    (folder / name).write_bytes(data[: len(data) - 1000])
    cfg = tiny_run(tmp_path, folder, random_init=False)
    load_config(DEFAULTS, cfg, SCHEMA, REPO)  # a truncated file still looks like weights here
    out = tmp_path / "fetched"
    with pytest.raises(ModelSourceError) as err:
        fetch_model(cfg["model"], 0, out)
    message = str(err.value)
    assert len(message.splitlines()) == 1, message
    assert message.startswith(f"{folder / name}: damaged or incomplete"), message
    assert not (out / MANIFEST).exists()


@pytest.mark.integration
def test_whole_weights_pass_the_fetch(tmp_path):
    from attnlimits_workflow.models import MANIFEST, fetch_model

    folder = folder_with(tmp_path, weights="safetensors")
    fetch_model(tiny_run(tmp_path, folder, random_init=False)["model"], 0, tmp_path / "out")
    assert (tmp_path / "out" / MANIFEST).exists()


# ---- damaged sample packs ----


def write_pack(folder: Path, n: int = 6, length: int = 4, d: int = 3) -> Path:
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    arrays = {
        "layer": np.zeros(n, np.int32),
        "chunk": np.arange(n, dtype=np.int32),
        "head": np.zeros(n, np.int32),
        "weights": np.full((n, length), 1 / length, np.float32),
        "logits": rng.standard_normal((n, length)).astype(np.float32),
        "x": rng.standard_normal((n, length, d)).astype(np.float32),
        "query_norm": np.ones(n, np.float32),
        "key_norm_max": np.ones(n, np.float32),
        "score_scale": np.ones(n, np.float32),
    }
    for name, value in arrays.items():
        np.save(folder / f"{name}.npy", value)
    (folder / "metadata.json").write_text(json.dumps({"length": length}))
    write_checksums(folder, [f"{name}.npy" for name in arrays] + ["metadata.json"])
    (folder / ".snakemake_timestamp").touch()
    return folder


def cut(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


@pytest.mark.unit
@pytest.mark.parametrize(
    ("damaged", "damage"),
    [
        ("x.npy", lambda p: cut(p, 100)),
        ("metadata.json", lambda p: cut(p, 5)),
        ("weights.npy", lambda p: np.save(p, np.zeros((5, 4), np.float32))),  # wrong shape
    ],
    ids=["truncated-array", "truncated-metadata", "wrong-shape"],
)
@pytest.mark.parametrize("checksummed", [True, False], ids=["pack", "older-pack"])
def test_a_damaged_pack_is_set_aside_and_made_stale(tmp_path, damaged, damage, checksummed):
    """A pack's checksums refuse the damage first; a pack written before packs had them (read
    with a warning) still has its files' shapes checked."""
    from attnlimits_workflow.packs import DumpError, read_pack

    pack = write_pack(tmp_path / "samples/L4")
    if not checksummed:
        (pack / "checksums.json").unlink()
    assert read_pack(pack).x.shape == (6, 4, 3)
    damage(pack / damaged)
    with pytest.raises(DumpError) as err:
        read_pack(pack)
    message = str(err.value)
    why = "bytes, checksums.json records" if checksummed else "unreadable sample pack file"
    assert message.startswith(f"{pack / damaged}: ") and why in message
    assert f"set aside as {damaged}.corrupt" in message and len(message.splitlines()) == 1
    assert (pack / f"{damaged}.corrupt").exists() and not (pack / damaged).exists()
    # Snakemake reads a directory output's time from its .snakemake_timestamp: made older than
    # any input, so the next run rebuilds the pack
    assert (pack / ".snakemake_timestamp").stat().st_mtime == 0


@pytest.mark.unit
def test_a_job_starts_at_most_two_threads_per_core_with_one_warning(caplog):
    import logging

    from attnlimits_workflow.jobs import job_threads

    log = logging.getLogger("extract")
    with caplog.at_level(logging.WARNING):
        assert job_threads(4, log, cores=16) == 4
        assert job_threads(0, log, cores=16) == 1
        assert not caplog.records
        assert job_threads(256, log, cores=16) == 32
    assert [r.getMessage() for r in caplog.records] == [
        "WARNING: 256 threads asked for, 16 cores here; using 32"
    ]
