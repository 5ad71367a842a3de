"""The critical N as the grid cell it is, the paper's comparator first, and the side a "not
reproduced" falls on (issue 46, points 7 and 8). Hand-made curves, worked by hand."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import yaml

from attnlimits.critical_search import cell_floor, critical_n_list
from attnlimits_workflow.analyses import critical_cells, critical_n
from attnlimits_workflow.assemble import table1

pytestmark = pytest.mark.unit

CLAIMS = yaml.safe_load(
    (Path(__file__).resolve().parents[1] / "workflow/resources/paper_claims.yaml").read_text()
)


def test_a_first_pass_is_known_to_its_cell():
    assert cell_floor(29, [1, 2, 26]) == 27  # N = 26 failed, so N_crit is 27, 28 or 29
    assert cell_floor(5, [5]) == 1  # the first N tried passed: anything from 1
    assert cell_floor(1, [1]) == 1
    assert cell_floor(None, [1, 2]) is None  # censored: no pass
    assert cell_floor(7, [6, 7, 9]) == 7  # a bisection that tried N - 1 knows N exactly


def test_band_edges_put_floor_and_ceil_on_the_list():
    """0.03 x 1024 = 30.72: round gives 31 alone; the edge adds 30."""
    assert 30 not in critical_n_list(1024, [0.03])
    assert critical_n_list(1024, [0.03], edges=[0.03]) == [30, 31, 1023]
    # an edge on an integer adds nothing: 0.06 x 100 = 6
    assert critical_n_list(100, [0.06], edges=[0.06]) == [6, 99]


def test_the_search_rows_carry_the_cell():
    rows = critical_n.table_rows(
        32, "both", "closed_form", [(1, 0.0), (26, 0.0), (29, 0.5)], {}, 29, False, 29, 72
    )
    assert {r["N_crit_low"] for r in rows} == {27}
    reps = critical_n.replicate_rows(
        32, "both", "closed_form", [(29, 31), (None, 31)], grid=[1, 2, 26, 29, 31]
    )
    assert [r["N_crit_low"] for r in reps] == [27, None]


def curve(lengths, n_crit, low, kinds=("closed_form", "monte_carlo")) -> pl.DataFrame:
    size = len(lengths)
    return pl.concat(
        [
            pl.DataFrame(
                {
                    "L": lengths,
                    "masked": ["both"] * size,
                    "expectation": [kind] * size,
                    "N_crit": n_crit,
                    "N_crit_low": low,
                    "censored": [False] * size,
                    "top_N": n_crit,
                    "evaluations": [20] * size,
                    "ks_samples": [72] * size,
                    "ks_min_pvalue": [1e-6] * size,
                },
                schema_overrides={"N_crit": pl.Int64, "N_crit_low": pl.Int64},
            )
            for kind in kinds
        ]
    )


def scored(crit: pl.DataFrame) -> list[dict]:
    card = table1.Scorecard(CLAIMS)
    critical_n.claims(card, crit, 0.01)
    return card.rows


def test_the_paper_comparator_comes_first():
    rows = scored(curve([100, 200], [5, 10], [5, 10]))
    kinds = [r["claim_id"].split(":")[1] for r in rows if r["claim_id"].startswith("critical_n")]
    assert kinds[0] == "closed_form" and kinds.index("monte_carlo") == 2


def test_a_quantised_share_is_printed_as_its_cell_and_says_above():
    """The findings' 0.906 = 29/32, 0.703 = 45/64, 0.602 = 77/128 are the top ends of cells
    (26/32, 29/32], (38/64, 45/64], (64/128, 77/128]; "fewer than 6 %" is above either way."""
    rows = {r["claim_id"]: r for r in scored(curve([32, 64, 128], [29, 45, 77], [27, 39, 65]))}
    below = rows["critical_n:closed_form:below"]
    assert below["verdict"] == "not reproduced"
    assert below["measured"].startswith("above the rule's <= 0.06: ")
    assert "32: (0.812, 0.906]" in below["measured"]
    assert "largest N_crit / L lies in [0.844, 0.906]" in below["measured"]
    # review 36: only the listed N were tried, so the cell reading says what it assumes
    assert (
        "lies in [0.844, 0.906] if each length's first pass over every integer N lies in"
        in (below["measured"])
    )


def test_a_share_below_the_band_says_below():
    """N_crit = 1 at L = 100, 200, 400 (found exactly): slope 1/210 = 0.0048, under 0.03."""
    rows = {r["claim_id"]: r for r in scored(curve([100, 200, 400], [1, 2, 4], [1, 2, 4]))}
    approx = rows["critical_n:closed_form:approx"]
    assert approx["verdict"] == "not reproduced"
    assert approx["measured"].startswith("below the rule's [0.03, 0.12]: ")
    assert "grid cells" not in approx["measured"]  # each N_crit known exactly


def test_a_cell_that_straddles_the_band_is_undecided():
    """N_crit = 8 at L = 100 with the cell (4, 8]: the share lies in [0.05, 0.08], across 0.06."""
    rows = {r["claim_id"]: r for r in scored(curve([100], [8], [5]))}
    assert rows["critical_n:closed_form:below"]["verdict"] == "undecided"


def test_bootstrap_intervals_read_the_resamples_cells():
    point = critical_n.censored_slope([100], [10.0], [False], [10])
    reps = pl.DataFrame(
        {
            "replicate": [0, 1, 2, 3],
            "L": [100] * 4,
            "N_crit": [10, 10, 12, 12],
            "N_crit_low": [7, 7, 11, 11],
            "censored": [False] * 4,
            "top_N": [10, 10, 12, 12],
        }
    )
    cells = critical_cells.slope_interval(point, reps, 0.5)
    ends = critical_cells.slope_interval(point, reps.drop("N_crit_low"), 0.5)
    assert cells.low == pytest.approx(0.07) and ends.low == pytest.approx(0.10)
    assert cells.high == ends.high == pytest.approx(0.12)


def search_table(
    length: int, tried, fixed, n_crit, n_low, top_n, expectation: str = "closed_form"
) -> pl.DataFrame:
    """A critical-N table of one (L, reading, expectation), as the analysis writes it: the
    search's (N, p) then the fixed fractions' (N, p)."""
    rows = [
        {"step": "search", "fraction": None, "N": n, "p_value": p, "ks_statistic": None}
        for n, p in tried
    ] + [
        {"step": "fixed_fraction", "fraction": f, "N": n, "p_value": p, "ks_statistic": 0.1}
        for f, (n, p) in fixed.items()
    ]
    common = {
        "L": length,
        "masked": "both",
        "expectation": expectation,
        "N_crit": n_crit,
        "N_crit_low": n_low,
        "censored": n_crit is None,
        "top_N": top_n,
        "evaluations": len(tried),
        "ks_samples": 72,
        "ks_min_pvalue": 1e-6,
    }
    return pl.DataFrame(
        [{**common, **r} for r in rows],
        schema_overrides={"N_crit": pl.Int64, "N_crit_low": pl.Int64, "fraction": pl.Float64},
    )


def test_the_summary_keeps_the_p_values_either_side_of_the_pass():
    """L = 100: the search fails at 1, 5 and passes at 10 (cell (5, 10]); the fixed fractions
    test N = 3 (p 0.2: a pass below the cell), 25 (p 0.001: a failure above) and 50 (p 0.6).
    A censored L = 200 whose fixed N = 50 passed (p 0.3) also has a pass below its top N."""
    from attnlimits_workflow.assemble.summaries import critical_n_summary

    crit = pl.concat(
        [
            search_table(
                100,
                [(1, 0.0), (5, 0.001), (10, 0.4)],
                {0.03: (3, 0.2), 0.25: (25, 0.001), 0.5: (50, 0.6)},
                10,
                6,
                10,
            ),
            search_table(
                200, [(1, 0.0), (100, 0.001), (199, 0.002)], {0.25: (50, 0.3)}, None, None, 199
            ),
        ]
    )
    summary = critical_n_summary(crit).filter(pl.col("expectation") == "closed_form")
    first, censored = summary.sort("L").iter_rows(named=True)
    assert (first["least_p_above"], first["N_least_p_above"]) == (0.001, 25)
    assert (first["most_p_below"], first["N_most_p_below"]) == (0.2, 3)
    assert censored["least_p_above"] is None
    assert (censored["most_p_below"], censored["N_most_p_below"]) == (0.3, 50)
    text = critical_cells.non_monotone_text(summary, 0.01)
    assert text.startswith("the KS outcome is not monotone in N at 2/2 lengths")
    assert "L = 100 (first pass N = 10; fails at N = 25 (p 0.001), passes at N = 3 (p 0.2))" in text
    assert "L = 200 (no pass; passes at N = 50 (p 0.3))" in text
    # at a level of 0.0005 the failure above passes and the passes below stay passes
    assert "fails at" not in critical_cells.non_monotone_text(summary, 0.0005)


def test_a_monotone_curve_is_not_flagged_and_a_non_monotone_one_is_in_table1():
    monotone = search_table(100, [(1, 0.0), (5, 0.001), (10, 0.4)], {0.5: (50, 0.6)}, 10, 6, 10)
    from attnlimits_workflow.assemble.summaries import critical_n_summary

    assert critical_cells.non_monotone_text(critical_n_summary(monotone), 0.01) == ""
    flipped = pl.concat(
        [
            search_table(100, [(1, 0.0), (5, 0.001), (10, 0.4)], {0.5: (50, p)}, 10, 6, 10, kind)
            for kind, p in (("closed_form", 0.002), ("monte_carlo", 0.6))
        ]
    )
    rows = {r["claim_id"]: r for r in scored(critical_n_summary(flipped))}
    assert "not monotone in N at 1/1 lengths" in rows["critical_n:closed_form:below"]["measured"]
    assert "fails at N = 50 (p 0.002)" in rows["critical_n:closed_form:below"]["measured"]
    assert "not monotone" not in rows["critical_n:monte_carlo:below"]["measured"]


def test_a_pass_below_the_cell_leaves_the_side_above_undecided():
    """Third review of issue 46 (S3): at L = 100 the search passes first at N = 50 (cell
    (41, 50]: N_crit / L 0.5, above <= 0.06), but the fixed fraction N = 3 passed too: the first
    pass over every N may lie below the cell, so "above" is undecided. A verdict below its band
    cannot be moved by a lower pass and stays."""
    from attnlimits_workflow.assemble.summaries import critical_n_summary

    def curve(fixed_p, n_crit, n_low):
        return pl.concat(
            [
                search_table(
                    100,
                    [(1, 0.0), (n_low - 1, 0.001), (n_crit, 0.4)],
                    {0.03: (3, fixed_p)},
                    n_crit,
                    n_low,
                    n_crit,
                    kind,
                )
                for kind in ("closed_form", "monte_carlo")
            ]
        )

    monotone = {r["claim_id"]: r for r in scored(critical_n_summary(curve(0.001, 50, 42)))}
    assert monotone["critical_n:closed_form:below"]["verdict"] == "not reproduced"
    flagged = {r["claim_id"]: r for r in scored(critical_n_summary(curve(0.3, 50, 42)))}
    assert flagged["critical_n:closed_form:below"]["verdict"] == "undecided"
    assert "passes at N = 3 (p 0.3)" in flagged["critical_n:closed_form:below"]["measured"]


def test_a_pass_below_the_cell_cannot_undo_fewer_than_six_percent():
    """Fourth review of issue 46 (M1): a pass below a cell can only lower the first pass, so a
    largest share already within "<= 0.06" stays reproduced; the two-sided [0.03, 0.12] band
    can be left below, so its "reproduced" becomes undecided."""
    from attnlimits_workflow.assemble.summaries import critical_n_summary

    def curve(fixed_p):
        return pl.concat(
            [
                search_table(
                    100, [(1, 0.0), (3, 0.001), (5, 0.4)], {0.02: (2, fixed_p)}, 5, 4, 5, kind
                )
                for kind in ("closed_form", "monte_carlo")
            ]
        )

    plain = {r["claim_id"]: r for r in scored(critical_n_summary(curve(0.001)))}
    assert plain["critical_n:closed_form:below"]["verdict"] == "reproduced"
    assert plain["critical_n:closed_form:approx"]["verdict"] == "reproduced"
    flagged = {r["claim_id"]: r for r in scored(critical_n_summary(curve(0.3)))}
    assert flagged["critical_n:closed_form:below"]["verdict"] == "reproduced"
    assert flagged["critical_n:closed_form:approx"]["verdict"] == "undecided"


def test_a_point_and_its_interval_on_opposite_sides_are_undecided():
    """Seventh review of issue 46 (M1): N_crit = 2 and 4 at L = 100 and 200 (slope 0.02, below
    [0.03, 0.12]) while every resample finds 20 and 40 (interval [0.2, 0.2], above): the
    verdict read "not reproduced, below" against its own interval. No side: undecided."""
    crit = curve([100, 200], [2, 4], [2, 4])
    reps = pl.concat(
        [
            pl.DataFrame(
                {
                    "replicate": [i, i],
                    "L": [100, 200],
                    "masked": ["both"] * 2,
                    "expectation": [kind] * 2,
                    "N_crit": [20, 40],
                    "N_crit_low": [20, 40],
                    "censored": [False] * 2,
                    "top_N": [20, 40],
                }
            )
            for i in range(50)
            for kind in ("closed_form", "monte_carlo")
        ]
    )
    card = table1.Scorecard(CLAIMS, level=0.95)
    critical_n.claims(card, crit, 0.01, reps)
    rows = {r["claim_id"]: r for r in card.rows}
    approx = rows["critical_n:closed_form:approx"]
    assert approx["verdict"] == "undecided", approx["measured"]
    assert not approx["measured"].startswith(("below", "above"))
    # the same point with resamples that agree with it: below, named
    agree = reps.with_columns(pl.col("N_crit") // 10, pl.col("N_crit_low") // 10)
    card = table1.Scorecard(CLAIMS, level=0.95)
    critical_n.claims(card, crit, 0.01, agree)
    rows = {r["claim_id"]: r for r in card.rows}
    assert rows["critical_n:closed_form:approx"]["verdict"] == "not reproduced"
    assert rows["critical_n:closed_form:approx"]["measured"].startswith("below the rule's")


def test_the_glance_and_robust_list_print_the_cells_not_their_tops():
    """Issue 46 point 7: the page's first table and its robust list printed 0.906, the top of
    the cells, as if it were precise; they print the range the cells allow, as Table 1 does."""
    from attnlimits_workflow.assemble.claim_lists import evidence
    from attnlimits_workflow.assemble.findings import glance_number
    from attnlimits_workflow.assemble.scorecard import interval_cell

    rows = {r["claim_id"]: r for r in scored(curve([32, 64, 128], [29, 45, 77], [27, 39, 65]))}
    below = rows["critical_n:closed_form:below"]
    assert glance_number(interval_cell(below), below["measured"]) == "in [0.844, 0.906]"
    # review 48: with a bootstrap interval, the glance prints it beside the cells' range: a
    # range inside the rule read "undecided" with no number saying why
    assert (
        glance_number("0.906 [0.5, 1]", below["measured"])
        == "in [0.844, 0.906], bootstrap [0.5, 1]"
    )
    assert evidence(interval_cell(below), below["measured"]).startswith(
        "largest N_crit / L in [0.844, 0.906] (grid cells)"
    )
    # known exactly: the number itself
    exact = {r["claim_id"]: r for r in scored(curve([100, 200, 400], [1, 2, 4], [1, 2, 4]))}
    approx = exact["critical_n:closed_form:approx"]
    assert glance_number(interval_cell(approx), approx["measured"]) == interval_cell(approx)


def test_a_printed_ks_p_keeps_its_side_of_alpha():
    """Review 14: a failing N's p of 0.00996 at alpha 0.01 printed "(p 0.01)"."""
    curve = pl.DataFrame(
        {
            "L": [100],
            "N_crit": [10],
            "least_p_above": [0.00996],
            "N_least_p_above": [20],
            "most_p_below": [None],
            "N_most_p_below": [None],
        }
    )
    text = critical_cells.non_monotone_text(curve, 0.01)
    assert "fails at N = 20 (p 0.00996)" in text, text


