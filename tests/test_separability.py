"""Theorem 2 quantities (Eqs. 10-12)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import attention_samples

from attnlimits import reference as ref
from attnlimits.separability import min_pairwise_distance, project_to_sphere, separability, xi

pytestmark = pytest.mark.unit


def test_projection_puts_points_on_the_sphere(rng):
    x = project_to_sphere(rng.normal(size=(2, 5, 3)), 2.5)
    np.testing.assert_allclose(np.linalg.norm(x, axis=2), 2.5)


def test_projection_refuses_zero_vectors():
    with pytest.raises(ValueError, match="zero embedding"):
        project_to_sphere(np.zeros((1, 2, 3)), 1.0)


def test_min_pairwise_distance_on_square():
    # four points of the unit circle at right angles: nearest neighbours are sqrt(2) apart
    x = np.array([[[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]]])
    assert min_pairwise_distance(x)[0] == pytest.approx(math.sqrt(2))


def test_min_pairwise_distance_is_exact_below_float32_resolution(rng):
    # Pairs 1e-7 and 3e-7 apart among 300 points on the sphere: float32 cannot tell them apart
    # (its Gram entries round to the same value), the float64 repair must pick the closer pair.
    x = project_to_sphere(rng.normal(size=(2, 300, 64)), 1.0)
    x[0, 17] = project_to_sphere(x[0, 5] + 1e-7 * rng.normal(size=64), 1.0)
    x[0, 211] = project_to_sphere(x[0, 40] + 3e-7 * rng.normal(size=64), 1.0)
    want = [ref.min_pairwise(row) for row in x]
    np.testing.assert_allclose(min_pairwise_distance(x), want, rtol=1e-9)
    assert min_pairwise_distance(x)[0] == pytest.approx(
        np.linalg.norm(x[0, 17] - x[0, 5]), rel=1e-9
    )


def test_xi_hand_case():
    # N = 2, alpha_sel = (0.6, 0.4), M = 1, delta = 1: the pair sum over j != k, both != i, is
    # empty for N = 2, so xi_i = alpha_other: xi = (0.4, 0.6)
    np.testing.assert_allclose(
        xi(np.array([[0.6, 0.4]]), np.array([1.0]), radius_m=1.0), [[0.4, 0.6]]
    )


def test_xi_three_selected():
    # alpha = (0.5, 0.3, 0.2), M = 1, delta = 0: xi_0^2 = 0.09 + 0.04 + (1)(2 * 0.3 * 0.2) = 0.25
    got = xi(np.array([[0.5, 0.3, 0.2]]), np.array([0.0]), radius_m=1.0)
    assert got[0, 0] == pytest.approx(0.5)


def test_negative_xi_square_is_flagged_not_hidden():
    # delta = 2M (antipodal points) makes (M^2 - delta^2/2) = -1 and xi^2 < 0 for N >= 3
    got = xi(np.array([[0.4, 0.3, 0.3]]), np.array([2.0]), radius_m=1.0)
    assert np.isnan(got).any()


def test_one_hot_attention_separates_the_selected_token():
    # alpha = (1, 0, 0): s = x_0, r = ||s|| = M, the selected token is at distance 0 <= r
    x = project_to_sphere(np.array([[[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]]), 1.0)
    res = separability(
        np.array([[1.0, 0.0, 0.0]]), x, n=1, delta=np.array([math.sqrt(2)]), radius_m=1.0
    )
    assert res.n_distinguishable[0] == 1 and res.radius[0] == pytest.approx(1.0)


def test_n_equal_l_is_degenerate():
    x = project_to_sphere(np.array([[[1.0, 0.0], [0.0, 1.0]]]), 1.0)
    res = separability(np.array([[0.5, 0.5]]), x, n=2, delta=np.array([1.0]), radius_m=1.0)
    assert res.no_outside_token[0] and np.isnan(res.lower_bound[0])
    # review 44: no N_s/N either (it read 0 and would have entered the means), as in the engine
    assert np.isnan(res.ratio[0])


def test_zero_radius_is_flagged():
    # a non-selected token whose scaled vector equals s gives r = 0
    x = np.array([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    res = separability(np.array([[0.5, 0.5, 0.0]]), x, n=1, delta=np.array([0.5]), radius_m=1.0)
    assert res.zero_radius[0] and np.isnan(res.lower_bound[0])


@given(attention_samples(min_len=2, max_dim=3), st.integers(1, 7), st.booleans())
def test_blockwise_min_pairwise_distance_matches_the_loop(sample, block, duplicate):
    """Any block size gives the brute-force minimum, duplicates (delta = 0) included."""
    _, x = sample
    if duplicate:
        x = x.copy()
        x[:, -1] = x[:, 0]
    want = np.array([ref.min_pairwise(x[s]) for s in range(len(x))])
    np.testing.assert_allclose(min_pairwise_distance(x, block=block), want, rtol=1e-12, atol=1e-15)


@given(attention_samples(min_len=3, max_dim=3), st.data())
def test_separability_matches_loop(sample, data):
    alpha, x = sample
    x = x + 1e-3  # keep away from the zero vector
    x = project_to_sphere(x, 1.0)
    n = data.draw(st.integers(1, alpha.shape[1] - 1))
    delta = np.array([ref.min_pairwise(x[s]) for s in range(len(alpha))])
    np.testing.assert_allclose(min_pairwise_distance(x), delta, rtol=1e-12, atol=1e-15)
    res = separability(alpha, x, n=n, delta=delta, radius_m=1.0)
    for s in range(len(alpha)):
        n_s, r, lower, upper = ref.separability(alpha[s], x[s], n, delta[s], 1.0)
        assert res.n_distinguishable[s] == n_s
        assert res.radius[s] == pytest.approx(r, abs=1e-12)
        if not (math.isnan(lower) or res.zero_radius[s]):
            assert res.lower_bound[s] == pytest.approx(lower, rel=1e-9, abs=1e-12)
        if not math.isnan(upper):
            assert res.upper_bound[s] == pytest.approx(upper, rel=1e-9)
        assert 1 <= n_s <= n or n_s == 0


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 9).flatmap(
        lambda length: st.tuples(
            st.just(length),
            st.integers(1, length - 1),
            st.lists(st.floats(0.0, 1.0), min_size=length, max_size=length).filter(
                lambda w: sum(w) > 1e-3
            ),
            st.integers(0, 2**16),
            st.floats(0.1, 5.0),
        )
    )
)
def test_theorem2_upper_bound_never_falls_below_its_floor(case):
    """docs/paper-notes.md section 10: r and every xi_i lie in [0, M], so each term of Eq. (11)'s
    upper bound is at least e^(-1/16), whatever the weights, vectors, N and M."""
    from attnlimits.separability import UPPER_BOUND_FLOOR

    length, n, raw, seed, radius = case
    alpha = np.array(raw) / sum(raw)
    x = np.random.default_rng(seed).standard_normal((length, 3))
    x = project_to_sphere(x[None], radius)
    delta = min_pairwise_distance(x)
    res = separability(alpha[None], x, n=n, delta=delta, radius_m=radius, zero_weight="literal")
    assert UPPER_BOUND_FLOOR == pytest.approx(math.exp(-1 / 16))
    if not np.isnan(res.upper_bound[0]):
        assert res.upper_bound[0] >= UPPER_BOUND_FLOOR - 1e-12


@given(
    st.integers(3, 10).flatmap(
        lambda length: st.tuples(
            st.just(length),
            st.integers(1, length - 1),
            st.lists(
                st.one_of(st.just(0.0), st.floats(1e-6, 1.0)), min_size=length, max_size=length
            ).filter(lambda w: sum(w) > 1e-3),
            st.integers(0, 2**16),
            st.integers(2, 5),
            st.sampled_from(["not_selected", "literal"]),
        )
    )
)
def test_theorem2_lower_bound_holds_per_sample_on_any_data(case):
    """docs/paper-notes.md section 16: with delta the smallest distance over the context, every
    selected token's distance from s is at most its xi_i, so the tokens outside r number at
    most sum xi_i / r, and Eq. (11)'s lower bound holds on every row of non-negative weights,
    exact zeros (under either zero-weight rule) included: a check that no data can fail."""
    length, n, raw, seed, dim, rule = case
    alpha = np.array(raw) / sum(raw)
    x = project_to_sphere(np.random.default_rng(seed).standard_normal((1, length, dim)), 1.7)
    delta = min_pairwise_distance(x)
    res = separability(alpha[None], x, n=n, delta=delta, radius_m=1.7, zero_weight=rule)
    if not np.isnan(res.lower_bound[0]):
        assert res.ratio[0] >= res.lower_bound[0] - 1e-12


def test_theorem2_upper_bound_on_the_mean_is_false_under_its_own_assumptions():
    """Review 23 (1): embeddings uniform on the sphere (Assumptions 1-2) and attention spread
    evenly over N keys: in high dimension every selected token lies nearer s than any other, so
    N_s = N on every draw, and E[N_s]/N = 1 exceeds Eq. (11)'s upper bound (< 1) at every N
    tried. A counterexample to the theorem, so Table 1 gives its mean check no verdict."""
    import polars as pl
    import yaml
    from project import REPO

    from attnlimits_workflow.analyses.separability import checks, summarise_inputs
    from attnlimits_workflow.assemble.claims import Scorecard
    from attnlimits_workflow.assemble.table1 import bound_claims

    rng = np.random.default_rng(6)
    samples, length, dims = 6, 64, 2048
    x = project_to_sphere(rng.standard_normal((samples, length, dims)), 1.0)
    delta = min_pairwise_distance(x)
    frames = []
    for n in (2, 4, 8, 16):
        logits = np.zeros((samples, length))
        logits[:, :n] = 14.0
        a = np.exp(logits - logits.max(1, keepdims=True))
        a /= a.sum(1, keepdims=True)
        r = separability(a, x, n=n, delta=delta, radius_m=1.0)
        assert (r.ratio == 1.0).all() and (r.upper_bound < 1.0).all()
        o = checks(r.ratio, r.lower_bound, r.upper_bound)
        frames.append(
            pl.DataFrame(
                {
                    "layer": np.zeros(samples, int),
                    "head": np.arange(samples),
                    "chunk": np.zeros(samples, int),
                    "L": np.full(samples, length),
                    "N": np.full(samples, n),
                    "ratio": r.ratio,
                    "lower_bound": r.lower_bound,
                    "upper_bound": r.upper_bound,
                    "zero_weight_selected": r.zero_weight_selected,
                    "zero_radius": r.zero_radius,
                    "negative_xi_square": r.negative_xi_square,
                    "no_outside_token": r.no_outside_token,
                    "rows": np.ones(samples, int),
                    "lower_bound_check": o["lower_bound"].tolist(),
                    "upper_bound_check": o["upper_bound"].tolist(),
                }
            )
        )
    out = summarise_inputs(pl.concat(frames))
    means = out["separability"]
    assert (means["ratio_mean"] > means["upper_bound_mean"]).all()
    card = Scorecard(yaml.safe_load((REPO / "workflow/resources/paper_claims.yaml").read_text()))
    bound_claims(card, out["violations"])
    (row,) = [r for r in card.rows if r["claim_id"].endswith("upper bound on mean N_s/N")]
    assert row["verdict"] == "no verdict", row
    assert "4 of 4 N values violate" in row["measured"]


def test_a_resample_with_no_deciding_n_is_undefined_not_a_perfect_fit():
    """Review 25 (1): "the upper bound tracks the maximum" scored a resample where no N had
    max N_s/N below 0.9 (so no N could test the bound) as a gap of 0, the best fit: 3 such
    resamples of 100 printed a lower end of 0.00 and turned a clear "not reproduced" (gap 0.13
    against a band of 0.10) into "undecided". Such a resample has no gap: undefined."""
    import polars as pl
    import yaml
    from project import REPO

    from attnlimits_workflow.analyses.separability import claims
    from attnlimits_workflow.assemble.claims import Scorecard

    def sep(ratio_max):
        return pl.DataFrame(
            {
                "L": [1024] * 3,
                "N": [16, 32, 64],
                "ratio_median": [0.8] * 3,
                "zero_weight_selected_mean": [0.0] * 3,
                "ratio_max": ratio_max,
                "upper_bound_mean": [0.99] * 3,
            }
        )

    card = Scorecard(yaml.safe_load((REPO / "workflow/resources/paper_claims.yaml").read_text()))
    replicates = [sep([0.95, 0.95, 0.86])] * 97 + [sep([0.95, 0.95, 0.91])] * 3
    claims(card, sep([0.95, 0.95, 0.86]), [(None, "")], replicates)
    (row,) = [r for r in card.rows if r["claim_id"] == "upper_bound_tracks"]
    assert row["low"] == pytest.approx(0.13) and row["high"] == pytest.approx(0.13)
    assert row["verdict"] == "not reproduced"
    # review 29: the interval leaves those resamples out, and the text counts them
    assert "(3 of 100 resamples with no N deciding)" in row["measured"]


def plain_reading_can_fall(alpha_row, n, zero_weight):
    """Rows where N_s/N under ``zero_weight`` can fall below Eq. (11)'s lower bound, row by row:
    a negative weight (outside the proof), or under not_selected a literal top-n weight above 0
    and at most float32's eps times the row's peak (left out of N_s, reviews 43-44)."""
    if any(a < 0 for a in alpha_row):
        return True
    if zero_weight == "literal":
        return False
    floor = np.finfo(np.float32).eps * max(alpha_row)
    return any(0 < alpha_row[i] <= floor for i in ref.top_n(alpha_row, n))


NEGLIGIBLE_OR_NOT = st.one_of(
    st.just(0.0), st.just(1e-9), st.just(2e-8), st.just(-0.1), st.floats(1e-6, 1.0)
)


@given(
    st.integers(2, 9).flatmap(
        lambda length: st.tuples(
            st.lists(NEGLIGIBLE_OR_NOT, min_size=length, max_size=length).filter(
                lambda w: max(w) > 1e-3
            ),
            st.integers(1, length - 1),
            st.sampled_from(["not_selected", "literal"]),
        )
    )
)
def test_open_and_left_out_rows_against_a_plain_loop(case):
    from attnlimits.selection import top_n_mask
    from attnlimits.separability import lower_bound_open, negligible_left_out

    raw, n, rule = case
    alpha = np.array(raw)[None] / max(raw)
    literal = top_n_mask(alpha, n)
    open_ = lower_bound_open(alpha, literal)[0]
    left = negligible_left_out(alpha, literal, rule)[0]
    # review 46: only a negative weight in the top-N set is outside the proof
    assert bool(open_) == any(alpha[0][i] < 0 for i in ref.top_n(alpha[0], n))
    negative = any(a < 0 for a in alpha[0])
    if not negative:
        assert bool(left) == plain_reading_can_fall(alpha[0], n, rule)


@settings(max_examples=300)
@given(
    st.integers(3, 9).flatmap(
        lambda length: st.tuples(
            st.just(length),
            st.integers(1, length - 1),
            st.lists(
                st.one_of(st.just(0.0), st.just(1e-9), st.just(2e-8), st.floats(1e-6, 1.0)),
                min_size=length,
                max_size=length,
            ).filter(lambda w: max(w) > 1e-3),
            st.integers(0, 2**16),
            st.integers(2, 4),
            st.sampled_from(["not_selected", "literal"]),
        )
    )
)
def test_theorem2_lower_bound_holds_unless_the_reading_leaves_a_weight_out(case):
    """Reviews 43-44: on rows of non-negative weights Eq. (11)'s lower bound holds under Eq.
    (10)'s count (literal) whatever the weights, and under not_selected wherever no negligible
    top-N weight is left out of N_s, by the plain reference's N_s and bound."""
    length, n, raw, seed, dim, rule = case
    alpha = np.array(raw) / sum(raw)
    x = project_to_sphere(np.random.default_rng(seed).standard_normal((1, length, dim)), 1.3)
    delta = float(min_pairwise_distance(x)[0])
    n_s, _, lower, _ = ref.separability(alpha, x[0], n, delta, 1.3, rule)
    if not plain_reading_can_fall(alpha, n, rule) and not math.isnan(lower):
        assert n_s / n >= lower - 1e-12


