"""analysis.all_rows.rows: the paper's protocol on R query rows drawn per head instead of all L.
Each per-head mean is then an estimate, and its stated standard error is held against the exact
variance of a draw (enumerating every draw of a small population), against the spread of many
seeded draws of real analysis rows, and against the all-rows value itself (coverage). With every
row drawn (R >= L) the tables are the all-rows tables, bit for bit."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import polars as pl
import pytest
import test_torch_analyses as torch_analyses
from hypothesis import given, settings
from hypothesis import strategies as st
from test_torch_analyses import ALL_ROWS, ANALYSES, distance_settings, random_pack

import attnlimits_workflow.rows as rows_module
from attnlimits.protocol import attention_rows, drawn_rows, sampled_mean_stderr
from attnlimits_workflow.analyses import distance, separability
from attnlimits_workflow.analyses.common import rows_to_analyse
from attnlimits_workflow.plotting import protocol_text
from attnlimits_workflow.rows import _merged_spread, pool_chunks, row_means
from attnlimits_workflow.streams import Stream, stream_rng

# --- the draw and the estimator ---------------------------------------------------------------


@pytest.mark.unit
def test_drawn_rows_keep_the_first_half_and_the_last_row_and_draw_the_rest_between():
    rng = np.random.default_rng(0)
    rows = drawn_rows(rng, 100, 9)
    assert len(rows) == 9 and np.all(np.diff(rows) > 0)
    assert list(rows[:4]) == [0, 1, 2, 3] and rows[-1] == 99  # kept: first 9 // 2, last
    assert np.all((rows[4:-1] >= 4) & (rows[4:-1] <= 98))
    assert np.array_equal(drawn_rows(np.random.default_rng(0), 100, 9), rows)  # seeded
    for count in (None, 100, 500):
        untouched = np.random.default_rng(1)
        assert np.array_equal(drawn_rows(untouched, 100, count), np.arange(100))
        # every row: nothing drawn, so a generator shared with other draws is not moved
        assert untouched.random() == np.random.default_rng(1).random()
    assert len(drawn_rows(rng, 10, 5)) == 5
    with pytest.raises(ValueError, match="at least 5"):
        drawn_rows(rng, 10, 4)


@pytest.mark.unit
def test_every_row_between_is_equally_likely_to_be_drawn():
    hits = np.zeros(24)
    for seed in range(4000):
        hits[drawn_rows(np.random.default_rng(seed), 24, 8)] += 1
    assert np.all(hits[:4] == 4000) and hits[-1] == 4000
    # 3 of the 19 rows between: 632 expected per row, a binomial s.d. of 23; a bias to the
    # first or the last of them would show
    assert np.abs(hits[4:-1] - 4000 * 3 / 19).max() < 100


@pytest.mark.unit
def test_the_standard_error_on_hand_computed_cases():
    # values 1, 2, 3, 4 of a population of 10: s^2 = 5/3, (1 - 4/10) * (5/3) / 4 = 0.25
    assert sampled_mean_stderr(np.var([1, 2, 3, 4], ddof=1), 4, 10) == pytest.approx(0.5)
    assert sampled_mean_stderr(2.0, 10, 10) == 0.0  # every value drawn: the mean is exact
    assert sampled_mean_stderr(2.0, 12, 10) == 0.0
    assert np.isnan(sampled_mean_stderr(np.nan, 1, 10))  # one of several: no variance to read
    assert np.isnan(sampled_mean_stderr(np.nan, 0, 10))


@settings(max_examples=60, deadline=None)
@given(
    population=st.lists(
        st.floats(-50, 50, allow_nan=False, allow_infinity=False), min_size=3, max_size=8
    ),
    data=st.data(),
)
@pytest.mark.unit
def test_the_standard_error_is_exact_over_every_possible_draw(population, data):
    """Enumerating every draw of n of P values: the variance of the drawn mean is
    (1 - n/P) S^2 / n, and the stated s.e. squared is unbiased for it (its mean over draws)."""
    values = np.asarray(population)
    size = len(values)
    n = data.draw(st.integers(2, size - 1))
    means, stated = [], []
    for subset in itertools.combinations(range(size), n):
        drawn = values[list(subset)]
        means.append(drawn.mean())
        stated.append(sampled_mean_stderr(drawn.var(ddof=1), n, size) ** 2)
    exact_variance = np.var(means)  # every draw equally likely: the population variance
    scale = max(1.0, float(np.abs(values).max()) ** 2)
    assert float(np.mean(means)) == pytest.approx(values.mean(), abs=1e-9 * scale**0.5)
    assert exact_variance == pytest.approx(
        (1 - n / size) * values.var(ddof=1) / n, rel=1e-9, abs=1e-12 * scale
    )
    assert float(np.mean(stated)) == pytest.approx(exact_variance, rel=1e-9, abs=1e-12 * scale)


@settings(max_examples=100, deadline=None)
@given(
    values=st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=2, max_size=40),
    cuts=st.lists(st.integers(1, 39), max_size=4),
)
@pytest.mark.unit
def test_the_spread_merged_block_by_block_equals_the_direct_sum_of_squares(values, cuts):
    values = np.asarray(values)
    edges = sorted({0, *(c for c in cuts if c < len(values)), len(values)})
    spread, total, count = 0.0, 0.0, 0
    for a, b in itertools.pairwise(edges):
        spread = _merged_spread(spread, total, count, values[a:b])
        total, count = total + values[a:b].sum(), count + (b - a)
    want = float(((values - values.mean()) ** 2).sum())
    assert spread == pytest.approx(want, rel=1e-9, abs=1e-9 * max(1.0, float(np.abs(values).max())))


# --- the rows analysed ------------------------------------------------------------------------


def largest_weight(block, logits, rows, sample):
    """A per-row statistic every row has: the row's largest attention weight."""
    return {"largest": np.asarray(block.alpha).max(axis=1)}