def test_an_expectation_without_rows_reads_no_critical_n_rows():
    """Review 22 (7): the D spread was formatted before the empty-frame check, so a summary with
    the closed form alone raised TypeError instead of scoring "no critical-N rows"."""
    from attnlimits_workflow.assemble.summaries import critical_n_summary

    only = search_table(100, [(1, 0.0), (5, 0.001), (10, 0.4)], {0.5: (50, 0.6)}, 10, 6, 10)
    rows = {r["claim_id"]: r for r in scored(critical_n_summary(only))}
    assert rows["critical_n:monte_carlo:below"]["measured"] == "no critical-N rows"
    assert rows["critical_n:closed_form:below"]["measured"] != "no critical-N rows"


def test_the_critical_n_says_which_ks_distance_its_test_can_reject():
    """Review 25 (3): with few values per side the KS test passes early whatever the curve, so
    N_crit sits at the list's floor and "fewer than 6 %" reads reproduced on low power alone.
    The measured text says which D the test can reject at all (about 0.27 at 72 per side, 0.66 at
    12; the asymptotic critical value at alpha = 0.01)."""
    wide = {r["claim_id"]: r for r in scored(curve([100, 200], [5, 10], [5, 10]))}
    assert (
        "rejects only a KS distance D above about 0.27"
        in wide["critical_n:closed_form:below"]["measured"]
    )
    few = curve([100, 200], [1, 2], [1, 1]).with_columns(pl.lit(12).alias("ks_samples"))
    rows = {r["claim_id"]: r for r in scored(few)}
    assert (
        "rejects only a KS distance D above about 0.66"
        in rows["critical_n:closed_form:below"]["measured"]
    )
