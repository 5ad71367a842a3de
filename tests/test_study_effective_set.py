"""N* of the study's trained models over their seeds (attnlimits_workflow.assemble.
study_effective_set): hand-computed cases and a property test against a plain reference."""

import math

import hypothesis.strategies as st
import polars as pl
import pytest
from hypothesis import given, settings

from attnlimits_workflow.assemble import study_effective_set as n_star
from attnlimits_workflow.study_limits import NO_DIFFERENCE, ONE_SEED

pytestmark = pytest.mark.unit

T_975_2 = 4.302652729911275  # Student's t, 97.5 % quantile, 2 degrees of freedom


def summary(values, length=64, variant="attention-delete", censored=None, spread=0.1, nll=3.0):
    """effective_set.summarise's columns the study reads, one row per seed (in seed order); the
    window-bootstrap interval of each N* is N* (1 -+ ``spread``) (None: withheld)."""
    censored = censored or [False] * len(values)
    return [
        pl.DataFrame(
            {
                "length": [length],
                "variant": [variant],
                "n_star": [None if c else v],
                "censored": [c],
                "lower_bound": [v if c else None],
                "n_star_low": [None if c or spread is None else v * (1 - spread)],
                "n_star_high": [None if c or spread is None else v * (1 + spread)],
                "base_nll_per_target": [nll],
            },
            schema_overrides={
                "n_star": pl.Int64,
                "lower_bound": pl.Int64,
                "n_star_low": pl.Float64,
                "n_star_high": pl.Float64,
            },
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
    # every seed's ratio is 1/2: the paired interval is the point 1/2, beyond 1/1.5; the seeds
    # agreeing best is no reason to withhold what agreeing less decides (review 37), and the
    # sign test beside it says what no normality-free test over 3 seeds can give: p >= 0.25
    assert rule["ratio"] == pytest.approx(0.5)
    assert rule["ratio_low"] == pytest.approx(0.5) and rule["ratio_high"] == pytest.approx(0.5)
    assert rule["n_star_values"] == "5 10 20" and rule["sign_p"] == pytest.approx(0.25)
    # review 38: tied integers give the t-interval no coverage; the sign test handles ties but
    # cannot go below 0.25 with 3 seeds: a candidate, never a verdict
    assert rule["verdict"] == n_star.CANDIDATES[n_star.FEWER]
    assert math.isnan(base["ratio"])
    assert n_star.cell(rule).endswith("[0.5, 0.5], sign test p = 0.25; NLL 3.00")

    def against_softmax(rule):
        table = frame(softmax=summary([10, 20, 40] * 2), sparsemax=summary(rule))
        return n_star.over_seeds(table, "softmax", 0.95, 1.5, "attention-delete").row(1, named=True)

    # six seeds, all at half: the sign test's 2 / 64 decides
    six = against_softmax([5, 10, 20] * 2)
    assert six["sign_p"] == pytest.approx(2 / 64) and six["verdict"] == n_star.FEWER
    # the ratios spread around 1/2, all well below 1/1.5: fewer keys with six seeds
    spread = against_softmax([5, 9, 21] * 2)
    assert spread["ratio_high"] <= 1 / 1.5 and spread["verdict"] == n_star.FEWER


def test_a_reading_needs_the_windows_intervals_apart_in_every_seed():
    """Ratios near x1/2 in every seed (0.5, 0.45, 0.525): an interval over the seeds below
    1/1.5, but the text's own spread (the window bootstrap) decides whether the two models
    differ."""

    def verdict(spread):
        table = n_star.over_seeds(
            frame(
                softmax=summary([10, 20, 40] * 2, spread=spread),
                other=summary([5, 9, 21] * 2, spread=spread),
            ),
            "softmax",
            0.95,
            1.5,
            "attention-delete",
        )
        return table["verdict"][1]

    assert verdict(0.3) == n_star.FEWER  # [3.5, 6.5] below [7, 13], ... in every seed
    assert verdict(0.4) == n_star.WINDOWS_OVERLAP  # [3, 7] meets [6, 14]
    assert verdict(None) == n_star.NO_WINDOW_INTERVAL


def test_more_keys_no_difference_one_seed_and_censored():
    rules = dict(
        softmax=summary([10, 20, 40]),
        more=summary([30, 58, 125]),
        mixed=summary([5, 40, 40]),
        censored=summary([10, 64, 40], censored=[False, True, False]),
    )
    table = n_star.over_seeds(frame(**rules), "softmax", 0.95, 1.5, "attention-delete")
    found = dict(table.select("normalizer", "verdict").iter_rows())
    assert found["more"] == n_star.CANDIDATES[n_star.MORE]  # 3 seeds: a candidate
    assert found["mixed"] == NO_DIFFERENCE  # ratios 1/2, 2, 1: the interval spans 1
    assert found["censored"] == n_star.CENSORED
    censored = table.filter(pl.col("normalizer") == "censored").row(0, named=True)
    assert censored["censored"] and n_star.cell(censored).startswith(n_star.CENSORED + ": >= ")
    # review 30: a lower bound is no measurement, so no t-interval of the seeds
    assert math.isnan(censored["n_star_low"]) and math.isnan(censored["n_star_high"])
    assert "[" not in n_star.cell(censored)
    # review 31: the per-seed values mark the censored seed's lower bound
    assert censored["n_star_values"] == "10 >=64 40"
    one = n_star.over_seeds(
        frame(softmax=summary([8]), other=summary([2])), "softmax", 0.95, 1.5, "attention-delete"
    )
    assert one["verdict"].to_list() == ["baseline", ONE_SEED]
    assert math.isnan(one["n_star_low"][1])


def test_n_star_at_the_search_floor_in_every_seed_is_no_comparison():
    """Review 30: N* = 1 in every seed of both models is the search's floor: neither can need
    fewer keys, and three tied integers give a zero-width interval that shows nothing."""
    table = n_star.over_seeds(
        frame(softmax=summary([1, 1, 1]), floor=summary([1, 1, 1]), more=summary([4, 8, 4])),
        "softmax",
        0.95,
        1.5,
        "attention-delete",
    )
    found = dict(table.select("normalizer", "verdict").iter_rows())
    assert found["floor"] == n_star.AT_FLOOR
    # above the baseline's floor: still comparable (3 seeds: a candidate, review 38)
    assert found["more"] == n_star.CANDIDATES[n_star.MORE]
    assert "Withheld: no verdict: N* = 1, the floor, in every seed of both (N* cannot go" in (
        n_star.answer(table, "softmax")
    )


def test_the_interval_of_n_star_never_reaches_below_one():
    """N* >= 1 by definition: seeds 2, 1, 2 give a log-t interval whose low end is 0.587."""
    table = n_star.over_seeds(
        frame(softmax=summary([2, 1, 2])), "softmax", 0.95, 1.5, "attention-delete"
    )
    assert table["n_star_low"][0] == 1.0 and table["n_star_high"][0] > 2


def test_the_ratio_to_a_baseline_at_the_floor_never_reaches_below_one():
    """A baseline at N* = 1 in every seed: every seed's ratio is the rule's N* >= 1, but the
    log-t interval of ratios 4, 1, 4 reaches 0.55; a rule at the floor has no ratio above 1."""
    table = n_star.over_seeds(
        frame(softmax=summary([1, 1, 1]), more=summary([4, 1, 4]), floor=summary([1, 1, 1])),
        "softmax",
        0.95,
        1.5,
        "attention-delete",
    )
    rows = {r["normalizer"]: r for r in table.iter_rows(named=True)}
    log_ratios = [math.log(4), 0.0, math.log(4)]
    mean = sum(log_ratios) / 3
    sd = math.sqrt(sum((v - mean) ** 2 for v in log_ratios) / 2)
    assert math.exp(mean - T_975_2 * sd / math.sqrt(3)) < 1  # what the interval would say
    assert rows["more"]["ratio_low"] == 1.0 and rows["more"]["ratio_high"] > 4
    flipped = n_star.over_seeds(
        frame(softmax=summary([4, 1, 4]), floor=summary([1, 1, 1])),
        "softmax",
        0.95,
        1.5,
        "attention-delete",
    )
    below = flipped.filter(pl.col("normalizer") == "floor").row(0, named=True)
    assert below["ratio_high"] == 1.0 and below["ratio_low"] < 0.25
    # review 47: a clipped interval is no t-interval any more, and the cell says so
    assert rows["more"]["ratio_clipped"] and below["ratio_clipped"]
    assert "(clipped at 1: a side at N* = 1 in every seed)" in n_star.cell(below)
    unclipped = n_star.over_seeds(
        frame(softmax=summary([4, 2, 4]), rule=summary([8, 4, 9])),
        "softmax",
        0.95,
        1.5,
        "attention-delete",
    )
    unclipped = unclipped.filter(pl.col("normalizer") == "rule").row(0, named=True)
    assert not math.isnan(unclipped["ratio"])
    assert not unclipped["ratio_clipped"] and "clipped" not in n_star.cell(unclipped)


def test_a_censored_baseline_prints_its_share_as_a_bound():
    """Review 33: the answer printed '>= 65 of L = 128 keys (N*/L = 0.51)'."""
    table = n_star.over_seeds(
        frame(softmax=summary([64, 64, 64], censored=[True, True, True])),
        "softmax",
        0.95,
        1.5,
        "attention-delete",
    )
    assert "(N*/L >= 1)" in n_star.answer(table, "softmax")


def test_n_star_known_to_its_cell_only_gives_no_verdict():
    """Review 33: with effective_set.refine false each seed's N* is its power of two's cell top;
    [5, 8] against [9, 16] in every seed read 'fewer keys' at the tops' ratio 0.5, though the
    cells allow 8 against 9."""

    def cells(values, floors):
        frames = summary(values)
        return [
            f.with_columns(pl.lit(lo, pl.Int64).alias("n_star_floor"))
            for f, lo in zip(frames, floors, strict=True)
        ]

    table = n_star.over_seeds(
        frame(softmax=cells([16, 16, 16], [9, 9, 9]), rule=cells([8, 8, 8], [5, 5, 5])),
        "softmax",
        0.95,
        1.5,
        "attention-delete",
    )
    row = table.filter(pl.col("normalizer") == "rule").row(0, named=True)
    assert row["verdict"] == n_star.CELLS_ONLY and row["n_star_values"] == "5-8 5-8 5-8"
    # review 34: no mean or interval of cell tops is printed, in the cells nor in the answer
    base = table.filter(pl.col("normalizer") == "softmax").row(0, named=True)
    assert math.isnan(base["n_star_low"]) and n_star.cell(base) == (
        "baseline: cells 9-16 9-16 9-16; NLL 3.00"
    )
    assert "softmax needs N* in cells 9-16 9-16 9-16 of L = 64 keys" in n_star.answer(
        table, "softmax"
    )


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
    rows = frame(softmax=summary([10, 20, 40]), sparsemax=summary([5, 9, 21]))
    rows = pl.concat(
        [rows, frame(softmax=summary([20, 40, 80], 128), sparsemax=summary([20, 40, 80], 128))]
    )
    table = n_star.over_seeds(rows, "softmax", 0.95, 1.5, "attention-delete")
    md = n_star.markdown(table).splitlines()
    assert md[0] == "| normalizer | N* at L = 64 | N* at L = 128 |"
    assert md[3].startswith("| sparsemax | fewer keys, a candidate only (the sign test over")
    assert "9.81 [" in md[3] and "no difference shown" in md[3]
    said = n_star.answer(table, "softmax")
    assert said.startswith(
        "softmax needs N* = 20 of L = 64 keys (N*/L = 0.31) and N* = 40 of L = 128"
    )
    # three seeds: a candidate, named apart from the verdicts (review 38); no cell can be
    # decided, which is said, not "at no L" as if it were a finding (review 47)
    assert (
        "With 3 seeds no N* cell can be decided: the two-sided sign test's least p is 2 / 2^3 ="
        " 0.25, above 0.05."
    ) in said
    assert "at no L" not in said
    assert (
        "Candidates for fewer keys (the t-interval and every seed's windows say so, the sign "
        "test over 3 seeds cannot): sparsemax (L = 64)."
    ) in said
    same = n_star.over_seeds(
        frame(softmax=summary([10, 20, 40]), sparsemax=summary([10, 20, 40])),
        "softmax",
        0.95,
        1.5,
        "attention-delete",
    )
    assert n_star.answer(same, "softmax").endswith("above 0.05; no cell is even a candidate.")
    # six seeds can reach 2 / 2^6 = 0.031: "at no L" is then a finding, and said
    six = n_star.over_seeds(
        frame(
            softmax=summary([10, 20, 40, 10, 20, 40]), sparsemax=summary([11, 19, 40, 10, 21, 40])
        ),
        "softmax",
        0.95,
        1.5,
        "attention-delete",
    )
    said = n_star.answer(six, "softmax")
    assert "Fewer keys than softmax at no L." in said and "can be decided" not in said
    marked = n_star.answer(table, "softmax", {"sparsemax"})
    assert "cannot): sparsemax (zero weights) (L = 64)." in marked
    assert "its N* is at most the largest number of nonzero weights" in marked


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
    if set(base) == set(rule) == {1}:
        assert row["verdict"] == n_star.AT_FLOOR and math.isnan(row["ratio"])
        return
    logs = [math.log(r / b) for b, r in pairs]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    half = stats.t.ppf(0.95, len(logs) - 1) * sd / math.sqrt(len(logs))
    assert row["ratio"] == pytest.approx(math.exp(mean), rel=1e-12)
    # clipped to what the ratio can be: N* >= 1, so at least 1 over a baseline at the floor
    # in every seed, at most 1 for a rule at the floor in every seed
    low = max(math.exp(mean - half), 1.0) if set(base) == {1} else math.exp(mean - half)
    high = min(math.exp(mean + half), 1.0) if set(rule) == {1} else math.exp(mean + half)
    assert row["ratio_low"] == pytest.approx(low, rel=1e-9)
    assert row["ratio_high"] == pytest.approx(high, rel=1e-9)
    expected = (
        n_star.FEWER
        if math.exp(mean + half) <= 1 / ratio
        else n_star.MORE
        if math.exp(mean - half) >= ratio
        else NO_DIFFERENCE
    )
    # the windows' intervals (N* -+ 10 %) must lie apart in every seed
    if expected == n_star.FEWER and not all(r * 1.1 < b * 0.9 for b, r in pairs):
        expected = n_star.WINDOWS_OVERLAP
    if expected == n_star.MORE and not all(r * 0.9 > b * 1.1 for b, r in pairs):
        expected = n_star.WINDOWS_OVERLAP
    # and the sign test, which handles tied integers (review 38): else a candidate only
    beyond = (sum(x > math.log(ratio) for x in logs), sum(x < -math.log(ratio) for x in logs))
    sign_p = min(1.0, 2 * min(stats.binom.sf(k - 1, len(logs), 0.5) for k in beyond))
    if expected in (n_star.FEWER, n_star.MORE) and sign_p > 0.1:
        expected = n_star.CANDIDATES[expected]
    if abs(math.exp(mean + half) - 1 / ratio) > 1e-9 and abs(math.exp(mean - half) - ratio) > 1e-9:
        assert row["verdict"] == expected
    geo = math.exp(sum(math.log(r) for r in rule) / len(rule))
    assert row["n_star_mean"] == pytest.approx(geo, rel=1e-12)


def test_better_agreement_between_seeds_never_loses_a_verdict():
    """Review 37: N* = 1 in every seed against 4, 4, 4 must decide at least what 4, 4, 5
    decides; withholding the zero-width interval made the rule fail on the strongest case."""

    def verdict(base):
        table = n_star.over_seeds(
            frame(softmax=summary(base), rule=summary([1, 1, 1])),
            "softmax",
            0.95,
            1.5,
            "attention-delete",
        )
        return table.filter(pl.col("normalizer") == "rule")["verdict"][0]

    # with 3 seeds both are candidates (review 38): the sign test cannot go below 0.25
    assert verdict([4, 4, 5]) == verdict([4, 4, 4]) == n_star.CANDIDATES[n_star.FEWER]


@pytest.mark.parametrize("seeds", [3, 6])
def test_a_boundary_null_of_tied_integers_is_decided_at_most_at_its_level(seeds):
    """Review 38: the baseline's N* is 2 in every seed, the rule's 1 or 2 with probability 1/2,
    so each seed's ratio lies beyond 1/1.5 with probability exactly 1/2. Over every pattern,
    "fewer keys" must come at most 2.5 % of the time (one-sided at 95 %): the zero-width
    interval of (1, 1, 1) alone decided 1 in 8 with the t-interval."""
    import itertools

    decided = 0
    patterns = list(itertools.product([1, 2], repeat=seeds))
    for rule in patterns:
        table = n_star.over_seeds(
            frame(softmax=summary([2] * seeds, spread=0.01), rule=summary(list(rule), spread=0.01)),
            "softmax",
            0.95,
            1.5,
            "attention-delete",
        )
        decided += table.filter(pl.col("normalizer") == "rule")["verdict"][0] == n_star.FEWER
    assert decided / len(patterns) <= 0.025


def test_a_ratio_of_exactly_the_threshold_counts_as_beyond_in_the_sign_test():
    """Review 40: six seeds at N* 3 against 2 (ratio exactly 1.5) gave sign test p = 1 while the
    mirror case, 2 against 3, gave 2 / 64: the log of 3/2 and of 2/3 rounded either side of the
    edge. At or beyond, both ways, as the intervals read it."""
    from attnlimits.intervals import beyond_ratio_sign_pvalue

    more = [math.log(3 / 2)] * 6
    fewer = [math.log(2 / 3)] * 6
    assert beyond_ratio_sign_pvalue(more, 1.5) == pytest.approx(2 / 64)
    assert beyond_ratio_sign_pvalue(fewer, 1.5) == pytest.approx(2 / 64)


def test_the_t_tests_exact_agreement_branch_is_at_or_beyond_too():
    """Review 42: three seeds all at 3/2 got p = 1 and all at 2/3 got 0.25 (rounding of the
    logs either side of the edge); at or beyond, both are 0.25."""
    from attnlimits.intervals import beyond_ratio_pvalue

    assert beyond_ratio_pvalue([math.log(3 / 2)] * 3, 1.5) == pytest.approx(0.25)
    assert beyond_ratio_pvalue([math.log(2 / 3)] * 3, 1.5) == pytest.approx(0.25)
