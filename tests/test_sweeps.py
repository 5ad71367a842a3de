"""The fused distance and separability sweeps (attnlimits.sweeps) against their plain numpy
references in attnlimits.protocol, each reading's own block apart: d~, the closed-form E and the
Monte-Carlo subsets' d~ (distance_rows against row_statistics and row_monte_carlo), and N_s/N
with Theorem 2's bounds (separability_rows against row_separability). Blocks are drawn with
ties, underflowed (exactly zero) weights, duplicated vectors (entries that cancel), consecutive
and scattered rows, N = 1 and N = L - 1, under both zero-weight rules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fused import assert_close, causal_block

from attnlimits import fused
from attnlimits import reference as ref
from attnlimits.protocol import (
    row_epsilon_bound,
    row_monte_carlo,
    row_separability,
    row_statistics,
)
from attnlimits.separability import project_to_sphere
from attnlimits.sweeps import (
    distance_rows,
    epsilon_bound_rows,
    monte_carlo_ranks,
    separability_rows,
)

pytestmark = pytest.mark.unit

DRAWS = 3


def check_distance(block, rows, length, n, causal, drawn, seed):
    """distance_rows against row_statistics on each reading's block and row_monte_carlo on the
    same seeded draws; returns the fused values."""
    rng = np.random.default_rng(seed)
    ranks = monte_carlo_ranks(block.counted[drawn], n, DRAWS, rng)
    got = distance_rows(block, n, positions=rows, causal=causal, mc_ranks=ranks, mc_rows=drawn)
    want = row_statistics(block, n=n)
    prefix = row_statistics(block.read_as("prefix", rows, length), n=n) if causal else want
    assert_close(got["distance"], want["distance"], f"distance N={n}")
    assert_close(got["expectation_term"], want["expectation_term"], f"E term N={n}")
    assert_close(got["distance_prefix"], prefix["distance"], f"prefix distance N={n}")
    assert_close(got["expectation_term_prefix"], prefix["expectation_term"], f"prefix E N={n}")
    plain = row_monte_carlo(block.take(drawn), n=n, draws=DRAWS, rng=np.random.default_rng(seed))
    assert_close(got["monte_carlo"], plain, f"Monte Carlo N={n}")
    for reading in (block, block.read_as("prefix", rows, length)) if causal else (block,):
        # every block, whichever keys it counts: its own epsilon bound
        assert_close(epsilon_bound_rows(reading, n), row_epsilon_bound(reading, n=n), "epsilon")
    return got


def check_separability(block, rows, length, n, causal, delta=1.3):
    """separability_rows against row_separability on each reading's block."""
    got = separability_rows(block, n, delta=delta, radius_m=1.0, positions=rows, causal=causal)
    want = row_separability(block, n=n, delta=delta, radius_m=1.0)
    other = block.read_as("prefix", rows, length) if causal else block
    prefix = row_separability(other, n=n, delta=delta, radius_m=1.0)
    for name, values in want.items():
        # N_s counts are equal, not close: each distance is the reference's entry
        if name == "ratio":
            assert np.array_equal(got[name], values, equal_nan=True), name
        else:
            assert_close(got[name], values, f"{name} N={n}")
    assert np.array_equal(got["ratio_prefix"], prefix["ratio"], equal_nan=True)
    return got


def drawn_case(data, length):
    if data.draw(st.booleans()):  # consecutive rows, as a block of every row
        first = data.draw(st.integers(0, length - 1))
        rows = np.arange(first, data.draw(st.integers(first + 1, length)))
    else:  # scattered rows, as analysis.all_rows.rows draws them
        rows = np.array(sorted(data.draw(st.sets(st.integers(0, length - 1), min_size=1))))
    n = data.draw(st.integers(1, max(length - 1, 1)))
    return rows, n


CASES = {
    "length": st.integers(2, 24),
    "causal": st.booleans(),
    "zero_weight": st.sampled_from(["not_selected", "literal"]),
    "tied": st.booleans(),
    "spiky": st.booleans(),
    "repeated": st.booleans(),
    "data": st.data(),
    "seed": st.integers(0, 2**16),
}


@settings(max_examples=80, deadline=None)
@given(**CASES)
def test_distance_rows_match_each_readings_plain_pass(
    length, causal, zero_weight, tied, spiky, repeated, data, seed
):
    rows, n = drawn_case(data, length)
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
    drawn = np.array(sorted(data.draw(st.sets(st.integers(0, len(rows) - 1), min_size=1))))
    check_distance(block, rows, length, n, causal, drawn, seed)


