"""The sign test and Benjamini-Hochberg (attnlimits.intervals): hand-worked cases and plain
references (scipy's binomial test; BH by its definition over every subset size)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from attnlimits.intervals import benjamini_hochberg, holm, sign_test_greater

pytestmark = pytest.mark.unit


def test_sign_test_by_hand():
    assert sign_test_greater(3, 3) == 1 / 8  # 3 seeds: the smallest p there is
    assert sign_test_greater(4, 4) == 1 / 16
    assert sign_test_greater(5, 5) == 1 / 32
    assert sign_test_greater(2, 3) == 4 / 8  # C(3,2) + C(3,3) = 4
    assert sign_test_greater(0, 3) == 1.0
    assert sign_test_greater(0, 0) == 1.0


def test_sign_test_refuses_counts_that_cannot_be():
    for above, trials in ((4, 3), (-1, 3), (0, -1)):
        with pytest.raises(ValueError):
            sign_test_greater(above, trials)


@given(trials=st.integers(1, 60), data=st.data())
def test_sign_test_is_scipys_binomial_test(trials, data):
    above = data.draw(st.integers(0, trials))
    want = stats.binomtest(above, trials, 0.5, alternative="greater").pvalue
    assert sign_test_greater(above, trials) == pytest.approx(want, rel=1e-12)


def test_benjamini_hochberg_by_hand():
    # m = 4, q = 0.05: thresholds 0.0125, 0.025, 0.0375, 0.05; p_(3) = 0.03 <= 0.0375 is the
    # largest passing rank, so the three smallest are rejected, 0.02 included
    assert benjamini_hochberg([0.01, 0.04 + 0.02, 0.02, 0.03], 0.05) == [True, False, True, True]
    assert benjamini_hochberg([0.5, 0.6], 0.05) == [False, False]
    assert benjamini_hochberg([float("nan"), 0.01], 0.05) == [False, True]
    assert benjamini_hochberg([], 0.05) == []
    with pytest.raises(ValueError):
        benjamini_hochberg([0.1], 0.0)


def brute_force_bh(p, q):
    """Reject the k smallest for the largest k whose k-th smallest p is at most k q / m."""
    m = len(p)
    ranked = sorted(range(m), key=lambda i: (p[i], i))
    k = max((r for r in range(1, m + 1) if p[ranked[r - 1]] <= r * q / m), default=0)
    out = [False] * m
    for i in ranked[:k]:
        out[i] = True
    return out


@settings(max_examples=200)
@given(
    p=st.lists(st.floats(0, 1), min_size=1, max_size=30),
    q=st.floats(0.001, 0.5),
)
def test_benjamini_hochberg_matches_its_definition(p, q):
    assert benjamini_hochberg(p, q) == brute_force_bh(p, q)
    # a rejected p-value never exceeds an accepted one
    rejected = benjamini_hochberg(p, q)
    kept = [x for x, r in zip(p, rejected, strict=True) if not r]
    assert all(x <= min(kept, default=np.inf) for x, r in zip(p, rejected, strict=True) if r)


def test_holm_by_hand():
    # m = 4, alpha = 0.05: cuts 0.0125, 0.0167, 0.025, 0.05 in p order; 0.01 and 0.015 pass,
    # 0.03 > 0.025 stops the walk, so 0.04 is not rejected though it is below 0.05
    assert holm([0.03, 0.01, 0.04, 0.015], 0.05) == [False, True, False, True]
    # the first cut is BH's, alpha / m: both reject nothing when the least p misses it
    assert holm([0.00096] + [0.5] * 54, 0.05) == [False] * 55
    assert benjamini_hochberg([0.00096] + [0.5] * 54, 0.05) == [False] * 55
    assert holm([0.00090] + [0.5] * 54, 0.05) == [True] + [False] * 54
    # BH keeps all four of the by-hand case above it, Holm the first only
    assert holm([0.01, 0.06, 0.02, 0.03], 0.05) == [True, False, False, False]
    assert holm([float("nan"), 0.01], 0.05) == [False, True]
    assert holm([], 0.05) == []
    with pytest.raises(ValueError):
        holm([0.1], 1.0)


def brute_force_holm(p, alpha):
    """Walk the p-values in order; the k-th (from 1) must be at most alpha / (m - k + 1)."""
    m = len(p)
    out = [False] * m
    for k, i in enumerate(sorted(range(m), key=lambda i: (p[i], i)), start=1):
        if p[i] > alpha / (m - k + 1):
            break
        out[i] = True
    return out


@settings(max_examples=200)
@given(
    p=st.lists(st.floats(0, 1), min_size=1, max_size=30),
    alpha=st.floats(0.001, 0.5),
)
def test_holm_matches_its_definition_and_rejects_within_bh(p, alpha):
    rejected = holm(p, alpha)
    assert rejected == brute_force_holm(p, alpha)
    bh = benjamini_hochberg(p, alpha)
    assert all(b for h, b in zip(rejected, bh, strict=True) if h)


def brute_force_sign_flip(d):
    d = [x for x in d if x != 0]
    if not d:
        return 1.0
    observed = abs(sum(d))
    hits = 0
    for pattern in range(2 ** len(d)):
        total = sum(x if (pattern >> i) & 1 else -x for i, x in enumerate(d))
        hits += abs(total) >= observed - 1e-9
    return hits / 2 ** len(d)


@given(st.lists(st.integers(-5, 5), min_size=0, max_size=10))
def test_sign_flip_is_exact_against_brute_force(d):
    from attnlimits.intervals import sign_flip_pvalue

    assert sign_flip_pvalue(d) == pytest.approx(brute_force_sign_flip(d))


def test_sign_flip_by_hand_and_by_draws():
    from attnlimits.intervals import sign_flip_pvalue

    assert sign_flip_pvalue([1, 1, 1, 1, 1, 1]) == 2 / 64  # all one way: the two extremes
    assert sign_flip_pvalue([1, -1]) == 1.0
    assert sign_flip_pvalue([0, 0]) == 1.0
    # 20 differences: drawn patterns, close to the exact tail of +-1 steps (2 x P(B >= 16))
    p = sign_flip_pvalue([1] * 16 + [-1] * 4)
    assert p == pytest.approx(2 * stats.binom.sf(15, 20, 0.5), abs=0.003)
