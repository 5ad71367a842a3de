"""The effective-set intervention (attnlimits.effective_set) against plain references.

- With N at least the number of keys, the intervened forward is the plain one bit for bit, in
  every causal family (it is the capture's own attention there).
- One attention call, every selection and mode, against attnlimits.reference.top_n_attention
  (plain numpy, row by row); at N = 1 on every row.
- Whole models of every causal family (GQA, sliding windows, soft-caps, sinks, differential
  attention) against a dense float64 numpy attention that applies the deletion rule.
- Blocks of rows against one block; the N* search against a full scan.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_families import COMMON, TINY
from test_study import ARCH as STUDY_ARCH
from transformers import AttentionInterface, AutoConfig, AutoModelForCausalLM
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from attnlimits import reference
from attnlimits.effective_search import bootstrap_n_star, powers_of_two, search_n_star
from attnlimits.effective_set import (
    Intervention,
    intervene,
    intervened_attention,
    kept_keys,
    kept_weights,
    register_intervention,
)
from attnlimits.extraction import RULE_KEY, register_capture
from attnlimits.families import FAMILIES

pytestmark = pytest.mark.unit

CAUSAL = sorted(name for name, f in FAMILIES.items() if f.causal)
CONTEXT = 24


def qkv(seed=0, heads=3, kv_heads=3, n=11, d=5, spread=2.0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, heads, n, d, generator=g) * spread
    k = torch.randn(1, kv_heads, n, d, generator=g) * spread
    v = torch.randn(1, kv_heads, n, d, generator=g)
    return q, k, v


class Module(torch.nn.Module):
    is_causal = True


def causal_visible(n):
    return np.tril(np.ones((n, n), dtype=bool))


@pytest.mark.parametrize("selection", ["attention", "contribution", "random"])
@pytest.mark.parametrize("mode", ["delete", "renormalize"])
@pytest.mark.parametrize("n", [1, 3, 10])
def test_one_call_equals_the_numpy_reference_on_every_row(selection, mode, n):
    q, k, v = qkv(heads=4, kv_heads=2)  # grouped: query heads 0, 1 read KV head 0
    heads, rows = q.shape[1], q.shape[2]
    uniform = torch.rand(
        (1, heads, rows, rows), generator=torch.Generator().manual_seed(5), dtype=torch.float32
    )
    with intervene(Intervention(n, selection, mode, seed=5)):
        out, _ = intervened_attention(Module(), q, k, v, None, scaling=0.5, is_causal=True)
    for h in range(heads):
        kv = h * k.shape[1] // heads
        want = reference.top_n_attention(
            (q[0, h] @ k[0, kv].T).numpy() * 0.5,
            causal_visible(rows),
            v[0, kv].numpy(),
            n,
            selection,
            mode,
            uniform[0, h].numpy(),
        )
        np.testing.assert_allclose(out[0, :, h].numpy(), want, rtol=1e-5, atol=1e-6)


def test_a_row_that_sees_at_most_n_keys_keeps_them_all():
    q, k, v = qkv()
    with intervene(Intervention(4)):
        out, _ = intervened_attention(Module(), q, k, v, None, scaling=0.5, is_causal=True)
    plain = (
        torch.softmax(
            (q @ k.transpose(-1, -2) * 0.5).masked_fill(
                ~torch.tril(torch.ones(11, 11, dtype=torch.bool)), -torch.inf
            ),
            -1,
        )
        @ v
    )
    # rows 0..3 see 1..4 keys
    torch.testing.assert_close(out[0, :4], plain[0, :, :4].transpose(0, 1), rtol=1e-6, atol=1e-7)
    assert not torch.allclose(out[0, 4:], plain[0, :, 4:].transpose(0, 1), atol=1e-4)


def test_ties_keep_the_lower_index():
    weights = torch.tensor([[0.25, 0.25, 0.25, 0.25]])
    keep = kept_keys(weights, torch.ones(1, 4, dtype=torch.bool), 2, "attention")
    assert keep.tolist() == [[True, True, False, False]]


def test_signed_weights_keep_the_largest_magnitudes():
    weights = torch.tensor([[0.5, -0.9, 0.1, 0.3]])
    visible = torch.ones(1, 4, dtype=torch.bool)
    assert kept_keys(weights, visible, 1, "attention").tolist() == [[True, False, False, False]]
    assert kept_keys(weights, visible, 2, "attention", signed=True).tolist() == [
        [True, True, False, False]
    ]
    norms = torch.tensor([1.0, 0.1, 10.0, 1.0])  # |w| ||v||: 0.5, 0.09, 1.0, 0.3
    assert kept_keys(weights, visible, 2, "contribution", norms, signed=True).tolist() == [
        [True, False, True, False]
    ]


def test_a_signed_rule_refuses_renormalizing():
    q, k, v = qkv(heads=2, kv_heads=2, n=5)
    module = Module()
    module.config = type("Config", (), {RULE_KEY: {"kind": "self_adjust_softmax_raw"}})()
    with intervene(Intervention(2, "attention", "renormalize")):
        with pytest.raises(NotImplementedError, match="either sign; use delete"):
            intervened_attention(module, q, k, v, None, scaling=0.4, is_causal=True)


def test_invisible_keys_are_never_kept():
    weights = torch.tensor([[0.5, 0.0, 0.5, 0.0]])
    visible = torch.tensor([[True, False, True, False]])
    keep = kept_keys(weights, visible, 3, "random", generator=torch.Generator().manual_seed(0))
    assert keep.tolist() == [[True, False, True, False]]


def test_renormalized_weights_keep_the_row_mass_and_are_the_plain_ones_when_nothing_drops():
    w = (
        torch.tensor([[0.5, 0.3, 0.2], [0.6, 0.4, 0.0]], dtype=torch.float64) * 0.9
    )  # a sink took 0.1
    keep = torch.tensor([[True, True, False], [True, True, False]])
    got = kept_weights(w, keep, "renormalize")
    torch.testing.assert_close(
        got[0], torch.tensor([0.5, 0.3, 0.0], dtype=torch.float64) * 0.9 / 0.8
    )
    assert torch.equal(got[1], w[1])  # only a zero weight was dropped
    assert torch.equal(
        kept_weights(w, keep, "delete")[0], torch.tensor([0.45, 0.27, 0.0], dtype=torch.float64)
    )


def test_blocks_of_rows_equal_one_block():
    # in float64, so that the test reads the blocking, not float32's summation order (which
    # moved one of 260 outputs by 3 ulp on one CPU)
    q, k, v = (t.double() for t in qkv(heads=4, kv_heads=2, n=13))
    got = {}
    for block in (1, 3, 13, 100):
        with intervene(Intervention(3, "contribution", "renormalize", block=block)):
            got[block], _ = intervened_attention(
                Module(), q, k, v, None, scaling=0.4, is_causal=True
            )
    for block in (1, 3, 13):
        torch.testing.assert_close(got[block], got[100], rtol=1e-12, atol=1e-14)


def test_bad_interventions_are_refused():
    for bad in (
        {"n": 0},
        {"n": 2, "selection": "top"},
        {"n": 2, "mode": "scale"},
        {"n": 2, "block": 0},
    ):
        with pytest.raises(ValueError):
            Intervention(**bad)


# --- whole models of every causal family ----------------------------------------------------


def numpy_deletion_attention(n):
    """A dense attention in float64 numpy, row by row: the model's scores (scaling, soft-cap,
    mask, sink key), softmax, then the deletion rule's top-n by weight (lower index on ties)."""

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
        softcap = kwargs.get("softcap")
        sinks = kwargs.get("s_aux")
        q = query.detach().double().numpy()[0]
        k = key.detach().double().numpy()[0]
        v = value.detach().double().numpy()[0]
        heads, rows, _ = q.shape
        keys = k.shape[1]
        if attention_mask is None:
            visible = np.tril(np.ones((rows, keys), dtype=bool), keys - rows)
        else:
            m = attention_mask[0, 0].numpy()
            visible = m if m.dtype == bool else m > -1e30
        out = np.zeros((rows, heads, v.shape[2]))
        for h in range(heads):
            kv = h * k.shape[0] // heads
            for r in range(rows):
                s = q[h, r] @ k[kv].T * scaling
                if softcap is not None:
                    s = np.tanh(s / softcap) * softcap
                seen = np.flatnonzero(visible[r])
                logits = list(s[seen]) + ([float(sinks[h])] if sinks is not None else [])
                top = max(logits)
                e = np.exp(np.asarray(logits) - top)
                w = e[: len(seen)] / e.sum()
                order = sorted(range(len(seen)), key=lambda i: (-w[i], i))[:n]
                for i in order:
                    out[r, h] += w[i] * v[kv, seen[i]]
        return torch.from_numpy(out).float()[None], None

    return attention


