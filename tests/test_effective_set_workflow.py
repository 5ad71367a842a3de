"""N*'s jobs (attnlimits_workflow.effective_set): the model as a causal LM, the scored targets'
NLL, one (L, variant) search and the summary, on the tiny models of .test/data."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

from attnlimits.effective_set import Intervention
from attnlimits_workflow.effective_set import (
    chunk_nll,
    config_errors,
    load_causal_lm,
    parse_variant,
    run_variant,
    summarise,
)
from attnlimits_workflow.models import ModelSourceError, fetch_model

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / ".test" / "data"
SECTION = {
    "enabled": True,
    "lengths": [32, 48],
    "targets": 8,
    "tau": 0.05,
    "variants": ["attention-delete"],
    "refine": True,
    "max_n": None,
    "block": 7,
    "device": "cpu",
    "threads": 1,
    "mem_mb": 1000,
}


def fetched(tmp_path, name, seed=3):
    out = tmp_path / name
    cfg = {"name": name, "path": str(DATA / name), "random_init": True}
    fetch_model(cfg, seed, out, log=lambda _: None)
    return out


def test_an_untied_random_head_is_seeded_and_the_same_on_every_load(tmp_path):
    folder = fetched(tmp_path, "tiny-llama")  # tie_word_embeddings: false, no head saved
    a, b = load_causal_lm(folder), load_causal_lm(folder)
    torch.testing.assert_close(a.lm_head.weight, b.lm_head.weight, rtol=0, atol=0)
    assert a.lm_head.weight.std() > 0


def test_chunk_nll_is_the_cross_entropy_of_the_last_targets(tmp_path):
    model = load_causal_lm(fetched(tmp_path, "tiny-gpt2"))
    ids = np.random.default_rng(0).integers(1, 200, size=(3, 40))
    got = chunk_nll(model, ids, 8, None)
    with torch.inference_mode():
        for c in range(3):
            row = torch.from_numpy(ids[c])[None]
            logits = model(input_ids=row).logits[0].double()
            want = torch.nn.functional.cross_entropy(logits[-9:-1], row[0, -8:], reduction="sum")
            assert got[c] == pytest.approx(want.item(), rel=1e-12)
    # N >= L: the plain model's loss, exactly
    np.testing.assert_array_equal(chunk_nll(model, ids, 8, Intervention(40)), got)


def test_a_search_and_its_summary(tmp_path):
    model = load_causal_lm(fetched(tmp_path, "tiny-llama"))
    tokens = np.random.default_rng(1).integers(1, 200, size=(4, 48))
    section = {**SECTION, "tau": 1e-4}
    tables = [
        run_variant(model, tokens, length, "attention-delete", section, 0, logging.getLogger("t"))
        for length in (32, 48)
    ]
    for table in tables:
        assert table.height == table["n"].n_unique() * 4
        assert (table["targets"] == 8).all()
    summary = summarise(tables, 1e-4, 50, 0.95, 0)
    assert summary.height == 2
    for row in summary.iter_rows(named=True):
        part = pl.concat(tables).filter(pl.col("length") == row["length"])
        curve = part.group_by("n").agg(
            ((pl.col("nll").sum() - pl.col("base_nll").sum()) / pl.col("base_nll").sum()).alias("d")
        )
        passing = curve.filter(pl.col("d") <= 1e-4)["n"]
        assert row["n_star"] == (passing.min() if passing.len() else None)
        if row["n_star"] is not None and row["n_star_low"] is not None:
            assert row["n_star_low"] <= row["n_star_high"] <= row["length"]


def test_encoders_are_refused(tmp_path):
    folder = tmp_path / "bert"
    from transformers import BertConfig, BertModel

    BertModel(
        BertConfig(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            vocab_size=100,
        )
    ).save_pretrained(folder)
    (folder / "tokenizer.json").write_text("{}")
    with pytest.raises(ModelSourceError, match="encoder"):
        load_causal_lm(folder)


def test_bad_sections_are_refused_by_name():
    assert parse_variant("random-renormalise") == ("random", "renormalise")
    with pytest.raises(ValueError, match="selection"):
        parse_variant("top-delete")
    errs = config_errors({**SECTION, "variants": ["attention-keep"], "targets": 40}, 40)
    assert any("attention-keep" in e for e in errs)
    assert any("targets" in e for e in errs)
    assert any("chunk_length" in e for e in config_errors({**SECTION, "lengths": [64]}, 48))
    assert config_errors({**SECTION, "enabled": False, "lengths": [64]}, 48) == []
