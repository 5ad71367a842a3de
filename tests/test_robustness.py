"""Robust and fragile claims on hand-made verdict tables."""

import polars as pl
import pytest

from attnlimits_workflow.robustness import FRAGILE, ROBUST, UNRESOLVED, UNTESTED, robustness

pytestmark = pytest.mark.unit


def table(rows):
    return pl.DataFrame(rows, schema=["claim", "model", "reading", "verdict"], orient="row")


def test_same_verdict_everywhere_is_robust_and_a_flip_names_its_reading():
    got = robustness(
        table(
            [
                ("saturation", "minilm", "values", "reproduced"),
                ("saturation", "minilm", "keys", "reproduced"),
                ("saturation", "minilm", "attention_input", "reproduced"),
                ("plateau", "minilm", "values", "not reproduced"),
                ("plateau", "minilm", "keys", "undecided"),
                ("plateau", "minilm", "attention_input", "not reproduced"),
                ("drop", "minilm", "values", "not reproduced"),
                ("drop", "minilm", "keys", "reproduced"),
                ("drop", "minilm", "attention_input", "undecided"),
            ]
        ),
        over="reading",
        within=("claim", "model"),
        reference="values",
    ).sort("claim")
    assert got.to_dicts() == [
        {  # two decided verdicts that differ: fragile, whatever the third says
            "claim": "drop",
            "model": "minilm",
            "robustness": FRAGILE,
            "verdict": "not reproduced",
            "alternatives": 2,
            "flipped_by": "keys: reproduced",
            "unsettled_by": "attention_input: undecided",
        },
        {  # undecided under one reading: the data cannot say whether it flips
            "claim": "plateau",
            "model": "minilm",
            "robustness": UNRESOLVED,
            "verdict": "not reproduced",
            "alternatives": 2,
            "flipped_by": "",
            "unsettled_by": "keys: undecided",
        },
        {
            "claim": "saturation",
            "model": "minilm",
            "robustness": ROBUST,
            "verdict": "reproduced",
            "alternatives": 3,
            "flipped_by": "",
            "unsettled_by": "",
        },
    ]


def test_alternatives_without_a_verdict_leave_a_claim_untested():
    got = robustness(
        table(
            [
                ("c", "m", "a", "reproduced"),
                ("c", "m", "b", "not testable"),
                ("d", "m", "a", "no verdict"),
                ("d", "m", "b", "reproduced"),
                ("d", "m", "c", "reproduced"),
            ]
        ),
        over="reading",
        within=("claim", "model"),
        reference="a",
    ).sort("claim")
    # c: one decided alternative; d: two agree, but under the reference nothing was decided, so
    # nothing says the reference would agree
    assert got["robustness"].to_list() == [UNTESTED, UNTESTED]
    assert got["verdict"].to_list() == ["reproduced", "no verdict"]  # the reference's, as is
    assert got["alternatives"].to_list() == [1, 2]
    assert got["unsettled_by"].to_list() == ["b: not testable", "a: no verdict"]


def masked_readings(prefix: str) -> pl.DataFrame:
    """One claim on one model, read with masked keys non-selected and left out (prefix), on two
    texts that decide the non-selected reading alike."""
    return table(
        [
            ("critical_n", "minilm", f"{text}, masked: {reading}", verdict)
            for text in ("book", "docs")
            for reading, verdict in (("non_selected", "not reproduced"), ("prefix", prefix))
        ]
    )


def test_an_alternative_that_is_not_applicable_is_left_out_not_undecidable():
    # an encoder has no masked keys: its prefix reading does not exist (Table 1 scores it "not
    # applicable"), so the two texts' decided verdicts alone make the claim robust
    got = robustness(
        masked_readings("not applicable"),
        over="reading",
        within=("claim", "model"),
        reference="book, masked: non_selected",
    )
    assert got.to_dicts() == [
        {
            "claim": "critical_n",
            "model": "minilm",
            "robustness": ROBUST,
            "verdict": "not reproduced",
            "alternatives": 2,
            "flipped_by": "",
            "unsettled_by": "",
        }
    ]
    # the reference itself not applicable: the verdict is the first applicable alternative's
    got = robustness(
        masked_readings("not applicable"),
        over="reading",
        within=("claim", "model"),
        reference="book, masked: prefix",
    )
    assert (got["robustness"].item(), got["verdict"].item()) == (ROBUST, "not reproduced")
    # not applicable everywhere: nothing decides it, and nothing else to show
    got = robustness(
        table([("c", "m", "a", "not applicable"), ("c", "m", "b", "not applicable")]),
        over="reading",
        within=("claim", "model"),
        reference="a",
    )
    assert got.select("robustness", "verdict", "alternatives", "unsettled_by").row(0) == (
        UNTESTED,
        "not applicable",
        0,
        "",
    )


@pytest.mark.parametrize("undecidable", ["vacuous", "not testable", "not scored", "no verdict"])
def test_an_undecidable_alternative_still_leaves_a_claim_untested(undecidable):
    got = robustness(
        masked_readings(undecidable),
        over="reading",
        within=("claim", "model"),
        reference="book, masked: non_selected",
    )
    assert got["robustness"].item() == UNTESTED
    assert got["unsettled_by"].item() == (
        f"book, masked: prefix: {undecidable}; docs, masked: prefix: {undecidable}"
    )


