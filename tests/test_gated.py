"""Gated attention (arXiv 2505.06708): softmax's weights, then a trained sigmoid gate of the
layer input, elementwise per head, on weights @ v. Against a plain loop: the gated output with
ties and causal masks; its gradients are finite; the weights are softmax's on the same logits (so
every diagnostic of the weights equals softmax's by construction); a gated model saves, loads and
trains with its gate."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnlimits import attention_rules, rules
from attnlimits import normalizers as nz
from attnlimits.extraction import RULE_KEY, add_output_gates, rule_attention

GATED = {"kind": "gated_softmax"}


class TinyAttention(nn.Module):
    """The least an attention module needs for rule_attention: a config naming the rule, a layer
    index (attention_modules finds it), a q projection (the gate's input width)."""

    def __init__(self, hidden: int, rule: dict):
        super().__init__()
        self.config = SimpleNamespace(**{RULE_KEY: rule})
        self.layer_idx = 0
        self.is_causal = True
        self.q_proj = nn.Linear(hidden, hidden, bias=False)

    def forward(self, hidden_states, query, key, value, mask, scaling):
        return rule_attention(self, query, key, value, mask, scaling)


def sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def gated_loop(x, q, k, v, gate_weight, scaling, visible):
    """Plain loops: for each (batch, query t, head h), softmax over the keys t sees, the weighted
    sum of v, then each coordinate e of head h times sigma(sum_c x[t, c] W[h dh + e, c])."""
    batch, heads, n_q, dh = q.shape
    kv_heads, n_k = k.shape[1], k.shape[2]
    out = np.zeros((batch, n_q, heads, dh))
    for b in range(batch):
        for t in range(n_q):
            for h in range(heads):
                g = h // (heads // kv_heads)
                seen = [j for j in range(n_k) if visible[t][j]]
                z = [sum(q[b, h, t, e] * k[b, g, j, e] for e in range(dh)) * scaling for j in seen]
                top = max(z)
                e_z = [math.exp(v_ - top) for v_ in z]
                w = [a / sum(e_z) for a in e_z]
                for e in range(dh):
                    o = sum(w[i] * v[b, g, j, e] for i, j in enumerate(seen))
                    gate = sig(
                        sum(x[b, t, c] * gate_weight[h * dh + e, c] for c in range(x.shape[2]))
                    )
                    out[b, t, h, e] = o * gate
    return out


def case(seed, batch=2, heads=4, kv_heads=2, n=6, dh=3, ties=False):
    g = torch.Generator().manual_seed(seed)
    hidden = heads * dh
    x = torch.randn(batch, n, hidden, generator=g, dtype=torch.float64)
    q = torch.randn(batch, heads, n, dh, generator=g, dtype=torch.float64)
    k = torch.randn(batch, kv_heads, n, dh, generator=g, dtype=torch.float64)
    v = torch.randn(batch, kv_heads, n, dh, generator=g, dtype=torch.float64)
    if ties:  # every key alike: each visible weight 1 / (t + 1), exactly tied
        k[:] = k[:, :, :1]
    module = TinyAttention(hidden, GATED).double()
    torch.manual_seed(seed)
    add_output_gates(module, heads, dh, std=1.0)
    module.double()
    return module, x, q, k, v


def causal(n):
    return [[j <= t for j in range(n)] for t in range(n)]


@pytest.mark.unit
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_gated_output_equals_the_plain_loop_on_causal_rows(seed, ties):
    module, x, q, k, v = case(seed, ties=ties)
    out, weights = module(x, q, k, v, None, 0.5)  # no mask: the causal flag
    gate_weight = getattr(module, rules.OUTPUT_GATE).weight.detach().numpy()
    want = gated_loop(x.numpy(), q.numpy(), k.numpy(), v.numpy(), gate_weight, 0.5, causal(6))
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-10, atol=1e-12)
    if ties:  # tied keys: the weights are uniform over the keys each row sees
        for t in range(6):
            np.testing.assert_allclose(weights[:, :, t, : t + 1].detach(), 1.0 / (t + 1))
            assert torch.all(weights[:, :, t, t + 1 :] == 0.0)


@pytest.mark.unit
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 5),
    ties=st.booleans(),
    drop=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=6),
)
def test_gated_output_equals_the_plain_loop_under_any_mask(seed, n, ties, drop):
    """A boolean mask (causal, minus some keys; every row keeps its diagonal) and n = 1."""
    module, x, q, k, v = case(seed, batch=1, n=n, ties=ties)
    visible = causal(n)
    for t, j in drop:
        if t < n and j < t:
            visible[t][j] = False
    mask = torch.tensor(visible)[None, None]
    out, _ = module(x, q, k, v, mask, 0.7)
    gate_weight = getattr(module, rules.OUTPUT_GATE).weight.detach().numpy()
    want = gated_loop(x.numpy(), q.numpy(), k.numpy(), v.numpy(), gate_weight, 0.7, visible)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.unit
