"""The paper's all-rows protocol (Appendix B) against plain loops written from its pseudocode."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ks_2samp

from attnlimits import reference as ref
from attnlimits.protocol import (
    RowBlock,
    attention_rows,
    first_passing_n,
    head_means,
    max_of_head_means,
    row_sensitivity,
    row_separability,
    row_statistics,
    unit_directions,
    visible_lengths,
)
from attnlimits.separability import project_to_sphere

pytestmark = pytest.mark.unit


def loop_rows(q, k, scaling, causal):
    """softmax(q k^T * scaling) row by row, keys after the query masked when causal."""
    L = len(k)
    out = np.zeros((L, L))
    for t in range(L):
        scores = [
            float(q[t] @ k[i]) * scaling if (not causal or i <= t) else -math.inf for i in range(L)
        ]
        top = max(scores)
        e = [math.exp(s - top) for s in scores]
        out[t] = np.array(e) / sum(e)
    return out


def head(seed, length, width):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((length, 3)) * 2
    k = rng.standard_normal((length, 3))
    x = rng.standard_normal((length, width))
    return q, k, x


def test_hand_case_one_row():
    """Three tokens, weights (0.5, 0.3, 0.2), N = 1: s = 0.5 x_0 and d~ = ||0.3 x_1 - s|| +
    ||0.2 x_2 - s||; E as printed: (3-1)/3 sum_i ||(alpha_i + 1/2) x_i - xbar||."""
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    alpha = np.array([[0.5, 0.3, 0.2]])
    stats = row_statistics(RowBlock.of(alpha, x, np.array([3])), n=1)
    s = np.array([0.5, 0.0])
    want = np.linalg.norm([-0.5, 0.3]) + np.linalg.norm([0.2 - 0.5, 0.2])
    assert stats["distance"][0] == pytest.approx(want, rel=1e-14)
    xbar = np.array([0.7, 0.5])
    terms = [np.linalg.norm((a + 0.5) * xi - xbar) for a, xi in zip(alpha[0], x, strict=True)]
    assert stats["expectation_term"][0] == pytest.approx(2 / 3 * sum(terms), rel=1e-14)
    assert s @ s == pytest.approx(0.25)


@settings(max_examples=60, deadline=None)
@given(
    length=st.integers(2, 9),
    width=st.integers(1, 3),
    causal=st.booleans(),
    masked=st.sampled_from(["non_selected", "prefix"]),
    data=st.data(),
    seed=st.integers(0, 2**16),
    repeated=st.booleans(),
)
def test_per_row_statistics_match_the_pseudocode_loop(
    length, width, causal, masked, data, seed, repeated
):
    q, k, x = head(seed, length, width)
    if repeated:  # two distinct vectors: zero distances, where the expansion cancels
        x = x[np.arange(length) % 2]
    n = data.draw(st.integers(1, length - 1))
    rows = np.arange(length)
    logits, alpha = attention_rows(q, k, 0.7, rows, causal=causal)
    np.testing.assert_allclose(alpha, loop_rows(q, k, 0.7, causal), rtol=1e-12, atol=1e-15)
    lengths = visible_lengths(rows, length, causal=causal, masked=masked)
    stats = row_statistics(RowBlock.of(alpha, x, lengths), n=n)
    light = row_statistics(RowBlock.of(alpha, x, lengths), n=n, upper_bound=False)
    assert "upper_bound" not in light
    np.testing.assert_array_equal(light["distance"], stats["distance"])
    np.testing.assert_array_equal(light["expectation_term"], stats["expectation_term"])
    for t in rows:
        visible = int(lengths[t])
        if visible <= n:  # no non-selected token: the row is left out
            assert np.isnan(stats["distance"][t])
            continue
        a, xs = alpha[t, :visible], x[:visible]
        sel = set(ref.top_n(a, n))
        assert stats["distance"][t] == pytest.approx(ref.distance(a, xs, sel), rel=1e-10, abs=1e-12)
        assert stats["upper_bound"][t] == pytest.approx(
            ref.upper_bound(a, xs, n), rel=1e-10, abs=1e-12
        )
        assert stats["expectation_term"][t] == pytest.approx(
            ref.expectation_term(a, xs, n), rel=1e-10, abs=1e-12
        )


@settings(max_examples=40, deadline=None)
@given(length=st.integers(3, 8), causal=st.booleans(), data=st.data(), seed=st.integers(0, 999))
def test_per_row_separability_matches_the_loop(length, causal, data, seed):
    q, k, x = head(seed, length, 3)
    x = project_to_sphere(x[None] + 1e-3, 1.0)[0]
    n = data.draw(st.integers(1, length - 1))
    rows = np.arange(length)
    _, alpha = attention_rows(q, k, 0.9, rows, causal=causal)
    lengths = visible_lengths(rows, length, causal=causal, masked="prefix")
    delta = ref.min_pairwise(x)
    got = row_separability(RowBlock.of(alpha, x, lengths), n=n, delta=delta, radius_m=1.0)
    for t in rows:
        visible = int(lengths[t])
        if visible <= n:
            assert np.isnan(got["ratio"][t])
            continue
        n_s, _, lower, upper = ref.separability(alpha[t, :visible], x[:visible], n, delta, 1.0)
        assert got["ratio"][t] == n_s / n
        for name, want in (("lower_bound", lower), ("upper_bound", upper)):
            if math.isnan(want):
                assert np.isnan(got[name][t])
            else:
                assert got[name][t] == pytest.approx(want, rel=1e-10, abs=1e-12)


def test_sensitivity_matches_the_loop():
    rng = np.random.default_rng(3)
    q, k, _ = head(4, 6, 2)
    logits, _ = attention_rows(q, k, 1.0, np.arange(6), causal=True)
    v = unit_directions(rng, 6, np.arange(6) + 1, 6)
    epsilons = [1e-3, 0.1, 10.0]
    got = row_sensitivity(logits, v, temperature=0.5, epsilons=epsilons)
    for j, eps in enumerate(epsilons):
        for t in range(6):
            row = [x for x in logits[t] if x != -math.inf]
            base = np.exp(np.array(row) / 0.5 - max(row) / 0.5)
            base /= base.sum()
            moved = np.array(row) + eps * v[t, : len(row)]
            pert = np.exp(moved / 0.5 - moved.max() / 0.5)
            pert /= pert.sum()
            assert got[j, t] == pytest.approx(np.linalg.norm(pert - base) / eps, rel=1e-9)
            assert np.linalg.norm(v[t]) == pytest.approx(1.0) and not v[t, t + 1 :].any()


def test_sampled_rows_are_evenly_spaced_and_end_at_the_last_row():
    from attnlimits.protocol import sampled_rows

    assert sampled_rows(8, 2).tolist() == [3, 7]
    assert sampled_rows(10, 3).tolist() == [3, 6, 9]
    assert sampled_rows(4, 9).tolist() == [0, 1, 2, 3]
    assert sampled_rows(1024, 256).tolist() == list(range(3, 1024, 4))
    # count not dividing L: rows 4 - floor(i 5 / 3) = 4, 3, 1 (a stride of 5 // 3 = 1 gave 2, 3, 4)
    assert sampled_rows(5, 3).tolist() == [1, 3, 4]
    # and the whole context is covered: L = 300, 256 rows from row 1 to 299, gaps of 1 or 2
    rows = sampled_rows(300, 256)
    assert len(set(rows.tolist())) == 256 and rows[0] == 1 and rows[-1] == 299
    assert set(np.diff(rows).tolist()) == {1, 2}


def test_head_means_and_algorithm_5():
    values = np.array([1.0, 3.0, np.nan, 10.0, 20.0, 5.0])
    heads = np.array([0, 0, 0, 1, 1, 2])
    np.testing.assert_allclose(head_means(values, heads, 4), [2.0, 15.0, 5.0, np.nan])
    assert max_of_head_means(values, heads, 4) == 15.0


def test_algorithm_3_returns_the_first_n_that_the_ks_test_does_not_reject():
    rng = np.random.default_rng(0)
    far = rng.normal(0, 1, 144), rng.normal(3, 1, 144)
    near = rng.normal(0, 1, 144), rng.normal(0.05, 1, 144)
    grid = [(1, *far), (2, *far), (5, *near), (10, *near)]
    computed = []

    def lazy():
        for item in grid:
            computed.append(item[0])
            yield item

    result = first_passing_n(lazy(), alpha=0.01)
    # the pseudocode, with scipy directly
    want = next(n for n, a, b in grid if ks_2samp(a, b).pvalue >= 0.01)
    assert result.critical_n == want == 5
    assert computed == [1, 2, 5]  # stopped at the first pass
    assert [n for n, _ in result.tried] == [1, 2, 5]
    assert first_passing_n(iter(grid[:2]), alpha=0.01).critical_n == -1
    with pytest.raises(ValueError, match="must increase"):
        first_passing_n(iter([grid[1], grid[0]]), alpha=1.1)


@settings(max_examples=30, deadline=None)
@given(length=st.integers(3, 7), causal=st.booleans(), data=st.data(), seed=st.integers(0, 999))
def test_per_row_epsilon_bound_and_monte_carlo_match_the_loop(length, causal, data, seed):
    from attnlimits.protocol import row_epsilon_bound, row_monte_carlo

    q, k, x = head(seed, length, 2)
    n = data.draw(st.integers(1, length - 1))
    rows = np.arange(length)
    _, alpha = attention_rows(q, k, 0.8, rows, causal=causal)
    lengths = visible_lengths(rows, length, causal=causal, masked="prefix")
    block = RowBlock.of(alpha, x, lengths)
    bound = row_epsilon_bound(block, n=n)
    draws = row_monte_carlo(block, n=n, draws=400, rng=np.random.default_rng(seed))
    for t in rows:
        visible = int(lengths[t])
        if visible <= n:
            assert np.isnan(bound[t]) and np.isnan(draws[:, t]).all()
            continue
        a, xs = alpha[t, :visible], x[:visible]
        want = ref.epsilon_bound(a, xs, n)
        assert bound[t] == pytest.approx(want, rel=1e-10) or (np.isinf(want) and np.isinf(bound[t]))
        exact = ref.exact_expected_distance(a, xs, n)
        stderr = draws[:, t].std() / math.sqrt(len(draws)) + 1e-12
        assert abs(draws[:, t].mean() - exact) <= 5 * stderr


def fake_pack(causal: bool, length=6, seed=0):
    from attnlimits_workflow.packs import Pack

    rng = np.random.default_rng(seed)
    layer = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    chunk = np.array([0, 0, 1, 1, 0, 0, 1, 1])
    head = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    S = len(layer)
    return Pack(
        length=length,
        layer=layer,
        chunk=chunk,
        head=head,
        weights=np.zeros((S, length)),
        logits=np.zeros((S, length)),
        x=rng.standard_normal((S, length, 2)),
        query_norm=np.zeros(S),
        key_norm_max=np.zeros(S),
        score_scale=np.full(S, 0.5),
        metadata={"causal": causal, "softcap": None},
        q_rows=rng.standard_normal((S, length, 3)),
        k_rows=rng.standard_normal((S, length, 3)),
    )


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("masked", ["non_selected", "prefix"])
def test_row_means_and_chunk_pooling_match_the_loop(causal, masked, monkeypatch):
    """Every row of every sample, mean over rows, then over chunks, per (layer, head)."""
    import attnlimits_workflow.rows as rows_module
    from attnlimits_workflow.rows import pool_chunks, row_means

    monkeypatch.setattr(rows_module, "ROW_BLOCK", 4)  # several blocks per sample
    pack = fake_pack(causal)
    n = 2
    means = row_means(
        pack, lambda b, lg, r, s: {"d": row_statistics(b, n=n)["distance"]}, masked=masked
    )
    pooled = pool_chunks(pack, means)
    want: dict[tuple, list] = {}
    for s in range(len(pack.layer)):
        alpha = loop_rows(pack.q_rows[s], pack.k_rows[s], 0.5, causal)
        for t in range(pack.length):
            visible = t + 1 if (causal and masked == "prefix") else pack.length
            if visible <= n:
                continue
            a, xs = alpha[t, :visible], pack.x[s, :visible]
            d = ref.distance(a, xs, set(ref.top_n(a, n)))
            want.setdefault((pack.layer[s], pack.head[s]), []).append(d)
    for i, (lay, hd) in enumerate(zip(pooled["layer"], pooled["head"], strict=True)):
        assert pooled["d"][i] == pytest.approx(np.mean(want[(lay, hd)]), rel=1e-10)
        assert pooled["d_rows"][i] == len(want[(lay, hd)])
        assert pooled["chunks"][i] == 2


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5]), min_size=1, max_size=9),
    data=st.data(),
)
def test_top_n_breaks_ties_to_the_lower_index(values, data):
    """Ties (every masked key of a causal row weighs 0) go to the lower index, as the stable sort
    of the reference; invisible keys are never selected."""
    alpha = np.array([values])
    length = data.draw(st.integers(1, len(values)))
    n = data.draw(st.integers(1, len(values)))
    mask = RowBlock.of(alpha, np.ones((len(values), 1)), np.array([length])).literal_top_n(n)
    visible = [v if i < length else -1.0 for i, v in enumerate(values)]
    want = set(sorted(range(len(values)), key=lambda i: (-visible[i], i))[: min(n, length)])
    assert set(np.nonzero(mask[0])[0]) == want


@settings(max_examples=60, deadline=None)
@given(
    length=st.integers(2, 9),
    causal=st.booleans(),
    masked=st.sampled_from(["non_selected", "prefix"]),
    tied=st.booleans(),
    data=st.data(),
    seed=st.integers(0, 2**16),
)
def test_critical_statistics_for_several_n_match_the_loop(length, causal, masked, tied, data, seed):
    """The multi-N routine of the critical-N search, against the pseudocode per N: d~ of the
    top-N set, the closed-form E, and d~ of the Monte-Carlo subsets (the keys of rank < N), on a
    block of the first rows (a causal block leaves later keys unweighted) with random subsets
    drawn on some of them."""
    from attnlimits.protocol import row_critical_statistics

    q, k, x = head(seed, length, 2)
    if tied:  # equal keys: every visible weight of a row ties
        k = np.ones_like(k)
    ns = sorted(data.draw(st.sets(st.integers(1, length), min_size=1, max_size=4)))
    rows = np.arange(data.draw(st.integers(1, length)))
    drawn = np.array(sorted(data.draw(st.sets(st.sampled_from(rows.tolist()), min_size=1))))
    _, alpha = attention_rows(q, k, 0.8, rows, causal=causal)
    lengths = visible_lengths(rows, length, causal=causal, masked=masked)
    block = RowBlock.of(alpha, x, lengths)
    ranks = [block.random_ranks(np.random.default_rng(seed + d), drawn) for d in range(2)]
    got = row_critical_statistics(block, ns, random_ranks=ranks, random_rows=drawn)
    for j, n in enumerate(ns):
        for t in rows:
            visible = int(lengths[t])
            if visible <= n:
                assert all(np.isnan(got[name][j, t]) for name in got)
                continue
            a, xs = alpha[t, :visible], x[:visible]
            tol = {"rel": 1e-10, "abs": 1e-12}
            assert got["distance"][j, t] == pytest.approx(
                ref.distance(a, xs, set(ref.top_n(a, n))), **tol
            )
            assert got["closed_form"][j, t] == pytest.approx(ref.expectation_term(a, xs, n), **tol)
            if t not in drawn:
                assert np.isnan(got["monte_carlo"][j, t])
                continue
            at = int(np.searchsorted(drawn, t))
            subsets = [{i for i in range(visible) if r[at, i] < n} for r in ranks]
            assert all(len(sub) == n for sub in subsets)
            want = np.mean([ref.distance(a, xs, sub) for sub in subsets])
            assert got["monte_carlo"][j, t] == pytest.approx(want, **tol)


def test_random_ranks_give_uniform_subsets_of_the_counted_keys():
    """Over many draws, every N-subset of a row's counted keys appears equally often (chi-square),
    and no uncounted key is ever among them."""
    import itertools

    from scipy.stats import chisquare

    rng = np.random.default_rng(7)
    for counted in (5, 6):  # a sort of random keys, or a random permutation when all count
        block = RowBlock.of(np.full((1, 6), 1 / 6), np.ones((6, 1)), np.array([counted]))
        counts = dict.fromkeys(itertools.combinations(range(counted), 2), 0)
        for _ in range(3000):
            rank = block.random_ranks(rng)[0]
            assert sorted(rank) == list(range(6)) and (counted == 6 or rank[5] == 5)
            counts[tuple(np.nonzero(rank < 2)[0])] += 1
        assert chisquare(list(counts.values())).pvalue > 1e-3


@settings(max_examples=100, deadline=None)
@given(
    passes=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=9),
    batch=st.integers(1, 4),
)
def test_batched_search_returns_each_kinds_first_pass_and_evaluates_no_further(passes, batch):
    """Two expectations searched side by side in batches: each answer is the plain Algorithm 3 loop's
    over its own p-values, and a kind is not evaluated after the batch of its first pass."""
    from attnlimits.protocol import search_in_batches

    rng = np.random.default_rng(1)
    d = rng.normal(0, 1, 24)
    near, far = d + 1e-3, d + 10.0  # KS p = 1 and p ~ 1e-13
    grid = [2 * i + 1 for i in range(len(passes))]
    calls = []

    def evaluate(ns, pending):
        calls.append((ns, pending))
        out = {"distance": np.stack([d for _ in ns])}
        for j, kind in enumerate(("a", "b")):
            if kind in pending:
                out[kind] = np.stack([near if passes[grid.index(n)][j] else far for n in ns])
        return out

    got = search_in_batches(grid, evaluate, ("a", "b"), alpha=0.01, batch=batch)
    for j, kind in enumerate(("a", "b")):
        first = next((i for i, p in enumerate(passes) if p[j]), None)  # the pseudocode's loop
        assert got[kind].critical_n == (grid[first] if first is not None else -1)
        assert [n for n, _ in got[kind].tried] == grid[: (first + 1 if first is not None else None)]
        last_batch = (first if first is not None else len(grid) - 1) // batch
        evaluated = [i for i, (ns, pending) in enumerate(calls) if kind in pending]
        assert evaluated == list(range(last_batch + 1))


def test_captions_say_which_rows_a_figure_used():
    """Under the all-rows protocol the paper's figures say every query row; the beyond-the-paper
    figures, which always use the analysed rows, say that instead."""
    from attnlimits_workflow.plotting import protocol_text

    run = {"protocol": "all_rows", "masked": "non_selected", "chunks": 16, "heads_per_L": 144}
    assert protocol_text(run).startswith("paper's protocol (Appendix B): every query row of the")
    assert "144 per L" in protocol_text(run)
    beyond = protocol_text(run, analysed_rows=True)
    assert beyond.startswith("the analysed row of each (layer, chunk, head)")
    last = {"protocol": "last_row", "samples_per_L": 2304}
    assert protocol_text(last) == protocol_text(last, analysed_rows=True)
    assert "2304 samples per L" in protocol_text(last)


# --- Algorithm 3's search: its top, censoring, readings of masked keys, D at fixed fractions ---

CONFIG_FRACTIONS = __import__("yaml").safe_load(
    (__import__("pathlib").Path(__file__).parents[1] / "config/config.yaml").read_text()
)["analysis"]["all_rows"]["critical_n_fractions"]


def test_the_n_list_ends_at_l_minus_1_whatever_the_fractions():
    """A search that never passes must have tried N = L - 1 (one non-selected token), so its
    "never" is a censored N_crit > L - 1, not the edge of a grid that stopped at 0.9 L."""
    from attnlimits.protocol import critical_n_list

    assert critical_n_list(100, [0.1, 0.5]) == [10, 50, 99]
    assert critical_n_list(1000, CONFIG_FRACTIONS)[-3:] == [950, 990, 999]
    assert critical_n_list(2, [0.5, 0.9]) == [1]
    assert critical_n_list(32, [0.01, 0.02])[0] == 1


def _head_set(first_pass: int | None, heads: int = 144):
    """Per-head means of d~ and E at each N: E far from d~ (KS p ~ 1e-80) below ``first_pass``,
    equal to it from there on (p = 1); ``first_pass`` None: far at every N."""
    d = np.linspace(1.0, 2.0, heads)

    def evaluate(ns, pending):
        near = [first_pass is not None and n >= first_pass for n in ns]
        e = np.stack([d if ok else d + 5.0 for ok in near])
        return {"distance": np.stack([d for _ in ns]), **dict.fromkeys(pending, e)}

    return evaluate


def test_a_first_pass_at_0_95_l_is_found_and_no_pass_is_reported_censored_at_l_minus_1():
    from attnlimits.protocol import critical_n_list, search_in_batches

    length = 200
    grid = critical_n_list(length, CONFIG_FRACTIONS)
    late = search_in_batches(grid, _head_set(190), ("a",), alpha=0.01, batch=8)["a"]
    assert late.critical_n == 190 and not late.censored and late.top_n == 190
    never = search_in_batches(grid, _head_set(None), ("a",), alpha=0.01, batch=8)["a"]
    assert never.critical_n == -1 and never.censored and never.top_n == length - 1
    assert [n for n, _ in never.tried] == grid


def _near_uniform_pack(heads, length, causal, seed=0, width=4):
    """A pack of ``heads`` heads whose queries are ~0: every row's attention is near-uniform over
    its visible keys (all L keys in an encoder, keys 0..t in a causal row t)."""
    from attnlimits_workflow.packs import Pack

    rng = np.random.default_rng(seed)
    zeros = np.zeros(heads)
    return Pack(
        length=length,
        layer=np.arange(heads) // 8,
        chunk=np.zeros(heads, dtype=np.int64),
        head=np.arange(heads) % 8,
        weights=np.zeros((heads, length), dtype=np.float32),
        logits=np.zeros((heads, length), dtype=np.float32),
        x=rng.standard_normal((heads, length, width)).astype(np.float32),
        query_norm=zeros,
        key_norm_max=zeros,
        score_scale=np.ones(heads),
        metadata={"causal": causal, "softcap": None},
        q_rows=rng.standard_normal((heads, length, 3)) * 1e-3,
        k_rows=rng.standard_normal((heads, length, 3)),
    )


def _all_rows_search(pack, fractions=(0.06, 0.5), keep=None, draws=None):
    from attnlimits.protocol import critical_n_list
    from attnlimits_workflow.rows import critical_n_all_rows

    return critical_n_all_rows(
        pack,
        grid=critical_n_list(pack.length, CONFIG_FRACTIONS),
        fractions=fractions,
        alpha=0.01,
        keep=keep,
        seed=3,
        default_masked="non_selected",
        chunks=None,
        mc_rows=pack.length,
        mc_draws=2,
        batch=8,
        draws=draws,
    )


def test_near_uniform_causal_attention_is_searched_under_both_readings_of_its_masked_keys():
    """On near-uniform causal rows the top-N set is as good as a random one among the visible
    keys: under prefix the Monte-Carlo search passes at N = 1. Under non_selected a random N-set
    is mostly masked keys (weight 0, never selected, so each adds ||s|| to d~ as in the top-N
    set's d~), so the search measures the mask and passes only late. Both come from the one
    call."""
    length = 32
    got = _all_rows_search(_near_uniform_pack(64, length, causal=True))
    assert {reading for reading, _ in got} == {"non_selected", "prefix"}
    prefix = got[("prefix", "monte_carlo")][0]
    lxl = got[("non_selected", "monte_carlo")][0]
    assert prefix.critical_n == 1
    assert lxl.censored or lxl.critical_n >= 0.5 * length


def test_an_encoders_readings_coincide_and_are_computed_once():
    got = _all_rows_search(_near_uniform_pack(16, 16, causal=False))
    assert set(got) == {("both", "closed_form"), ("both", "monte_carlo")}


def test_d_at_a_fixed_fraction_is_scipys_ks_statistic_on_the_per_head_means():
    """The KS distance D reported at N = round(f L), whatever the search finds, is scipy's
    ks_2samp statistic between the per-head means (over every row, from the plain reference) of
    d~ and of the closed-form E at that N, on the heads kept for the test."""
    from attnlimits.protocol import fixed_fraction_ns

    length, heads = 20, 12
    pack = _near_uniform_pack(heads, length, causal=False, seed=5)
    pack.q_rows[:] *= 2e3  # sharper rows: d~ and E apart at small N
    keep = np.array([0, 2, 3, 5, 7, 8, 11])
    fractions = (0.06, 0.1, 0.25, 0.5)
    got = _all_rows_search(pack, fractions=fractions, keep=keep)
    assert fixed_fraction_ns(length, fractions) == {0.06: 1, 0.1: 2, 0.25: 5, 0.5: 10}
    for f, n in fixed_fraction_ns(length, fractions).items():
        d_means, e_means = [], []
        for h in range(heads):
            q, k = pack.rows(h)
            _, alpha = attention_rows(q, k, 1.0, np.arange(length), causal=False)
            x = np.asarray(pack.x[h], dtype=np.float64)
            d_means.append(np.mean([ref.distance(a, x, ref.top_n(a, n)) for a in alpha]))
            e_means.append(np.mean([ref.expectation_term(a, x, n) for a in alpha]))
        want = ks_2samp(np.array(d_means)[keep], np.array(e_means)[keep]).statistic
        at, res = got[("both", "closed_form")][1][f]
        assert at == n and res.n_a == res.n_b == keep.size
        assert res.statistic == pytest.approx(want, abs=1e-12)


def test_all_rows_search_rerun_on_resampled_heads_matches_a_brute_force_scan():
    """Each bootstrap resample of the kept heads reruns Algorithm 3: the first N of the list
    whose KS test (scipy's, exact) between the drawn heads' mean d~ and mean closed-form E (the
    plain reference over every row) does not reject; null when none does, its top the list's
    last N."""
    from attnlimits.protocol import critical_n_list

    length, heads = 20, 16
    pack = _near_uniform_pack(heads, length, causal=False, seed=5)
    pack.q_rows[:] *= 1e3  # d~ and E apart at N = 1 on some resamples of the heads, not others
    keep = np.array([0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15])
    draws = np.random.default_rng(4).integers(0, keep.size, size=(16, keep.size))
    got = _all_rows_search(pack, keep=keep, draws=draws)
    grid = critical_n_list(length, CONFIG_FRACTIONS)
    means = {}
    for n in grid:
        d_means, e_means = [], []
        for h in range(heads):
            q, k = pack.rows(h)
            _, alpha = attention_rows(q, k, 1.0, np.arange(length), causal=False)
            x = np.asarray(pack.x[h], dtype=np.float64)
            d_means.append(np.mean([ref.distance(a, x, ref.top_n(a, n)) for a in alpha]))
            e_means.append(np.mean([ref.expectation_term(a, x, n) for a in alpha]))
        means[n] = (np.array(d_means)[keep], np.array(e_means)[keep])
    want = []
    for drawn in draws:
        first = next(
            (
                n
                for n in grid
                if ks_2samp(means[n][0][drawn], means[n][1][drawn], method="exact").pvalue >= 0.01
            ),
            None,
        )
        want.append((first, grid[-1] if first is None else first))
    assert got[("both", "closed_form")][2] == want
    assert len({n for n, _ in want}) > 1  # the resamples disagree
    assert len(got[("both", "monte_carlo")][2]) == len(draws)
