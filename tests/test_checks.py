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
    VACUOUS,
    VIOLATED,
    check_bound,
    describe_tolerance,
    head_outcomes,
    log10_slack,
    row_outcome_columns,
)
from attnlimits.vanishing import vanishing

pytestmark = pytest.mark.unit


def test_hand_cases():
    got = check_bound([1.0, 2.0, 2.0 + 1e-12, np.nan], [2.0, 1.0, 2.0, 1.0], upper=True, rtol=1e-9)
    assert got.tolist() == [HOLDS, VIOLATED, HOLDS, None]
    got = check_bound([1.0, 0.5], [0.5, 1.0], upper=False, rtol=1e-9)
    assert got.tolist() == [HOLDS, VIOLATED]


def test_a_bound_inside_the_tolerance_of_the_range_is_not_testable():
    # A lower bound of 1e-74 on a non-negative quantity of size ~1: tol = 1e-9 exceeds the
    # bound's distance to the floor, so only values within the tolerance could fail it.
    assert check_bound([1.0], [1e-74], upper=False, rtol=1e-9, floor=0.0).tolist() == [NOT_TESTABLE]
    # ...while a bound above the tolerance is tested.
    assert check_bound([1.0], [1e-3], upper=False, rtol=1e-9, floor=0.0).tolist() == [HOLDS]
    # an upper bound within the tolerance below the quantity's ceiling
    assert check_bound([0.9], [1.0 - 1e-12], upper=True, rtol=1e-9, ceiling=1.0).tolist() == [
        NOT_TESTABLE
    ]
    # a value outside the range is still a violation, testable or not
    assert check_bound([-1.0], [0.0], upper=False, rtol=1e-9, floor=0.0).tolist() == [VIOLATED]
    assert check_bound([-1.0], [1e-3], upper=False, rtol=1e-9, floor=0.0).tolist() == [VIOLATED]


def test_a_check_no_data_could_fail_is_vacuous():
    # an upper bound at or above the quantity's ceiling, or infinite, cannot fail on any data
    assert check_bound([0.9, 0.9], [1.0, 0.95], upper=True, rtol=1e-9, ceiling=1.0).tolist() == [
        VACUOUS,
        HOLDS,
    ]
    assert check_bound([5.0], [np.inf], upper=True, rtol=1e-9).tolist() == [VACUOUS]
    # a lower bound at or below the floor
    assert check_bound([0.5], [-2.0], upper=False, rtol=1e-9, floor=0.0).tolist() == [VACUOUS]
    # Theorem 2's upper bound is never below e^(-1/16): a ratio of 0.5 passes whatever it is
    floor = float(np.exp(-1 / 16))
    got = check_bound(
        [0.5, 0.97, 1.0], [0.95, 0.98, 0.95], upper=True, rtol=1e-9, bound_floor=floor
    )
    assert got.tolist() == [VACUOUS, HOLDS, VIOLATED]
    # a one-sided check whose value is already below the least bound (epsilon >= 0)
    got = check_bound([-3.0, 0.5], [10.0, 10.0], upper=True, rtol=1e-9, bound_floor=0.0)
    assert got.tolist() == [VACUOUS, HOLDS]
    # a lower bound whose largest possible value the value already reaches
    got = check_bound([0.0, -1.0], [-5.0, -5.0], upper=False, rtol=1e-9, bound_ceiling=0.0)
    assert got.tolist() == [VACUOUS, HOLDS]


def test_slack_by_hand():
    got = log10_slack([1.0, 10.0, 0.0, 2.0], [100.0, 1.0, 1.0, np.inf], upper=True)
    np.testing.assert_array_equal(got[:2], [2.0, -1.0])
    assert np.isnan(got[2:]).all()
    assert log10_slack([10.0], [1.0], upper=False)[0] == 1.0


def test_head_outcomes_count_rows():
    rows = np.array([4, 4, 4, 4, 0])  # applicable rows per head
    pooled = {
        "b_violated": np.array([0.25, 0.0, 0.0, 0.0, np.nan]),
        "b_not_testable": np.array([0.0, 0.5, 0.0, 0.0, np.nan]),
        "b_vacuous": np.array([0.75, 0.5, 1.0, 0.5, np.nan]),
    } | {f"b_{label}_rows": rows for label in ("violated", "not_testable", "vacuous")}
    got = head_outcomes(pooled, "b")
    assert got["b_check"] == [VIOLATED, NOT_TESTABLE, VACUOUS, HOLDS, None]
    assert got["b_violated_rows"].tolist() == [1, 0, 0, 0, 0]
    assert got["b_vacuous_rows"].tolist() == [3, 2, 4, 2, 0]
    cols = row_outcome_columns(
        "b", check_bound([1.0, 3.0, np.nan], [2.0, 2.0, 1.0], upper=True, rtol=0)
    )
    np.testing.assert_array_equal(cols["b_violated"], [0.0, 1.0, np.nan])


@given(
    # review 21: infinite values too, against which the tolerance takes the finite parts only
    st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from([np.inf, -np.inf])),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.booleans(),
)
def test_matches_a_plain_comparison(value, bound, upper):
    tol = RTOL_FLOAT64 * ((abs(value) if np.isfinite(value) else 0.0) + abs(bound))
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


def test_the_stated_tolerance_is_the_one_check_bound_applies():
    """The scorecard's tolerance text names the finite parts, as check_bound computes it: an
    infinite value against a finite bound is a violation, not inside an infinite tolerance."""
    assert check_bound([np.inf], [1.0], upper=True, rtol=1e-9).tolist() == [VIOLATED]
    text = describe_tolerance(1e-9)
    assert text.startswith("rtol 1e-09 x (|value| + |bound|)")
    assert "finite" in text
