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


# ------------------------------------------------ the published formulas, one reference per kind
# PUBLISHED[kind](z, **settings): the rule's weights on one row's logits ``z`` (a 1-D float64 torch
# tensor of the keys the row sees, so n = len(z)), written out from its paper in plain torch, so
# that autograd's Jacobian of it is the reference for the rule's Jacobian norm. ``settings`` are
# the what-if's keywords (a learned parameter as one number), with the papers' defaults. The
# property tests below hold every rule of the table to it (numpy weights and Jacobian norm), and
# tests/test_study.py holds every trained forward to it, row by row.
def _sparsemax(z, temperature=1.0):
    """The Euclidean projection of z / T onto the simplex (Martins and Astudillo, 2016, Alg. 1):
    the support is the k largest, k the last with 1 + k z_(k) > z_(1) + ... + z_(k)."""
    x = z / temperature
    top = torch.sort(x, descending=True).values
    k = torch.arange(1, len(x) + 1, dtype=x.dtype)
    size = int(torch.nonzero(1.0 + k * top > torch.cumsum(top, 0)).max()) + 1
    return torch.relu(x - (top[:size].sum() - 1.0) / size)


def _alpha_entmax(x, alpha):
    """alpha-entmax (Peters et al., 2019, Eq. 9): p_i = [(alpha - 1) x_i - tau]_+^(1 / (alpha - 1))
    with sum 1; tau by plain bisection, then one Newton step on sum p = 1, through which autograd
    differentiates tau as the implicit function it is."""
    y, power = (alpha - 1.0) * x, 1.0 / (alpha - 1.0)
    ys = y.detach().numpy()
    lo, hi = ys.max() - 1.0, ys.max()  # sum p >= 1 at lo, 0 at hi
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if (np.clip(ys - mid, 0.0, None) ** power).sum() >= 1.0 else (lo, mid)
    above = y.detach() > lo
    slope = (power * torch.where(above, torch.relu(y.detach() - lo), 0.0) ** (power - 1.0)).sum()
    tau = lo + ((torch.relu(y - lo) ** power).sum() - 1.0) / slope
    p = torch.relu(y - tau) ** power
    return p / p.sum()


def _self_adjust_softmax(z):
    """(z - min(z_min, 0)) / (max(z_max, 0) - min(z_min, 0)) * softmax(z), Zheng et al. (2025);
    a row of zeros gets 0."""
    low, high = torch.clamp(z.min(), max=0.0), torch.clamp(z.max(), min=0.0)
    if high == low:
        return torch.zeros_like(z)
    return (z - low) / (high - low) * torch.softmax(z, -1)


def _softpick(z):
    """relu(e^z - 1) / sum |e^z - 1| (Zuhri et al., 2025, without its epsilon); 0 / 0 is 0."""
    e = torch.expm1(z)
    total = e.abs().sum()
    return torch.relu(e) / total if total > 0 else torch.zeros_like(z)


def _softmax_sink(z, sink=0.0):
    """softmax over [z, sink], the sink's share dropped (gpt-oss)."""
    m = max(float(z.detach().max()), sink)
    e = torch.exp(z - m)
    return e / (e.sum() + math.exp(sink - m))


def _stick_breaking(z):
    """Tan et al. (2024): from the last key back, each takes the fraction sigma(z_j) of the stick
    left."""
    out, left = [], 1.0
    for j in reversed(range(len(z))):
        beta = torch.sigmoid(z[j])
        out.append(beta * left)
        left = left * (1.0 - beta)
    return torch.stack(out[::-1])


def _log_length_softmax(z, floor_scale=8192.0, beta=0.1):
    """Llama 4: softmax(c z), c = 1 + beta log(floor(n / floor_scale) + 1)."""
    return torch.softmax((1.0 + beta * math.log(math.floor(len(z) / floor_scale) + 1.0)) * z, -1)


PUBLISHED = {
    "softmax": lambda z, temperature=1.0: torch.softmax(z / temperature, -1),
    "sparsemax": _sparsemax,
    "entmax15": lambda z, temperature=1.0: _alpha_entmax(z / temperature, 1.5),
    # Nakanishi (2025): softmax(s log(n) z)
    "scalable_softmax": lambda z, s=0.43: torch.softmax(s * math.log(len(z)) * z, -1),
    "self_adjust_softmax_raw": lambda z: z * torch.softmax(z, -1),  # Zheng et al., Eq. 3
    "self_adjust_softmax": _self_adjust_softmax,
    "sigmoid_attention": lambda z: torch.sigmoid(z - math.log(len(z))),  # Ramapuram et al.
    "softpick": _softpick,
    "softmax_sink": _softmax_sink,
    # the entmax package's EntmaxAlpha: alpha = 1 + sigmoid(pre_alpha), clamped to [1.01, 2]
    "entmax_alpha": lambda z, pre_alpha=0.0: _alpha_entmax(
        z, min(max(1.0 + 1.0 / (1.0 + math.exp(-pre_alpha)), 1.01), 2.0)
    ),
    "log_length_softmax": _log_length_softmax,
    "stick_breaking": _stick_breaking,
    # gated attention's weights are softmax's: its gate acts after them
    "gated_softmax": lambda z, temperature=1.0: torch.softmax(z / temperature, -1),
}


