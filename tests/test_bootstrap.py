"""Bootstrap intervals against a brute-force resampling loop and the exact bootstrap distribution;
the three-outcome verdict on hand-made intervals."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attnlimits.bootstrap import (
    NO_VERDICT,
    NOT_REPRODUCED,
    REPRODUCED,
    UNDECIDED,
    Band,
    Interval,
    bootstrap,
    bootstrap_mean,
    clopper_pearson,
    cluster_indices,
    joint_verdict,
    percentile_interval,
    verdict,
)

pytestmark = pytest.mark.unit


def test_percentile_interval_is_order_statistics_by_hand():
    # ten values, level 0.8: the 10 % and 90 % points of the empirical CDF are the 1st and 9th
    low, high, undefined = percentile_interval([7, 3, 10, 1, 9, 2, 8, 4, 6, 5], 0.8)
    assert (low, high, undefined) == (1.0, 9.0, 0)
    # undefined resamples are left out and counted; a censored +inf stays in
    low, high, undefined = percentile_interval([1, 2, np.nan, np.inf, 3, np.inf], 0.5)
    assert (low, high, undefined) == (2.0, np.inf, 1)
    assert np.isnan(percentile_interval([np.nan, np.nan], 0.9)[0])


def _loop_mean(values, resamples, level, seed):
    """The plain reference: a Python loop over resamples of the nan-mean."""
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        return bootstrap(
            lambda i: np.nanmean(values[i]) if np.isfinite(values[i]).any() else np.nan,
            values.shape,
            resamples=resamples,
            level=level,
            seed=seed,
        )
    return bootstrap(
        lambda i, j: (
            np.nanmean(values[np.ix_(i, j)]) if np.isfinite(values[np.ix_(i, j)]).any() else np.nan
        ),
        values.shape,
        resamples=resamples,
        level=level,
        seed=seed,
    )


@given(
    arrays(
        np.float64,
        st.one_of(st.tuples(st.integers(1, 7)), st.tuples(st.integers(1, 5), st.integers(1, 4))),
        elements=st.one_of(st.floats(-5, 5, width=64), st.just(np.nan)),
    ),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.5, 0.9, 0.95]),
)
def test_vectorised_mean_matches_the_resampling_loop(values, seed, level):
    fast = bootstrap_mean(values, resamples=64, level=level, seed=seed)
    slow = _loop_mean(values, 64, level, seed)
    for a, b in [(fast.value, slow.value), (fast.low, slow.low), (fast.high, slow.high)]:
        assert (np.isnan(a) and np.isnan(b)) or a == pytest.approx(b, rel=1e-12, abs=1e-12)
    assert fast.undefined == slow.undefined
    if np.isfinite(values).any():
        finite = values[np.isfinite(values)]
        # a resampled mean lies within the values it resamples
        assert fast.low >= finite.min() - 1e-12 and fast.high <= finite.max() + 1e-12


def test_interval_matches_the_exact_bootstrap_distribution():
    # Three units: all 27 resamples are equally likely, so the bootstrap distribution of the mean
    # is known exactly. Its 5 % point is 1/3 (P(mean = 0) = 1/27 < 0.05 <= 4/27) and its 95 %
    # point is 11/3 (P(mean < 11/3) = 23/27 < 0.95 <= 26/27), both far from a CDF step.
    values = np.array([0.0, 1.0, 5.0])
    means = sorted(np.mean(values[list(ix)]) for ix in itertools.product(range(3), repeat=3))
    exact = np.quantile(means, [0.05, 0.95], method="inverted_cdf")
    assert exact == pytest.approx([1 / 3, 11 / 3])
    got = bootstrap_mean(values, resamples=20000, level=0.9, seed=7)
    assert (got.low, got.high) == pytest.approx(tuple(exact))
    assert got.value == pytest.approx(2.0)


def test_grid_resamples_chunks_as_well_as_heads():
    # Every head the same, the two chunks different: resampling heads alone would give a
    # zero-width interval; the chunk axis gives means 0, 1/2 and 1 (each >= 1/4 likely).
    grid = np.array([[0.0, 1.0]] * 4)
    got = bootstrap_mean(grid, resamples=2000, level=0.9, seed=1)
    assert (got.value, got.low, got.high) == (0.5, 0.0, 1.0)
    one_axis = bootstrap_mean(grid[:, 0], resamples=2000, level=0.9, seed=1)
    assert one_axis.low == one_axis.high == 0.0


def test_same_seed_same_interval_and_refit_statistics():
    x = np.arange(10.0)
    y = 0.3 * x + np.array([0.1, -0.2, 0.05, 0.0, 0.3, -0.1, 0.2, -0.3, 0.1, 0.0])

    def slope(i):
        return np.nan if np.unique(x[i]).size < 2 else np.polyfit(x[i], y[i], 1)[0]

    a = bootstrap(slope, (10,), resamples=300, level=0.95, seed=3)
    b = bootstrap(slope, (10,), resamples=300, level=0.95, seed=3)
    assert a == b
    assert a.low < 0.3 < a.high and a.value == pytest.approx(np.polyfit(x, y, 1)[0])


@pytest.mark.parametrize(
    ("low", "high", "band", "expected"),
    [
        (0.72, 0.77, Band(0.70, 0.85), REPRODUCED),
        (0.70, 0.85, Band(0.70, 0.85), REPRODUCED),  # edges belong to the band
        (0.53, 0.58, Band(0.70, 0.85), NOT_REPRODUCED),
        (0.86, 0.90, Band(0.70, 0.85), NOT_REPRODUCED),
        (0.65, 0.75, Band(0.70, 0.85), UNDECIDED),
        (0.60, 0.95, Band(0.70, 0.85), UNDECIDED),
        (-0.60, -0.52, Band(high=-0.5), REPRODUCED),
        (-0.55, -0.40, Band(high=-0.5), UNDECIDED),
        (0.20, np.inf, Band(0.03, 0.12), NOT_REPRODUCED),  # censored above the band
        (0.05, np.inf, Band(0.03, 0.12), UNDECIDED),
        (np.nan, np.nan, Band(0.0, 1.0), NO_VERDICT),
    ],
)
def test_verdict_has_three_outcomes(low, high, band, expected):
    # the measured value inside its interval: the middle, or the low end when unbounded above
    value = low if not np.isfinite(high) else (low + high) / 2
    assert verdict(Interval(value, low, high, 0.95, 1000), band) == expected


@pytest.mark.parametrize(
    ("value", "low", "high", "expected"),
    [
        # a first passing N's resamples pass later than their sample: the interval can lie
        # wholly above the band while the measured value is in it
        (0.05, 0.13, 0.20, UNDECIDED),
        (0.20, 0.08, 0.10, UNDECIDED),  # the interval inside, the value not
        (np.nan, 0.08, 0.10, UNDECIDED),  # an undefined value decides nothing
        (0.09, 0.08, 0.10, REPRODUCED),
        (0.20, 0.13, 0.20, NOT_REPRODUCED),
    ],
)
def test_a_verdict_needs_the_value_on_the_same_side_as_its_interval(value, low, high, expected):
    assert verdict(Interval(value, low, high, 0.95, 1000), Band(0.03, 0.12)) == expected


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="level"):
        percentile_interval([1.0], 1.0)
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_mean([1.0, 2.0], resamples=0, level=0.9, seed=0)
    with pytest.raises(ValueError, match="at least one unit"):
        bootstrap_mean(np.empty(0), resamples=10, level=0.9, seed=0)
    assert Interval(0.5, 0.25, np.nan, 0.9, 10).text() == "0.5 [0.25, n/a]"


def test_clopper_pearson_by_hand():
    # 0 of 10 at 95 %: [0, 1 - 0.025^(1/10)] = [0, 0.3085]; n of n mirrors it
    low, high = clopper_pearson(0, 10, 0.95)
    assert low == 0.0 and high == pytest.approx(0.30850, abs=1e-5)
    assert high == pytest.approx(1 - 0.025 ** (1 / 10), rel=1e-12)
    low, high = clopper_pearson(10, 10, 0.95)
    assert high == 1.0 and low == pytest.approx(0.025 ** (1 / 10), rel=1e-12)
    # 1 of 2 at 90 %: the ends solve P(X >= 1 | p) = 0.05 and P(X <= 1 | p) = 0.05, i.e.
    # 1 - (1 - p)^2 = 0.05 and 1 - p^2 = 0.05
    low, high = clopper_pearson(1, 2, 0.90)
    assert low == pytest.approx(1 - 0.95**0.5, rel=1e-9)
    assert high == pytest.approx(0.95**0.5, rel=1e-9)
    with pytest.raises(ValueError):
        clopper_pearson(3, 2, 0.95)


@given(successes=st.integers(0, 30), extra=st.integers(0, 30), level=st.floats(0.5, 0.99))
def test_clopper_pearson_tails_by_the_binomial(successes, extra, level):
    # the interval's ends are where the observed count sits at the tail probability (1-level)/2
    from scipy import stats

    trials = successes + extra
    if trials == 0:
        return
    low, high = clopper_pearson(successes, trials, level)
    tail = (1 - level) / 2
    assert 0.0 <= low <= successes / trials <= high <= 1.0
    if successes > 0:
        assert stats.binom.sf(successes - 1, trials, low) == pytest.approx(tail, rel=1e-6)
    if successes < trials:
        assert stats.binom.cdf(successes, trials, high) == pytest.approx(tail, rel=1e-6)


def test_joint_verdict_by_hand():
    inside, straddle, outside = (
        Interval(0.5, 0.4, 0.6, 0.95, 100),
        Interval(0.5, 0.2, 0.6, 0.95, 100),
        Interval(0.1, 0.0, 0.2, 0.95, 100),
    )
    band = Band(0.3, 0.7)
    assert joint_verdict([inside, inside], [band, band]) == REPRODUCED
    assert joint_verdict([inside, straddle], [band, band]) == UNDECIDED
    # one statistic surely outside: no point of the box can hold
    assert joint_verdict([straddle, outside], [band, band]) == NOT_REPRODUCED
    undefined = Interval(np.nan, np.nan, np.nan, 0.95, 100, 100)
    assert joint_verdict([inside, undefined], [band, band]) == NO_VERDICT


def test_too_many_undefined_resamples_leave_a_claim_undecided():
    band = Band(0.0, 1.0)
    inside = dict(value=0.5, low=0.4, high=0.6, level=0.95, resamples=1000)
    assert verdict(Interval(**inside, undefined=50), band) == "reproduced"  # 5 %: allowed
    assert verdict(Interval(**inside, undefined=51), band) == "undecided"
    outside = {**inside, "low": 2.0, "high": 3.0}
    assert verdict(Interval(**outside, undefined=400), band) == "undecided"


def test_cluster_indices_by_hand():
    """Units 0-5 in layers (1, 0, 1, 0, 2, 2): a resample that draws layers 2, 2, 0 holds units
    4, 5, 4, 5, 1, 3, each drawn layer whole, as a plain loop over the same draws gives."""
    clusters = np.array([1, 0, 1, 0, 2, 2])

    class Fixed:
        def integers(self, low, high, size):
            assert (low, high, size) == (0, 3, (2, 3))
            return np.array([[2, 2, 0], [1, 0, 1]])

    got = cluster_indices(clusters, 2, Fixed())
    assert got.tolist() == [[4, 5, 4, 5, 1, 3], [0, 2, 1, 3, 0, 2]]


@given(
    st.integers(1, 5),
    st.integers(1, 4),
    st.integers(1, 6),
    st.integers(0, 2**32 - 1),
)
def test_cluster_indices_against_a_plain_loop(layers, per_layer, resamples, seed):
    order = np.random.default_rng(seed).permutation(layers * per_layer)
    clusters = np.repeat(np.arange(layers), per_layer)[order]
    got = cluster_indices(clusters, resamples, np.random.default_rng(seed))
    picks = np.random.default_rng(seed).integers(0, layers, size=(resamples, layers))
    want = [
        [unit for layer in row for unit in range(len(clusters)) if clusters[unit] == layer]
        for row in picks
    ]
    assert got.tolist() == want
    # every drawn layer is whole: each resample's units come in whole layers
    for row in got:
        counts = np.bincount(clusters[row], minlength=layers)
        assert (counts % per_layer == 0).all()


def test_cluster_indices_refuses_unequal_clusters_and_no_resamples():
    with pytest.raises(ValueError, match="same number of units in every cluster, got 0: 2, 1: 1"):
        cluster_indices([0, 0, 1], 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="resamples must be >= 1"):
        cluster_indices([0, 1], 0, np.random.default_rng(0))
