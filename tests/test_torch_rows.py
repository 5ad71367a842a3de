"""The row-block kernels in torch (analysis.all_rows.device: cpu | cuda[:i]) against the same
kernels in numpy, the default: equal to 1e-10 relative in float64 on the same rows, with causal
masks under both readings, ties, zero weights under both zero-weight rules, N = 1 and N = L - 1.
The numpy kernels themselves are held against plain loops in tests/test_protocol.py.

torch on the CPU runs everywhere; the cuda cases run only where torch sees a GPU."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attnlimits.arrays import NUMPY, namespace
from attnlimits.protocol import (
    HeadVectors,
    RowBlock,
    attention_rows,
    row_critical_statistics,
    row_epsilon_bound,
    row_monte_carlo,
    row_separability,
    row_statistics,
    visible_lengths,
)
from attnlimits.separability import project_to_sphere

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.unit

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no GPU"),
    ),
]
RTOL, ATOL = 1e-10, 1e-12  # values are O(1): ATOL only covers entries that are exactly 0


def same(want, got, xp) -> None:
    """A torch result equals numpy's to RTOL (NaN and inf where numpy has them)."""
    assert not isinstance(got, np.ndarray), "the torch path returned a numpy array"
    got = xp.to_numpy(got)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)


@st.composite
def heads(draw, min_len=2, max_len=10):
    """(q, k, x, alpha, rows, n, causal, masked, zero_weight) of one head: integer logits make
    exact ties common, ``sparse`` puts exact zeros among the visible weights, ``repeated`` makes
    x two distinct vectors (zero distances, where the expansions cancel); n is drawn with N = 1
    and N = L - 1 as likely as any other."""
    length = draw(st.integers(min_len, max_len))
    width = draw(st.integers(1, 3))
    ints = st.integers(-3, 3).map(float)
    q = draw(arrays(np.float64, (length, 2), elements=ints))
    k = draw(arrays(np.float64, (length, 2), elements=ints))
    x = draw(arrays(np.float64, (length, width), elements=st.floats(-3, 3, width=64)))
    if draw(st.booleans()):
        x = x[np.arange(length) % 2]
    causal = draw(st.booleans())
    start = draw(st.integers(0, length - 1))
    rows = np.arange(start, draw(st.integers(start + 1, length)))
    _, alpha = attention_rows(q, k, 0.7, rows, causal=causal)
    if draw(st.booleans()):  # sparse rows: some visible weights exactly 0, each row keeps one
        zero = draw(arrays(np.bool_, alpha.shape))
        zero[np.arange(len(rows)), np.minimum(rows, length - 1)] = False
        alpha = np.where(zero, 0.0, alpha)
        alpha /= alpha.sum(axis=1, keepdims=True)
    n = draw(st.one_of(st.just(1), st.just(length - 1), st.integers(1, length - 1)))
    masked = draw(st.sampled_from(["non_selected", "prefix"]))
    zero_weight = draw(st.sampled_from(["not_selected", "literal"]))
    return q, k, x, alpha, rows, n, causal, masked, zero_weight


def both_blocks(case, device):
    """The case's block in numpy and in torch on ``device``, from the same weights."""
    _, _, x, alpha, rows, _, causal, masked, zero_weight = case
    lengths = visible_lengths(rows, len(x), causal=causal, masked=masked)
    xp = namespace(device)
    want = RowBlock.of(alpha, x, lengths, zero_weight=zero_weight)
    got = RowBlock.of(alpha, HeadVectors(x, xp), lengths, zero_weight=zero_weight)
    return want, got, xp


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=80, deadline=None)
@given(case=heads(), softcap=st.sampled_from([None, 2.0]), keys=st.booleans())
def test_attention_rows(device, case, softcap, keys):
    q, k, _, _, rows, _, causal, _, _ = case
    xp = namespace(device)
    last = int(rows[-1]) + 1 if keys else None
    for want, got in zip(
        attention_rows(q, k, 0.7, rows, causal=causal, softcap=softcap, keys=last),
        attention_rows(q, k, 0.7, rows, causal=causal, softcap=softcap, keys=last, xp=xp),
        strict=True,
    ):
        same(want, got, xp)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=120, deadline=None)
