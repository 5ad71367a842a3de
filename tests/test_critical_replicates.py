"""The critical-N search rerun on bootstrap resamples of its units, against a brute-force
rerun: draw the units with numpy, scan every N with scipy's exact KS test, take the first
pass; and Table 1's slope interval over the rerun searches, by hand."""

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ks_2samp

from attnlimits.bootstrap import resample_indices
from attnlimits.critical import (
    CensoredSlope,
    first_passing_n_resampled,
    ks_steps_rows,
    resampled_critical_n,
)
from attnlimits_workflow.analyses import critical_cells

pytestmark = pytest.mark.unit

ALPHA = 0.05


def _samples(units: int, max_n: int, seed: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per N, (d, e) per unit with d = e + 3 / N: the same units shifted less and less, so the
    KS distance of any resample falls with N (a shift of one sample against itself grows the
    distance monotonically) and a scan and the bracketing search find the same first N."""
    e = np.random.default_rng(seed).normal(size=units)
    return {n: (e + 3.0 / n, e) for n in range(1, max_n + 1)}


def _brute_force(values, draws, max_n):
    out = []
    for drawn in draws:
        first = None
        for n in range(1, max_n + 1):
            d, e = values[n]
            if ks_2samp(d[drawn], e[drawn], method="exact").pvalue >= ALPHA:
                first = n
                break
        out.append(first)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rerun_search_matches_a_brute_force_scan(seed):
    units, max_n = 12, 40
    values = _samples(units, max_n, seed)
    calls: dict[int, int] = {}

    def values_at(n):
        calls[n] = calls.get(n, 0) + 1
        return values[n]

    draws = resample_indices([units], 30, np.random.default_rng(seed))[0]
    search = _first_pass(list(range(1, max_n + 1)), ALPHA)
    got = resampled_critical_n(values_at, search, draws)
    want = _brute_force(values, draws, max_n)
    assert [n for n, _ in got] == want
    assert len(set(want)) > 1  # the resamples disagree: the interval has a width
    # a found N is its own top only when the search ended there; censored runs reached max_n
    assert all(top == max_n for n, top in got if n is None)


def test_censored_resamples_report_no_pass():
    # d far from e at every N: no resample passes, each is censored at the top N
    units, max_n = 10, 8
    e = np.arange(units, dtype=float)
    values = {n: (e + 100.0, e) for n in range(1, max_n + 1)}

    search = _first_pass(list(range(1, max_n + 1)), ALPHA)
    draws = resample_indices([units], 5, np.random.default_rng(0))[0]
    assert resampled_critical_n(values.__getitem__, search, draws) == [(None, max_n)] * 5


def test_slope_interval_by_hand():
    # two resamples at L = 100, 200: N_crit 5, 10 (slope 0.05) and 8, 16 (slope 0.08); a third
    # censored at L = 200 with top N 199: its slope is at least (100*8 + 200*199)/(100^2+200^2)
    # and unbounded above
    reps = pl.DataFrame(
        {
            "replicate": [0, 0, 1, 1, 2, 2],
            "L": [100, 200] * 3,
            "N_crit": [5, 10, 8, 16, 8, None],
            "censored": [False, False, False, False, False, True],
            "top_N": [5, 10, 8, 16, 8, 199],
        }
    )
    point = CensoredSlope(0.06, 0.06, 0)
    got = critical_cells.slope_interval(point, reps, 0.5)
    # level 0.5: the 25 % and 75 % order statistics of 3 values are the 1st and 3rd
    assert got.value == 0.06 and got.resamples == 3
    assert got.low == pytest.approx(0.05)
    assert got.high == np.inf
    got = critical_cells.slope_interval(point, reps.filter(pl.col("replicate") < 2), 0.5)
    assert (got.low, got.high) == (pytest.approx(0.05), pytest.approx(0.08))
    assert critical_cells.slope_interval(point, None, 0.5) is None
    # the point search censored (slope >= 0.076, open above): resamples that all passed do not
    # close the interval, so a censored slope is never "reproduced" by the band
    censored = CensoredSlope(0.02, 0.076, 1)
    got = critical_cells.slope_interval(censored, reps.filter(pl.col("replicate") < 2), 0.5)
    assert got.high == np.inf and got.low == pytest.approx(0.05)


def _first_pass(grid, alpha):
    def search(ks_at):
        for n in grid:
            if ks_at(n).pvalue >= alpha:
                return n, n
        return None, grid[-1]

    return search


@given(
    seed=st.integers(0, 2**32 - 1),
    units=st.integers(2, 40),
    ties=st.booleans(),
    alpha=st.sampled_from([0.01, 0.05, 0.5]),
)
@settings(max_examples=60, deadline=None)
def test_vectorised_list_search_equals_the_loop_on_every_resample(seed, units, ties, alpha):
    """first_passing_n_resampled (every resample at once) against resampled_critical_n with the
    list search, resample by resample: the same first N, the same N asked for, in grid order;
    rounded values put ties within and between the samples."""
    rng = np.random.default_rng(seed)
    grid = [1, 2, 3, 5, 8, 13]
    values = {}
    for n in grid:
        d, e = rng.normal(size=units) + 2.0 / n, rng.normal(size=units)
        values[n] = (np.round(d), np.round(e)) if ties else (d, e)
    draws = resample_indices([units], 50, rng)[0]
    asked_loop, asked_fast = [], []

    def values_from(asked):
        def at(n):
            asked.append(n)
            return values[n]

        return at

    loop = resampled_critical_n(values_from(asked_loop), _first_pass(grid, alpha), draws)
    fast = first_passing_n_resampled(values_from(asked_fast), grid, alpha, draws)
    assert fast == loop
    assert sorted(set(asked_fast)) == sorted(set(asked_loop))


def test_ks_steps_rows_by_hand():
    # a = [1, 2], b = [2, 3]: at 1 F_a - F_b = 1/2, at 2 (a tie) 1 - 1/2 = 1/2, at 3 0: h = 1
    assert ks_steps_rows(np.array([[1.0, 2.0]]), np.array([[2.0, 3.0]])).tolist() == [1]
    # identical samples: every step closes at the end of its run of ties
    assert ks_steps_rows(np.array([[1.0, 1.0, 2.0]]), np.array([[1.0, 1.0, 2.0]])).tolist() == [0]
    # disjoint: h = n
    assert ks_steps_rows(np.array([[0.0, 0.5, 0.7]]), np.array([[1.0, 2.0, 3.0]])).tolist() == [3]


@given(
    seed=st.integers(0, 2**32 - 1),
    units=st.sampled_from([3, 72, 540]),
    shift=st.sampled_from([0.0, 0.3, 50.0]),
    holes=st.booleans(),
)
@settings(max_examples=15, deadline=None)
def test_vectorised_search_equals_the_loop_at_the_edges(seed, units, shift, holes):
    """The fast list search against the loop where the table is least likely to hold: many units
    (shift 50 separates the samples, so the exact p-value underflows to 0 at n = 540), a grid that
    ends at N = L - 1 with every resample censored there, and non-finite values (which the loop's
    ks_test drops and the fast path must hand to it)."""
    rng = np.random.default_rng(seed)
    length = 64
    grid = [1, 4, 16, length - 1]
    values = {}
    for n in grid:
        d, e = rng.normal(size=units) + shift * (n < length - 1), rng.normal(size=units)
        if holes and units > 3:  # (3 units: a resample may draw no finite value, an error)
            d[rng.integers(units)] = np.inf
            e[rng.integers(units)] = np.nan
        values[n] = (d, e)
    draws = resample_indices([units], 20, rng)[0]
    loop = resampled_critical_n(values.__getitem__, _first_pass(grid, ALPHA), draws)
    fast = first_passing_n_resampled(values.__getitem__, grid, ALPHA, draws)
    assert fast == loop
    if shift == 50.0 and units > 3 and not holes:
        # separated at every N but the last: nothing passes before L - 1 (3 units cannot
        # reject at 5 %: their smallest p-value is 2 / C(6, 3) = 0.1)
        assert all(n in (None, length - 1) for n, _ in fast)


def test_largest_share_by_hand():
    from attnlimits.critical import largest_share

    # N_crit 4 at L = 32 (0.125), 50 at L = 1024; a censored L = 256 with top N 10 (>= 0.039)
    got = largest_share(
        np.array([32, 256, 1024]),
        np.array([4.0, np.nan, 50.0]),
        np.array([False, True, False]),
        np.array([4, 10, 50]),
    )
    assert got.found == pytest.approx(0.125) and got.at_least == pytest.approx(0.125)
    assert got.censored == 1 and got.upper == np.inf
    # every length censored: nothing found, the bound alone
    none = largest_share(np.array([32]), np.array([np.nan]), np.array([True]), np.array([31]))
    assert np.isnan(none.found) and none.at_least == pytest.approx(32 / 32)  # N_crit > 31
