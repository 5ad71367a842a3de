"""The fused gradient rows (attnlimits.fused_gradient.gradient_rows) against their plain
references: the exact Jacobian norm (attnlimits.gradient.softmax_jacobian_norm_from_weights,
itself held to dense eigvalsh in tests/test_gradient.py) and Algorithm 5's finite differences
(attnlimits.protocol.row_sensitivity), on rows with masked keys, ties, near one-hot rows whose
weights underflow, one visible key, and temperatures from 0.001 to 100."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlimits import fused_gradient as fused
from attnlimits.fused_gradient import EXP_FLOOR
from attnlimits.gradient import softmax, softmax_jacobian_norm_from_weights
from attnlimits.protocol import row_sensitivity, unit_directions

pytestmark = pytest.mark.unit

EPSILONS = np.array([0.001, 0.1, 10.0])
TEMPERATURES = [0.001, 0.00316, 0.01, 0.1, 1.0, 10.0, 100.0]
# The Jacobian norm is a root found to 8e-16 of its bracket: both find it to 1e-12 relative
RTOL = 1e-12
# g is ||softmax((l + eps v)/T) - a|| / eps: each weight carries a few units of rounding (u) in
# either implementation, whose sums run in another order, so the difference is known to
# ~u ||a|| whatever its size: 64 u ||a|| / eps absolute on top of RTOL (both are this far from
# the exact g; neither is the more accurate)
G_ABSOLUTE = 64 * np.finfo(np.float64).eps


def rows_of(seed, rows, width, *, causal, tied, scale):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((rows, width)) * scale
    if tied:
        logits[:, ::2] = logits[:, :1]
    visible = np.full(rows, width)
    if causal:
        visible = np.minimum(np.arange(rows) % width + 1, width)
        logits[np.arange(width)[None, :] >= visible[:, None]] = -np.inf
    directions = unit_directions(rng, rows, visible, width)
    return logits, directions


def plain(logits, directions, temperature):
    base = softmax(logits, temperature)
    jac = softmax_jacobian_norm_from_weights(base) / temperature
    g = row_sensitivity(
        logits, directions, temperature=temperature, epsilons=list(EPSILONS), base=base
    )
    return jac, g


def assert_rows_match(logits, directions, temperature):
    got_jac, got_g = fused.gradient_rows(logits, directions, temperature, EPSILONS)
    want_jac, want_g = plain(logits, directions, temperature)
    np.testing.assert_allclose(got_jac, want_jac, rtol=RTOL, atol=0.0)
    norm_a = np.linalg.norm(softmax(logits, temperature), axis=1)
    bound = RTOL * np.abs(want_g) + G_ABSOLUTE * norm_a[None, :] / EPSILONS[:, None]
    assert (np.abs(got_g - want_g) <= bound).all(), (got_g, want_g, bound)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.integers(1, 8),
    width=st.integers(1, 60),
    causal=st.booleans(),
    tied=st.booleans(),
    holes=st.booleans(),
    scale=st.sampled_from([0.0, 0.5, 3.0, 40.0, 400.0, 4000.0]),
    temperature=st.sampled_from([*TEMPERATURES, 0.0316, 0.316, 3.16, 31.6]),
    seed=st.integers(0, 2**16),
)
def test_fused_rows_match_the_plain_references(
    rows, width, causal, tied, holes, scale, temperature, seed
):
    """Masked tails, masked keys inside a row (the kernel passes over keys that weigh nothing),
    ties, and rows whose weights underflow at small T under one eps and not another."""
    logits, directions = rows_of(seed, rows, width, causal=causal, tied=tied, scale=scale)
    if holes:
        logits[:, 1::3] = -np.inf
        directions[:, 1::3] = 0.0
        logits[:, 0] = np.maximum(logits[:, 0], 0.0)  # a visible key in every row
    assert_rows_match(logits, directions, temperature)


def test_hand_made_rows():
    """A single visible key (||J|| = 0), a two-way tie (1/(2T)), a uniform row of 4 keys
    (1/(4T)) and a near one-hot row whose other weights underflow to exactly 0."""
    minus = -np.inf
    logits = np.array(
        [
            [0.3, minus, minus, minus],
            [2.0, 2.0, minus, minus],
            [1.0, 1.0, 1.0, 1.0],
            [900.0, 0.0, 1.0, minus],
        ]
    )
    visible = np.isfinite(logits).sum(axis=1)
    directions = unit_directions(np.random.default_rng(0), 4, visible, 4)
    for temperature in (0.01, 1.0):
        jac, _ = fused.gradient_rows(logits, directions, temperature, EPSILONS)
        assert jac[0] == 0.0
        assert jac[1] == pytest.approx(1 / (2 * temperature), rel=1e-14)
        assert jac[2] == pytest.approx(1 / (4 * temperature), rel=1e-14)
        assert_rows_match(logits, directions, temperature)
    jac, _ = fused.gradient_rows(logits, directions, 1.0, EPSILONS)
    assert jac[3] == 0.0  # the other weights are exactly 0: a one-hot row


@pytest.mark.parametrize("part", [0, 1])
def test_a_drifting_kernel_is_caught(monkeypatch, part):
    """The comparison can fail: a Jacobian norm or a g off by one part in 1e9 is refused."""
    original = fused.gradient_rows

    def drifted(*args):
        got = list(original(*args))
        got[part] = got[part] * (1 + 1e-9)
        return tuple(got)

    monkeypatch.setattr(fused, "gradient_rows", drifted)
    logits, directions = rows_of(1, 6, 12, causal=True, tied=False, scale=1.0)
    with pytest.raises(AssertionError):
        assert_rows_match(logits, directions, 0.1)


def test_rows_the_reference_makes_nan_are_nan():
    """A NaN or +inf logit, an overflowing l / T, or a row with no visible key: the reference's
    weights are NaN there, and so are the fused row's statistics (never a number, never -inf
    passing a check)."""
    minus = -np.inf
    logits = np.array(
        [
            [1.0, np.nan, 0.5],
            [1.0, np.inf, 0.5],
            [1e308, -1e308, 0.0],
            [minus, minus, minus],
            [1.0, 0.0, minus],
        ]
    )
    directions = np.zeros_like(logits)
    directions[:, 0] = 1.0
    with np.errstate(invalid="ignore", over="ignore"):
        want_jac, want_g = plain(logits, directions, 1e-3)
    got_jac, got_g = fused.gradient_rows(logits, directions, 1e-3, EPSILONS)
    assert np.isnan(want_jac[:4]).all() and np.isnan(got_jac[:4]).all()
    assert np.isnan(got_g[:, :4]).all()
    assert np.isfinite(got_jac[4]) and got_jac[4] == pytest.approx(want_jac[4], rel=RTOL)


def test_the_kernel_keeps_the_keys_a_large_eps_lifts():
    """At T = 0.001 a key 0.3 below the maximum weighs 0 (exp(-300)) in the base row, and
    eps = 10 along a direction that favours it lifts it to the top: g sees it, as the plain
    reference does."""
    logits = np.array([[1.0, 0.7, -5.0, 0.9]])
    directions = np.array([[-0.5, 0.5, 0.5, -0.5]])
    _, g = fused.gradient_rows(logits, directions, 0.001, EPSILONS)
    assert g[2, 0] > 0.1  # the moved row's weight went to another key
    assert_rows_match(logits, directions, 0.001)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.floats(-720.0, 0.0),
            st.floats(-1e-6, 0.0),
            st.sampled_from([0.0, -0.0, EXP_FLOOR, np.nextafter(EXP_FLOOR, 0.0), -709.0, -np.inf]),
        ),
        min_size=1,
        max_size=70,
    )
)
def test_exp_nonpositive_is_within_one_ulp_of_numpy(values):
    """The vectorised exp against np.exp: within 1 ulp above EXP_FLOOR, exactly 0 below."""
    x = np.array(values)
    out = np.empty_like(x)
    fused.exp_nonpositive(x, out, len(x))
    want = np.where(x >= EXP_FLOOR, np.exp(np.maximum(x, EXP_FLOOR)), 0.0)
    assert (out[x < EXP_FLOOR] == 0.0).all()
    kept = x >= EXP_FLOOR
    assert (np.abs(out[kept] - want[kept]) <= np.spacing(want[kept])).all()


def test_a_direction_that_is_not_finite_gives_nan_g():
    """A NaN or infinite entry in a row's direction, on a visible or a masked key: the
    reference's moved logits (or its softmax) are NaN there, and the kernel's g is NaN; the
    Jacobian norm does not read the direction and stays the reference's."""
    minus = -np.inf
    logits = np.array([[1.0, 0.5, 0.2, minus]] * 4)
    directions = np.array(
        [
            [0.5, np.nan, 0.5, 0.0],
            [0.5, 0.5, 0.5, np.nan],
            [0.5, np.inf, 0.5, 0.0],
            [0.5, 0.5, -0.5, 0.5],
        ]
    )
    jac, g = fused.gradient_rows(logits, directions, 1.0, EPSILONS)
    assert np.isnan(g[:, :3]).all() and np.isfinite(g[:, 3]).all()
    with np.errstate(invalid="ignore"):
        want_jac, _ = plain(logits, directions, 1.0)
    np.testing.assert_allclose(jac, want_jac, rtol=RTOL)


def test_exp_nonpositive_keeps_nan():
    x = np.array([np.nan, -1.0, np.nan, -800.0])
    out = np.empty_like(x)
    fused.exp_nonpositive(x, out, len(x))
    assert np.isnan(out[[0, 2]]).all() and out[3] == 0.0
    assert out[1] == pytest.approx(np.exp(-1.0), rel=3e-16)
