"""Alternative normalizers: hand-computed cases, and every Jacobian norm against torch autograd's
dense Jacobian (the reference) on random logits."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attnlimits import normalizers as nz
from attnlimits import rules
from attnlimits.gradient import softmax

pytestmark = pytest.mark.unit


def test_sparsemax_hand_cases():
    # sparsemax([1, 0]): threshold 0 -> [1, 0]; sparsemax([0.5, 0]): threshold -0.25 -> [.75, .25]
    w = nz.sparsemax_weights(np.array([[1.0, 0.0], [0.5, 0.0]]), 2)
    np.testing.assert_allclose(w, [[1.0, 0.0], [0.75, 0.25]], atol=1e-12)
    # one-token support: the Jacobian is 0; two or more: a projection, norm 1/T
    np.testing.assert_allclose(
        nz.sparsemax_jacobian_norm(np.array([[1.0, 0.0], [0.5, 0.0]]), 2), [0.0, 1.0], atol=1e-9
    )
    assert nz.sparsemax_jacobian_norm(np.array([[0.2, 0.0]]), 2, temperature=0.5)[0] == (
        pytest.approx(2.0)
    )


def test_entmax15_hand_cases():
    # a tie gives the uniform pair; g = sqrt(1/2) and J = g (I - 11^T / 2): norm sqrt(1/2)
    w = nz.entmax15_weights(np.array([[0.0, 0.0]]), 2)
    np.testing.assert_allclose(w, [[0.5, 0.5]], atol=1e-7)
    assert nz.entmax15_jacobian_norm(np.array([[0.0, 0.0]]), 2)[0] == pytest.approx(
        math.sqrt(0.5), rel=1e-6
    )
    # far-apart logits: one-hot, zero Jacobian
    w = nz.entmax15_weights(np.array([[10.0, 0.0, -3.0]]), 3)
    np.testing.assert_allclose(w, [[1.0, 0.0, 0.0]], atol=1e-12)
    assert nz.entmax15_jacobian_norm(np.array([[10.0, 0.0, -3.0]]), 3)[0] == 0.0  # exactly


def test_scalable_softmax_is_softmax_scaled_by_s_log_length():
    logits = np.array([[0.3, -1.0, 2.0, 0.0]])
    scale = 0.43 * math.log(4)
    np.testing.assert_allclose(
        nz.scalable_softmax_weights(logits, 4), softmax(logits * scale), rtol=1e-12
    )
    # at s log L = 1 it is the plain softmax
    np.testing.assert_allclose(
        nz.scalable_softmax_weights(logits, 4, s=1 / math.log(4)), softmax(logits), rtol=1e-12
    )


def test_self_adjust_softmax_hand_case():
    z = np.array([[1.0, 0.0, -1.0]])
    p = softmax(z)[0]
    # min(z_min, 0) = -1, max(0, z_max) = 1: g = (z + 1) / 2 = [1, 1/2, 0]
    np.testing.assert_allclose(nz.self_adjust_softmax_weights(z, 3)[0], [p[0], p[1] / 2, 0.0])
    # all-positive logits: the lower end is 0, not z_min
    z = np.array([[2.0, 1.0]])
    np.testing.assert_allclose(nz.self_adjust_softmax_weights(z, 2)[0], softmax(z)[0] * [1, 0.5])
    # rows sum to at most one; an all-zero row has weights 0 and Jacobian norm 0
    assert nz.self_adjust_softmax_weights(np.zeros((1, 3)), 3).sum() == 0.0
    assert nz.self_adjust_softmax_jacobian_norm(np.zeros((1, 3)), 3)[0] == 0.0
    assert not rules.get("self_adjust_softmax").sums_to_one


def _torch_reference(kind: str, z: np.ndarray, length: int, **params) -> tuple[float, np.ndarray]:
    """Dense Jacobian by autograd and its largest singular value."""
    import entmax

    def f(t):
        if kind in ("softmax", "gated_softmax"):  # the gate acts after the weights
            return torch.softmax(t / params.get("temperature", 1.0), -1)
        if kind == "sparsemax":
            return entmax.sparsemax(t / params.get("temperature", 1.0), dim=-1)
        if kind == "entmax15":
            return entmax.entmax15(t / params.get("temperature", 1.0), dim=-1)
        if kind == "scalable_softmax":
            return torch.softmax(t * params.get("s", 0.43) * math.log(length), -1)
        if kind == "self_adjust_softmax_raw":
            return t * torch.softmax(t, -1)
        if kind == "self_adjust_softmax":
            low = torch.clamp(t.min(), max=0.0)
            high = torch.clamp(t.max(), min=0.0)
            return (t - low) / (high - low) * torch.softmax(t, -1)
        if kind == "sigmoid_attention":
            return torch.sigmoid(t - math.log(length))
        if kind == "softpick":
            e = torch.expm1(t)
            return torch.relu(e) / e.abs().sum()
        if kind == "softmax_sink":
            e = torch.exp(t)
            return e / (e.sum() + math.exp(params.get("sink", 0.0)))
        if kind == "entmax_alpha":
            alpha = 1.0 + 1.0 / (1.0 + math.exp(-params.get("pre_alpha", 0.0)))
            return entmax.entmax_bisect(t, alpha, dim=-1)
        if kind == "log_length_softmax":
            scale = 1.0 + 0.1 * math.log(math.floor(length / 8192.0) + 1.0)
            return torch.softmax(scale * t, -1)
        if kind == "stick_breaking":
            beta = torch.sigmoid(t)
            rest = [torch.prod(1.0 - beta[j + 1 :]) for j in range(len(t))]
            return beta * torch.stack(rest)
        raise NotImplementedError(f"{kind}: add its plain formula here (docs/extending.md)")

    t = torch.tensor(z, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(f, t).numpy()
    return float(np.linalg.norm(jac, 2)), f(t).detach().numpy()


@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(sorted(rules.RULES)),
    z=arrays(np.float64, st.integers(2, 12), elements=st.floats(-4, 4, width=32)),
    temperature=st.sampled_from([0.3, 1.0, 3.0]),
)
def test_weights_and_jacobian_norm_match_autograd(kind, z, temperature):
    # distinct logits: min/max (SA-Softmax) and the sparse supports are differentiable there
    if len(np.unique(np.round(z, 3))) < len(z):
        return
    # SA-Softmax's min(z_min, 0) and max(z_max, 0) have a kink where the extreme logit is 0:
    # the one-sided derivatives there differ between this code and autograd
    if kind == "self_adjust_softmax" and (z.min() == 0.0 or z.max() == 0.0):
        return
    length = len(z)
    params = {"temperature": temperature} if "temperature" in rules.get(kind).settings else {}
    norm_ref, w_ref = _torch_reference(kind, z, length, **params)
    norm = rules.get(kind)
    np.testing.assert_allclose(norm.weights(z[None], length, **params)[0], w_ref, atol=1e-9)
    got = norm.jacobian_norm(z[None], length, **params)[0]
    assert got == pytest.approx(norm_ref, rel=1e-6, abs=1e-9)
    row_sum = norm.weights(z[None], length, **params).sum()
    if norm.sums_to_one:
        assert row_sum == pytest.approx(1.0)
    elif kind == "self_adjust_softmax":  # g in [0, 1] times a distribution
        assert 0.0 <= row_sum <= 1.0 + 1e-12
    elif kind in ("softpick", "softmax_sink", "stick_breaking"):  # mass missing, none extra
        assert 0.0 <= row_sum <= 1.0 + 1e-12
    elif kind == "sigmoid_attention":  # each weight in (0, 1) on its own
        assert 0.0 < row_sum < length
    else:  # z * softmax(z): the softmax mean of z, between min(z) and max(z)
        assert z.min() - 1e-12 <= row_sum <= z.max() + 1e-12


def test_sparse_normalizers_produce_exact_zeros_softmax_does_not():
    rng = np.random.default_rng(0)
    z = rng.normal(0, 3, (5, 64))
    assert (nz.sparsemax_weights(z, 64) == 0).sum() > 0
    assert (nz.entmax15_weights(z, 64) == 0).sum() > 0
    assert (nz.softmax_weights(z, 64) == 0).sum() == 0
    # sparsemax is sparser than 1.5-entmax on the same logits
    assert (nz.sparsemax_weights(z, 64) > 0).sum() <= (nz.entmax15_weights(z, 64) > 0).sum()


def test_entropy_and_effective_temperature():
    assert nz.entropy(np.full((1, 8), 1 / 8))[0] == pytest.approx(math.log(8))
    assert nz.entropy(np.array([[0.0, 1.0, 0.0]]))[0] == 0.0
    # renormalised: a row summing to 1/2 has the entropy of its normalised version
    assert nz.entropy(np.array([[0.25, 0.25]]))[0] == pytest.approx(math.log(2))
    assert np.isnan(nz.entropy(np.zeros((1, 3)))[0])
    # logits with standard deviation 20 act like unit-variance logits at T = 1/20
    z = np.array([[-20.0, 20.0]])
    assert nz.effective_temperature(z)[0] == pytest.approx(1 / 20)
    assert nz.effective_temperature(np.ones((1, 4)))[0] == np.inf


def test_unknown_kind_is_named():
    with pytest.raises(ValueError, match="unknown normalizer kind 'softermax'"):
        rules.get("softermax")
