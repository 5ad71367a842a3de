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
    tokens = np.random.default_rng(1).integers(1, 200, size=(8, 48))
    # on this tiny random model dNLL_rel at L = 48 falls below 2e-4 only past N = 16
    section = {**SECTION, "tau": 2e-4}
    tables = [
        run_variant(model, tokens, length, "attention-delete", section, 0, logging.getLogger("t"))
        for length in (32, 48)
    ]
    for table in tables:
        assert table.height == table["n"].n_unique() * 8
        assert (table["targets"] == 8).all()
    summary = summarise(tables, 2e-4, 200, 0.95, 0)
    assert summary.height == 2
    interior = summary.filter(pl.col("length") == 48).row(0, named=True)
    assert 16 < interior["n_star"] < 48
    for row in summary.iter_rows(named=True):
        part = pl.concat(tables).filter(pl.col("length") == row["length"])
        curve = part.group_by("n").agg(
            ((pl.col("nll").sum() - pl.col("base_nll").sum()) / pl.col("base_nll").sum()).alias("d")
        )
        # every evaluated N below N* fails, N* passes
        assert curve.filter(pl.col("n") == row["n_star"])["d"][0] <= 2e-4
        assert (curve.filter(pl.col("n") < row["n_star"])["d"] > 2e-4).all()
        assert row["n_star_low"] <= row["n_star"] <= row["n_star_high"] <= row["length"]


def synthetic(curve, chunks=8, length=64):
    """A job's table whose pooled dNLL_rel at each N is curve[N] (every chunk the same)."""
    base = np.full(chunks, 10.0)
    ns = sorted(curve)
    return pl.DataFrame(
        {
            "length": [length] * (len(ns) * chunks),
            "variant": ["attention-delete"] * (len(ns) * chunks),
            "n": np.repeat(ns, chunks),
            "chunk": np.tile(np.arange(chunks), len(ns)),
            "nll": np.concatenate([base * (1 + curve[n]) for n in ns]),
            "base_nll": np.tile(base, len(ns)),
            "targets": [16] * (len(ns) * chunks),
        }
    )


def test_a_capped_search_that_never_passes_is_a_lower_bound():
    table = synthetic({1: 0.5, 2: 0.4, 4: 0.3, 8: 0.2})
    row = summarise([table], 0.05, 100, 0.95, 0, max_n=8).row(0, named=True)
    assert row["censored"] and row["n_star"] is None and row["lower_bound"] == 9
    assert row["n_star_low"] is None and row["n_star_high"] is None


def test_few_chunks_get_no_interval():
    table = synthetic({1: 0.5, 2: 0.01}, chunks=4)
    row = summarise([table], 0.05, 100, 0.95, 0).row(0, named=True)
    assert row["n_star"] == 2 and row["n_star_low"] is None
    row = summarise([synthetic({1: 0.5, 2: 0.01})], 0.05, 100, 0.95, 0).row(0, named=True)
    # identical chunks: every resample is the curve itself
    assert (row["n_star_low"], row["n_star_high"]) == (2, 2)


def test_an_unrefined_n_star_records_its_grid_cell():
    """Review 31: with effective_set.refine false the search stops at the first passing power of
    two, so N* is known only to (the last failing N, that N]; the row says so."""
    unrefined = summarise([synthetic({1: 0.5, 2: 0.3, 4: 0.2, 8: 0.01})], 0.05, 100, 0.95, 0)
    row = unrefined.row(0, named=True)
    assert (row["n_star"], row["n_star_floor"]) == (8, 5)
    refined = synthetic({1: 0.5, 2: 0.3, 4: 0.2, 5: 0.1, 6: 0.04, 8: 0.01})
    row = summarise([refined], 0.05, 100, 0.95, 0).row(0, named=True)
    assert (row["n_star"], row["n_star_floor"]) == (6, 6)


