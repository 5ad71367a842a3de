"""One model on two texts: a models entry with its own corpus (config/findings.yaml's design)."""

import json

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
