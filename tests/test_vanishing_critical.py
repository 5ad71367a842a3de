"""Corollary 1 (vanishing attention) and the critical-N search."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlimits.critical import critical_n_search, fit_through_origin, ks_pvalue, linear_fit
from attnlimits.gradient import softmax
from attnlimits.vanishing import corollary1_delta, vanishing


def test_uniform_logits_give_uniform_weights():
    res = vanishing(np.full((1, 8), 1 / 8), np.zeros((1, 8)), np.zeros(1))
    assert res.max_scaled[0] == pytest.approx(1.0) and res.min_scaled[0] == pytest.approx(1.0)
    assert res.lower_bound[0] == 1.0 == res.upper_bound[0]


def test_delta_uses_the_largest_key():
    q = np.array([[3.0, 4.0]])  # |q| = 5
    k = np.array([[[1.0, 0.0], [0.0, 2.0]]])  # max |k| = 2
    assert corollary1_delta(q, k, 0.5)[0] == pytest.approx(5.0)


def test_delta_from_norms_equals_delta_from_vectors(rng):
    from attnlimits.vanishing import corollary1_delta_from_norms

    q, k = rng.normal(size=(5, 4)), rng.normal(size=(5, 7, 4))
    from_norms = corollary1_delta_from_norms(
        np.linalg.norm(q, axis=1), np.linalg.norm(k, axis=2).max(axis=1), 0.5
    )
    np.testing.assert_allclose(from_norms, corollary1_delta(q, k, 0.5))


def test_corollary1_holds_for_cauchy_schwarz_logits(rng):
    q, k = rng.normal(size=(50, 4)), rng.normal(size=(50, 16, 4))
    logits = np.einsum("sd,sld->sl", q, k) * 0.5
    alpha = softmax(logits)
    res = vanishing(alpha, logits, corollary1_delta(q, k, 0.5))
    assert np.all(res.min_scaled >= res.lower_bound * (1 - 1e-12))
    assert np.all(res.max_scaled <= res.upper_bound * (1 + 1e-12))
    assert np.all(res.logit_span <= corollary1_delta(q, k, 0.5) + 1e-12)


@given(st.integers(2, 3000), st.data())
def test_search_finds_a_step_within_its_stated_cost(max_n, data):
    n0 = data.draw(st.integers(1, max_n + 1))  # n0 = max_n + 1: never indistinguishable
    calls = []

    def pvalue(n):
        calls.append(n)
        return 0.5 if n >= n0 else 0.0

    res = critical_n_search(pvalue, max_n, 0.01)
    assert res.n_crit == (n0 if n0 <= max_n else None)
    assert len(calls) == len(set(calls)) <= 2 * math.ceil(math.log2(max_n)) + 1


def test_search_records_every_evaluation():
    res = critical_n_search(lambda n: 1.0 if n >= 5 else 0.0, 100, 0.01)
    assert [n for n, _ in res.evaluations] == [1, 2, 4, 8, 6, 5]
    assert res.n_crit == 5


def test_ks_pvalue_separates_and_merges(rng):
    a = rng.normal(size=500)
    assert ks_pvalue(a, a + 3) < 1e-10
    assert ks_pvalue(a, rng.normal(size=500)) > 0.001
    with pytest.raises(ValueError):
        ks_pvalue(np.array([np.nan]), a)


def test_fits():
    assert fit_through_origin(
        np.array([1.0, 2.0, 4.0]), np.array([0.06, 0.12, 0.24])
    ) == pytest.approx(0.06)
    intercept, slope, r2 = linear_fit(np.array([0.0, 1, 2]), np.array([1.0, 3, 5]))
    assert (intercept, slope, r2) == pytest.approx((1.0, 2.0, 1.0))