def causal_lm(model_type, implementation, state=None):
    settings = {k: v for k, v in {**COMMON, **TINY[model_type]}.items() if v is not None}
    # wider scores than the default init, so that the top-n sets are far from ties
    config = AutoConfig.for_model(model_type, initializer_range=0.2, **settings)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=implementation)
    for layer, module in enumerate(m for m in model.modules() if hasattr(m, "sinks")):
        with torch.no_grad():
            module.sinks.copy_(torch.linspace(-2.0, 4.0, module.sinks.numel()) + layer)
    if state is not None:
        model.load_state_dict(state)
    return model.eval()


def tokens(seed=1):
    return torch.randint(1, 300, (1, CONTEXT), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("model_type", CAUSAL)
def test_n_at_least_the_keys_is_the_plain_forward_bit_for_bit(model_type):
    model = causal_lm(model_type, register_intervention())
    captured = causal_lm(model_type, register_capture(), model.state_dict())
    ids = tokens()
    with torch.inference_mode():
        plain = captured(input_ids=ids).logits
        assert torch.equal(model(input_ids=ids).logits, plain)
        for n in (CONTEXT, CONTEXT + 7):
            for selection in ("attention", "contribution", "random"):
                for mode in ("delete", "renormalize"):
                    with intervene(Intervention(n, selection, mode)):
                        assert torch.equal(model(input_ids=ids).logits, plain)


@pytest.mark.parametrize("model_type", [t for t in CAUSAL if t != "diffllama"])
@pytest.mark.parametrize("n", [1, 5])
def test_every_family_equals_a_dense_numpy_deletion(model_type, n):
    name = f"test_numpy_top_{n}"
    AttentionInterface.register(name, numpy_deletion_attention(n))
    AttentionMaskInterface.register(name, sdpa_mask)
    model = causal_lm(model_type, register_intervention())
    dense = causal_lm(model_type, name, model.state_dict())
    ids = tokens()
    with torch.inference_mode():
        want = dense(input_ids=ids).logits
        with intervene(Intervention(n, block=5)):
            got = model(input_ids=ids).logits
        plain = model(input_ids=ids).logits
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(got, plain, atol=1e-3)  # the intervention did something


def test_differential_attention_keeps_one_set_per_head_or_refuses():
    """DiffLlama calls the attention twice per head, with the same q and k and each half of the
    values: the attention selection keeps the same keys in both calls (the calls' weights are
    the same), and equals a dense deletion; the others, whose ranks would differ between the
    calls, are refused."""
    name = "test_numpy_top_2"
    AttentionInterface.register(name, numpy_deletion_attention(2))
    AttentionMaskInterface.register(name, sdpa_mask)
    model = causal_lm("diffllama", register_intervention())
    dense = causal_lm("diffllama", name, model.state_dict())
    ids = tokens()
    with torch.inference_mode():
        plain = model(input_ids=ids).logits
        want = dense(input_ids=ids).logits
        with intervene(Intervention(2)):
            got = model(input_ids=ids).logits
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert not torch.allclose(got, plain, atol=1e-3)
        for selection in ("contribution", "random"):
            with intervene(Intervention(2, selection)), pytest.raises(NotImplementedError):
                model(input_ids=ids)


# --- the search and the bootstrap -----------------------------------------------------------


def test_powers_of_two_end_at_the_limit():
    assert powers_of_two(1) == [1]
    assert powers_of_two(8) == [1, 2, 4, 8]
    assert powers_of_two(12) == [1, 2, 4, 8, 12]


def full_scan(curve, tau):
    passing = [n for n in range(1, len(curve) + 1) if curve[n - 1] <= tau]
    return min(passing) if passing else None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.0, 2.0), min_size=1, max_size=300), st.floats(0.0, 1.0))
