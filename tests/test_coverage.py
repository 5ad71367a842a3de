"""Multi-head coverage on hand-made masks, and against a per-token reference loop."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlimits.coverage import head_coverage, heads_for_coverage
from attnlimits.critical import ks_min_pvalue
from attnlimits.separability import distinguishable, separability

pytestmark = pytest.mark.unit


def test_hand_case_two_heads():
    # head 0 selects {0, 1}, keeps {0}; head 1 selects {1, 2}, keeps {1, 2}
    sel = np.array([[[1, 1, 0, 0], [0, 1, 1, 0]]], dtype=bool)
    dis = np.array([[[1, 0, 0, 0], [0, 1, 1, 0]]], dtype=bool)
    cov = head_coverage(sel, dis)
    assert cov.union_selected[0] == 3 and cov.union_distinguishable[0] == 3
    assert cov.coverage[0] == 1.0
    p = (0.5 + 1.0) / 2
    assert cov.p[0] == pytest.approx(p)
    assert cov.predicted_paper[0] == pytest.approx(1 - (1 - p) ** 2)
    # token 1 is in two heads' sets, tokens 0 and 2 in one each
    expected = (2 * p + (1 - (1 - p) ** 2)) / 3
    assert cov.predicted_overlap[0] == pytest.approx(expected)


def test_identical_heads_match_the_paper_formula():
    sel = np.zeros((1, 3, 6), dtype=bool)
    sel[:, :, :4] = True
    dis = sel.copy()
    dis[:, :, 3] = False
    cov = head_coverage(sel, dis)
    assert cov.predicted_overlap[0] == pytest.approx(cov.predicted_paper[0])
    assert cov.coverage[0] == 0.75  # the same token is lost by every head


def test_paper_three_heads_for_99_percent():
    assert heads_for_coverage(0.8, 0.99) == 3
    assert heads_for_coverage(1.0, 0.99) == 1
    assert heads_for_coverage(0.0, 0.99) == float("inf")


def test_distinguishable_without_selection_is_rejected():
    sel = np.zeros((1, 1, 3), dtype=bool)
    dis = sel.copy()
    dis[0, 0, 0] = True
    with pytest.raises(ValueError, match="must be selected"):
        head_coverage(sel, dis)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 4), st.integers(2, 10))
def test_against_reference_loop(seed, n_heads, length):
    rng = np.random.default_rng(seed)
    sel = rng.random((3, n_heads, length)) < 0.5
    dis = sel & (rng.random(sel.shape) < 0.6)
    cov = head_coverage(sel, dis)
    for g in range(3):
        union = [t for t in range(length) if any(sel[g, h, t] for h in range(n_heads))]
        kept = [t for t in union if any(dis[g, h, t] for h in range(n_heads))]
        # a head that selects nothing has no rate (review 32): the mean is over the others
        rates = [dis[g, h].sum() / sel[g, h].sum() for h in range(n_heads) if sel[g, h].any()]
        p = sum(rates) / len(rates) if rates else float("nan")
        assert cov.union_selected[g] == len(union)
        if union:
            assert cov.coverage[g] == pytest.approx(len(kept) / len(union))
            pred = sum(1 - (1 - p) ** sum(sel[g, h, t] for h in range(n_heads)) for t in union)
            assert cov.predicted_overlap[g] == pytest.approx(pred / len(union))
        else:
            assert np.isnan(cov.coverage[g])
        assert cov.p[g] == pytest.approx(p, nan_ok=True)


def test_a_head_that_selects_nothing_has_no_rate():
    """Review 32: a head whose top-N weights are all 0 selects nothing; counted as a rate of 0
    it pulled p (and the paper's prediction) down: 0.5 where the one head with tokens keeps all."""
    sel = np.array([[[True, True, False], [False, False, False]]])
    dis = sel.copy()
    cov = head_coverage(sel, dis)
    assert cov.p[0] == 1.0 and cov.predicted_paper[0] == 1.0
    # review 33: nor does it count among the paper's H: one head at p = 0.5 predicts 0.5
    half = head_coverage(sel, sel & np.array([True, False, False])[None, None, :])
    assert half.p[0] == 0.5 and half.predicted_paper[0] == 0.5
    assert np.isnan(heads_for_coverage(float("nan"), 0.99))
    # review 34: a group where no head selects anything has no prediction either (nan ** 0 = 1
    # made it 0)
    empty = head_coverage(np.zeros_like(sel), np.zeros_like(sel))
    assert np.isnan(empty.p[0]) and np.isnan(empty.predicted_paper[0])


def test_distinguishable_agrees_with_separability():
    rng = np.random.default_rng(3)
    alpha = rng.dirichlet(np.ones(12), size=5)
    x = rng.normal(size=(5, 12, 4))
    x /= np.linalg.norm(x, axis=2, keepdims=True)
    selected, inside, radius = distinguishable(alpha, x, n=4)
    sep = separability(alpha, x, n=4, delta=np.full(5, 0.1), radius_m=1.0)
    assert (selected.sum(axis=1) == 4).all()
    np.testing.assert_array_equal(inside.sum(axis=1), sep.n_distinguishable)
    np.testing.assert_allclose(radius, sep.radius)


def test_ks_min_pvalue_is_the_exact_extreme():
    from math import comb

    for n in (3, 4, 8):
        assert ks_min_pvalue(n, n) == pytest.approx(2 / comb(2 * n, n))
