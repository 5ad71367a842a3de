"""One model on two texts: a models entry with its own corpus (config/findings.yaml's design)."""

import json
from pathlib import Path

import polars as pl
import pytest
from project import snakemake, tiny_config, write_config

pytestmark = pytest.mark.integration

PYTHON_DOCS = {
    "name": "python_docs",
    "bundled": "python_docs",
    "path": None,
    "strip_gutenberg": False,
}


def test_each_entry_reads_its_own_text_and_says_which(tmp_path):
    cfg = tiny_config(tmp_path / "in", **{"chunking.n_chunks": 2})
    cfg["models"] = {"tiny-book": None, "tiny-docs": {"corpus": PYTHON_DOCS}}
    config = write_config(tmp_path / "in", cfg)
    targets = [f"results/{m}/summary/run.json" for m in cfg["models"]]
    snakemake(tmp_path, config, "--cores", "1", *targets)
    # one download per text, each under its own name
    book = (tmp_path / "resources/corpus/synthetic.txt").read_text()
    docs = (tmp_path / "resources/corpus/python_docs.txt").read_text()
    assert "natasha" in book and "natasha" not in docs and "Python" in docs
    for model, corpus in (("tiny-book", "synthetic"), ("tiny-docs", "python_docs")):
        run = json.loads((tmp_path / f"results/{model}/summary/run.json").read_text())
        assert run["corpus"] == corpus
    chunks = {
        m: pl.read_parquet(tmp_path / f"results/{m}/chunks/tokens.parquet") for m in cfg["models"]
    }
    assert chunks["tiny-book"].shape == chunks["tiny-docs"].shape
    assert not chunks["tiny-book"].equals(chunks["tiny-docs"])


def test_auto_chunking_takes_the_chunks_a_short_text_holds(tmp_path):
    from tokenizers import Tokenizer

    cfg = tiny_config(tmp_path / "in", **{"chunking.n_chunks": "auto"})
    tokenizer = Tokenizer.from_file(str(Path(cfg["model"]["path"]) / "tokenizer.json"))
    length, per_batch = cfg["chunking"]["chunk_length"], cfg["extraction"]["chunks_per_batch"]
    # a text of the user's own that holds 3 full chunks and part of a fourth
    words, n = Path(cfg["corpus"]["path"]).read_text().split(" "), 1
    while len(tokenizer.encode(" ".join(words[:n])).ids) < 3 * length + length // 2:
        n += 1
    text = " ".join(words[:n])
    Path(cfg["corpus"]["path"]).write_text(text)
    held = len(tokenizer.encode(text).ids) // length
    assert held == 3
    config = write_config(tmp_path / "in", cfg)
    # planned before the text is cut: the extraction jobs wait for the chunking checkpoint
    assert snakemake(tmp_path, config, "-n", "all").returncode == 0
    snakemake(tmp_path, config, "--cores", "1", "results/tiny-gpt2/summary/run.json")
    chunks = pl.read_parquet(tmp_path / "results/tiny-gpt2/chunks/tokens.parquet")
    assert chunks["chunk"].unique().sort().to_list() == [0, 1, 2]
    dumps = sorted(p.name for p in (tmp_path / "results/tiny-gpt2/dumps").iterdir())
    assert dumps == [f"batch{b:03d}" for b in range(-(-held // per_batch))]
    log = (tmp_path / "logs/tiny-gpt2/chunk_corpus.log").read_text()
    assert "chunking.n_chunks: auto takes 3 chunks (at most 16)" in log

    # the cap holds (an explicit number the text cannot hold stays an error: test_reliability)
    cfg["chunking"].update(n_chunks="auto", max_chunks=2)
    config = write_config(tmp_path / "in", cfg)
    snakemake(tmp_path, config, "--cores", "1", "results/tiny-gpt2/chunks/tokens.parquet")
    chunks = pl.read_parquet(tmp_path / "results/tiny-gpt2/chunks/tokens.parquet")
    assert chunks["chunk"].n_unique() == 2