def test_the_search_is_the_full_scan_on_a_non_increasing_curve(steps, tau):
    curve = np.sort(np.asarray(steps))[::-1]
    calls = []

    def dnll(n):
        calls.append(n)
        return curve[n - 1]

    found = search_n_star(dnll, tau, len(curve))
    assert found.n_star == full_scan(curve, tau)
    assert len(calls) == len(set(calls))  # each N evaluated once
    assert len(calls) <= 2 * len(curve).bit_length() + 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.0, 2.0), min_size=2, max_size=100), st.floats(0.0, 1.0))
def test_on_any_curve_the_search_finds_a_crossing(values, tau):
    curve = np.asarray(values)
    found = search_n_star(lambda n: curve[n - 1], tau, len(curve))
    if found.n_star is None:
        assert all(curve[n - 1] > tau for n in powers_of_two(len(curve)))
    else:
        assert curve[found.n_star - 1] <= tau
        assert found.n_star == 1 or curve[found.n_star - 2] > tau


def test_a_curve_that_never_passes_is_censored():
    found = search_n_star(lambda n: 1.0, 0.05, 64)
    assert found.censored and sorted(found.evaluated) == [1, 2, 4, 8, 16, 32, 64]


def test_the_bootstrap_by_hand():
    base = np.array([10.0, 20.0])
    nll = {1: np.array([12.0, 26.0]), 2: np.array([10.5, 20.5])}

    # resample draws: chunk 0 twice, then chunk 1 twice, then both
    class Fixed:
        def integers(self, lo, hi, size):
            return np.array([[0, 0], [1, 1], [0, 1]])

    first, curves = bootstrap_n_star(nll, base, 0.1, 3, Fixed())
    np.testing.assert_allclose(curves, [[0.2, 0.05], [0.3, 0.025], [8 / 30, 1 / 30]])
    np.testing.assert_array_equal(first, [2, 2, 2])
    first, _ = bootstrap_n_star(nll, base, 0.25, 3, Fixed())
    np.testing.assert_array_equal(first, [1, 2, 2])


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from([-np.inf, 0.0, 0.25, 0.5, 1.0, 2.0]), min_size=2, max_size=12),
    st.data(),
)
def test_the_top_n_mask_is_a_stable_sorts_first_n(values, data):
    from attnlimits.effective_set import top_n_mask

    n = data.draw(st.integers(1, len(values) - 1))
    score = torch.tensor([values], dtype=torch.float64)
    order = torch.sort(score, dim=-1, descending=True, stable=True).indices[0, :n]
    want = torch.zeros(len(values), dtype=torch.bool)
    want[order] = True
    assert torch.equal(top_n_mask(score, n)[0], want)


