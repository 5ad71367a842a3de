"""Softmax sensitivity: exact Jacobian norm, finite differences, and the paper's bound."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attnlimits.gradient import (
    corollary3_bound,
    finite_difference_sensitivity,
    gershgorin_bound,
    random_unit_directions,
    softmax,
    softmax_jacobian_norm,
    softmax_jacobian_norm_from_weights,
)

pytestmark = pytest.mark.unit


def dense_norm(logits, t):
    a = softmax(logits, t)
    return np.linalg.eigvalsh(np.diag(a) - np.outer(a, a)).max() / t


def test_softmax_rows_sum_to_one_and_survive_large_logits():
    a = softmax(np.array([[1000.0, 0.0, -1000.0]]), 0.01)
    np.testing.assert_allclose(a.sum(), 1.0)
    assert a[0, 0] == pytest.approx(1.0)


def test_uniform_weights():
    # a = 1/L: J = (I - 11^T/L)/L has norm 1/L (eigenvector orthogonal to 1)
    assert softmax_jacobian_norm(np.zeros((1, 4)), 1.0)[0] == pytest.approx(0.25)


def test_two_way_tie_breaks_the_paper_bound():
    # a = (1/2, 1/2): J = [[1/4, -1/4], [-1/4, 1/4]] / T has norm 1/(2T) > 1/(4T).
    # This is the counterexample to Corollary 3 recorded in docs/paper-notes.md.
    for t in (0.01, 0.1, 1.0, 10.0):
        norm = softmax_jacobian_norm(np.array([[3.0, 3.0]]), t)[0]
        assert norm == pytest.approx(1 / (2 * t))
        assert norm > corollary3_bound(t)
        assert norm <= gershgorin_bound(t) * (1 + 1e-12)


def test_one_hot_has_zero_jacobian():
    assert softmax_jacobian_norm_from_weights(np.array([[1.0, 0.0, 0.0]]))[0] == pytest.approx(
        0.0, abs=1e-12
    )


def test_paper_bound_values():
    assert corollary3_bound(1.0) == pytest.approx(0.25)
    assert corollary3_bound(0.01) == pytest.approx(np.sqrt(2))


@given(
    arrays(
        np.float64,
        st.tuples(st.integers(1, 3), st.integers(2, 12)),
        elements=st.floats(-20, 20, width=64),
    ),
    st.sampled_from([0.01, 0.1, 1.0, 5.0]),
)
def test_exact_norm_matches_eigvalsh(logits, t):
    got = softmax_jacobian_norm(logits, t)
    want = [dense_norm(row, t) for row in logits]
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-12)
    assert np.all(got <= gershgorin_bound(t) * (1 + 1e-9))


def test_finite_difference_approaches_the_directional_derivative(rng):
    logits = rng.normal(size=(2, 6))
    u = random_unit_directions(3, 6, rng)
    g = finite_difference_sensitivity(logits, temperature=0.5, eps=1e-6, directions=u)
    for s in range(2):
        a = softmax(logits[s], 0.5)
        jac = (np.diag(a) - np.outer(a, a)) / 0.5
        np.testing.assert_allclose(g[s], np.linalg.norm(u @ jac, axis=1), rtol=1e-4)
        assert np.all(g[s] <= softmax_jacobian_norm(logits[s : s + 1], 0.5)[0] * (1 + 1e-4))


def test_finite_difference_is_capped_by_sqrt2_over_eps(rng):
    # two points of the simplex are at most sqrt(2) apart
    g = finite_difference_sensitivity(
        rng.normal(size=(4, 5)) * 50,
        temperature=0.01,
        eps=10.0,
        directions=random_unit_directions(8, 5, rng),
    )
    assert np.all(g <= np.sqrt(2) / 10.0 + 1e-12)


def sigmoid_change(y, step):
    """sigma(y + step) - sigma(y) without cancellation: e^y expm1(step) / ((1 + e^(y+step))(1 + e^y))."""
    return np.exp(y) * np.expm1(step) / ((1 + np.exp(y + step)) * (1 + np.exp(y)))


@pytest.mark.parametrize(
    "eps, t",
    [
        (1e-3, 1.0),  # max |d| <= 1: expm1 of the shared exponentials
        (5.0, 1.0),  # 1 < max |d| <= 30: exp of the shared exponentials
        (50.0, 1.0),  # max |d| > 30: every perturbed softmax evaluated directly
    ],
)
def test_finite_difference_on_a_near_one_hot_pair(eps, t):
    # L = 2, logits (0, -50), u = (1, -1)/sqrt 2: softmax is (sigma(z1 - z2), sigma(z2 - z1)), so
    # both entries change by sigma(-50 - sqrt2 eps) - sigma(-50) (opposite signs) and
    # g = sqrt2 |that| / eps. The larger weight is 1.0 in float64 before and after, so
    # subtracting the two softmax vectors would lose its change and give g / sqrt 2.
    z = -50.0 / t
    want = np.sqrt(2) * abs(sigmoid_change(z, -np.sqrt(2) * eps / t)) / eps
    u = np.array([[1.0, -1.0]]) / np.sqrt(2)
    got = finite_difference_sensitivity(
        np.array([[0.0, -50.0]]), temperature=t, eps=eps, directions=u
    )[0, 0]
    assert got == pytest.approx(want, rel=1e-12, abs=0.0)


def reference_finite_difference(logits, t, eps, directions):
    """g(T, eps) by the definition, one sample and one direction at a time."""
    out = np.empty((len(logits), len(directions)))
    for s, row in enumerate(logits):
        for k, u in enumerate(directions):
            moved = np.exp((row + eps * u) / t - ((row + eps * u) / t).max())
            base = np.exp(row / t - (row / t).max())
            diff = moved / moved.sum() - base / base.sum()
            out[s, k] = np.sqrt((diff**2).sum()) / eps
    return out


@given(
    arrays(
        np.float64,
        st.tuples(st.integers(1, 4), st.integers(2, 9)),
        elements=st.floats(-4, 4, width=64),
    ),
    st.sampled_from([0.3, 1.0, 4.0]),
    st.sampled_from([0.05, 1.0, 20.0, 200.0]),
    st.integers(0, 2**32 - 1),
)
def test_finite_difference_matches_a_reference_loop(logits, t, eps, seed):
    # Weights stay above e^-27 here, where subtracting the softmax vectors loses nothing that
    # matters at this tolerance; eps spans all three evaluation regimes.
    u = random_unit_directions(3, logits.shape[1], np.random.default_rng(seed))
    got = finite_difference_sensitivity(logits, temperature=t, eps=eps, directions=u)
    want = reference_finite_difference(logits, t, eps, u)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-14 / eps)


def test_directions_are_unit_and_seeded():
    a = random_unit_directions(4, 7, np.random.default_rng(3))
    b = random_unit_directions(4, 7, np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0)


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_nonpositive_temperature_and_eps_are_refused(bad):
    with pytest.raises(ValueError):
        softmax(np.zeros((1, 2)), bad)
    with pytest.raises(ValueError):
        finite_difference_sensitivity(
            np.zeros((1, 2)), temperature=1.0, eps=bad, directions=np.ones((1, 2)) / np.sqrt(2)
        )


@pytest.mark.parametrize("gap", [1e-3, 1.0, 25.78, 40.0, 800.0])
def test_newton_solver_near_the_pole(gap):
    # Two dominant logits `gap` apart plus a tail: the root sits ~e^-gap from the pole delta_(2),
    # where a Newton iteration started at the wrong side would crawl (found by hypothesis at 25.78).
    logits = np.array([[gap, 0.0, -3.0, -5.0, -5.0], [0.0, gap, -40.0, -1.0, 2.0 - gap]])
    for t in (0.01, 0.1, 1.0):
        want = [dense_norm(row, t) for row in logits]
        np.testing.assert_allclose(softmax_jacobian_norm(logits, t), want, rtol=1e-7, atol=1e-12)


def test_newton_solver_on_wide_rows(rng):
    # Rows as long as the paper's (L = 1024 would make eigvalsh slow; 256 keeps the test quick).
    logits = rng.normal(scale=4.0, size=(6, 256))
    for t in (0.001, 0.1, 1.0, 100.0):
        want = [dense_norm(row, t) for row in logits]
        np.testing.assert_allclose(softmax_jacobian_norm(logits, t), want, rtol=1e-7, atol=1e-12)


def _mpmath_jacobian_norm(logit_row, t, digits):
    """lambda_max(diag(a) - a a^T) / T from the logits, every step at ``digits`` digits."""
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(digits):
        z = [mpmath.mpf(float(v)) / mpmath.mpf(t) for v in logit_row]
        top = max(z)
        e = [mpmath.exp(v - top) for v in z]
        total = mpmath.fsum(e)
        a = [v / total for v in e]
        n = len(a)
        jac = mpmath.matrix(n, n)
        for i in range(n):
            for j in range(n):
                jac[i, j] = (a[i] if i == j else 0) - a[i] * a[j]
        return float(max(mpmath.eigsy(jac, eigvals_only=True)) / mpmath.mpf(t))


@pytest.mark.parametrize("t", [1.0, 0.1, 0.0316, 0.01, 0.003])
def test_exact_norm_keeps_relative_accuracy_on_near_one_hot_rows(t):
    # Logit gaps of ~0.1-2 at small T make rows whose norm is far below 1e-8: the shifted secular
    # solver (lam = d_1 - tau with d_1 ~ 1) returned 0 or values 100+ decades too small on these.
    rng = np.random.default_rng(7)
    logits = rng.normal(0.0, 0.6, size=(6, 7))
    logits[:, 0] += np.linspace(0.4, 2.5, 6)  # one token leads by a growing margin
    got = softmax_jacobian_norm(logits, t)
    want = np.array([_mpmath_jacobian_norm(row, t, digits=450) for row in logits])
    assert np.all(want > 0)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)
    np.testing.assert_allclose(np.median(got), np.median(want), rtol=1e-6, atol=0)


def test_exact_norm_of_a_two_token_row_at_the_underflow_edge():
    # a = (1 - e, e) has ||J|| = 2 a_1 a_2 exactly; e = exp(-700) is far below float64's epsilon.
    got = softmax_jacobian_norm_from_weights(np.array([[1.0, np.exp(-700.0)]]))[0]
    assert got == pytest.approx(2 * np.exp(-700.0), rel=1e-14, abs=0)


@settings(max_examples=30, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.just(1), st.integers(2, 6)), elements=st.floats(-3, 3)),
    st.sampled_from([0.003, 0.01, 0.05, 1.0]),
)
def test_exact_norm_matches_450_digit_arithmetic(logits, t):
    got = softmax_jacobian_norm(logits, t)[0]
    want = _mpmath_jacobian_norm(logits[0], t, digits=450)
    if want < 1e-300:  # below float64's range: the weights themselves underflow
        return
    assert got == pytest.approx(want, rel=1e-9, abs=0)


def test_corollary3_wide_rows_start_where_near_uniform_rows_stop_violating():
    """A near-uniform row of 4 keys violates min{1/(4T), sqrt 2} whatever its logits (uniform:
    T ||J|| = 1/4, and any perturbation raises it); of 5 keys it does not (1/5): the rows counted
    apart start at COROLLARY3_WIDE_ROW_KEYS = 5."""
    from attnlimits.gradient import (
        COROLLARY3_WIDE_ROW_KEYS,
        corollary3_bound,
        softmax,
        softmax_jacobian_norm_from_weights,
    )

    rng = np.random.default_rng(0)
    assert COROLLARY3_WIDE_ROW_KEYS == 5
    for keys, violated in ((4, True), (5, False)):
        z = rng.standard_normal((500, keys)) * 0.05
        norms = softmax_jacobian_norm_from_weights(softmax(z, 1.0))
        assert bool(np.all(norms > corollary3_bound(1.0) * (1 + 1e-9))) is violated
