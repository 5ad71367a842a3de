"""A fuzzer over damaged input files: each kind the workflow reads (the corpus and its copy,
tokenizer files, config.json, safetensors / .bin / GGUF weights, tokens.parquet, dumps, packs,
trained study models), truncated, bit-flipped or overwritten, then read by the code of the job
that reads it. Each read either succeeds (a flipped bit inside tensor data carries no checksum;
dumps and packs do, so any change to them fails) or fails with one line naming the file, raised as the project's own error (which the job's
logger prints as that one line, no traceback), and no other file is removed."""

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from project import REPO
from strategies import FUZZ_SETTINGS
from test_fuzz import KEY_LINE
from test_hostile import tiny_gguf, write_pack

pytestmark = pytest.mark.integration

TINY = REPO / ".test/data/tiny-gpt2"
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
DEFAULTS = yaml.safe_load((REPO / "config/config.yaml").read_text())
PROV = {"weights_sha256": "w" * 8, "tokens_fingerprint": "t" * 8}
BUDGET = 120


def tiny_gpt2(folder: Path, weights: str = "safetensors") -> Path:
    import torch
    from transformers import AutoConfig, AutoModel

    shutil.copytree(TINY, folder)
    torch.manual_seed(0)
    model = AutoModel.from_config(AutoConfig.from_pretrained(folder))
    if weights == "safetensors":
        model.save_pretrained(folder)
        (folder / "config.json").write_text((TINY / "config.json").read_text())
    else:
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
    return folder


def tokens_file(path: Path) -> Path:
    from attnlimits_workflow.jobs import TOKENS_META_KEY

    path.parent.mkdir(parents=True)
    n, length = 4, 16
    meta = {"first_chunk": 0, "n_chunks": n, "fingerprint": "f" * 16}
    table = pa.table(
        {
            "chunk": np.repeat(np.arange(n, dtype=np.int32), length),
            "position": np.tile(np.arange(length, dtype=np.int32), n),
            "token_id": np.arange(n * length, dtype=np.int32) % 50,
        }
    ).replace_schema_metadata({TOKENS_META_KEY: json.dumps(meta)})
    pq.write_table(table, path, compression="zstd")
    return path


def dump_batch(folder: Path) -> Path:
    import torch
    from transformers import AutoModel, GPT2Config

    from attnlimits.extraction import register_capture
    from attnlimits_workflow.dumps.write import write_batch

    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=8, n_positions=16, vocab_size=50)
    model = AutoModel.from_config(config, attn_implementation=register_capture()).eval()
    folder.mkdir(parents=True)
    chunks = {0: np.arange(16) % 50, 1: (np.arange(16) * 7) % 50}
    write_batch(
        folder,
        model,
        chunks,
        [8, 16],
        query_row="last",
        store_hidden=False,
        provenance=PROV,
        extra_metadata={},
    )
    return folder


def trained_model(folder: Path) -> Path:
    import torch

    from attnlimits_workflow.training import build_model, save_trained

    torch.manual_seed(0)
    arch = {
        "hidden_size": 16,
        "intermediate_size": 32,
        "layers": 1,
        "heads": 2,
        "kv_heads": 1,
        "max_positions": 32,
        "rope_theta": 10000.0,
    }
    model = build_model(arch, {"kind": "scalable_softmax", "s_init": 0.4}, 300, 0, 16)
    save_trained(model, TINY / "tokenizer.json", folder, {"name": "study-ssmax"})
    return folder


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """One undamaged file of each kind, in the folders their jobs read them from."""
    root = tmp_path_factory.mktemp("pristine")
    (root / "corpus").mkdir()
    shutil.copy(REPO / ".test/data/corpus.txt", root / "corpus/corpus.txt")
    (root / "copy").mkdir()
    shutil.copy(REPO / ".test/data/corpus.txt", root / "copy/synthetic.txt")
    tiny_gpt2(root / "model")
    tiny_gpt2(root / "binmodel", weights="bin")
    (root / "gguf").mkdir()
    tiny_gguf(root / "gguf/tiny.gguf")
    tokens_file(root / "chunks/tokens.parquet")
    dump_batch(root / "dumps/batch000")
    write_pack(root / "samples/L4")
    trained_model(root / "trained")
    return root


# ---- the readers: what each job does with the file ----


def read_corpus(root: Path):
    from attnlimits_workflow.corpus_io import obtain_corpus

    cfg = {"path": str(root / "corpus/corpus.txt"), "encoding": "utf-8", "url": "file:///x"}
    obtain_corpus(cfg, log=lambda _: None)


