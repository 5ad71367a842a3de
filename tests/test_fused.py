"""The fused row kernels (attnlimits.fused) against their plain numpy references in
attnlimits.protocol: the critical-N statistics under every reading at once against
row_critical_statistics on each reading's own block, and the nested context vectors against a
product per N. Blocks are drawn with ties, underflowed (exactly zero) weights, duplicated
vectors (entries that cancel), masks, N = 1 and N = L - 1, under both zero-weight rules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlimits import fused
from attnlimits import reference as ref
from attnlimits.protocol import (
    RowBlock,
    attention_rows,
    row_critical_statistics,
    row_critical_statistics_readings,
    visible_lengths,
)

pytestmark = pytest.mark.unit

RTOL = 1e-12


def causal_block(seed, length, rows, *, causal, zero_weight, tied, spiky, repeated, width=3):
    """A head's block of ``rows`` (query positions) under the reading where every key counts,
    with its weights and vectors: ``tied`` equal keys (every visible weight of a row ties),
    ``spiky`` large scores (weights that underflow to exactly 0, near one-hot rows),
    ``repeated`` duplicated vectors (alpha_i x_i and s nearly equal: the cancellation repair)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((length, 3)) * (400.0 if spiky else 2.0)
    k = np.ones((length, 3)) if tied else rng.standard_normal((length, 3))
    x = rng.standard_normal((length, width))
    if repeated:
        x[1::2] = x[0]
    _, alpha = attention_rows(q, k, 0.8, rows, causal=causal)
    lengths = visible_lengths(rows, length, causal=causal, masked="non_selected")
    return RowBlock.of(alpha, x, lengths, zero_weight=zero_weight), alpha, x


def assert_close(got, want, where):
    assert np.array_equal(np.isnan(got), np.isnan(want)), where
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=RTOL, atol=1e-300, err_msg=where)


def check_readings(block, rows, length, ns, causal, drawn, seed, mc_draws=2):
    readings = ("non_selected", "prefix") if causal else ("both",)
    own = {r: block.read_as("prefix", rows, length) if r == "prefix" else block for r in readings}
    ranks = {}
    for reading, b in own.items():
        rng = np.random.default_rng(seed)
        ranks[reading] = [b.random_ranks(rng, drawn) for _ in range(mc_draws)]
    got = row_critical_statistics_readings(
        block, ns, readings, positions=rows, random_ranks=ranks, random_rows=drawn
    )
    for reading, b in own.items():
        want = row_critical_statistics(b, ns, random_ranks=ranks[reading], random_rows=drawn)
        assert set(got[reading]) == set(want)
        for name in want:
            assert_close(got[reading][name], want[name], f"{reading} {name} N={ns}")
    return got


@settings(max_examples=80, deadline=None)
@given(
    length=st.integers(2, 24),
    causal=st.booleans(),
    zero_weight=st.sampled_from(["not_selected", "literal"]),
    tied=st.booleans(),
    spiky=st.booleans(),
    repeated=st.booleans(),
    data=st.data(),
    seed=st.integers(0, 2**16),
)
def test_every_reading_at_once_matches_each_readings_own_pass(
    length, causal, zero_weight, tied, spiky, repeated, data, seed
):
    """row_critical_statistics_readings (one sort, one sweep per N, the fused kernels) gives
    each reading's d~, closed-form E and Monte-Carlo E as row_critical_statistics on that
    reading's block does, on a block of consecutive or scattered rows."""
    if data.draw(st.booleans()):  # consecutive rows, as a block of every row
        first = data.draw(st.integers(0, length - 1))
        rows = np.arange(first, data.draw(st.integers(first + 1, length)))
    else:  # scattered rows, as analysis.all_rows.rows draws them
        rows = np.array(sorted(data.draw(st.sets(st.integers(0, length - 1), min_size=1))))
    ns = sorted(data.draw(st.sets(st.integers(1, length - 1 or 1), min_size=1, max_size=5)))
    block, _, _ = causal_block(
        seed,
        length,
        rows,
        causal=causal,
        zero_weight=zero_weight,
        tied=tied,
        spiky=spiky,
        repeated=repeated,
    )
    picks = data.draw(st.sets(st.integers(0, len(rows) - 1), min_size=1))
    drawn = np.array(sorted(picks))
    check_readings(block, rows, length, ns, causal, drawn, seed)


