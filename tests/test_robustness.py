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
                ("c", "m", "b", "not applicable"),
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
    assert got["unsettled_by"].to_list() == ["b: not applicable", "a: no verdict"]


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
