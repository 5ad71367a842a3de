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
