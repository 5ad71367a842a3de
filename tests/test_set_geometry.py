"""P_N, R_N, F_N of a selected set (attnlimits.set_geometry) against hand-computed cases and the
plain reference (attnlimits.reference.set_geometry)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlimits import reference
from attnlimits.set_geometry import random_sets, set_geometry, top_n_sets

pytestmark = pytest.mark.unit


def test_a_hand_computed_row():
    # y = alpha v: (0.5, 0), (0.3, 0), (0, 0.2); S = top 2 = {0, 1}, s = (0.8, 0)
    w = np.array([[0.5, 0.3, 0.2]])
    v = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    vis = np.ones((1, 3), dtype=bool)
    sel = top_n_sets(w, vis, 2)
    assert sel.tolist() == [[True, True, False]]
    # D = 0.3, 0.5, sqrt(0.64 + 0.04) = 0.8246: rho_max 0.5, rho_min 0.8246
    got = set_geometry(w, v, sel, vis)
    assert got.precision[0] == 1.0 and got.recall[0] == 1.0 and got.f[0] == 1.0
    # cosine: D = 0, 0, 1: again apart
    got = set_geometry(w, v, sel, vis, "cosine")
    assert (got.precision[0], got.recall[0]) == (1.0, 1.0)
    # S = {0} alone: s = (0.5, 0), D = 0, 0.2, sqrt(0.25 + 0.04) = 0.539; nothing intrudes on
    # rho_max = 0, and key 0 is nearer than every other
    got = set_geometry(w, v, top_n_sets(w, vis, 1), vis)
    assert (got.precision[0], got.recall[0]) == (1.0, 1.0)
    # S = {2}: s = (0, 0.2), D_2 = 0, D_0 = 0.539, D_1 = 0.361
    sel = np.array([[False, False, True]])
    got = set_geometry(w, v, sel, vis)
    assert (got.precision[0], got.recall[0]) == (1.0, 1.0)
    # S = {0, 2}: s = (0.5, 0.2), D_0 = 0.2, D_2 = 0.5, D_1 = 0.283: key 1 intrudes (<= 0.5),
    # only key 0 is nearer than it
    sel = np.array([[True, False, True]])
    got = set_geometry(w, v, sel, vis)
    assert got.precision[0] == pytest.approx(2 / 3) and got.recall[0] == pytest.approx(0.5)
    assert got.f[0] == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))


def test_every_visible_key_selected_has_no_intruder_and_no_rival():
    w = np.array([[0.6, 0.4, 0.0]])
    v = np.eye(3)
    vis = np.array([[True, True, False]])  # a causal row: key 2 is masked
    got = set_geometry(w, v, top_n_sets(w, vis, 5), vis)
    assert (got.precision[0], got.recall[0], got.f[0]) == (1.0, 1.0, 1.0)


def test_masked_keys_are_never_selected_nor_counted():
    w = np.array([[0.2, 0.3, 0.5]])
    vis = np.array([[True, True, False]])
    assert top_n_sets(w, vis, 1).tolist() == [[False, True, False]]
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert not random_sets(vis, 1, rng)[0, 2]


@st.composite
def rows(draw):
    length = draw(st.integers(2, 7))
    d = draw(st.integers(1, 3))
    # a coarse grid of weights and values, so ties and zero weights come up
    w = np.asarray(
        draw(st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5]), min_size=length, max_size=length))
    )
    v = np.asarray(
        draw(
            st.lists(
                st.lists(st.sampled_from([-1.0, 0.0, 0.5, 1.0]), min_size=d, max_size=d),
                min_size=length,
                max_size=length,
            )
        )
    )
    vis = np.asarray(draw(st.lists(st.booleans(), min_size=length, max_size=length)))
    vis[draw(st.integers(0, length - 1))] = True
    n = draw(st.integers(1, length))
    return w, v, vis, n


@settings(max_examples=100, deadline=None)
@given(rows(), st.sampled_from(["euclidean", "cosine"]))
def test_against_the_plain_reference(row, metric):
    w, v, vis, n = row
    sel = top_n_sets(w[None], vis[None], n)
    got = set_geometry(w[None], v, sel, vis[None], metric)
    want = reference.set_geometry(w, v, sel[0], vis, metric)
    np.testing.assert_allclose([got.precision[0], got.recall[0], got.f[0]], want, atol=1e-12)
