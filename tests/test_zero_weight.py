"""A top-N token of weight 0 is neither selected nor distinguishable (analysis.zero_weight:
not_selected), on hand-made rows: a sparse row (as sparsemax gives), a causal row t < N under
``masked: non_selected``, and the paper's literal reading beside it."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlimits import distance as dist
from attnlimits import reference
from attnlimits.protocol import RowBlock, row_critical_statistics, row_separability, row_statistics
from attnlimits.separability import separability

pytestmark = pytest.mark.unit

# Four tokens on the unit circle; the row weights only the first two (a sparsemax-like row).
X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [0.6, 0.8]])
ALPHA = np.array([0.6, 0.4, 0.0, 0.0, 0.0])
S_NORM = math.hypot(0.6, 0.4)  # ||s|| for s = 0.6 x0 + 0.4 x1


@pytest.mark.parametrize(
    ("rule", "n_s", "zero"),
    [
        # selected 0.6 x0 and 0.4 x1 lie at 0.4 and 0.6 from s, within r = ||s|| = 0.721; the two
        # zero-weight top-4 tokens lie at exactly ||s|| = r: literally "distinguishable"
        ("literal", 4, 2),
        ("not_selected", 2, 2),
    ],
)
def test_sparse_row_zero_weights_never_distinguishable(rule, n_s, zero):
    res = separability(
        ALPHA[None], X[None], n=4, delta=np.array([0.5]), radius_m=1.0, zero_weight=rule
    )
    assert res.n_distinguishable[0] == n_s
    assert res.ratio[0] == n_s / 4  # N stays the denominator
    assert res.radius[0] == pytest.approx(S_NORM)
    assert res.zero_weight_selected[0] == zero
    got = reference.separability(list(ALPHA), list(X), 4, 0.5, 1.0, rule)
    assert got[0] == n_s
    block = RowBlock.of(ALPHA[None], X, np.array([5]), zero_weight=rule)
    row = row_separability(block, n=4, delta=0.5, radius_m=1.0)
    assert row["ratio"][0] == n_s / 4
    assert row["zero_weight_selected"][0] == zero
    # the bounds run over the literal top-4 weights: the same under both rules
    assert row["upper_bound"][0] == pytest.approx(res.upper_bound[0])


def test_distance_counts_zero_weight_top_n_tokens_as_not_selected():
    """d~ of the top-3 set {0, 1, 2}: token 2 has weight 0, so under the rule it is left out at
    ||0 - s|| = ||s||, beside token 3 and 4 (each ||s||)."""
    literal = 2 * S_NORM  # tokens 3, 4
    for rule, want in (("literal", literal), ("not_selected", literal + S_NORM)):
        w = dist.weighted(ALPHA[None], X[None], zero_weight=rule)
        assert dist.distance_to_context(w, n=3)[0] == pytest.approx(want)
        assert reference.distance(list(ALPHA), list(X), {0, 1, 2}, rule) == pytest.approx(want)
        block = RowBlock.of(ALPHA[None], X, np.array([5]), zero_weight=rule)
        assert row_statistics(block, n=3)["distance"][0] == pytest.approx(want)
        crit = row_critical_statistics(block, [3])
        assert crit["distance"][0, 0] == pytest.approx(want)


def test_causal_row_below_n_under_non_selected():
    """Row t = 1 of a causal L = 4 head (keys 2, 3 masked, weight 0), N = 3: literally the top-3
    set takes masked key 2 (ties to the lower index); under the rule it does not, and d~ counts
    both masked keys at ||s||, and N_s/N counts only the visible selected keys."""
    x = X[:4]
    alpha = np.array([[0.5, 0.5, 0.0, 0.0]])
    s_norm = math.hypot(0.5, 0.5)
    for rule, d_want, zero in (("literal", s_norm, 1), ("not_selected", 2 * s_norm, 1)):
        block = RowBlock.of(alpha, x, np.array([4]), zero_weight=rule)
        out = row_statistics(block, n=3)
        assert out["distance"][0] == pytest.approx(d_want)
        assert out["zero_weight_selected"][0] == zero
        sep = row_separability(block, n=3, delta=math.sqrt(2), radius_m=1.0)
        # selected 0.5 x0, 0.5 x1 lie at 0.5 from s, r = ||s|| = 0.707: both distinguishable;
        # the masked key 2 literally ties at r
        assert sep["ratio"][0] == pytest.approx((3 if rule == "literal" else 2) / 3)


def test_n_equal_one_and_no_zero_weights_unchanged():
    """Rows without zero weights give the same numbers under both rules (N = 1 and N = L - 1)."""
    rng = np.random.default_rng(0)
    alpha = rng.dirichlet(np.ones(6), size=3)
    x = rng.standard_normal((3, 6, 4))
    x /= np.linalg.norm(x, axis=2, keepdims=True)
    for n in (1, 5):
        a = separability(alpha, x, n=n, delta=np.full(3, 0.1), radius_m=1.0, zero_weight="literal")
        b = separability(alpha, x, n=n, delta=np.full(3, 0.1), radius_m=1.0)
        np.testing.assert_array_equal(a.ratio, b.ratio)
        wl = dist.weighted(alpha, x, zero_weight="literal")
        wr = dist.weighted(alpha, x)
        np.testing.assert_array_equal(
            dist.distance_to_context(wl, n=n), dist.distance_to_context(wr, n=n)
        )
        assert (b.zero_weight_selected == 0).all()


def test_fixed_set_bound_uses_the_selected_set():
    """Theorem 1.1's bound for the selected set I (weight-0 top-N keys left out): |I| = 2, not 3,
    in (L - |I|), and only selected keys in max ||x_j|| and in D."""
    x = np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0], [0.0, -1.0], [0.5, 0.5]])
    for rule in ("literal", "not_selected"):
        want = reference.upper_bound(list(ALPHA), list(x), 3, rule)
        w = dist.weighted(ALPHA[None], x[None], zero_weight=rule)
        assert dist.fixed_set_upper_bound(w, n=3)[0] == pytest.approx(want)
        block = RowBlock.of(ALPHA[None], x, np.array([5]), zero_weight=rule)
        assert row_statistics(block, n=3)["upper_bound"][0] == pytest.approx(want)
    # by hand, not selected: I = {0, 1}, m = 1: bound = 0 * D + max(1, 2) * (1 * 3 - 0) = 6
    assert reference.upper_bound(list(ALPHA), list(x), 3) == pytest.approx(6.0)
    # literal: I = {0, 1, 2}: max ||x_j|| = 3 and L - N = 2: 3 * 2 = 6 as well, D unused (m = 1)
    assert reference.upper_bound(list(ALPHA), list(x), 3, "literal") == pytest.approx(6.0)


def test_monte_carlo_expectation_follows_the_rule():
    """E over every 2-subset, enumerated, against the fast stratified estimate with enough draws
    to visit every stratum exhaustively in expectation; both with the zero-weight rule."""
    alpha = np.array([[0.7, 0.3, 0.0, 0.0]])
    x = X[None, :4]
    for rule in ("literal", "not_selected"):
        exact = reference.exact_expected_distance(list(alpha[0]), list(x[0]), 2, rule)
        w = dist.weighted(alpha, x, zero_weight=rule)
        est = dist.monte_carlo_expected_distance(
            w, n=2, draws=4000, rng=np.random.default_rng(1), strata=0
        )
        assert est.mean[0] == pytest.approx(exact, abs=4 * est.stderr[0] + 1e-12)
    lit = reference.exact_expected_distance(list(alpha[0]), list(x[0]), 2, "literal")
    new = reference.exact_expected_distance(list(alpha[0]), list(x[0]), 2)
    assert new > lit  # drawn zero-weight tokens now add ||s|| each


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    length=st.integers(2, 7),
    rule=st.sampled_from(["literal", "not_selected"]),
)
def test_fast_routines_equal_the_plain_reference_on_sparse_rows(data, length, rule):
    """Rows with many zero weights (and ties among them): the vectorised last-row and all-rows
    routines against the plain loops of attnlimits.reference, under either rule."""
    support = data.draw(st.integers(1, length))
    raw = data.draw(
        st.lists(st.floats(0.05, 1.0), min_size=support, max_size=support), label="weights"
    )
    alpha = np.zeros(length)
    alpha[data.draw(st.permutations(range(length)))[:support]] = raw
    alpha /= alpha.sum()
    x = np.random.default_rng(data.draw(st.integers(0, 2**16))).standard_normal((length, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    n = data.draw(st.integers(1, length - 1))
    n_s, r, _, _ = reference.separability(list(alpha), list(x), n, 0.1, 1.0, rule)
    fast = separability(
        alpha[None], x[None], n=n, delta=np.array([0.1]), radius_m=1.0, zero_weight=rule
    )
    assert fast.n_distinguishable[0] == n_s
    assert fast.radius[0] == pytest.approx(r, abs=1e-12)
    block = RowBlock.of(alpha[None], x, np.array([length]), zero_weight=rule)
    assert row_separability(block, n=n, delta=0.1, radius_m=1.0)["ratio"][0] == n_s / n
    want = reference.distance(list(alpha), list(x), set(reference.top_n(list(alpha), n)), rule)
    w = dist.weighted(alpha[None], x[None], zero_weight=rule)
    assert dist.distance_to_context(w, n=n)[0] == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert row_statistics(block, n=n)["distance"][0] == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert dist.fixed_set_upper_bound(w, n=n)[0] == pytest.approx(
        reference.upper_bound(list(alpha), list(x), n, rule), rel=1e-12, abs=1e-12
    )


@pytest.mark.unit
def test_negligible_weights_in_the_top_n_count_zeros_and_weights_below_float32_resolution():
    from attnlimits import distance as dist

    eps = float(np.finfo(np.float32).eps)
    # row 0: peak 0.5; 1e-12 and 0 are negligible, 0.25 and 0.25 - ... are not
    # row 1: a softmax-like row, nothing negligible in its top 3
    alpha = np.array([[0.5, 0.25, 0.25 - 1e-12, 1e-12, 0.0], [0.4, 0.3, 0.2, 0.05, 0.05]])
    x = np.eye(5)[None].repeat(2, axis=0)
    w = dist.weighted(alpha, x)
    assert w.negligible_weight_in_top_n(5).tolist() == [2, 0]
    assert w.negligible_weight_in_top_n(3).tolist() == [0, 0]
    assert w.zero_weight_in_top_n(5).tolist() == [1, 0]
    # the threshold is relative to the row's peak: eps x peak counts, just above it does not
    edge = np.array([[1.0, eps, 1.5 * eps]])
    assert dist.weighted(edge, np.eye(3)[None]).negligible_weight_in_top_n(3).tolist() == [1]
    assert dist.NEGLIGIBLE_WEIGHT == eps


@pytest.mark.parametrize(("gap", "rule", "n_s"), [(40.0, "not_selected", 1), (40.0, "literal", 8)])
def test_a_weight_below_float32_resolution_ties_at_the_radius_like_a_zero(gap, rule, n_s):
    """A sharp row (a sink head): one key at logit gap, the rest e^-gap of it. At gap 40 the
    small weights (4e-18) leave ||s - alpha_i x_i|| equal to ||s|| in float64: every one ties at
    r and the literal Eq. 10 counts all 8 of the top-8; under not_selected only the peak counts,
    as it would were they 0. The fast row routine, the per-sample one and the plain reference
    agree."""
    length, n = 64, 8
    rng = np.random.default_rng(0)
    x = rng.normal(size=(length, 4))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    logits = np.zeros(length)
    logits[0] = gap
    alpha = np.exp(logits - logits.max())
    alpha /= alpha.sum()
    res = separability(
        alpha[None], x[None], n=n, delta=np.array([0.1]), radius_m=1.0, zero_weight=rule
    )
    assert res.n_distinguishable[0] == n_s
    block = RowBlock.of(alpha[None], x, np.array([length]), zero_weight=rule)
    assert row_separability(block, n=n, delta=0.1, radius_m=1.0)["ratio"][0] == n_s / n
    assert reference.separability(list(alpha), list(x), n, 0.1, 1.0, rule)[0] == n_s