def every_row_value(pack, sample: int) -> np.ndarray:
    """largest_weight on every row of one sample, computed directly."""
    q, k = (np.asarray(v, dtype=np.float64) for v in pack.rows(sample))
    _, weights = attention_rows(
        q,
        k,
        float(pack.score_scale[sample]),
        np.arange(pack.length),
        causal=bool(pack.metadata["causal"]),
        softcap=None,
    )
    return np.asarray(weights).max(axis=1)


def stratified(values: np.ndarray, rows: np.ndarray, length: int) -> tuple[float, float]:
    """The estimate and its error from the analysed rows' values, by hand: kept rows (the first
    R // 2 and the last) count once, each drawn row for (L - 1 - R // 2) / (R - 1 - R // 2)
    rows; the drawn rows' mean's error with the finite-population factor, scaled by their share
    of the weight."""
    count = len(rows)
    first = count // 2
    drawn = (rows >= first) & (rows < length - 1)
    w = (length - 1 - first) / (count - 1 - first)
    weight = w * drawn.sum() + (~drawn).sum()
    estimate = (w * values[drawn].sum() + values[~drawn].sum()) / weight
    n = drawn.sum()
    error = np.sqrt((1 - n / (length - 1 - first)) * values[drawn].var(ddof=1) / n)
    return estimate, w * n / weight * error


@pytest.mark.unit
@pytest.mark.parametrize("causal", [True, False])
def test_a_sampled_mean_weighs_the_drawn_rows_by_the_rows_they_stand_for(causal, monkeypatch):
    monkeypatch.setattr(rows_module, "ROW_BLOCK", 4)  # several blocks per head, the last short
    pack = random_pack(causal, length=30)
    got = row_means(pack, largest_weight, masked="non_selected", row_count=9, row_seed=5)
    for i, s in enumerate(got["__samples"].tolist()):
        drawn = drawn_rows(stream_rng(5, Stream.QUERY_ROWS, 30, s), 30, 9)
        estimate, error = stratified(every_row_value(pack, s)[drawn], drawn, 30)
        assert got["largest"][i] == pytest.approx(estimate, rel=1e-12)
        assert got["largest__se"][i] == pytest.approx(error, rel=1e-9)
        assert got["largest__rows"][i] == 9
        assert got["largest__weight"][i] == pytest.approx(30)
    # each sample draws its own rows: the heads' errors are independent
    firsts = {tuple(drawn_rows(stream_rng(5, Stream.QUERY_ROWS, 30, s), 30, 9)) for s in range(4)}
    assert len(firsts) == 4


@pytest.mark.unit
def test_a_statistic_undefined_on_some_rows_is_estimated_over_its_defined_rows():
    """Defined on rows t >= 20 only (as the prefix reading's rows with t + 1 > N): the weighted
    mean over the drawn defined rows; the last row keeps every such statistic defined."""

    def late_only(block, logits, rows, sample):
        value = np.asarray(block.alpha).max(axis=1)
        return {"late": np.where(rows >= 20, value, np.nan)}

    pack = random_pack(True, length=30)
    got = row_means(pack, late_only, masked="non_selected", row_count=9, row_seed=2)
    for i, s in enumerate(got["__samples"].tolist()):
        drawn = drawn_rows(stream_rng(2, Stream.QUERY_ROWS, 30, s), 30, 9)
        values = every_row_value(pack, s)[drawn]
        late = drawn >= 20
        between = late & (drawn < 29)  # the drawn rows among them; the last row is kept
        w = (29 - 4) / (9 - 1 - 4)
        want = (w * values[between].sum() + values[-1]) / (w * between.sum() + 1)
        assert got["late"][i] == pytest.approx(want, rel=1e-12)
        assert got["late__rows"][i] == late.sum()