def published(kind: str):
    """The published-formula reference of ``kind``; a rule of the table without one fails here,
    saying where to add it."""
    if kind not in PUBLISHED:
        pytest.fail(
            f"{kind}: add its published formula to PUBLISHED in tests/test_normalizers.py "
            "(docs/extending.md, 'Adding a normalizer')"
        )
    return PUBLISHED[kind]


def test_every_rule_of_the_table_has_a_published_formula():
    missing = sorted(set(rules.RULES) - set(PUBLISHED))
    assert not missing, (
        f"{missing}: add each one's published formula to PUBLISHED in tests/test_normalizers.py "
        "(docs/extending.md, 'Adding a normalizer')"
    )
    assert sorted(set(PUBLISHED) - set(rules.RULES)) == []  # no reference of a removed rule


def _torch_reference(kind: str, z: np.ndarray, **settings) -> tuple[float, np.ndarray]:
    """The published formula's weights and the largest singular value of its dense Jacobian, by
    autograd."""

    def f(t):
        return published(kind)(t, **settings)

    t = torch.tensor(z, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(f, t).numpy()
    return float(np.linalg.norm(jac, 2)), f(t).detach().numpy()


@pytest.mark.parametrize("kind", sorted(rules.RULES))
@settings(max_examples=12, deadline=None)
@given(
    z=arrays(np.float64, st.integers(2, 12), elements=st.floats(-4, 4, width=32)),
    temperature=st.sampled_from([0.3, 1.0, 3.0]),
)
def test_weights_jacobian_norm_and_bound_match_autograd(kind, z, temperature):
    """Every rule of the table against its published formula: the weights, the Jacobian norm
    against autograd's, the row sums, and the rule's Jacobian bound (at outer = 1) above the
    norm."""
    # distinct logits: min/max (SA-Softmax) and the sparse supports are differentiable there
    if len(np.unique(np.round(z, 3))) < len(z):
        return
    # SA-Softmax's min(z_min, 0) and max(z_max, 0) have a kink where the extreme logit is 0:
    # the one-sided derivatives there differ between this code and autograd
    if kind == "self_adjust_softmax" and (z.min() == 0.0 or z.max() == 0.0):
        return
    length = len(z)
    rule = rules.get(kind)
    params = {"temperature": temperature} if "temperature" in rule.settings else {}
    norm_ref, w_ref = _torch_reference(kind, z, **params)
    weights = rule.weights(z[None], length, **params)
    np.testing.assert_allclose(weights[0], w_ref, atol=1e-9)
    got = rule.jacobian_norm(z[None], length, **params)[0]
    assert got == pytest.approx(norm_ref, rel=1e-6, abs=1e-9)
    row_sum = weights.sum()
    if rule.sums_to_one:
        assert row_sum == pytest.approx(1.0)
    elif kind == "sigmoid_attention":  # each weight in (0, 1) on its own
        assert 0.0 < row_sum < length
    elif rule.signed:  # z * softmax(z): the softmax mean of z, between min(z) and max(z)
        assert z.min() - 1e-12 <= row_sum <= z.max() + 1e-12
    else:  # mass missing (softpick, a sink, stick-breaking; SA-Softmax's g in [0, 1]), none extra
        assert 0.0 <= row_sum <= 1.0 + 1e-12
    bound = rules.jacobian_bound(kind, 1.0, length, {**rule.settings, **params})
    if bound is not None:
        assert got <= float(np.max(bound)) * (1 + 1e-9) + 1e-12


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
    # renormalized: a row summing to 1/2 has the entropy of its normalized version
    assert nz.entropy(np.array([[0.25, 0.25]]))[0] == pytest.approx(math.log(2))
    assert np.isnan(nz.entropy(np.zeros((1, 3)))[0])
    # logits with standard deviation 20 act like unit-variance logits at T = 1/20
    z = np.array([[-20.0, 20.0]])
    assert nz.effective_temperature(z)[0] == pytest.approx(1 / 20)
    assert nz.effective_temperature(np.ones((1, 4)))[0] == np.inf


def test_unknown_kind_is_named():
    with pytest.raises(ValueError, match="unknown normalizer kind 'softermax'"):
        rules.get("softermax")