def test_a_negligible_top_n_weight_takes_the_reading_below_the_lower_bound():
    """Reviews 43-44: the one way below the bound on non-negative weights. Weights (1, e, 0.9e,
    0.8e) / sum with e = 1e-7, N = 2, on e1, a unit vector 0.3 rad from it, -e1 and its mirror:
    not_selected leaves the second top-N token out of N_s though it lies inside r, so N_s/N =
    1/2 against a bound of 1/2 + 4e-8; Eq. (10)'s count gives 1. The paper's check is vacuous
    (proved) either way, and the reading's shortfall is reported apart, not counted."""
    from attnlimits.checks import VACUOUS
    from attnlimits_workflow.analyses.separability import checks

    e, th = 1e-7, 0.3
    alpha = np.array([[1.0, e, 0.9 * e, 0.8 * e]])
    alpha /= alpha.sum()
    x = np.array([[[1.0, 0.0], [np.cos(th), np.sin(th)], [-1.0, 0.0], [-np.cos(th), np.sin(th)]]])
    delta = min_pairwise_distance(x)
    got = {}
    for rule in ("not_selected", "literal"):
        r = separability(alpha, x, n=2, delta=delta, radius_m=1.0, zero_weight=rule)
        outcome = checks(
            r.ratio, r.lower_bound, r.upper_bound, r.lower_bound_open, r.negligible_left_out
        )
        got[rule] = (r.ratio[0], bool(r.negligible_left_out[0]))
        assert outcome["lower_bound"][0] == VACUOUS
        below = outcome["lower_bound_reading_violated"][0]
        assert below == (1.0 if rule == "not_selected" else 0.0)
        assert r.lower_bound[0] == pytest.approx(0.5 + 4e-8, abs=1e-8)
    assert got == {"not_selected": (0.5, True), "literal": (1.0, False)}


def test_a_negative_weight_leaves_the_lower_bound_a_check():
    """Outside the proof (docs/paper-notes.md 16): a row with a negative weight is counted."""
    from attnlimits.checks import HOLDS, VIOLATED
    from attnlimits_workflow.analyses.separability import checks

    ratio, lower, upper = np.array([0.5, 0.5]), np.array([0.4, 0.6]), np.array([0.99, 0.99])
    outcome = checks(ratio, lower, upper, np.array([True, True]), np.array([False, False]))
    assert outcome["lower_bound"].tolist() == [HOLDS, VIOLATED]
    proved = checks(ratio, lower, upper, np.array([False, False]), np.array([False, False]))
    assert proved["lower_bound"].tolist() == ["vacuous", VIOLATED]  # a proved row violated: a bug