@pytest.mark.unit
def test_pooled_chunks_combine_their_errors_by_the_rows_they_stand_for():
    pack = random_pack(False, length=30)
    means = row_means(pack, largest_weight, masked="non_selected", row_count=9, row_seed=1)
    pooled = pool_chunks(pack, means)
    chosen = means["__samples"]
    for g, (layer, head) in enumerate(zip(pooled["layer"], pooled["head"], strict=True)):
        mine = [i for i, s in enumerate(chosen) if pack.layer[s] == layer and pack.head[s] == head]
        assert len(mine) == 2  # two chunks, each standing for its 30 rows: one half each
        assert pooled["largest"][g] == pytest.approx(np.mean(means["largest"][mine]), rel=1e-12)
        want = np.sqrt(sum((0.5 * means["largest__se"][i]) ** 2 for i in mine))
        assert pooled["largest_se"][g] == pytest.approx(want, rel=1e-12)
        assert pooled["largest_rows"][g] == 18


@pytest.mark.unit
def test_the_stated_error_matches_the_spread_of_many_draws():
    """One pack, 600 seeded draws of 30 of 60 rows: per sample, the standard deviation of the
    600 estimates and the root mean square of their stated errors agree, and the estimates
    centre on the all-rows mean. Without the finite-population factor (14 of the 44 rows between
    drawn: sqrt(1 - 14/44) = 0.83) the ratio would sit near 0.83; the s.d.'s own relative error
    is about 1 / sqrt(1200) = 3 %."""
    pack = random_pack(True, length=60, seed=4)
    exact = row_means(pack, largest_weight, masked="non_selected")["largest"]
    estimates, stated = [], []
    for seed in range(600):
        got = row_means(pack, largest_weight, masked="non_selected", row_count=30, row_seed=seed)
        estimates.append(got["largest"])
        stated.append(got["largest__se"])
    estimates, stated = np.array(estimates), np.array(stated)
    ratio = estimates.std(axis=0, ddof=1) / np.sqrt((stated**2).mean(axis=0))
    assert 0.95 < np.median(ratio) < 1.05, ratio
    assert np.all((ratio > 0.8) & (ratio < 1.2)), ratio
    z = (estimates.mean(axis=0) - exact) / (estimates.std(axis=0, ddof=1) / np.sqrt(600))
    assert np.all(np.abs(z) < 4), z


# --- the analyses' tables -----------------------------------------------------------------------


def with_rows(monkeypatch, rows) -> None:
    """test_torch_analyses' ANALYSES with analysis.all_rows.rows set: they read its ALL_ROWS
    when called."""
    monkeypatch.setattr(torch_analyses, "ALL_ROWS", ALL_ROWS | {"rows": rows})


@pytest.mark.integration
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("analysis", sorted(ANALYSES))
def test_drawing_every_row_is_the_all_rows_table_bit_for_bit(analysis, causal, monkeypatch):
    pack = random_pack(causal)
    want = ANALYSES[analysis](pack, "numpy")
    for rows in (pack.length, 10 * pack.length):
        with_rows(monkeypatch, rows)
        got = ANALYSES[analysis](pack, "numpy")
        errors = [c for c in got.columns if c.endswith("_se")]
        # the columns every L of a sampled run has, 0 where every row was analysed
        assert got.drop(errors).equals(want, null_equal=True), (analysis, rows)
        assert all((got[c] == 0).all() for c in errors)


@pytest.mark.integration
@pytest.mark.parametrize("analysis", sorted(ANALYSES))
def test_a_sampled_table_keeps_the_all_rows_columns_and_adds_the_errors(analysis, monkeypatch):
    pack = random_pack(True, length=24)
    full = ANALYSES[analysis](pack, "numpy")
    with_rows(monkeypatch, 8)
    got = ANALYSES[analysis](pack, "numpy")
    assert set(full.columns) <= set(got.columns)
    errors = [c for c in got.columns if c.endswith("_se")]
    if analysis == "critical_n":
        # the KS search on the drawn rows' per-head means: no per-head mean in its table to give
        # an error of, and its rows are the N it tried, which the draw may change
        assert not errors and got.columns == full.columns
        return
    assert got.height == full.height
    assert errors and all(c[: -len("_se")] in got.columns for c in errors)
    assert all(got[c].drop_nans().drop_nulls().min() > 0 for c in errors)
    if "rows" in got.columns:
        assert set(got["rows"].to_list()) <= {8, 16}  # 8 drawn rows per chunk pooled