@given(case=heads())
def test_top_n_masks_and_ranks_are_identical(device, case):
    """Ties go to the lower index in both: the selected sets are the same sets, not close ones."""
    want, got, xp = both_blocks(case, device)
    n = case[5]
    for name in ("top_n", "literal_top_n"):
        np.testing.assert_array_equal(xp.to_numpy(getattr(got, name)(n)), getattr(want, name)(n))
    np.testing.assert_array_equal(xp.to_numpy(got.top_ranks()), want.top_ranks())
    np.testing.assert_array_equal(xp.to_numpy(got.selectable), want.selectable)
    same(want.zero_weight_in_top_n(n), got.zero_weight_in_top_n(n), xp)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=120, deadline=None)
@given(case=heads(), upper_bound=st.booleans())
def test_row_statistics(device, case, upper_bound):
    """d~, the fixed-set bound (its cross-distance pass both ways: every key counted, an
    encoder's or non_selected block, and some not, a prefix block), E's term, the other reading
    and a block of some rows."""
    want, got, xp = both_blocks(case, device)
    _, _, x, _, rows, n, causal, masked, _ = case
    pairs = [(want, got)]
    if causal:
        other = "prefix" if masked == "non_selected" else "non_selected"
        pairs.append((want.read_as(other, rows, len(x)), got.read_as(other, rows, len(x))))
    some = np.arange(0, len(rows), 2)
    pairs.append((want.take(some), got.take(some)))
    for w, g in pairs:
        expected = row_statistics(w, n=n, upper_bound=upper_bound)
        result = row_statistics(g, n=n, upper_bound=upper_bound)
        assert result.keys() == expected.keys()
        for name in expected:
            same(expected[name], result[name], xp)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=100, deadline=None)
@given(case=heads(), data=st.data(), seed=st.integers(0, 2**16))
def test_row_critical_statistics(device, case, data, seed):
    """Several N at once, the closed form and the Monte-Carlo subsets drawn on some rows: both
    namespaces draw the same subsets from the same seed."""
    want, got, xp = both_blocks(case, device)
    length, rows = len(case[2]), case[4]
    ns = sorted(data.draw(st.sets(st.integers(1, length), min_size=1, max_size=4)))
    drawn = np.array(sorted(data.draw(st.sets(st.integers(0, len(rows) - 1), min_size=1))))
    ranks = {}
    for name, block in (("want", want), ("got", got)):
        ranks[name] = [block.random_ranks(np.random.default_rng(seed + d), drawn) for d in range(2)]
    for a, b in zip(ranks["want"], ranks["got"], strict=True):
        np.testing.assert_array_equal(xp.to_numpy(b), a)
    expected = row_critical_statistics(want, ns, random_ranks=ranks["want"], random_rows=drawn)
    result = row_critical_statistics(got, ns, random_ranks=ranks["got"], random_rows=drawn)
    assert result.keys() == expected.keys()
    for name in expected:
        same(expected[name], result[name], xp)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=80, deadline=None)
