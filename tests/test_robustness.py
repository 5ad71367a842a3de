"""Robust and fragile claims on hand-made verdict tables."""

import polars as pl
import pytest

from attnlimits_workflow.robustness import FRAGILE, ROBUST, UNTESTED, robustness

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
            ]
        ),
        over="reading",
        within=("claim", "model"),
        reference="values",
    ).sort("claim")
    assert got.to_dicts() == [
        {
            "claim": "plateau",
            "model": "minilm",
            "robustness": FRAGILE,
            "verdict": "not reproduced",
            "alternatives": 3,
            "flipped_by": "keys: undecided",
        },
        {
            "claim": "saturation",
            "model": "minilm",
            "robustness": ROBUST,
            "verdict": "reproduced",
            "alternatives": 3,
            "flipped_by": "",
        },
    ]


def test_alternatives_without_a_verdict_neither_confirm_nor_flip():
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
    assert got["robustness"].to_list() == [UNTESTED, ROBUST]
    # the reference has no verdict: the first alternative that has one stands in
    assert got["verdict"].to_list() == ["reproduced", "reproduced"]
    assert got["alternatives"].to_list() == [1, 2]


def test_a_missing_column_is_named():
    with pytest.raises(ValueError, match="reading"):
        robustness(
            pl.DataFrame({"claim": ["c"], "verdict": ["reproduced"]}),
            over="reading",
            within=("claim",),
            reference="a",
        )