def test_an_interval_whose_high_end_is_censored_is_withheld(monkeypatch):
    """Review 30: with exactly the tail's share of resamples censored (25 of 1,000 at 95 %),
    the high quantile landed on +inf and the page printed '16 [9, inf]'."""
    from attnlimits_workflow import effective_set

    def bootstrap(nll, base, tau, resamples, rng):
        first = np.full(resamples, 4.0)
        first[: resamples // 40] = np.nan  # censored: no evaluated N passes
        return first, None

    monkeypatch.setattr(effective_set, "bootstrap_n_star", bootstrap)
    table = synthetic({1: 0.5, 2: 0.3, 4: 0.01})
    row = effective_set.summarise([table], 0.05, 1000, 0.95, 0, max_n=4).row(0, named=True)
    assert row["n_star"] == 4 and row["n_star_low"] is None and row["n_star_high"] is None


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
    assert parse_variant("random-renormalize") == ("random", "renormalize")
    with pytest.raises(ValueError, match="selection"):
        parse_variant("top-delete")
    errs = config_errors({**SECTION, "variants": ["attention-keep"], "targets": 40}, 40)
    assert any("attention-keep" in e for e in errs)
    assert any("targets" in e for e in errs)
    assert any("chunk_length" in e for e in config_errors({**SECTION, "lengths": [64]}, 48))
    assert config_errors({**SECTION, "enabled": False, "lengths": [64]}, 48) == []


def test_the_rank_correlation_needs_four_lengths_and_reads_fractions_of_l():
    from attnlimits_workflow.assemble.effective_set_report import (
        correlation_sentence,
        rank_correlations,
    )

    lengths = [128, 256, 512, 1024]
    summary = pl.DataFrame(
        {
            "length": lengths,
            "variant": ["attention-delete"] * 4,
            "n_star": [64, 96, 128, 160],  # counts rise, fractions fall
            "n_star_over_length": [0.5, 0.375, 0.25, 0.15625],
        }
    )
    critical = pl.DataFrame(
        {
            "length": lengths,
            "expectation": ["closed_form"] * 4,
            "N_crit": [8.0, 32.0, 128.0, 512.0],  # fractions rise
            "N_crit_censored": [False] * 4,
            "N_crit_over_length": [8 / 128, 32 / 256, 128 / 512, 512 / 1024],
        }
    )
    got = rank_correlations(summary, critical).row(0, named=True)
    # the counts would correlate at +1; the fractions move oppositely
    assert got["lengths"] == 4 and got["spearman_rho"] == pytest.approx(-1.0)
    assert "-1.00" in correlation_sentence(rank_correlations(summary, critical))
    short = rank_correlations(summary.head(3), critical).row(0, named=True)
    assert short["spearman_rho"] is None and short["lengths"] == 3
    # review 9: across L any two trends rank alike (N* = 8 at every L against N_crit = 0.06 L + 1
    # gives rho = +1), so no p-value is given, and the sentence says it describes, not tests
    assert "p_value" not in rank_correlations(summary, critical).columns
    sentence = correlation_sentence(rank_correlations(summary, critical))
    assert "a description, not a test" in sentence and "p =" not in sentence
    from attnlimits_workflow.assemble.findings_functional import (
        correlation_sentence as page_sentence,
    )

    page = page_sentence(rank_correlations(summary, critical))
    assert "a description, not a test" in page and "p =" not in page
    assert "predict the functional one?" not in page


def test_the_interval_reads_each_resamples_cell_not_its_top():
    """Review 9: a resample's N* is known only to lie in (its last failing evaluated N, its first
    passing one]; with 1, 2, 4, 8 evaluated and a crossing between 2 and 4, the low end is 3,
    not 4 (the top of the cell overstated it by up to a factor of 2)."""
    row = summarise([synthetic({1: 0.5, 2: 0.2, 4: 0.01, 8: 0.0})], 0.05, 100, 0.95, 0).row(
        0, named=True
    )
    assert row["n_star"] == 4
    assert (row["n_star_low"], row["n_star_high"]) == (3, 4)


def test_the_rank_correlation_ties_lengths_whose_cells_overlap():
    """Review 37: N_crit is known to its list cell; ranking the cells' tops ranked the list's
    rounding (one fraction cell (0.6, 0.7] gives tops 0.703, 0.699, 0.699, 0.700 at L = 128 ...
    1024) and the low ends too. Lengths whose cells overlap tie, and where every one overlaps
    there is no order to rank."""
    from attnlimits_workflow.assemble.effective_set_report import (
        cell_ranks,
        correlation_sentence,
        rank_correlations,
    )

    assert cell_ranks([0.1, 0.3, 0.25, 0.6], [0.2, 0.4, 0.35, 0.7]).tolist() == [0, 1, 1, 2]
    assert cell_ranks([0.5, 0.5], [0.5, 0.5]).tolist() == [0, 0]  # equal points tie

    lengths = [128, 256, 512, 1024]
    summary = pl.DataFrame(
        {
            "length": lengths,
            "variant": ["attention-delete"] * 4,
            "n_star": [64, 96, 128, 160],
            "n_star_over_length": [0.5, 0.375, 0.25, 0.15625],
        }
    )
    tops = [90 / 128, 179 / 256, 358 / 512, 717 / 1024]
    lows = [77 / 128, 154 / 256, 307 / 512, 615 / 1024]  # the list N before each: 0.6 L
    critical = pl.DataFrame(
        {
            "length": lengths,
            "expectation": ["closed_form"] * 4,
            "N_crit": [90.0, 179.0, 358.0, 717.0],
            "N_crit_censored": [False] * 4,
            "N_crit_over_length": tops,
            "N_crit_cell_low": lows,
        }
    )
    got = rank_correlations(summary, critical).row(0, named=True)
    assert got["spearman_rho"] is None and got["lengths"] == 4
    assert "list cells overlap at every length" in correlation_sentence(
        rank_correlations(summary, critical)
    )
    # two cells apart from the other two: two tied pairs, ranked
    apart = critical.with_columns(
        pl.Series("N_crit_over_length", [0.2, 0.2, 0.7, 0.7]),
        pl.Series("N_crit_cell_low", [0.1, 0.1, 0.6, 0.6]),
    )
    rho = rank_correlations(summary, apart).row(0, named=True)["spearman_rho"]
    from scipy.stats import spearmanr

    assert rho == pytest.approx(spearmanr([0.5, 0.375, 0.25, 0.15625], [0, 0, 1, 1]).statistic)