def test_gated_output_by_hand():
    # one head of two coordinates: Y = [2, -4], scores [0, ln 3]: gates 1/2 and 3/4
    y = torch.tensor([[[[2.0, -4.0]]]], dtype=torch.float64)
    scores = torch.tensor([[[0.0, math.log(3.0)]]], dtype=torch.float64)
    got = attention_rules.gated_output(y, scores)
    np.testing.assert_allclose(got.numpy(), [[[[1.0, -3.0]]]], rtol=1e-15)


@pytest.mark.unit
def test_gradients_are_finite_with_ties_and_masks():
    module, x, q, k, v = case(3, ties=True)
    tensors = [t.clone().requires_grad_(True) for t in (x, q, k, v)]
    mask = torch.tensor(causal(6))[None, None]
    out, _ = module(*tensors, mask, 1.0)
    (out * torch.randn_like(out)).sum().backward()
    for t in tensors:
        assert torch.isfinite(t.grad).all()
    gate = getattr(module, rules.OUTPUT_GATE).weight.grad
    assert gate is not None and torch.isfinite(gate).all() and gate.abs().sum() > 0


@pytest.mark.unit
def test_a_gated_rule_without_its_gate_is_refused():
    module = TinyAttention(12, GATED).double()  # no add_output_gates: no gate, no pre-hook
    _, x, q, k, v = case(0)
    with pytest.raises(RuntimeError, match="output gate"):
        module(x, q, k, v, None, 1.0)


@pytest.mark.unit
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 9), spread=st.sampled_from([0.0, 1.0, 30.0]))
def test_the_weights_are_softmax_on_the_same_logits(seed, n, spread):
    """Both sides of the rules' table: the trained forward and the numpy what-if give softmax's
    weights exactly (spread 0: every logit tied), so every diagnostic of them is softmax's."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(2, n, n, generator=g, dtype=torch.float64) * spread
    visible = attention_rules.visible_from_mask(None, True, n, n, "cpu")[0]
    gated = attention_rules.normalize(scores, visible, GATED)
    assert torch.equal(gated, attention_rules.normalize(scores, visible, {"kind": "softmax"}))
    z = scores[:, -1].numpy()
    rule = rules.get("gated_softmax")
    assert np.array_equal(rule.weights(z, n), nz.softmax_weights(z, n))
    assert np.array_equal(rule.jacobian_norm(z, n), nz.softmax_normalizer_jacobian_norm(z, n))
    assert rules.jacobian_bound("gated_softmax", 2.0, n, {}) == rules.jacobian_bound(
        "softmax", 2.0, n, {}
    )


@pytest.mark.unit
def test_only_gated_attention_has_an_output_gate():
    assert [k for k, r in rules.RULES.items() if r.output_gate] == ["gated_softmax"]
    assert rules.get("gated_softmax").targets == ()  # no limit of the weights can move
    assert all(r.lemma1 for r in rules.RULES.values())  # each says which Lemma 1 assumption


ARCH = {
    "hidden_size": 16,
    "intermediate_size": 32,
    "layers": 2,
    "heads": 4,
    "kv_heads": 2,
    "max_positions": 64,
    "rope_theta": 10000.0,
}


@pytest.mark.integration
def test_a_gated_model_keeps_softmax_weights_and_its_gate_through_save_and_load(tmp_path):
    from tokenizers import Tokenizer, models

    from attnlimits.extraction import register_rule_attention
    from attnlimits_workflow import training

    torch.set_num_threads(1)
    gated = training.build_model(ARCH, GATED, 50, 0, 16)
    plain = training.build_model(ARCH, {"kind": "softmax"}, 50, 0, 16)
    gate_keys = [k for k in gated.state_dict() if rules.OUTPUT_GATE in k]
    assert len(gate_keys) == ARCH["layers"]
    # the gate is drawn after the model: every other initial weight is the softmax model's
    for key, value in plain.state_dict().items():
        assert torch.equal(value, gated.state_dict()[key]), key
    ids = torch.arange(12)[None] % 50
    with torch.inference_mode():
        a = gated(input_ids=ids, output_attentions=True)
        b = plain(input_ids=ids, output_attentions=True)
    # layer 0 reads the same hidden states: the same weights, a different (gated) output
    assert torch.equal(a.attentions[0], b.attentions[0])
    assert not torch.allclose(a.logits, b.logits)
    tok_file = tmp_path / "tokenizer.json"
    Tokenizer(models.BPE()).save(str(tok_file))
    training.save_trained(gated, tok_file, tmp_path / "model", {"name": "gated"})
    again = training.load_trained(tmp_path / "model", register_rule_attention(), causal_lm=True)
    with torch.inference_mode():
        assert torch.equal(again(input_ids=ids).logits, a.logits)