@settings(max_examples=80, deadline=None)
@given(**CASES)
def test_separability_rows_match_each_readings_plain_pass(
    length, causal, zero_weight, tied, spiky, repeated, data, seed
):
    rows, n = drawn_case(data, length)
    block, alpha, x = causal_block(
        seed,
        length,
        rows,
        causal=causal,
        zero_weight=zero_weight,
        tied=tied,
        spiky=spiky,
        repeated=repeated,
    )
    sphere = type(block).of(
        alpha, project_to_sphere(x[None], 1.0)[0], block.length, zero_weight=zero_weight
    )
    check_separability(sphere, rows, length, n, causal)


@pytest.mark.parametrize("zero_weight", ["not_selected", "literal"])
def test_hand_made_edges_every_row_n_one_and_l_minus_one(zero_weight):
    """Every row of a causal head of 12 keys at N = 1 and N = L - 1, with underflowed weights
    and repeated vectors; d~ at N = 1 against the definition too."""
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
    first = check_distance(block, rows, length, 1, True, rows, seed=5)
    for t in range(1, length):
        a, xs = alpha[t, : t + 1], x[: t + 1]
        selected = {i for i in ref.top_n(a, 1) if a[i] > 0 or zero_weight == "literal"}
        want = ref.distance(a, xs, selected)
        assert first["distance_prefix"][t] == pytest.approx(want, rel=1e-12, abs=1e-15)
    last = check_distance(block, rows, length, length - 1, True, rows, seed=5)
    # N = L - 1: only the last row keeps a non-selected key under the prefix reading
    assert np.isnan(last["distance_prefix"][:-1]).all()
    assert not np.isnan(last["distance"]).any()
    for n in (1, length - 1):
        check_separability(block, rows, length, n, True)


def test_every_key_must_count():
    """A block read as "prefix" (masked keys not counted) is refused, not swept wrongly."""
    length = 6
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
    prefix = block.read_as("prefix", rows, length)
    with pytest.raises(ValueError, match="count every key"):
        distance_rows(prefix, 2, positions=rows, causal=True)
    with pytest.raises(ValueError, match="count every key"):
        separability_rows(prefix, 2, delta=1.0, radius_m=1.0, positions=rows, causal=True)


def test_a_drifting_epsilon_kernel_is_caught(monkeypatch):
    """The comparison can fail: a sum that leaves out each row's first key is refused."""
    original = fused.epsilon_ratio_sums.py_func

    def drifted(alpha, x, x_sq, scale, point, q_sq, g, counted):
        alpha = alpha.copy()
        alpha[:, 0] = 0.0
        return original(alpha, x, x_sq, scale, point, q_sq, g, counted)

    monkeypatch.setattr(fused, "epsilon_ratio_sums", drifted)
    length = 10
    rows = np.arange(length)
    block, _, _ = causal_block(
        4,
        length,
        rows,
        causal=True,
        zero_weight="not_selected",
        tied=False,
        spiky=False,
        repeated=False,
    )
    with pytest.raises(AssertionError):
        assert_close(epsilon_bound_rows(block, 2), row_epsilon_bound(block, n=2), "epsilon")


def test_a_drifting_separation_kernel_is_caught(monkeypatch):
    """The comparison can fail: a kernel whose radius runs over one key too few is refused."""
    original = fused.separation_counts.py_func

    def drifted(alpha, x, a_sq_x, floor, s, q_sq, g, selected, counted, res, visible, *rest):
        counted = counted.copy()
        counted[:, 0] = False
        return original(alpha, x, a_sq_x, floor, s, q_sq, g, selected, counted, res, visible, *rest)

    monkeypatch.setattr(fused, "separation_counts", drifted)
    length = 10
    rows = np.arange(length)
    block, _, _ = causal_block(
        4,
        length,
        rows,
        causal=True,
        zero_weight="not_selected",
        tied=False,
        spiky=False,
        repeated=False,
    )
    with pytest.raises(AssertionError):
        for n in (1, 2, 3):
            check_separability(block, rows, length, n, True)


