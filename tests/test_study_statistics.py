"""The study's statistics (issue 46, point 4): the p-value behind each paired verdict, the
exact sign test beside it, and Benjamini-Hochberg over the rule x limit table. Hand-made seeds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlimits import intervals
from attnlimits_workflow import study, study_seeds
from attnlimits_workflow.assemble import study_prose

pytestmark = pytest.mark.unit


def test_the_p_value_by_hand():
    """log ratios 1, 1.2, 1.4 (mean 1.2, se 0.2/sqrt 3 x sqrt 3 = 0.1155); beyond log 1.5 =
    0.405: t = (1.2 - 0.405) / 0.1155 = 6.88 on 2 df, one-sided 0.0102, doubled 0.0205."""
    p = intervals.beyond_ratio_pvalue(np.array([1.0, 1.2, 1.4]), 1.5)
    assert p == pytest.approx(0.02047, rel=2e-3)
    # seeds that agree exactly: no spread for a t-test, the exact sign-flip p of 2 pairs
    assert intervals.beyond_ratio_pvalue(np.array([0.5, 0.5]), 1.5) == 0.5
    assert intervals.beyond_ratio_pvalue(np.array([0.1, 0.1]), 1.5) == 1.0  # agree, inside
    # ratios of 3 on every seed, computed by division: they differ in their last bits (sd ~
    # 2e-16), which is rounding, not a spread the t-test may read as certainty (p was 3e-32)
    logs = intervals.paired_log_ratios((0.3, 0.6, 0.9), (0.1, 0.2, 0.3))
    assert 0 < logs.std(ddof=1) < 1e-15
    assert intervals.beyond_ratio_pvalue(logs, 1.5) == 0.25
    with pytest.raises(ValueError):
        intervals.beyond_ratio_pvalue(np.array([1.0]), 1.5)


@settings(max_examples=150, deadline=None)
@given(
    logs=st.lists(st.floats(-3, 3), min_size=2, max_size=8),
    ratio=st.floats(1.05, 4.0),
)
def test_the_p_value_decides_exactly_where_the_interval_does(logs, ratio):
    """p < 0.05 if and only if the 95 % t-interval of the paired ratio lies wholly beyond the
    ratio on one side (ratio_verdict reads that interval)."""
    x = np.asarray(logs)
    if intervals.no_spread(x.std(ddof=1) / math.sqrt(x.size), x.mean()):
        return  # no spread: the exact p of test_the_p_value_by_hand
    mean, low, high = intervals.t_interval(x, 0.95)
    beyond = low >= math.log(ratio) or high <= -math.log(ratio)
    p = intervals.beyond_ratio_pvalue(x, ratio)
    if abs(p - 0.05) > 1e-9:
        assert (p < 0.05) == beyond


def test_three_seeds_never_pass_a_sign_test_at_five_percent():
    """Two-sided, the side read off the data: every seed beyond on one side is 2/8 = 0.25."""
    assert intervals.beyond_ratio_sign_pvalue(np.log([5.0, 6.0, 7.0]), 1.5) == 0.25
    assert intervals.beyond_ratio_sign_pvalue(np.log([0.2, 0.3, 0.1]), 1.5) == 0.25
    assert intervals.beyond_ratio_sign_pvalue(np.log([5.0, 1.0, 7.0]), 1.5) == 1.0
    assert intervals.beyond_ratio_sign_pvalue(np.log([5.0, 6.0, 7.0, 8.0, 9.0]), 1.5) == 0.0625


def per_seed_table(rules: dict[str, tuple[float, float, float]]) -> dict[str, list[dict]]:
    base = (0.10, 0.11, 0.12)
    out = {"softmax": [{"vanishing": v, "perplexity": 10.0} for v in base]}
    for name, factors in rules.items():
        out[name] = [
            {"vanishing": v * f, "perplexity": 10.0} for v, f in zip(base, factors, strict=True)
        ]
    return out


def test_benjamini_hochberg_drops_the_weak_verdicts_of_a_long_table():
    """One strong rule (x5 every seed, p ~ 1e-4) and a marginal one (p ~ 0.03 alone: its
    interval decides) among 18 rules that change nothing: alone the marginal one 'relaxes'; in
    the table BH keeps the strong one only, and the marginal cell says what it was."""
    marginal = (2.3, 3.0, 4.0)
    alone = study_seeds.seed_measures(per_seed_table({"m": marginal}), "softmax", 1.5, 0.95)
    assert alone["m"]["vanishing"].verdict == study.RELAXES
    assert alone["m"]["vanishing"].p_value < 0.05 and alone["m"]["vanishing"].dropped == ""
    nulls = {f"n{i}": (1.0 + 0.01 * i, 0.99, 1.02) for i in range(18)}
    table = per_seed_table({"strong": (4.9, 5.0, 5.1), "m": marginal, **nulls})
    got = study_seeds.seed_measures(table, "softmax", 1.5, 0.95)
    assert got["strong"]["vanishing"].verdict == study.RELAXES
    m = got["m"]["vanishing"]
    assert m.verdict == study.NO_DIFFERENCE and m.dropped == study.RELAXES
    assert "relaxes at p = 0.0" in study_prose.significance_text(m)
    assert "not kept by Benjamini-Hochberg" in study_prose.significance_text(m)
    strong = study_prose.significance_text(got["strong"]["vanishing"])
    assert "sign test p = 0.25" in strong


def test_an_unpaired_verdict_joins_the_family_too():
    """A censored seed leaves no paired ratio, and its interval verdict once escaped the
    correction. Alone, N_crit / L of (0.3, 0.35, >= 0.42) against (0.10, 0.11, 0.12) relaxes
    (Welch's p = 0.011); among 20 rules that change nothing, Benjamini-Hochberg drops it."""
    base = [0.10, 0.11, 0.12]

    def seeds(values, upper=None):
        return [
            {"vanishing": v, "perplexity": 10.0, "distance": v}
            | ({"distance_upper": upper[i]} if upper else {})
            for i, v in enumerate(values)
        ]

    rule, upper = [0.3, 0.35, 0.42], [0.3, 0.35, 0.43]
    alone = study_seeds.seed_measures(
        {"softmax": seeds(base), "r": seeds(rule, upper)}, "softmax", 1.5, 0.95
    )
    m = alone["r"]["distance"]
    assert m.verdict == study.RELAXES and m.lower_bound and 0.005 < m.p_value < 0.02
    table = {"softmax": seeds(base), "r": seeds(rule, upper)}
    for i in range(20):
        factors = (1.0 + 0.01 * i, 0.99, 1.02)
        table[f"n{i}"] = seeds([b * f for b, f in zip(base, factors, strict=True)])
    m = study_seeds.seed_measures(table, "softmax", 1.5, 0.95)["r"]["distance"]
    assert m.verdict == study.NO_DIFFERENCE and m.dropped == study.RELAXES


def test_the_unpaired_p_value_by_hand():
    """Seeds 4, 5, 6 against 1, 1, 1 (log differences ~1.6 > log 1.5): small p; reversed the
    same; equal sets: 1. An infinite upper end (a share of 1) cannot be below anything."""
    p = intervals.beyond_ratio_unpaired_pvalue(
        (4, 5, 6), (4, 5, 6), (1, 1, 1.01), (1, 1, 1.01), 1.5
    )
    assert p < 0.01
    q = intervals.beyond_ratio_unpaired_pvalue(
        (1, 1, 1.01), (1, 1, 1.01), (4, 5, 6), (4, 5, 6), 1.5
    )
    assert q == pytest.approx(p)
    assert intervals.beyond_ratio_unpaired_pvalue((1, 2), (1, 2), (1, 2), (1, 2), 1.5) == 1.0
    inf = math.inf
    assert intervals.beyond_ratio_unpaired_pvalue((1, 1.1), (inf, inf), (5, 6), (5, 6), 1.5) == 1.0
    assert math.isnan(intervals.beyond_ratio_unpaired_pvalue((0, 1), (0, 1), (1, 2), (1, 2), 1.5))
    # every seed agrees on each side (0.1 + 0.2 differs from 0.3 in its last bit): no spread,
    # the exact permutation p of all above all, 2 / C(6, 3) = 0.1, not Welch's ~1e-33
    agree = (0.1 + 0.2, 0.3, 0.3)
    assert intervals.beyond_ratio_unpaired_pvalue(agree, agree, (0.1,) * 3, (0.1,) * 3, 1.5) == 0.1
    assert intervals.beyond_ratio_unpaired_pvalue(agree, agree, (0.25,) * 3, (0.25,) * 3, 1.5) == 1


def test_boundary_values_keep_their_verdict_or_say_why_not():
    """A share of 1 on every seed (infinite odds) against a baseline near 0.62, and a low-T
    sensitivity of 0 on every seed against a positive baseline, are beyond any ratio, but with
    no spread for a t-test their p is the exact permutation one, 2 / C(6, 3) = 0.1 with 3 and 3
    seeds: the verdict is shown and not kept. A share of 1 on one seed only has no test."""
    base = [0.60, 0.62, 0.64]

    def seeds(key, values):
        return [{key: v, "perplexity": 10.0} for v in values]

    table = {"softmax": seeds("separability", base), "full": seeds("separability", [1.0] * 3)}
    m = study_seeds.seed_measures(table, "softmax", 1.5, 0.95)["full"]["separability"]
    assert m.verdict == study.NO_DIFFERENCE and m.dropped == study.RELAXES
    assert m.p_value == pytest.approx(0.1)
    table = {
        "softmax": seeds("gradient_low_t", [0.05, 0.06, 0.07]),
        "flat": seeds("gradient_low_t", [0.0] * 3),
    }
    m = study_seeds.seed_measures(table, "softmax", 1.5, 0.95)["flat"]["gradient_low_t"]
    assert m.dropped == study.RELAXES and m.p_value == pytest.approx(0.1)
    # both at a share of 1: no change, not "relaxes" (nothing is 1.5x above infinite odds)
    assert study.verdict(1.0, 1.0, 1.5, share=True) == study.NO_CHANGE
    mixed = {"softmax": seeds("separability", base), "m": seeds("separability", [1.0, 0.99, 0.99])}
    m = study_seeds.seed_measures(mixed, "softmax", 1.5, 0.95)["m"]["separability"]
    assert m.verdict == study.NO_P_VALUE and math.isnan(m.p_value)