# --- the study's trained rules under the intervention ----------------------------------------

STUDY_RULES = {
    "sparsemax": {"kind": "sparsemax"},
    "ssmax": {"kind": "scalable_softmax"},
    "sigmoid": {"kind": "sigmoid_attention"},
    "sink": {"kind": "softmax_sink"},
    "stick_breaking": {"kind": "stick_breaking"},
    "gated": {"kind": "gated_softmax"},
    "sa_raw": {"kind": "self_adjust_softmax_raw"},
}


def study_model(rule):
    """A tiny model of the study with ``rule``, its attention the intervention's."""
    from attnlimits_workflow.training import build_model

    model = build_model(STUDY_ARCH, rule, 50, 0, 16).eval()
    model.config._attn_implementation = register_intervention()
    return model


@pytest.mark.parametrize("name", sorted(STUDY_RULES))
def test_a_trained_rule_under_the_intervention(name):
    """Every study rule: N >= L is the rule's own forward bit for bit; the intervened path with
    every key kept (N = L - 1 on rows that see fewer) equals it to float32 rounding; N = 1
    changes the loss."""
    from attnlimits.extraction import register_rule_attention

    model = study_model(STUDY_RULES[name])
    ids = torch.randint(0, 50, (1, 24), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        model.config._attn_implementation = register_rule_attention()
        plain = model(input_ids=ids).logits
        model.config._attn_implementation = register_intervention()
        with intervene(Intervention(24)):
            assert torch.equal(model(input_ids=ids).logits, plain)
        # only the last row sees 24 keys; N = 23 drops its least key, every other row keeps all
        with intervene(Intervention(23)):
            near = model(input_ids=ids).logits
        torch.testing.assert_close(near[0, :-1], plain[0, :-1], rtol=1e-5, atol=1e-5)
        with intervene(Intervention(1)):
            assert not torch.allclose(model(input_ids=ids).logits[0, 2:], plain[0, 2:])