def test_an_undecidable_reading_beside_two_that_agree_is_not_robust():
    got = robustness(
        table(
            [
                ("c", "m", "a", "reproduced"),
                ("c", "m", "b", "reproduced"),
                ("c", "m", "x", "vacuous"),
                ("c", "m", "y", "not scored"),
            ]
        ),
        over="reading",
        within=("claim", "model"),
        reference="a",
    )
    assert got["robustness"].item() == UNTESTED
    assert got["unsettled_by"].item() == "x: vacuous; y: not scored"


def test_a_missing_column_is_named():
    with pytest.raises(ValueError, match="reading"):
        robustness(
            pl.DataFrame({"claim": ["c"], "verdict": ["reproduced"]}),
            over="reading",
            within=("claim",),
            reference="a",
        )


def test_a_reading_table1_could_not_score_leaves_the_claim_untested_not_robust():
    """Table 1 marks a claim its grid cannot score "not scored" (table1.verdict(None)), not
    "not applicable": two readings that agree beside one that could not be scored are not
    robust, where an alternative that does not exist would be left out."""
    from attnlimits_workflow.assemble import table1

    assert table1.verdict(None) == "not scored"
    got = robustness(
        table(
            [
                ("c", "m", "default", "reproduced"),
                ("c", "m", "x_key", table1.verdict(None)),
                ("c", "m", "t_raw", "reproduced"),
            ]
        ),
        over="reading",
        within=["claim", "model"],
        reference="default",
    ).row(0, named=True)
    assert got["robustness"] == UNTESTED and "x_key: not scored" in got["unsettled_by"]


def test_opposite_sides_of_a_band_flip_a_not_reproduced_claim():
    """Review 36: two readings that miss a two-sided band on opposite sides were compared by
    their verdict words alone and called robust; a reader of "not reproduced" assumes a side.
    An unknown side (an older table) agrees with either."""
    from attnlimits_workflow.robustness import compare

    both = {"default": "not reproduced", "x_key": "not reproduced", "t_raw": "not reproduced"}
    status, flipped, _ = compare(both, "default", {"default": "below", "x_key": "above"})
    assert (status, flipped) == (FRAGILE, "x_key: not reproduced (above)")
    same = compare(both, "default", {"default": "below", "x_key": "below", "t_raw": None})
    assert same[:2] == (ROBUST, "")
    # the reference's side unknown: the two that conflict are both named (review 39: which
    # one was named depended on the order)
    unknown = compare(both, "default", {"x_key": "above", "t_raw": "below"})
    assert unknown[:2] == (FRAGILE, "x_key: not reproduced (above); t_raw: not reproduced (below)")
    # a reproduced claim has no side, whatever the column says
    agreed = compare({"a": "reproduced", "b": "reproduced"}, "a", {"a": "above", "b": "below"})
    assert agreed[0] == ROBUST


def test_table1_sides_reach_the_robustness_table():
    """The reviewer's case: critical_n:closed_form:approx below the band under the default
    reading, above it under x_key: fragile, from Table 1's side column or, in a table written
    before it existed, from the measured text's opening."""
    from attnlimits_workflow.robustness import robustness_table

    def table1(measured, side):
        frame = pl.DataFrame(
            {
                "claim_id": ["critical_n:closed_form:approx"],
                "verdict": ["not reproduced"],
                "measured": [measured],
                "summary": ["critical_n"],
            }
        )
        return frame if side is None else frame.with_columns(side=pl.lit(side))

    below = "below the rule's [0.03, 0.12]: slope 0.010 (5/5 lengths found)"
    above = "above the rule's [0.03, 0.12]: slope >= 0.61: 3/5 lengths censored"
    for side_column in (False, True):
        tables = {
            "default": table1(below, "below" if side_column else None),
            "x_key": table1(above, "above" if side_column else None),
        }
        long, claims = robustness_table(
            tables, "default", "non_selected", applies={"x_key": {"critical_n"}}
        )
        row = claims.row(0, named=True)
        assert (row["robustness"], row["flipped_by"]) == (
            FRAGILE,
            "x_key: not reproduced (above)",
        )
        assert long["side"].to_list() == ["below", "above"]


def test_two_statistics_missing_their_own_bands_are_no_flip():
    """Review 37: Lemma 1 missed on its R^2 (below its band) under one reading and on its slope
    (above its band) under another says the same thing, the 1/L decay does not hold: no flip.
    The same statistic on opposite sides is one."""
    from attnlimits_workflow.robustness import compare, sides_conflict

    both = {"default": "not reproduced", "x_key": "not reproduced"}
    assert compare(both, "default", {"default": "R^2 below", "x_key": "slope above"})[0] == ROBUST
    flip = compare(both, "default", {"default": "slope below", "x_key": "slope above; R^2 below"})
    assert flip[:2] == (FRAGILE, "x_key: not reproduced (slope above; R^2 below)")
    assert sides_conflict("above", "below") and not sides_conflict("above", "above")
    assert not sides_conflict("above", "R^2 below")  # a plain side and a named one: apart


def test_two_readings_on_opposite_sides_flip_whatever_the_reference_missed():
    """Review 39: the reference missed on R^2 alone, which shares no statistic with two readings
    whose slopes lie on opposite sides of their band; those two still flip the claim."""
    from attnlimits_workflow.robustness import compare

    verdicts = dict.fromkeys(("value", "x_key", "t_raw"), "not reproduced")
    sides = {"value": "R^2 below", "x_key": "slope above", "t_raw": "slope below"}
    status, flipped, _ = compare(verdicts, "value", sides)
    assert status == FRAGILE
    assert flipped == "x_key: not reproduced (slope above); t_raw: not reproduced (slope below)"