@given(case=heads(), seed=st.integers(0, 2**16))
def test_epsilon_bound_and_monte_carlo(device, case, seed):
    """The bound is +inf where a denominator ||(1 + c) alpha_i x_i - c xbar|| is 0: where it is
    0 up to rounding (xbar summed in another order), one namespace may give +inf and the other
    a value beyond any data's (1/eps of the row's scale); everywhere else they agree."""
    want, got, xp = both_blocks(case, device)
    n = case[5]
    expected = row_epsilon_bound(want, n=n)
    result = xp.to_numpy(row_epsilon_bound(got, n=n))
    singular = np.isinf(expected) | np.isinf(result)
    assert (np.minimum(expected, result)[singular] > 1e12).all()
    same(expected[~singular], xp.asarray(result[~singular]), xp)
    same(
        row_monte_carlo(want, n=n, draws=3, rng=np.random.default_rng(seed)),
        row_monte_carlo(got, n=n, draws=3, rng=np.random.default_rng(seed)),
        xp,
    )


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=80, deadline=None)
@given(case=heads(), delta=st.sampled_from([0.0, 0.3, 1.5]))
def test_row_separability(device, case, delta):
    q, k, x, *rest = case
    case = (q, k, project_to_sphere(x[None] + 1e-3, 1.0)[0], *rest)
    want, got, xp = both_blocks(case, device)
    n = case[5]
    expected = row_separability(want, n=n, delta=delta, radius_m=1.0)
    result = row_separability(got, n=n, delta=delta, radius_m=1.0)
    for name in expected:
        same(expected[name], result[name], xp)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=60, deadline=None)
@given(case=heads(min_len=2, max_len=12), k=st.integers(1, 12))
def test_farthest_keys(device, case, k):
    """Per key its farthest keys: the same distances (keys at equal distance may come in either
    order), each index's distance is its own."""
    x = case[2]
    xp = namespace(device)
    want_index, want_d2 = HeadVectors(x).farthest(k)
    got_index, got_d2 = HeadVectors(x, xp).farthest(k)
    same(want_d2, got_d2, xp)
    got_index = xp.to_numpy(got_index)
    direct = ((x[got_index] - x[:, None, :]) ** 2).sum(axis=2)
    np.testing.assert_allclose(direct, want_d2, rtol=1e-9, atol=1e-9)
    assert want_index.shape == got_index.shape


def test_numpy_namespace_is_numpy_and_a_bad_device_is_refused():
    assert namespace("numpy") is NUMPY
    assert NUMPY.where is np.where
    for bad in ("gpu", "cuda:", "CPU", "cuda:x", ""):
        with pytest.raises(ValueError, match="numpy, cpu or cuda"):
            namespace(bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this torch sees a GPU")
def test_cuda_without_a_gpu_fails_with_a_clear_message():
    with pytest.raises(RuntimeError, match="sees no CUDA device"):
        namespace("cuda")


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=80, deadline=None)
@given(
    case=heads(),
    temperature=st.sampled_from([0.01, 0.3, 1.0, 10.0]),
    spread=st.sampled_from([1.0, 100.0]),
    seed=st.integers(0, 2**16),
)
def test_gradient_rows(device, case, temperature, spread, seed):
    """Algorithm 5's per-row statistics: softmax(l/T) (masked keys -inf, weights below
    exp(-708) exactly 0), the Jacobian norm by the secular-equation solver (near one-hot rows
    at small T or wide logits, ties from integer logits) and g at each eps."""
    from attnlimits.gradient import softmax, softmax_jacobian_norm_from_weights
    from attnlimits.protocol import row_sensitivity, unit_directions

    q, k, _, _, rows, _, causal, _, _ = case
    xp = namespace(device)
    logits, _ = attention_rows(spread * q, k, 0.7, rows, causal=causal, weights=False)
    visible = np.isfinite(logits).sum(axis=1)
    v = unit_directions(np.random.default_rng(seed), len(rows), visible, logits.shape[1])
    base = softmax(logits, temperature)
    got_base = softmax(xp.asarray(logits), temperature, xp=xp)
    same(base, got_base, xp)
    same(
        softmax_jacobian_norm_from_weights(base),
        softmax_jacobian_norm_from_weights(got_base, xp=xp),
        xp,
    )
    epsilons = [1e-3, 0.1]
    same(
        row_sensitivity(logits, v, temperature=temperature, epsilons=epsilons, base=base),
        row_sensitivity(xp.asarray(logits), v, temperature=temperature, epsilons=epsilons, xp=xp),
        xp,
    )
