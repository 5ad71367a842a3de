"""N* of the study's trained models over their seeds (attnlimits_workflow.assemble.
study_effective_set): hand-computed cases and a property test against a plain reference."""

import math

import hypothesis.strategies as st
import polars as pl
import pytest
from hypothesis import given, settings

from attnlimits_workflow.assemble import study_effective_set as n_star
from attnlimits_workflow.study import NO_DIFFERENCE, ONE_SEED

pytestmark = pytest.mark.unit

T_975_2 = 4.302652729911275  # Student's t, 97.5 % quantile, 2 degrees of freedom


def summary(values, length=64, variant="attention-delete", censored=None):
    """effective_set.summarise's columns the study reads, one row per seed (in seed order)."""
    censored = censored or [False] * len(values)
    return [
        pl.DataFrame(
            {
                "length": [length],
                "variant": [variant],
                "n_star": [None if c else v],
                "censored": [c],
                "lower_bound": [v if c else None],
            },
            schema_overrides={"n_star": pl.Int64, "lower_bound": pl.Int64},
        )
        for v, c in zip(values, censored, strict=True)
    ]


def frame(**rules):
    return n_star.seeds_frame(
        {(name, seed): s for name, rows in rules.items() for seed, s in enumerate(rows)}
    )


def test_a_rule_at_half_the_baseline_in_every_seed_needs_fewer_keys():
    table = n_star.over_seeds(
        frame(softmax=summary([10, 20, 40]), sparsemax=summary([5, 10, 20])),
        "softmax",
        0.95,
        1.5,
        "attention-delete",
    )
    base, rule = table.row(0, named=True), table.row(1, named=True)
    assert (base["normalizer"], base["verdict"]) == ("softmax", "baseline")
    # geometric mean 20; the logs' sd is ln 2, so the interval is 20 exp(+-t ln2 / sqrt 3)
    half = T_975_2 * math.log(2) / math.sqrt(3)
    assert base["n_star_mean"] == pytest.approx(20)
    assert base["n_star_low"] == pytest.approx(20 * math.exp(-half))
    assert base["n_star_high"] == pytest.approx(20 * math.exp(half))
    # every seed's ratio is 1/2: the paired interval is the point 1/2, beyond 1/1.5
    assert rule["ratio"] == pytest.approx(0.5)
    assert rule["ratio_low"] == pytest.approx(0.5) and rule["ratio_high"] == pytest.approx(0.5)
    assert rule["verdict"] == n_star.FEWER and rule["n_star_values"] == "5 10 20"
    assert math.isnan(base["ratio"])


def test_more_keys_no_difference_one_seed_and_censored():
    rules = dict(
        softmax=summary([10, 20, 40]),
        more=summary([30, 60, 120]),
        mixed=summary([5, 40, 40]),
        censored=summary([10, 64, 40], censored=[False, True, False]),
    )
    table = n_star.over_seeds(frame(**rules), "softmax", 0.95, 1.5, "attention-delete")
    found = dict(table.select("normalizer", "verdict").iter_rows())
    assert found["more"] == n_star.MORE
    assert found["mixed"] == NO_DIFFERENCE  # ratios 1/2, 2, 1: the interval spans 1
    assert found["censored"] == n_star.CENSORED
    censored = table.filter(pl.col("normalizer") == "censored").row(0, named=True)
    assert censored["censored"] and n_star.cell(censored).startswith(n_star.CENSORED + ": >= ")
    one = n_star.over_seeds(
        frame(softmax=summary([8]), other=summary([2])), "softmax", 0.95, 1.5, "attention-delete"
    )
    assert one["verdict"].to_list() == ["baseline", ONE_SEED]
    assert math.isnan(one["n_star_low"][1])


def test_seeds_must_pair_and_the_variant_and_baseline_exist():
    rules = {("softmax", 0): summary([4])[0], ("softmax", 1): summary([4])[0]}
    rules[("other", 0)] = summary([2])[0]
    with pytest.raises(ValueError, match="pairs them seed by seed"):
        n_star.over_seeds(n_star.seeds_frame(rules), "softmax", 0.95, 1.5, "attention-delete")
    with pytest.raises(ValueError, match="no N\\* of variant"):
        n_star.over_seeds(frame(softmax=summary([4])), "softmax", 0.95, 1.5, "random-delete")
    with pytest.raises(ValueError, match="baseline 'sink'"):
        n_star.over_seeds(frame(softmax=summary([4])), "sink", 0.95, 1.5, "attention-delete")


def test_markdown_and_answer_read_the_table():
    rows = frame(softmax=summary([10, 20, 40]), sparsemax=summary([5, 10, 20]))
    rows = pl.concat(
        [rows, frame(softmax=summary([20, 40, 80], 128), sparsemax=summary([20, 40, 80], 128))]
    )
    table = n_star.over_seeds(rows, "softmax", 0.95, 1.5, "attention-delete")
    md = n_star.markdown(table).splitlines()
    assert md[0] == "| normaliser | N* at L = 64 | N* at L = 128 |"
    assert md[3].startswith("| sparsemax | fewer keys: 10 [") and "no difference shown" in md[3]
    said = n_star.answer(table, "softmax")
    assert said.startswith("softmax needs N* = 20 of L = 64 keys (N*/L = 0.31) and 40 of L = 128")
    assert "Fewer keys than softmax at some: sparsemax (L = 64)." in said
    assert "More keys than softmax at no L." in said


def test_the_windows_must_be_held_out():
    assert n_star.held_out_error(16, 1024, 102_224) is None
    assert n_star.held_out_error(16, 1024, 16_384) is None
    assert "exceed the 16383 held-out tokens" in n_star.held_out_error(16, 1024, 16_383)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 1024), st.integers(1, 1024)), min_size=2, max_size=6),
    st.floats(1.1, 4.0),
)
def test_over_seeds_against_a_plain_reference(pairs, ratio):
    from scipy import stats

    base, rule = [b for b, _ in pairs], [r for _, r in pairs]
    table = n_star.over_seeds(
        frame(softmax=summary(base), rule=summary(rule)), "softmax", 0.9, ratio, "attention-delete"
    )
    row = table.filter(pl.col("normalizer") == "rule").row(0, named=True)
    logs = [math.log(r / b) for b, r in pairs]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    half = stats.t.ppf(0.95, len(logs) - 1) * sd / math.sqrt(len(logs))
    assert row["ratio"] == pytest.approx(math.exp(mean), rel=1e-12)
    assert row["ratio_low"] == pytest.approx(math.exp(mean - half), rel=1e-9)
    assert row["ratio_high"] == pytest.approx(math.exp(mean + half), rel=1e-9)
    expected = (
        n_star.FEWER
        if math.exp(mean + half) <= 1 / ratio
        else n_star.MORE
        if math.exp(mean - half) >= ratio
        else NO_DIFFERENCE
    )
    if abs(math.exp(mean + half) - 1 / ratio) > 1e-9 and abs(math.exp(mean - half) - ratio) > 1e-9:
        assert row["verdict"] == expected
    geo = math.exp(sum(math.log(r) for r in rule) / len(rule))
    assert row["n_star_mean"] == pytest.approx(geo, rel=1e-12)