@pytest.mark.parametrize("dims", [3, 64])
@pytest.mark.parametrize("n_from_end", [1, 2, 40])
def test_near_cancelling_vectors(dims, n_from_end):
    """Keys that nearly coincide (x = v + 1e-4 noise) put many entries just above the
    cancellation floor, where the expansion loses digits: each fused entry is still the
    reference's number (the same |s|^2 and the same expansion), so d~ and E agree to 1e-12."""
    length = 100
    rng = np.random.default_rng(dims + n_from_end)
    x = np.linspace(1.0, 2.0, dims) + 1e-4 * rng.standard_normal((length, dims))
    rows = np.arange(length - 4, length)
    alpha = np.full((len(rows), length), 1.0 / length)
    block = type(causal_block(0, 4, np.arange(4), **EDGE)[0]).of(
        alpha, x, np.full(len(rows), length)
    )
    n = length - n_from_end
    check_distance(block, rows, length, n, False, np.arange(len(rows)), seed=1)
    check_separability(block, rows, length, n, False)


EDGE = {
    "causal": True,
    "zero_weight": "not_selected",
    "tied": False,
    "spiky": False,
    "repeated": False,
}


def test_n_outside_one_to_l_minus_one_is_refused():
    """The sweeps read the top-N set of a row of L keys: N = 0 or N >= L is refused (the plain
    reference, which returns NaN there, serves such N)."""
    length = 6
    rows = np.arange(length)
    block, _, _ = causal_block(2, length, rows, **EDGE)
    for n in (0, length, length + 3):
        with pytest.raises(ValueError, match="within 1..L-1"):
            distance_rows(block, n, positions=rows, causal=True)
        with pytest.raises(ValueError, match="within 1..L-1"):
            separability_rows(block, n, delta=1.0, radius_m=1.0, positions=rows, causal=True)


def test_nan_weights_share_their_ranking():
    """Two blocks of the same NaN-holding weights (NaN scores) share one ranking, as equal
    weights do; other weights are refused."""
    from attnlimits.protocol import RowBlock

    alpha = np.array([[0.5, np.nan, 0.5], [0.2, 0.3, 0.5]])
    x = np.eye(3)
    one = RowBlock.of(alpha, x, np.array([3, 3]))
    two = RowBlock.of(alpha, 2 * x, np.array([3, 3]))
    two.share_ranks(one)
    assert two.top_ranks() is one.top_ranks()
    other = RowBlock.of(alpha[::-1], x, np.array([3, 3]))
    with pytest.raises(ValueError, match="same weights"):
        other.share_ranks(one)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.integers(1, 6),
    width=st.integers(1, 30),
    tail=st.integers(0, 30),
    tied=st.booleans(),
    zeros=st.booleans(),
    nan=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_ranks_that_skip_a_causal_tail_are_the_full_sorts(
    rows, width, tail, tied, zeros, nan, seed
):
    """The ranks sorted over the keys before a block's unweighted tail against one stable
    sort of the whole row: ties, zero weights before the tail, uncounted keys (sort key 1.0)
    inside it, and NaN weights, which send the block to the full sort."""
    from attnlimits.arrays import NUMPY
    from attnlimits.row_blocks import _ranks, _sorted_ranks

    rng = np.random.default_rng(seed)
    alpha = rng.random((rows, width + tail))
    alpha[:, width:] = 0.0
    if tied:
        alpha[:, :width:2] = alpha[:, :1]
    if zeros:
        alpha[:, 1:width:3] = 0.0
    if nan:
        alpha[0, 0] = np.nan
    counted = np.ones_like(alpha, dtype=bool)
    if seed % 2:
        counted[:, width:] = False  # the prefix reading: the tail is uncounted, sort key 1.0
    else:
        counted[:, -1] = tail == 0  # an uncounted key where the tail is empty
    key = np.where(counted, -alpha, 1.0)
    want = _ranks(np.argsort(key, axis=1, kind="stable"), NUMPY)
    assert np.array_equal(_sorted_ranks(key, alpha, NUMPY), want)


@pytest.mark.parametrize("hint", [0, 3, 40])
def test_farthest_keys_of_near_duplicates_are_the_brute_force_ones(hint):
    """Near-duplicate keys, whose expanded squared distances lose every digit: the k farthest
    are the brute force's, in the shape asked for, however many the head searched for."""
    from attnlimits.protocol import HeadVectors

    rng = np.random.default_rng(3)
    x = np.tile(rng.standard_normal(16) * 10, (40, 1)) + 1e-7 * rng.standard_normal((40, 16))
    index, dist2 = HeadVectors(x, farthest_keys=hint).farthest(3)
    assert index.shape == dist2.shape == (40, 3)
    brute = ((x[:, None, :] - x[None, :, :]) ** 2).sum(axis=2)
    want = -np.sort(-brute, axis=1)[:, :3]
    np.testing.assert_allclose(dist2, want, rtol=1e-12)
    np.testing.assert_allclose(np.take_along_axis(brute, index, axis=1), dist2, rtol=1e-12)