def read_corpus_copy(root: Path):
    from attnlimits_workflow.corpus_io import leading_tokens, text_sha256

    leading_tokens(root / "copy/synthetic.txt", str.split, 100)
    text_sha256(root / "copy/synthetic.txt")


def read_tokenizer(root: Path):
    from attnlimits_workflow.models import CorpusTokenizer

    CorpusTokenizer(root / "model").encode("prince andrew and natasha")


def plan_model(root: Path):
    from attnlimits_workflow.config import load_config

    user = {
        "corpus": {"name": "c", "path": str(root / "corpus/corpus.txt")},
        "model": {"name": "m", "path": str(root / "model"), "hf_id": None},
        "chunking": {"chunk_length": 64, "n_chunks": 4},
        "analysis": yaml.safe_load((REPO / ".test/config/config.yaml").read_text())["analysis"],
    }
    load_config(DEFAULTS, user, SCHEMA, REPO)


def fetch(folder: str, **model):
    def run(root: Path):
        from attnlimits_workflow.models import fetch_model

        cfg = {"name": "m", "path": str(root / folder), "random_init": False, **model}
        fetch_model(cfg, 0, Path(tempfile.mkdtemp(dir=root)) / "out", log=lambda _: None)

    return run


def plan_gguf(root: Path):
    from attnlimits_workflow.config import load_config
    from attnlimits_workflow.models import damaged_gguf

    path = root / "gguf/tiny.gguf"
    if error := damaged_gguf(path):  # what the fetch job checks first
        raise error
    model = {"name": "g", "gguf_file": str(path), "hf_id": None, "path": None}
    load_config(
        DEFAULTS,
        {"model": model, "corpus": {"path": str(root / "corpus/corpus.txt")}},
        SCHEMA,
        REPO,
    )


def read_tokens_file(root: Path):
    from attnlimits_workflow.jobs import chunk_ids, read_tokens, tokens_metadata

    path = root / "chunks/tokens.parquet"
    tokens_metadata(path)
    chunk_ids(path)
    read_tokens(path)


def pack_from_dumps(root: Path):
    from attnlimits_workflow.dumps.pack import pack_dumps

    out = Path(tempfile.mkdtemp(dir=root)) / "L8"
    out.mkdir()
    pack_dumps([root / "dumps/batch000"], 8, "value", out, expected=PROV)


def read_samples(root: Path):
    from attnlimits_workflow.packs import read_pack

    pack = read_pack(root / "samples/L4")
    float(np.asarray(pack.x).sum() + np.asarray(pack.weights).sum())


def load_trained_model(root: Path):
    from attnlimits.extraction import register_rule_attention
    from attnlimits_workflow.loading import load_model
    from attnlimits_workflow.training import load_trained, read_learned

    read_learned(root / "trained")
    load_trained(root / "trained", register_rule_attention(), causal_lm=True)
    load_model(root / "trained")


# the kinds whose every byte is covered by a checksum (attnlimits_workflow.integrity)
CHECKSUMMED = {"dump", "pack"}
# kind -> (the files of that kind, the job's reading)
KINDS = {
    "corpus": (["corpus/corpus.txt"], read_corpus),
    "corpus copy": (["copy/synthetic.txt"], read_corpus_copy),
    "tokenizer files": (
        [
            "model/tokenizer.json",
            "model/vocab.json",
            "model/merges.txt",
            "model/tokenizer_config.json",
        ],
        read_tokenizer,
    ),
    "config.json": (["model/config.json"], plan_model),
    "safetensors": (["model/model.safetensors"], fetch("model")),
    "pytorch .bin": (["binmodel/pytorch_model.bin"], fetch("binmodel")),
    "gguf": (["gguf/tiny.gguf"], plan_gguf),
    "tokens.parquet": (["chunks/tokens.parquet"], read_tokens_file),
    "dump": (["dumps/batch000/layer00.parquet", "dumps/batch000/checksums.json"], pack_from_dumps),
    "pack": (
        [
            "samples/L4/x.npy",
            "samples/L4/weights.npy",
            "samples/L4/metadata.json",
            "samples/L4/checksums.json",
        ],
        read_samples,
    ),
    "trained model": (
        ["trained/model.safetensors", "trained/config.json", "trained/learned.json"],
        load_trained_model,
    ),
}


