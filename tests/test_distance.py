"""Theorem 1 quantities: hand-computed cases and property tests against plain loops."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from strategies import attention_samples

from attnlimits import distance as dist
from attnlimits import reference as ref
from attnlimits.selection import top_n_indices, top_n_mask

pytestmark = pytest.mark.unit


def one(alpha, x):
    return np.asarray([alpha], dtype=float), np.asarray([x], dtype=float)


class TestSelection:
    def test_ties_go_to_the_lower_index(self):
        assert top_n_indices(np.array([[0.25, 0.25, 0.25, 0.25]]), 2).tolist() == [[0, 1]]
        assert top_n_indices(np.array([[0.1, 0.45, 0.45]]), 1).tolist() == [[1]]

    def test_order_is_by_decreasing_weight(self):
        assert top_n_indices(np.array([[0.1, 0.6, 0.3]]), 3).tolist() == [[1, 2, 0]]

    @pytest.mark.parametrize("n", [0, 4])
    def test_n_out_of_range_is_refused(self, n):
        with pytest.raises(ValueError, match="1 <= N <= L"):
            top_n_indices(np.ones((1, 3)) / 3, n)
        with pytest.raises(ValueError, match="1 <= N <= L"):
            top_n_mask(np.ones((1, 3)) / 3, n)

    def test_mask_ties_go_to_the_lower_index(self):
        # the n-th largest weight 0.25 is tied four ways: the two lowest indices of the tie
        alpha = np.array([[0.25, 0.05, 0.25, 0.4, 0.25, 0.25]])
        assert top_n_mask(alpha, 3).tolist() == [[True, False, True, True, False, False]]
        assert top_n_mask(alpha, 6).all()
        assert top_n_mask(np.array([[0.5, np.nan, 0.5]]), 1).tolist() == [[True, False, False]]

    @given(
        st.integers(1, 40).flatmap(
            lambda length: st.tuples(
                arrays(
                    np.float64,
                    st.tuples(st.integers(1, 4), st.just(length)),
                    elements=st.sampled_from([0.0, 0.1, 0.25, 0.3, np.nan]),
                ),
                st.integers(1, length),
            )
        )
    )
    def test_mask_is_the_sorted_top_n(self, case):
        # few distinct values, so most rows have ties at the n-th weight (and some a NaN)
        alpha, n = case
        want = np.zeros(alpha.shape, dtype=bool)
        for s, row in enumerate(alpha):
            want[s, top_n_indices(row[None, :], n)[0]] = True
        np.testing.assert_array_equal(top_n_mask(alpha, n), want)


class TestDistanceHandCases:
    def test_scalar_example(self):
        # I_1 = {0}, s = 0.5; d~ = |0.3*2 - 0.5| + |0.2*3 - 0.5| = 0.1 + 0.1
        a, x = one([0.5, 0.3, 0.2], [[1.0], [2.0], [3.0]])
        assert dist.distance_to_context(a, x, n=1)[0] == pytest.approx(0.2)

    def test_one_hot_weights(self):
        # s = x_0; every other token sits at 0, so d~ = (L - 1) ||x_0||
        a, x = one([1.0, 0.0, 0.0], [[3.0, 4.0], [1.0, 1.0], [-2.0, 0.0]])
        assert dist.distance_to_context(a, x, n=1)[0] == pytest.approx(10.0)

    def test_two_way_tie_selects_lower_index(self):
        # alpha = (1/2, 1/2), x = (1, -1): I_1 = {0}, s = 1/2, d~ = |-1/2 - 1/2| = 1
        a, x = one([0.5, 0.5], [[1.0], [-1.0]])
        assert dist.distance_to_context(a, x, n=1)[0] == pytest.approx(1.0)

    def test_uniform_weights_n_equals_l_minus_1(self):
        # L = 4, alpha = 1/4, x = (1, 2, 3, 4): I_3 = {0, 1, 2}, s = 6/4, d~ = |1 - 1.5| = 0.5
        a, x = one([0.25] * 4, [[1.0], [2.0], [3.0], [4.0]])
        assert dist.distance_to_context(a, x, n=3)[0] == pytest.approx(0.5)

    def test_selected_mass_follows_the_tie_rule(self):
        # top-2 of (0.2, 0.3, 0.3, 0.2) is {1, 2}: mass 0.6; top-3 adds index 0 (tie to the lower)
        a, x = one([0.2, 0.3, 0.3, 0.2], [[1.0], [2.0], [3.0], [4.0]])
        assert dist.selected_mass(a, x, n=2)[0] == pytest.approx(0.6)
        assert dist.selected_mass(a, x, n=4)[0] == pytest.approx(1.0)

    def test_fixed_set_bound_is_tight_on_antipodal_pair(self):
        # alpha = (0.9, 0.1), x = (e, -e): d~ = |-0.1 - 0.9| = 1; d1 = 2;
        # bound = 0.1 * 2 + 1 * (0.9 * 1 - 0.1) = 1.0
        a, x = one([0.9, 0.1], [[1.0], [-1.0]])
        assert dist.distance_to_context(a, x, n=1)[0] == pytest.approx(1.0)
        assert dist.fixed_set_upper_bound(a, x, n=1)[0] == pytest.approx(1.0)

    def test_expectation_term_and_true_expectation_differ(self):
        # alpha = (1/2, 1/2), x = (1, -1), N = 1: xbar = 0; term = 1/2 (|1.5| + |-1.5|) = 1.5,
        # while both subsets give d~ = 1, so E = 1 and the residual eps is -0.5.
        a, x = one([0.5, 0.5], [[1.0], [-1.0]])
        assert dist.expectation_term(a, x, n=1)[0] == pytest.approx(1.5)
        assert ref.exact_expected_distance(a[0], x[0], 1) == pytest.approx(1.0)
        # eps bound: each i contributes 0.25 / 1; 0.5 * (1 - 1/2) * 1 * 0.5 = 0.125
        assert dist.epsilon_bound(a, x, n=1)[0] == pytest.approx(0.125)

    def test_monte_carlo_matches_enumeration(self, rng):
        a, x = one([0.4, 0.3, 0.2, 0.1], [[1.0, 0.0], [0.0, 2.0], [-1.0, 1.0], [3.0, -1.0]])
        exact = ref.exact_expected_distance(a[0], x[0], 2)
        est = dist.monte_carlo_expected_distance(a, x, n=2, draws=4000, rng=rng)
        assert abs(est.mean[0] - exact) < 4 * est.stderr[0] + 1e-12

    def test_strata_of_one_set_each_give_the_exact_value(self, rng):
        # L = 2, N = 1: stratum 1 is {the heavier token}, stratum 0 {the other}; P = 1/2 each.
        a, x = one([0.7, 0.3], [[1.0], [-2.0]])
        est = dist.monte_carlo_expected_distance(a, x, n=1, draws=1, rng=rng)
        assert est.mean[0] == pytest.approx(ref.exact_expected_distance(a[0], x[0], 1), abs=1e-15)
        assert est.stderr[0] == 0.0 and est.draws[0] == 4

    def test_shape_errors_are_explicit(self):
        with pytest.raises(ValueError, match="expected alpha"):
            dist.distance_to_context(np.ones((2, 3)), np.ones((2, 4, 1)), n=1)


class TestDistanceProperties:
    @given(attention_samples(), st.data())
    def test_distance_matches_loop(self, sample, data):
        alpha, x = sample
        n = data.draw(st.integers(1, alpha.shape[1] - 1))
        got = dist.distance_to_context(alpha, x, n=n)
        want = [
            ref.distance(alpha[s], x[s], set(ref.top_n(alpha[s], n))) for s in range(len(alpha))
        ]
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)

    @given(attention_samples(), st.data())
    def test_upper_bound_matches_loop(self, sample, data):
        alpha, x = sample
        n = data.draw(st.integers(1, alpha.shape[1] - 1))
        got = dist.fixed_set_upper_bound(alpha, x, n=n)
        want = [ref.upper_bound(alpha[s], x[s], n) for s in range(len(alpha))]
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)

    @given(attention_samples(), st.data())
    def test_expectation_term_and_epsilon_match_loop(self, sample, data):
        alpha, x = sample
        n = data.draw(st.integers(1, alpha.shape[1] - 1))
        np.testing.assert_allclose(
            dist.expectation_term(alpha, x, n=n),
            [ref.expectation_term(alpha[s], x[s], n) for s in range(len(alpha))],
            rtol=1e-9,
            atol=1e-12,
        )
        np.testing.assert_allclose(
            dist.epsilon_bound(alpha, x, n=n),
            [ref.epsilon_bound(alpha[s], x[s], n) for s in range(len(alpha))],
            rtol=1e-7,
            atol=1e-12,
        )

    @given(attention_samples(max_len=6), st.data(), st.sampled_from(["dense", "complement"]))
    def test_monte_carlo_is_unbiased(self, sample, data, path):
        alpha, x = sample
        n = data.draw(st.integers(1, alpha.shape[1] - 1))
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
        # Both evaluation paths (small complement, products against every token) on each case.
        fraction = -1.0 if path == "dense" else 1.0
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(dist, "_COMPLEMENT_FRACTION", fraction)
            mean, se, _ = dist.monte_carlo_expected_distance(alpha, x, n=n, draws=3000, rng=rng)
        exact = np.array(
            [ref.exact_expected_distance(alpha[s], x[s], n) for s in range(len(alpha))]
        )
        # 5 standard errors: a false alarm has probability ~1e-6 per sample
        assert np.all(np.abs(mean - exact) <= 5 * se + 1e-9 * (1 + np.abs(exact)))

    @given(attention_samples())
    def test_selected_set_is_the_top_mass(self, sample):
        alpha, _ = sample
        n = max(1, alpha.shape[1] // 2)
        mask = top_n_mask(alpha, n)
        # no unselected weight exceeds a selected one
        assert np.all(
            np.where(mask, alpha, np.inf).min(axis=1) >= np.where(mask, -np.inf, alpha).max(axis=1)
        )


@given(st.integers(1, 60), st.integers(0, 2**32 - 1))
def test_random_subsets_are_distinct_and_in_range(length, seed):
    from attnlimits.selection import random_subset_indices

    rng = np.random.default_rng(seed)
    for n in {1, max(1, length // 2), length}:
        idx = random_subset_indices((7, 3), length=length, n=n, rng=rng)
        assert idx.shape == (7, 3, n) and idx.min() >= 0 and idx.max() < length
        assert all(len(set(row)) == n for row in idx.reshape(-1, n).tolist())


@pytest.mark.parametrize("n", [2, 60])  # Floyd's algorithm and the key-ranking branch
def test_random_subsets_are_uniform(n):
    from attnlimits.selection import random_subset_indices

    idx = random_subset_indices(
        (40000,), length=64 if n > 48 else 5, n=n, rng=np.random.default_rng(5)
    )
    length = 64 if n > 48 else 5
    counts = np.bincount(idx.reshape(-1), minlength=length) / len(idx)
    np.testing.assert_allclose(counts, n / length, atol=0.01)


class TestMaxCrossDistance:
    """d1 is screened in float32 and decided in float64: it must equal the float64 brute force
    exactly, including when many pairs lie within float32 rounding of the maximum."""

    @staticmethod
    def brute(x, mask):
        out = []
        for s in range(len(x)):
            sel, rest = x[s, mask[s]], x[s, ~mask[s]]
            diff = rest[:, None, :] - sel[None, :, :]
            out.append(np.sqrt(np.einsum("ijd,ijd->ij", diff, diff).max()))
        return np.array(out)

    @pytest.mark.parametrize("magnitude", [1.0, 1e-3, 1e20])
    def test_near_ties_are_decided_exactly(self, magnitude):
        rng = np.random.default_rng(7)
        s, length, d, n = 5, 64, 16, 8
        # antipodal clusters: every cross pair's distance is 2 up to ~1e-9, far below float32's
        # resolution, so the screening alone cannot tell the maximiser
        base = rng.standard_normal(d)
        base /= np.linalg.norm(base)
        signs = np.where(np.arange(length) % 2 == 0, 1.0, -1.0)
        x = (signs[None, :, None] * base + 1e-9 * rng.standard_normal((s, length, d))) * magnitude
        alpha = rng.dirichlet(np.ones(length), size=s)
        w = dist.weighted(alpha, x)
        idx, mask = w.top_n(n)
        got = dist._max_cross_distance(w, idx, mask)
        # float32 alone is off by ~1e-7 here; the float64 decision agrees to the last bits
        np.testing.assert_allclose(got, self.brute(x, mask), rtol=1e-14, atol=0)

    @given(attention_samples(), st.data())
    def test_matches_brute_force(self, sample, data):
        alpha, x = sample
        n = data.draw(st.integers(1, alpha.shape[1] - 1))
        w = dist.weighted(alpha, x)
        idx, mask = w.top_n(n)
        np.testing.assert_allclose(
            dist._max_cross_distance(w, idx, mask), self.brute(x, mask), rtol=1e-14, atol=0
        )


@pytest.mark.parametrize("length, n, m", [(5, 2, 4), (12, 11, 4), (40, 2, 4), (9, 3, 0), (7, 6, 6)])
def test_strata_probabilities_are_a_partition(length, n, m):
    # P_h counted by enumeration: h = rank of the heaviest selected token among the first m.
    counts = {}
    for subset in itertools.combinations(range(length), n):
        h = min(subset) + 1 if min(subset) < m else 0
        counts[h] = counts.get(h, 0) + 1
    plan = dist._strata_plan(length, n, m, draws=32)
    total = math.comb(length, n)
    assert {h: p for h, p, _ in plan} == pytest.approx({h: c / total for h, c in counts.items()})
    assert all(k >= 2 for _, _, k in plan)


def sink_sample(length=40, d=3, seed=0):
    """A row whose d~ over random sets is heavy-tailed: one token (an attention sink) holds half
    the weight and has a large embedding, so the rare sets that select it have d~ ~ 30x the rest."""
    rng = np.random.default_rng(seed)
    alpha = rng.dirichlet(np.ones(length))
    alpha = 0.5 * alpha / alpha.sum()
    alpha[7] += 0.5
    x = rng.normal(size=(length, d))
    x[7] *= 30.0
    return alpha[None, :], x[None, :, :]


@pytest.mark.parametrize("path", ["dense", "complement"])
def test_monte_carlo_error_is_honest_on_a_heavy_tail(path):
    # Exact E by enumerating every set; then 200 seeded 32-draw estimates. Plain uniform sampling
    # misses the sink in (1 - N/L)^32 = 19% of runs at N = 2 (and states a small error): 20% of
    # runs then fall beyond 3 standard errors. The stratified estimator may miss no more than a
    # normal error would (0.3%; 4% allowed for the few draws behind each stratum's spread).
    alpha, x = sink_sample()
    n = 2 if path == "dense" else 38
    exact = ref.exact_expected_distance(alpha[0], x[0], n)
    beyond = 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dist, "_COMPLEMENT_FRACTION", -1.0 if path == "dense" else 1.0)
        for seed in range(200):
            est = dist.monte_carlo_expected_distance(
                alpha, x, n=n, draws=32, rng=np.random.default_rng(seed)
            )
            beyond += abs(est.mean[0] - exact) > 3 * est.stderr[0]
    assert beyond <= 8, f"{beyond} of 200 estimates beyond 3 standard errors"


def test_monte_carlo_draws_more_where_the_error_is_large():
    alpha, x = sink_sample()
    easy_alpha = np.full((1, 40), 1 / 40)  # uniform weights, equal norms: d~ barely varies
    easy_x = np.ones((1, 40, 3))
    both_alpha = np.concatenate([alpha, easy_alpha])
    both_x = np.concatenate([x, easy_x])
    est = dist.monte_carlo_expected_distance(
        both_alpha,
        both_x,
        n=5,
        draws=16,
        rng=np.random.default_rng(0),
        max_draws=400,
        target_rel_stderr=1e-3,
    )
    assert est.draws[1] < est.draws[0] <= 400
    assert est.stderr[0] <= 1e-3 * est.mean[0] or est.draws[0] > 400 - 16 - 2 * 5
