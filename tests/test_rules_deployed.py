"""The rules deployed since the paper (issue 34), each against its paper's formula written out
here by hand, plain loops on one row: sigmoid attention, softpick, softmax with a sink logit,
alpha-entmax with a learned alpha, Llama 4's log-length query scaling and stick-breaking
attention. tests/test_rules.py holds their torch forwards equal to these numpy weights on drawn
masked rows; here: hand-computed cases, the torch forward on causal rows, ties and masks against
the loops, finite gradients, and each Jacobian norm and bound against autograd."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlimits import attention_rules, rules
from attnlimits import deployed_rules as dr
from attnlimits import normalizers as nz

NEW = [
    "sigmoid_attention",
    "softpick",
    "softmax_sink",
    "entmax_alpha",
    "log_length_softmax",
    "stick_breaking",
]


# ----------------------------------------------------------- the papers' formulas, plain loops
def sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def sigmoid_loop(z):  # Ramapuram et al. 2024: sigma(z - log n)
    return [sig(v - math.log(len(z))) for v in z]


def softpick_loop(z):  # Zuhri et al. 2025, Eq. 2 without its epsilon; e^z - 1 as expm1(z)
    num = [max(math.expm1(v), 0.0) for v in z]
    den = sum(abs(math.expm1(v)) for v in z)
    return [x / den if den > 0 else 0.0 for x in num]


def sink_loop(z, sink):  # gpt-oss: softmax over [z, sink], the sink's share dropped
    den = sum(math.exp(v) for v in z) + math.exp(sink)
    return [math.exp(v) / den for v in z]


def entmax_loop(z, alpha):
    """alpha-entmax by its definition: p_i = [(alpha - 1) z_i - tau]_+^(1 / (alpha - 1)) with tau
    found by plain bisection so that sum p = 1 (Peters et al., 2019, Eq. 9)."""

    def total(tau):
        return sum(max((alpha - 1) * v - tau, 0.0) ** (1 / (alpha - 1)) for v in z)

    lo, hi = (alpha - 1) * max(z) - 1.0, (alpha - 1) * max(z)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if total(mid) >= 1.0 else (lo, mid)
    p = [max((alpha - 1) * v - lo, 0.0) ** (1 / (alpha - 1)) for v in z]
    return [x / sum(p) for x in p]


def log_length_loop(z, position, floor_scale=8192.0, beta=0.1):
    """Llama 4: q times 1 + attn_scale log(floor((t + 1) / floor_scale) + 1), then softmax."""
    scale = 1.0 + beta * math.log(math.floor((position + 1) / floor_scale) + 1.0)
    e = [math.exp(scale * v - scale * max(z)) for v in z]
    return [x / sum(e) for x in e]


def stick_loop(z):
    """Tan et al. 2024: walk back from the most recent key, each taking the fraction beta of the
    stick left."""
    w, left = [0.0] * len(z), 1.0
    for j in reversed(range(len(z))):
        w[j] = sig(z[j]) * left
        left *= 1.0 - sig(z[j])
    return w


def loop(kind, z, learned=0.0, position=None, **settings):
    z = [float(v) for v in z]
    if kind == "sigmoid_attention":
        return sigmoid_loop(z)
    if kind == "softpick":
        return softpick_loop(z)
    if kind == "softmax_sink":
        return sink_loop(z, learned)
    if kind == "entmax_alpha":
        return entmax_loop(z, min(max(1.0 + sig(learned), 1.01), 2.0))
    if kind == "log_length_softmax":
        return log_length_loop(z, len(z) - 1 if position is None else position, **settings)
    if kind == "stick_breaking":
        return stick_loop(z)
    raise NotImplementedError(kind)


# ----------------------------------------------------------------------- hand-computed cases
@pytest.mark.unit
def test_sigmoid_attention_hand_case():
    # n = 4: sigma(z - log 4); z = log 4 gives exactly 1/2, z = log 12 gives 3/4
    z = np.array([[math.log(4), math.log(12), 0.0, -50.0]])
    w = dr.sigmoid_attention_weights(z, 4)[0]
    np.testing.assert_allclose(w[:3], [0.5, 0.75, 0.2], rtol=1e-12)
    assert 0 < w[3] < 1e-22
    # J = diag(s (1 - s)): at s = 1/2, 1/4 exactly, the bound
    assert dr.sigmoid_attention_jacobian_norm(z, 4)[0] == pytest.approx(0.25, rel=1e-12)
    assert rules.jacobian_bound("sigmoid_attention", 2.0, 4, {}) == 0.125
    assert not rules.get("sigmoid_attention").sums_to_one


@pytest.mark.unit
def test_softpick_hand_cases_and_the_zero_row():
    # e^z - 1 at z = log 3, log 2, -log 2: 2, 1, -1/2; D = 3.5; negatives get 0
    z = np.array([[math.log(3), math.log(2), -math.log(2)]])
    np.testing.assert_allclose(dr.softpick_weights(z, 3)[0], [2 / 3.5, 1 / 3.5, 0.0], rtol=1e-12)
    # no negative logit: a distribution; a row of zeros: 0 / 0, weights 0 and norm 0
    assert dr.softpick_weights(np.array([[1.0, 0.0, 2.0]]), 3).sum() == pytest.approx(1.0)
    assert np.all(dr.softpick_weights(np.zeros((1, 3)), 3) == 0.0)
    assert dr.softpick_jacobian_norm(np.zeros((1, 3)), 3)[0] == 0.0
    # large logits: no overflow (e^800 is inf in float64), the same as the shifted form
    big = np.array([[800.0, 799.0, -5.0]])
    d = 1 + math.exp(-1) + (1 - math.exp(-5)) * math.exp(-800)
    np.testing.assert_allclose(
        dr.softpick_weights(big, 3)[0], [1 / d, math.exp(-1) / d, 0.0], rtol=1e-12
    )
    # tiny logits: no cancellation, (e^z - 1) ~ z
    tiny = np.array([[1e-12, 3e-12, -1e-12]])
    np.testing.assert_allclose(dr.softpick_weights(tiny, 3)[0], [0.2, 0.6, 0.0], rtol=1e-9)
    assert rules.get("softpick").jacobian_bound is None  # no known bound


@pytest.mark.unit
def test_softmax_sink_hand_case():
    # z = [0, log 2], sink log 3: 1 / 6, 2 / 6, and the sink's 1 / 2 is missing
    z = np.array([[0.0, math.log(2)]])
    np.testing.assert_allclose(
        dr.softmax_sink_weights(z, 2, sink=math.log(3))[0], [1 / 6, 1 / 3], rtol=1e-12
    )
    # a very low sink is softmax
    np.testing.assert_allclose(
        dr.softmax_sink_weights(z, 2, sink=-100.0), nz.softmax_weights(z, 2), rtol=1e-12
    )
    # per-row sinks, shape (rows, 1)
    two = dr.softmax_sink_weights(np.zeros((2, 2)), 2, sink=np.array([[0.0], [math.log(2)]]))
    np.testing.assert_allclose(two, [[1 / 3, 1 / 3], [1 / 4, 1 / 4]], rtol=1e-12)
    sink = rules.get("softmax_sink")
    assert [(p.name, p.attribute, p.init_setting) for p in sink.learned] == [
        ("sink", "attention_sink", "sink_init")
    ]
    assert sink.trained_settings == {"sink_init"}
    assert not sink.sums_to_one


@pytest.mark.unit
def test_entmax_alpha_hand_cases():
    # pre_alpha 0: alpha 1.5, the package's entmax15; large pre_alpha: alpha 2, sparsemax
    z = np.array([[1.0, 0.3, -0.4, 0.9]])
    np.testing.assert_allclose(
        dr.entmax_alpha_weights(z, 4, pre_alpha=0.0), nz.entmax15_weights(z, 4), atol=1e-12
    )
    np.testing.assert_allclose(
        dr.entmax_alpha_weights(z, 4, pre_alpha=50.0), nz.sparsemax_weights(z, 4), atol=1e-12
    )
    # alpha = 2: [0.5, 0] -> [0.75, 0.25] (sparsemax, threshold -0.25); the clamp keeps alpha in
    # [1.01, 2]
    np.testing.assert_allclose(
        dr.entmax_alpha_weights(np.array([[0.5, 0.0]]), 2, pre_alpha=50.0), [[0.75, 0.25]]
    )
    assert dr.entmax_alpha(-50.0) == 1.01 and dr.entmax_alpha(50.0) == 2.0
    assert dr.entmax_alpha(0.0) == 1.5
    rule = rules.get("entmax_alpha")
    assert rule.trained_settings == {"pre_alpha_init"}
    assert rule.learned[0].init_default(128) == 0.0


@pytest.mark.unit
def test_entmax_alpha_bisects_to_the_dtypes_resolution():
    assert attention_rules.bisection_steps(torch.float32) == 25
    assert attention_rules.bisection_steps(torch.float64) == 54


@pytest.mark.integration
@settings(max_examples=60, deadline=None)
@given(
    scale=st.sampled_from([0.1, 0.3, 1.0, 3.0, 30.0]),
    alpha=st.floats(1.01, 2.0),
    keys=st.integers(1, 96),
    seed=st.integers(0, 2**16),
)
def test_entmax_alpha_float32_steps_lose_nothing_to_the_packages_fifty(scale, alpha, keys, seed):
    # The trained forward's 25 halvings in float32 against the package's 50, both measured
    # from an 80-halving float64 truth: the 25 are as close to it as the 50 are, to a rounding
    # (20 halvings miss it by up to 3e-6 at alpha 2: the check can fail)
    import entmax

    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(1, keys, keys, generator=g) * scale
    visible = torch.tril(torch.ones(keys, keys, dtype=torch.bool))
    pre_alpha = torch.tensor([math.log((alpha - 1.0) / (2.0 - alpha + 1e-12) + 1e-12)])
    got = attention_rules.normalize(
        scores, visible, {"kind": "entmax_alpha"}, {"pre_alpha": pre_alpha}
    )
    a = torch.clamp(1.0 + torch.sigmoid(pre_alpha), 1.01, 2.0).expand(keys, 1)
    z = scores[0].masked_fill(~visible, -1.0e4)
    truth = entmax.entmax_bisect(z.double(), a.double(), dim=-1, n_iter=80)
    package = entmax.entmax_bisect(z, a, dim=-1).masked_fill(~visible, 0.0)
    ours = (got[0].double() - truth).abs().max().item()
    theirs = (package.double() - truth).abs().max().item()
    assert ours <= theirs + 1e-7, (ours, theirs)
    assert torch.all(got[0][~visible] == 0.0)
    # float64: within rounding of the package's own 50 halvings, on float64's own alpha
    a64 = torch.clamp(1.0 + torch.sigmoid(pre_alpha.double()), 1.01, 2.0).expand(keys, 1)
    got64 = attention_rules.normalize(
        scores.double(), visible, {"kind": "entmax_alpha"}, {"pre_alpha": pre_alpha.double()}
    )
    want64 = entmax.entmax_bisect(z.double(), a64, dim=-1).masked_fill(~visible, 0.0)
    np.testing.assert_allclose(got64[0].numpy(), want64.numpy(), atol=1e-13)


@pytest.mark.unit
def test_log_length_scaling_hand_cases():
    # Llama 4's defaults: 1 below 8192 keys, 1 + 0.1 log(k + 1) from k * 8192 keys
    assert dr.log_length_scale(8191) == 1.0
    assert dr.log_length_scale(8192) == pytest.approx(1.0 + 0.1 * math.log(2))
    assert dr.log_length_scale(3 * 8192 + 5) == pytest.approx(1.0 + 0.1 * math.log(4))
    z = np.array([[0.5, -1.0, 2.0]])
    # below floor_scale: plain softmax
    np.testing.assert_allclose(dr.log_length_softmax_weights(z, 3), nz.softmax_weights(z, 3))
    # floor_scale 1, beta 1: scale 1 + log(3 + 1) at n = 3
    scale = 1 + math.log(4)
    np.testing.assert_allclose(
        dr.log_length_softmax_weights(z, 3, floor_scale=1.0, beta=1.0),
        nz.softmax_weights(scale * z, 3),
        rtol=1e-12,
    )
    assert rules.get("log_length_softmax").settings == {"floor_scale": 8192.0, "beta": 0.1}
    bound = rules.jacobian_bound("log_length_softmax", 1.0, 3, {"floor_scale": 1.0, "beta": 1.0})
    assert bound == pytest.approx(scale / 2)


@pytest.mark.unit
def test_stick_breaking_hand_case():
    # beta = sigma(z): z = 0, log 3, -log 3 -> beta = 1/2, 3/4, 1/4; from the last key back:
    # w_3 = 1/4, w_2 = 3/4 * 3/4 = 9/16, w_1 = 1/2 * 3/4 * 1/4 = 3/32; the stick left 3/32
    z = np.array([[0.0, math.log(3), -math.log(3)]])
    w = dr.stick_breaking_weights(z, 3)[0]
    np.testing.assert_allclose(w, [3 / 32, 9 / 16, 1 / 4], rtol=1e-12)
    assert 1 - w.sum() == pytest.approx(3 / 32)
    # ties: equal logits do not give equal weights (recency): the later key weighs more
    tie = dr.stick_breaking_weights(np.zeros((1, 3)), 3)[0]
    np.testing.assert_allclose(tie, [1 / 8, 1 / 4, 1 / 2])
    assert rules.get("stick_breaking").jacobian_bound is None


@pytest.mark.unit
def test_every_new_rule_is_in_the_table_and_names_its_mass():
    for kind in NEW:
        rule = rules.get(kind)
        assert rule.targets, kind
        text = rule.weights.__doc__ or ""
        if not rule.sums_to_one:  # says how the diagnostics treat the missing or extra mass
            assert "mass" in text, kind
    assert rules.get("entmax_alpha").sums_to_one
    assert rules.get("log_length_softmax").sums_to_one


# ------------------------------------------------- the torch forward against the loops
def _learned(kind: str, values: torch.Tensor) -> dict[str, torch.Tensor]:
    return {p.name: values for p in rules.get(kind).learned}


@st.composite
def rows(draw):
    """(scores (heads, queries, keys), visible (queries, keys), learned (heads,)): causal rows or
    any mask, with ties (a small set of values, zeros included) or spread logits."""
    heads = draw(st.integers(1, 2))
    n = draw(st.integers(1, 9))
    if draw(st.booleans()):
        values = st.sampled_from([-2.0, 0.0, 0.0, 0.7, 3.0])
    else:
        values = st.floats(-12.0, 12.0, allow_nan=False)
    scores = np.array(draw(st.lists(values, min_size=heads * n * n, max_size=heads * n * n)))
    if draw(st.booleans()):
        visible = np.tril(np.ones((n, n), dtype=bool))
    else:
        visible = np.array(draw(st.lists(st.booleans(), min_size=n * n, max_size=n * n)))
        visible = visible.reshape(n, n)
        visible[np.arange(n), np.arange(n)] = True
    learned = np.array(draw(st.lists(st.floats(-3, 3), min_size=heads, max_size=heads)))
    return scores.reshape(heads, n, n), visible, learned


@pytest.mark.integration
@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(NEW), case=rows())
def test_forward_equals_the_papers_formula_on_masked_rows(kind, case):
    scores, visible, learned = case
    got = attention_rules.normalize(
        torch.from_numpy(scores),
        torch.from_numpy(visible),
        {"kind": kind},
        _learned(kind, torch.from_numpy(learned)),
    ).numpy()
    for h in range(scores.shape[0]):
        for t in range(scores.shape[1]):
            keys = np.flatnonzero(visible[t])
            want = loop(kind, scores[h, t, keys], float(learned[h]))
            np.testing.assert_allclose(got[h, t, keys], want, rtol=1e-7, atol=1e-10)
            assert np.all(got[h, t, ~visible[t]] == 0.0)


@pytest.mark.integration
def test_log_length_forward_at_a_small_floor_scale_on_causal_rows():
    # floor_scale 2, beta 0.5: causal row t has t + 1 visible keys, scale 1 + 0.5 log(floor((t +
    # 1) / 2) + 1), changing along the rows
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 7, 7, generator=g, dtype=torch.float64) * 2
    visible = torch.tril(torch.ones(7, 7, dtype=torch.bool))
    spec = {"kind": "log_length_softmax", "floor_scale": 2.0, "beta": 0.5}
    got = attention_rules.normalize(scores, visible, spec).numpy()
    for h in range(2):
        for t in range(7):
            want = log_length_loop(scores[h, t, : t + 1].tolist(), t, floor_scale=2.0, beta=0.5)
            np.testing.assert_allclose(got[h, t, : t + 1], want, rtol=1e-12)


@pytest.mark.integration
@pytest.mark.parametrize("kind", NEW)
def test_gradients_are_finite_on_ties_masks_and_zero_rows(kind):
    # causal rows, a padded (masked) key, ties and all-zero rows (softpick's 0 / 0), float32 as
    # in training and float64; the learned parameter gets a gradient too
    for dtype in (torch.float32, torch.float64):
        scores = torch.tensor(
            [
                [
                    [0.0, 0.0, 0.0, 0.0],
                    [1.5, 1.5, -2.0, 0.0],
                    [30.0, -30.0, 0.0, 30.0],
                    [0.8, 0.0, 0.5, 0.0],
                ]
            ],
            dtype=dtype,
        ).expand(2, 4, 4)
        scores = scores.clone().requires_grad_(True)
        visible = torch.tensor(
            [
                [True, False, False, False],
                [True, True, False, False],
                [True, True, True, False],
                [True, True, True, False],
            ]
        )
        learned = torch.tensor([0.0, -1.0], dtype=dtype, requires_grad=True)
        w = attention_rules.normalize(scores, visible, {"kind": kind}, _learned(kind, learned))
        (w * torch.arange(1.0, 5.0, dtype=dtype)).sum().backward()
        assert torch.isfinite(w).all() and torch.isfinite(scores.grad).all(), kind
        assert torch.all(scores.grad[..., 3] == 0.0)  # a masked key gets no gradient
        if rules.get(kind).learned:
            assert torch.isfinite(learned.grad).all() and learned.grad.abs().sum() > 0


# --------------------------------------------- Jacobian norms and bounds against autograd
def _autograd_norm(kind: str, z: np.ndarray, learned: float) -> float:
    def f(t):
        return attention_rules.normalize(
            t.view(1, 1, -1),
            torch.ones(1, t.numel(), dtype=torch.bool),
            {"kind": kind},
            _learned(kind, torch.tensor([learned], dtype=torch.float64)),
        ).view(-1)

    jac = torch.autograd.functional.jacobian(f, torch.tensor(z, dtype=torch.float64))
    return float(np.linalg.norm(jac.numpy(), 2))


@pytest.mark.integration
@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(NEW),
    z=st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=10),
    learned=st.floats(-3, 3),
    outer=st.sampled_from([0.5, 1.0, 4.0]),
)
def test_jacobian_norm_and_bound_against_autograd(kind, z, learned, outer):
    z = np.array(z)
    if len(np.unique(np.round(z, 3))) < len(z):  # entmax's support changes at ties
        return
    arguments = {p.name: learned for p in rules.get(kind).learned}
    got = rules.get(kind).jacobian_norm(z[None], z.size, **arguments)[0]
    assert got == pytest.approx(_autograd_norm(kind, z, learned), rel=1e-6, abs=1e-9)
    bound = rules.jacobian_bound(kind, outer, z.size, arguments)
    if bound is not None:  # ||d w(z / outer) / d z|| = ||J(z / outer)|| / outer
        scaled = rules.get(kind).jacobian_norm((z / outer)[None], z.size, **arguments)[0]
        assert scaled / outer <= float(np.max(bound)) * (1 + 1e-9) + 1e-12