@st.composite
def damages(draw):
    """(kind, file, how, bytes -> damaged bytes)."""
    kind = draw(st.sampled_from(sorted(KINDS)))
    name = draw(st.sampled_from(KINDS[kind][0]))
    how = draw(st.sampled_from(["truncate", "flip", "overwrite", "empty"]))
    at = draw(st.floats(0, 1))
    bit = draw(st.integers(0, 7))
    noise = draw(st.binary(min_size=1, max_size=64))

    def damage(data: bytes) -> bytes:
        i = min(int(at * len(data)), max(len(data) - 1, 0))
        if how == "truncate":
            return data[:i]
        if how == "empty" or not data:
            return b""
        if how == "flip":
            return data[:i] + bytes([data[i] ^ (1 << bit)]) + data[i + 1 :]
        return data[:i] + noise + data[i + len(noise) :]

    return kind, name, how, damage


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def check_one_line(exc: BaseException, name: str) -> None:
    """The job's logger prints a project error as one line (jobs.job_logger): the error must be
    the project's, one line, and name the damaged file (a refused configuration names keys)."""
    from attnlimits_workflow.config import ConfigError

    module = type(exc).__module__
    assert module.startswith("attnlimits"), f"{type(exc).__name__} ({module}): {exc}"
    lines = str(exc).splitlines()
    if isinstance(exc, ConfigError):  # the damage made another valid-looking config.json
        assert all(KEY_LINE.match(line) for line in lines), lines
        return
    assert len(lines) == 1, lines
    assert Path(name).name in lines[0], lines[0]


@pytest.mark.filterwarnings("ignore")
def test_a_damaged_file_of_each_kind_is_read_or_named_in_one_line(pristine, tmp_path):
    seen: dict[str, set[str]] = {kind: set() for kind in KINDS}

    @settings(FUZZ_SETTINGS, max_examples=BUDGET)
    @given(damages())
    def one(case):
        kind, name, how, damage = case
        root = Path(tempfile.mkdtemp(dir=tmp_path))
        shutil.copytree(pristine, root, dirs_exist_ok=True)
        before = files_under(root) - {name}
        target = root / name
        original = target.read_bytes()
        target.write_bytes(damage(original))
        files, reader = KINDS[kind]
        try:
            reader(root)
            seen[kind].add("read")
            # a dump's or a pack's files carry checksums: any change is refused
            assert kind not in CHECKSUMMED or target.read_bytes() == original, (kind, name, how)
        except Exception as exc:
            check_one_line(exc, name)
            seen[kind].add("named")
        # a file set aside (renamed <name>.corrupt, named by the error) is kept, not lost
        lost = {
            f
            for f in before - files_under(root)
            if not list((root / f).parent.glob(f"{Path(f).name}.corrupt*"))
        }
        assert not lost, f"files removed: {sorted(lost)}"
        shutil.rmtree(root)

    one()
    # which kinds' damage the draws happened to catch is chance (an ASCII corpus copy is only
    # refused when a flip or the noise leaves invalid UTF-8): the test below catches each kind
    print(f"damaged files: {BUDGET} cases; outcomes per kind: {seen}")


def flip_high_bit(data: bytes) -> bytes:
    """The first byte's top bit flipped: invalid UTF-8 in an ASCII text, a wrong magic number
    or header in a binary file."""
    return bytes([data[0] ^ 0x80]) + data[1:]


def cut_in_half(data: bytes) -> bytes:
    return data[: len(data) // 2]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kinds_damage_is_caught_and_named_in_one_line(pristine, tmp_path, kind):
    """Deterministic, so that every kind is shown caught on every run: of a flipped top bit of
    the first byte and a file cut in half, at least one is refused naming the file, and each
    refusal is one line. (A flipped bit in a Parquet page header or a corpus cut between words
    can still be read, which is why either damage may be read.)"""
    files, reader = KINDS[kind]
    outcomes = {}
    for damage in (flip_high_bit, cut_in_half):
        for name in files:
            root = tmp_path / f"{damage.__name__}-{Path(name).name}"
            shutil.copytree(pristine, root)
            target = root / name
            target.write_bytes(damage(target.read_bytes()))
            try:
                reader(root)
                outcomes[damage.__name__, name] = "read"
            except Exception as exc:
                check_one_line(exc, name)
                outcomes[damage.__name__, name] = "named"
    assert "named" in outcomes.values(), outcomes
    if kind in CHECKSUMMED:
        assert set(outcomes.values()) == {"named"}, outcomes
    if kind in {"corpus", "corpus copy"}:  # text: invalid UTF-8 is always refused
        assert all(outcomes["flip_high_bit", name] == "named" for name in files), outcomes