@pytest.mark.parametrize("zero_weight", ["not_selected", "literal"])
def test_hand_made_edges_every_row_n_one_and_l_minus_one(zero_weight):
    """Every row of a causal head of 12 keys at N = 1 and N = L - 1 (one non-selected key),
    with underflowed weights and repeated vectors; against the plain per-row reference too."""
    length = 12
    rows = np.arange(length)
    block, alpha, x = causal_block(
        3,
        length,
        rows,
        causal=True,
        zero_weight=zero_weight,
        tied=False,
        spiky=True,
        repeated=True,
    )
    assert (alpha[np.tril_indices(length)] == 0).any(), "the case needs underflowed weights"
    got = check_readings(block, rows, length, [1, length - 1], True, rows, seed=5)
    # the prefix reading's d~ at N = 1 of row t, from the definition (zero weights not selected)
    for t in range(1, length):
        a, xs = alpha[t, : t + 1], x[: t + 1]
        selected = {i for i in ref.top_n(a, 1) if a[i] > 0 or zero_weight == "literal"}
        want = ref.distance(a, xs, selected)
        assert got["prefix"]["distance"][0, t] == pytest.approx(want, rel=1e-12, abs=1e-15)
    # N = L - 1: only the last row has a non-selected key under the prefix reading
    assert np.isnan(got["prefix"]["distance"][1, :-1]).all()
    assert not np.isnan(got["non_selected"]["distance"][1]).any()


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 6),
    keys=st.integers(1, 20),
    width=st.integers(1, 20),
    data=st.data(),
    seed=st.integers(0, 2**16),
)
def test_nested_context_vectors_match_a_product_per_n(rows, keys, width, data, seed):
    """s_t(N) for every N of an increasing list, in one visit of each row's keys, equals
    where(rank < N, alpha, 0) @ x per N; keys past x's length weigh nothing."""
    width = min(width, keys)
    rng = np.random.default_rng(seed)
    alpha = rng.random((rows, width))
    x = rng.standard_normal((width, 4))
    ranks = np.argsort(rng.random((rows, keys)), axis=1).argsort(axis=1).astype(np.int32)
    ns = np.array(sorted(data.draw(st.sets(st.integers(0, keys), min_size=1))), dtype=np.int64)
    got = fused.nested_context_vectors(alpha, x, ranks, ns)
    for j, n in enumerate(ns):
        want = np.where(ranks[:, :width] < n, alpha, 0.0) @ x
        np.testing.assert_allclose(got[j], want, rtol=1e-12, atol=1e-14)


def test_a_drifting_kernel_is_caught(monkeypatch):
    """The comparison above can fail: a sweep that drops one key of each row is refused."""
    original = fused.subset_norm_sums.py_func

    def drifted(alpha, x, a_sq_x, floor, s, q_sq, g, ranks, n, selectable, visible):
        inside, beyond = original(
            alpha, x, a_sq_x, floor, s, q_sq, g, ranks, n, selectable, visible
        )
        return inside * (1 + 1e-9), beyond

    monkeypatch.setattr(fused, "subset_norm_sums", drifted)
    length = 8
    rows = np.arange(length)
    block, _, _ = causal_block(
        1,
        length,
        rows,
        causal=True,
        zero_weight="not_selected",
        tied=False,
        spiky=False,
        repeated=False,
    )
    with pytest.raises(AssertionError):
        check_readings(block, rows, length, [1, 3], True, rows, seed=2)
