"""One capture for every supported family: the dumped rows equal the model's own eager attention.

For a tiny random-init model of each family in attnlimits.families.FAMILIES, the rows written to
a dump and read back equal eager ``output_attentions`` (max abs error <= 1e-5), the dumped q and
k reproduce the dumped logits, and the query-head -> KV-head map is the one the model applies
(transformers' repeat_kv on k, and the attention output on v). The dumped ``attention_input``
(the paper's x_i) is the tensor the q, k and v projections read, seen by hooks on the projections.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from dump_samples import load_samples
from transformers import AutoConfig, AutoModel

from attnlimits.extraction import extract_chunk, model_shape, register_capture, soft_capped
from attnlimits.families import FAMILIES, UnsupportedModelError, family
from attnlimits_workflow.dumps.write import write_batch

TOL = 1e-5
CONTEXT = 48
LENGTHS = [2, 7, 16, 17, 48]
COMMON = {"vocab_size": 300, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}
DECODER = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
    "head_dim": 16,
}

# One tiny config per family; between them: GQA (llama, qwen3, gemma2), sliding windows smaller
# than the context (mistral, gemma2, gemma3_text), soft-capping (gemma2), q/k norms (qwen3,
# olmo2, gemma3_text), and GPT-2's per-layer inverse scaling.
TINY: dict[str, dict] = {
    "gpt2": {
        "n_layer": 2,
        "n_head": 4,
        "n_embd": 64,
        "n_positions": 64,
        "scale_attn_by_inverse_layer_idx": True,
    },
    "bert": {
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "max_position_embeddings": 64,
    },
    "llama": {**DECODER, "num_key_value_heads": 2},
    "mistral": {**DECODER, "num_key_value_heads": 4, "sliding_window": 16},
    "qwen2": {**DECODER, "num_key_value_heads": 2, "head_dim": None},
    "qwen3": {**DECODER, "num_key_value_heads": 1},
    "gemma2": {
        **DECODER,
        "num_key_value_heads": 2,
        "sliding_window": 16,
        "attn_logit_softcapping": 2.0,
        "query_pre_attn_scalar": 16,
    },
    "gemma3_text": {
        **DECODER,
        "num_key_value_heads": 2,
        "sliding_window": 16,
        "layer_types": ["sliding_attention", "full_attention"],
    },
    "olmo2": {**DECODER, "num_key_value_heads": 4},
}


@pytest.mark.unit
def test_every_family_has_a_tiny_config():
    assert set(TINY) == set(FAMILIES)


def build(model_type: str, implementation: str, state=None):
    settings = {k: v for k, v in {**COMMON, **TINY[model_type]}.items() if v is not None}
    config = AutoConfig.for_model(model_type, **settings)
    torch.manual_seed(0)
    model = AutoModel.from_config(config, attn_implementation=implementation)
    if state is not None:
        model.load_state_dict(state)
    return model.eval()


def pair(model_type: str):
    captured = build(model_type, register_capture())
    eager = build(model_type, "eager", captured.state_dict())
    return captured, eager


def ids(seed=1):
    return torch.randint(1, 300, (CONTEXT,), generator=torch.Generator().manual_seed(seed))


def eager_rows(eager, tokens, causal):
    """length L -> per layer (heads, L) eager weights of the analysed row (L-1)."""
    out = {}
    with torch.inference_mode():
        if causal:
            att = eager(tokens[None], output_attentions=True).attentions
            for L in LENGTHS:
                out[L] = [a[0, :, L - 1, :L] for a in att]
        else:
            for L in LENGTHS:
                att = eager(tokens[None, :L], output_attentions=True).attentions
                out[L] = [a[0, :, L - 1, :L] for a in att]
    return out


@pytest.fixture(scope="module", params=sorted(TINY))
def family_dump(request, tmp_path_factory):
    model_type = request.param
    captured, eager = pair(model_type)
    tokens = ids()
    out = tmp_path_factory.mktemp(model_type) / "batch000"
    out.mkdir()
    write_batch(
        out,
        captured,
        {0: tokens.numpy(), 1: ids(2).numpy()},
        LENGTHS,
        query_row="last",
        store_hidden=True,
        store_attention_input=True,
        provenance={"weights_sha256": "w", "tokens_fingerprint": "t"},
        extra_metadata={"model": model_type, "model_type": model_type, "corpus_sha256": "c"},
        compression="zstd",
    )
    return model_type, captured, eager, out


@pytest.mark.integration
def test_dumped_rows_equal_eager_attention(family_dump):
    model_type, captured, eager, out = family_dump
    shape = model_shape(captured)
    want = {0: eager_rows(eager, ids(), shape.causal), 1: eager_rows(eager, ids(2), shape.causal)}
    for L in LENGTHS:
        s = load_samples([out], L, embedding="value", with_logits=True)
        for i in range(len(s.head)):
            ref = want[int(s.chunk[i])][L][int(s.layer[i])][int(s.head[i])].numpy()
            err = np.abs(s.weights[i] - ref).max()
            assert err <= TOL, (model_type, L, i, err)
            # the softmax of the dumped logits is the dumped row
            assert (
                np.abs(torch.softmax(torch.tensor(s.logits[i]), -1).numpy() - s.weights[i]).max()
                <= TOL
            )


@pytest.mark.integration
def test_dumped_q_and_k_reproduce_the_dumped_logits(family_dump):
    model_type, captured, _, out = family_dump
    for L in (16, 48):
        s = load_samples([out], L, embedding="value", with_logits=True, with_query_keys=True)
        meta = s.metadata
        for i in range(len(s.head)):
            raw = torch.tensor(s.keys[i] @ s.query[i]) * float(s.score_scale[i])
            softcap = meta["softcap"]
            logits = soft_capped(raw, softcap).numpy()
            finite = np.isfinite(s.logits[i])
            assert np.abs(logits[finite] - s.logits[i][finite]).max() <= 1e-4, (model_type, L, i)
        window = meta["sliding_window"]
        if window and L > window:  # layer 0 of each windowed tiny model is a sliding layer
            row = s.logits[(s.layer == 0)][0]
            assert np.isneginf(row[: L - window]).all() and np.isfinite(row[L - window :]).all()


@pytest.mark.integration
def test_kv_map_is_the_models(family_dump):
    """k: transformers' repeat_kv of the captured KV heads gives each query head the key the dump
    resolves for it; v: the dumped weights times the resolved values are the model's own attention
    output for the analysed row (read at the input of the output projection)."""
    model_type, captured, _, _ = family_dump
    from transformers.models.llama.modeling_llama import repeat_kv

    shape = model_shape(captured)
    tokens = ids()
    outputs = {}
    hooks = []
    for name, module in captured.named_modules():
        if name.endswith(("self_attn.o_proj", "attn.c_proj", "attention.output.dense")):
            layer = int(next(p for p in name.split(".") if p.isdigit()))

            def grab(_m, args, layer=layer):
                outputs[layer] = args[0][0]

            hooks.append(module.register_forward_pre_hook(grab))
    try:
        captures = list(extract_chunk(captured, tokens, [CONTEXT]))
    finally:
        for h in hooks:
            h.remove()
    assert len(outputs) == shape.n_layers
    group = shape.n_heads // shape.n_kv_heads
    for cap in captures:
        assert cap.k.shape[0] == shape.n_kv_heads  # each KV head once
        repeated = repeat_kv(cap.k[None], group)[0]
        mapped = cap.k[list(shape.kv_head_of_query)]
        assert torch.equal(repeated, mapped)
        _, _, weights = cap.rows[CONTEXT]
        values = cap.v[list(shape.kv_head_of_query), :CONTEXT]
        mine = torch.einsum("hl,hld->hd", weights, values).reshape(-1)
        theirs = outputs[cap.layer][CONTEXT - 1]
        assert (mine - theirs).abs().max().item() <= 1e-5, (model_type, cap.layer)


@pytest.mark.unit
def test_unsupported_family_is_refused_by_name():
    with pytest.raises(UnsupportedModelError, match="'bloom'"):
        family("bloom")


# Each family's q, k and v projections: the modules whose input is Eq. 1's x_i. GPT-2 computes all
# three with one c_attn.
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "attn.c_attn", "self.query", "self.key", "self.value")


def projection_inputs(model, tokens, causal):
    """(context length, layer) -> the input every q/k/v projection of the layer read in a plain
    forward of ``model`` (no capture active), from pre-hooks on the projections; asserts the
    projections of one layer read one tensor. Causal: one pass over ``tokens``; encoders: one pass
    per L in LENGTHS over the first L tokens, as extraction runs them."""
    seen: dict[tuple[int, int], list[torch.Tensor]] = {}
    hooks = []
    for name, module in model.named_modules():
        if name.endswith(PROJECTIONS):
            layer = int(next(p for p in name.split(".") if p.isdigit()))

            def grab(_m, args, layer=layer):
                x = args[0][0]
                seen.setdefault((x.shape[0], layer), []).append(x.detach().clone())

            hooks.append(module.register_forward_pre_hook(grab))
    try:
        with torch.inference_mode():
            for context in [CONTEXT] if causal else LENGTHS:
                model(tokens[None, :context])
    finally:
        for h in hooks:
            h.remove()
    out = {}
    for key, inputs in seen.items():
        assert len(inputs) == (1 if model.config.model_type == "gpt2" else 3), key
        assert all(torch.equal(x, inputs[0]) for x in inputs), key
        out[key] = inputs[0].float()
    return out


@pytest.mark.integration
def test_attention_input_is_what_the_projections_read(family_dump):
    """The capture's attention_input is, bit for bit, the tensor f_q, f_k and f_v (the q, k and v
    projections) receive in the same pass; ``hidden`` (the residual stream) is not, in a pre-norm
    model."""
    model_type, captured, _, _ = family_dump
    shape = model_shape(captured)
    tokens = ids()
    want = projection_inputs(captured, tokens, shape.causal)
    captures = list(
        extract_chunk(captured, tokens, LENGTHS, store_hidden=True, store_attention_input=True)
    )
    assert len(captures) == len(want) == shape.n_layers * (1 if shape.causal else len(LENGTHS))
    for cap in captures:
        x = want[(cap.context_length, cap.layer)]
        assert cap.attention_input.dtype == torch.float32
        assert torch.equal(cap.attention_input, x), (model_type, cap.layer)
        # pre-norm families normalise the residual stream before the projections; BERT (post-norm)
        # and OLMo 2 (norm after the attention) feed it as it is
        same = torch.equal(cap.hidden, x)
        assert same == (model_type in ("bert", "olmo2")), (model_type, cap.layer)


@pytest.mark.integration
def test_dumped_attention_input_is_what_the_projections_read(family_dump):
    """analysis.embedding: attention_input reads back, for every (layer, chunk, head) sample, the
    projections' input at positions 0..L-1 of the pass that produced the sample."""
    model_type, captured, _, out = family_dump
    shape = model_shape(captured)
    want = {c: projection_inputs(captured, ids(seed), shape.causal) for c, seed in ((0, 1), (1, 2))}
    for L in LENGTHS:
        s = load_samples([out], L, embedding="attention_input")
        assert s.x.shape == (2 * shape.n_layers * shape.n_heads, L, 64)
        for i in range(len(s.head)):
            context = CONTEXT if shape.causal else L
            x = want[int(s.chunk[i])][(context, int(s.layer[i]))][:L].numpy()
            np.testing.assert_array_equal(s.x[i], x, err_msg=f"{model_type} L={L} sample {i}")
        hidden = load_samples([out], L, embedding="hidden")
        assert hidden.x.shape == s.x.shape
        assert np.array_equal(hidden.x, s.x) == (model_type in ("bert", "olmo2"))
