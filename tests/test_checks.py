"""Bound checks: holds, violated, not testable; and Corollary 1 compared in log space."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlimits.checks import (
    HOLDS,
    NOT_TESTABLE,
    RTOL_FLOAT32,
    RTOL_FLOAT64,
    VIOLATED,
    check_bound,
)
from attnlimits.vanishing import vanishing


def test_hand_cases():
    got = check_bound([1.0, 2.0, 2.0 + 1e-12, np.nan], [2.0, 1.0, 2.0, 1.0], upper=True, rtol=1e-9)
    assert got.tolist() == [HOLDS, VIOLATED, HOLDS, None]
    got = check_bound([1.0, 0.5], [0.5, 1.0], upper=False, rtol=1e-9)
    assert got.tolist() == [HOLDS, VIOLATED]


def test_a_bound_inside_the_tolerance_of_the_range_is_not_testable():
    # A lower bound of 1e-74 on a non-negative quantity of size ~1: tol = 1e-9 exceeds the bound,
    # so no value could fail it.
    assert check_bound([1.0], [1e-74], upper=False, rtol=1e-9, floor=0.0).tolist() == [NOT_TESTABLE]
    # ...while a bound above the tolerance is tested.
    assert check_bound([1.0], [1e-3], upper=False, rtol=1e-9, floor=0.0).tolist() == [HOLDS]
    # an upper bound at or above the quantity's ceiling, or infinite, cannot fail either
    assert check_bound([0.9, 0.9], [1.0, 0.95], upper=True, rtol=1e-9, ceiling=1.0).tolist() == [
        NOT_TESTABLE,
        HOLDS,
    ]
    assert check_bound([5.0], [np.inf], upper=True, rtol=1e-9).tolist() == [NOT_TESTABLE]
    # a value outside the range is still a violation, testable or not
    assert check_bound([-1.0], [-2.0], upper=False, rtol=1e-9, floor=0.0).tolist() == [NOT_TESTABLE]
    assert check_bound([-1.0], [0.0], upper=False, rtol=1e-9, floor=0.0).tolist() == [VIOLATED]


@given(
    st.floats(-1e6, 1e6, allow_nan=False),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.booleans(),
)
def test_matches_a_plain_comparison(value, bound, upper):
    tol = RTOL_FLOAT64 * (abs(value) + abs(bound))
    ok = value <= bound + tol if upper else value >= bound - tol
    assert check_bound([value], [bound], upper=upper, rtol=RTOL_FLOAT64).tolist() == [
        HOLDS if ok else VIOLATED
    ]


def old_absolute_slack_holds(value, bound):
    """The lower-bound rule this project used before: value >= bound - 1e-9 max(1, |bound|)."""
    return value >= bound - 1e-9 * max(1.0, abs(bound))


def test_corollary1_violation_far_below_1e9_is_caught():
    # L alpha_min = 2 e^-120 / (1 + e^-120) ~ 1.5e-52, but a (wrong) Delta/T = 50 claims it is at
    # least e^-100 ~ 3.7e-44: a violation, which an absolute slack of 1e-9 swallowed.
    logits = np.array([[0.0, -120.0]])
    delta = np.array([50.0])
    res = vanishing(logits, delta_over_t=delta)
    assert old_absolute_slack_holds(res.min_scaled[0], res.lower_bound[0])
    got = check_bound(res.log_min_scaled, -2 * delta, upper=False, rtol=RTOL_FLOAT32)
    assert got.tolist() == [VIOLATED]


def test_corollary1_holds_where_float32_weights_underflow():
    # e^-110 ~ 1.7e-48 is below float32's smallest subnormal: the model's own weight is 0, yet
    # the true L alpha_min ~ 3.2e-48 satisfies the bound e^-120 ~ 7.7e-53.
    logits = np.array([[0.0, -110.0]], dtype=np.float32)
    assert np.exp(logits.astype(np.float32)).min() == 0.0
    delta = np.array([60.0])
    res = vanishing(logits, delta_over_t=delta)
    assert res.min_scaled[0] == pytest.approx(2 * np.exp(-110.0) / (1 + np.exp(-110.0)), rel=1e-12)
    assert check_bound(res.log_min_scaled, -2 * delta, upper=False, rtol=RTOL_FLOAT32).tolist() == [
        HOLDS
    ]


def test_log_space_quantities_match_high_precision():
    mpmath = pytest.importorskip("mpmath")
    logits = np.array([[3.0, -200.0, 1.5, -350.0, 0.0]])
    res = vanishing(logits, delta_over_t=np.array([400.0]))
    with mpmath.workdps(60):
        e = [mpmath.exp(mpmath.mpf(v)) for v in logits[0]]
        total = mpmath.fsum(e)
        want_min = float(mpmath.log(5 * min(e) / total))
        want_max = float(mpmath.log(5 * max(e) / total))
    assert res.log_min_scaled[0] == pytest.approx(want_min, rel=1e-14)
    assert res.log_max_scaled[0] == pytest.approx(want_max, rel=1e-14)