def distance_table(pack, rows):
    return distance.all_rows(pack, 3, distance_settings(0, ALL_ROWS | {"rows": rows}))


@pytest.mark.integration
def test_the_all_rows_value_lies_within_the_stated_error_of_the_sampled_one():
    """Coverage on real analysis tables: 20 random packs (6 heads each), d~ and N_s/N from 16
    of 64 rows against every row. About 95 % of |z| should be <= 1.96; a stated error half the
    true one would put about 67 % there."""
    z = []
    for seed in range(20):
        pack = random_pack(True, length=64, seed=seed)
        exact, sampled = distance_table(pack, "all"), distance_table(pack, 16)
        z += list(
            (sampled["distance"] - exact["distance"]).to_numpy() / sampled["distance_se"].to_numpy()
        )
        radius = separability.Settings(1.0, "context", "all_rows", ALL_ROWS, "not_selected", 0)
        delta = np.full(len(pack.layer), 0.4)
        ratio_exact = separability.all_rows(pack, 3, radius, delta)
        ratio = separability.all_rows(
            pack,
            3,
            dataclasses.replace(radius, all_rows=ALL_ROWS | {"rows": 16}, seed=seed),
            delta,
        )
        se = ratio["ratio_se"].to_numpy()
        ok = se > 0
        z += list(((ratio["ratio"] - ratio_exact["ratio"]).to_numpy() / se)[ok])
    z = np.asarray(z)
    covered = np.mean(np.abs(z) <= 1.96)
    assert len(z) >= 200
    # both ways: errors too small cover too little, errors too large (a missing
    # finite-population factor) too much
    assert 0.88 <= covered <= 0.99, covered


# --- settings and words ---------------------------------------------------------------------------


@pytest.mark.unit
def test_the_setting_reads_all_as_every_row():
    assert rows_to_analyse({"rows": "all"}) is None
    assert rows_to_analyse({}) is None
    assert rows_to_analyse({"rows": 512}) == 512


@pytest.mark.unit
def test_the_caption_says_how_many_rows_were_drawn():
    run = {
        "protocol": "all_rows",
        "causal": True,
        "masked": "non_selected",
        "chunks": 1,
        "heads_per_L": 270,
    }
    assert "every query row" in protocol_text(run)
    assert "every query row" in protocol_text(run | {"all_rows_rows": "all"})
    text = protocol_text(run | {"all_rows_rows": 256})
    assert "256 query rows" in text and "first 128 and the last kept" in text
    assert "standard error" in text and "every query" not in text


@pytest.mark.unit
def test_a_sampled_table_is_reproducible():
    pack = random_pack(True, length=40)
    first, again = distance_table(pack, 10), distance_table(pack, 10)
    assert first.equals(again, null_equal=True)
    assert isinstance(first, pl.DataFrame)


@pytest.mark.unit
def test_check_outcomes_count_the_analysed_rows_whatever_they_stand_for():
    """A check violated on two kept first rows only: two violated rows, the head violated (a
    weighted mean times the analysed rows would round them away)."""
    from attnlimits.checks import VIOLATED, head_outcomes, row_outcome_columns

    def early_violation(block, logits, rows, sample):
        outcome = np.where(rows < 2, VIOLATED, "holds").astype(object)
        return row_outcome_columns("c", outcome)

    pack = random_pack(True, length=64)
    pooled = pool_chunks(
        pack, row_means(pack, early_violation, masked="non_selected", row_count=16, row_seed=3)
    )
    got = head_outcomes(pooled, "c")
    assert list(got["c_violated_rows"]) == [4] * len(pooled["layer"])  # 2 rows x 2 chunks
    assert set(got["c_check"]) == {VIOLATED}


@pytest.mark.unit
def test_the_weighted_mean_of_row_variances_gives_the_variance_of_the_weighted_mean():
    """sum w_i^2 v_i / (sum w_i)^2 by hand: the Monte-Carlo E's error under drawn rows."""
    pack = random_pack(False, length=30)
    got = row_means(pack, largest_weight, masked="non_selected", row_count=9, row_seed=5)
    for i, s in enumerate(got["__samples"].tolist()):
        drawn = drawn_rows(stream_rng(5, Stream.QUERY_ROWS, 30, s), 30, 9)
        values = every_row_value(pack, s)[drawn]
        w = np.where((drawn >= 4) & (drawn < 29), 25 / 4, 1.0)
        want = (w**2 * values).sum() / w.sum() ** 2
        assert got["largest__weighted_sq"][i] == pytest.approx(want, rel=1e-12)
        assert got["largest__plain"][i] == pytest.approx(values.mean(), rel=1e-12)
