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

from attnlimits.extraction import (
    differential_lambda,
    extract_chunk,
    model_shape,
    register_capture,
    soft_capped,
)
from attnlimits.families import FAMILIES, UnsupportedModelError, family
from attnlimits_workflow.dumps.read import read_metadata
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

# One tiny config per family; between them: GQA (llama, qwen3, gemma2, phi3, granite), sliding
# windows smaller than the context (mistral, gemma2, gemma3_text, olmo3, phi3), soft-capping (gemma2), q/k norms (qwen3,
# olmo2, olmo3, gemma3_text), GPT-2's per-layer inverse scaling, Granite's attention_multiplier
# and Phi-3's fused qkv projection.
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
    "olmo3": {
        **DECODER,
        "num_key_value_heads": 4,
        "sliding_window": 16,
        "layer_types": ["sliding_attention", "full_attention"],
    },
    "phi3": {**DECODER, "num_key_value_heads": 2, "sliding_window": 16},
    # an attention_multiplier far from head_dim ** -0.5 = 0.25, so a capture that assumed the
    # usual scaling would fail
    "granite": {**DECODER, "num_key_value_heads": 2, "attention_multiplier": 0.6},
    # layer 0 rotary, layer 1 RoPE-free (NoPE)
    "smollm3": {**DECODER, "num_key_value_heads": 2, "no_rope_layers": [1, 0]},
    # layer 0 rotary with attention chunks of 16 keys, layer 1 NoPE with a query temperature that
    # grows every 8 positions (Llama 4's own floor_scale is 8192)
    "llama4_text": {
        **DECODER,
        "num_key_value_heads": 2,
        "intermediate_size_mlp": 96,
        "num_local_experts": 2,
        "num_experts_per_tok": 1,
        "no_rope_layers": [1, 0],
        "attention_chunk_size": 16,
        "floor_scale": 8,
        "attn_scale": 0.5,
    },
    # differential attention: head h's softmax minus lambda times head h + 2's
    "diffllama": {**DECODER, "num_key_value_heads": 2, "lambda_std_dev": 0.3},
    # a learned sink logit per head (set far from zero in build), a sliding layer, then a full one
    "gpt_oss": {
        **DECODER,
        "num_key_value_heads": 2,
        "sliding_window": 16,
        "num_local_experts": 2,
        "num_experts_per_tok": 1,
        "rope_parameters": {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 16,
            "rope_theta": 150000.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
        },
    },
}
# each family's per-layer position embedding, as the dumps must record it
POSITION_EMBEDDINGS = {
    "gpt2": ["absolute"] * 2,
    "bert": ["absolute"] * 2,
    "smollm3": ["rotary", "none"],
    "llama4_text": ["rotary", "none"],
}


@pytest.mark.unit
def test_every_family_has_a_tiny_config():
    assert set(TINY) == set(FAMILIES)


def build(model_type: str, implementation: str, state=None):
    settings = {k: v for k, v in {**COMMON, **TINY[model_type]}.items() if v is not None}
    config = AutoConfig.for_model(model_type, **settings)
    torch.manual_seed(0)
    model = AutoModel.from_config(config, attn_implementation=implementation)
    for layer, module in enumerate(m for m in model.modules() if hasattr(m, "sinks")):
        # sink logits from -2 to 4: rows whose sink takes from a few percent to most of the weight
        # (random init leaves them near 0, where a capture that dropped the sink is barely off)
        with torch.no_grad():
            module.sinks.copy_(torch.linspace(-2.0, 4.0, module.sinks.numel()) + layer)
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
    sink_logits = [
        read_metadata(out / f"layer{layer:02d}.parquet")["sink_logits"]
        for layer in range(shape.n_layers)
    ]
    assert all((sinks is not None) == (model_type == "gpt_oss") for sinks in sink_logits)
    for L in LENGTHS:
        s = load_samples([out], L, embedding="value", with_logits=True)
        for i in range(len(s.head)):
            ref = want[int(s.chunk[i])][L][int(s.layer[i])][int(s.head[i])].numpy()
            err = np.abs(s.weights[i] - ref).max()
            assert err <= TOL, (model_type, L, i, err)
            # the softmax of the dumped logits (and the head's sink logit) is the dumped row
            logits = torch.tensor(s.logits[i])
            sinks = sink_logits[int(s.layer[i])]
            if sinks is not None:
                sink = torch.tensor([sinks[int(s.head[i])]])
                row = torch.softmax(torch.cat([logits, sink]), -1)[:-1]
            else:
                row = torch.softmax(logits, -1)
            assert np.abs(row.numpy() - s.weights[i]).max() <= TOL


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
        if model_type == "diffllama":  # its output combines two heads' rows: tested below
            continue
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
# three with one c_attn, Phi-3 with one qkv_proj.
PROJECTIONS = (
    "q_proj",
    "k_proj",
    "v_proj",
    "qkv_proj",
    "attn.c_attn",
    "self.query",
    "self.key",
    "self.value",
)
FUSED_QKV = ("gpt2", "phi3")
# families whose attention reads the residual stream as it is (no norm before the projections)
UNNORMED_INPUT = ("bert", "olmo2", "olmo3")


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
        assert len(inputs) == (1 if model.config.model_type in FUSED_QKV else 3), key
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
        # pre-norm families normalize the residual stream before the projections; BERT (post-norm)
        # and OLMo 2 and 3 (norm after the attention) feed it as it is
        same = torch.equal(cap.hidden, x)
        assert same == (model_type in UNNORMED_INPUT), (model_type, cap.layer)


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
        assert np.array_equal(hidden.x, s.x) == (model_type in UNNORMED_INPUT)


@pytest.mark.integration
def test_dumps_record_each_layers_position_embedding(family_dump):
    """Metadata position_embedding, per layer file: rotary, none (a NoPE layer) or absolute."""
    model_type, captured, _, out = family_dump
    recorded = [
        read_metadata(out / f"layer{layer:02d}.parquet")["position_embedding"]
        for layer in range(model_shape(captured).n_layers)
    ]
    assert recorded == POSITION_EMBEDDINGS.get(model_type, ["rotary"] * 2)


@pytest.mark.integration
def test_a_nope_layer_scores_unrotated_q_and_k():
    """SmolLM3: the q and k the capture records for its NoPE layer are the q_proj and k_proj
    outputs as they are; for its rotary layer they differ from them at every position > 0 (and
    equal them at position 0, where the rotation is the identity)."""
    captured, _ = pair("smollm3")
    tokens = ids()
    projected = {}
    hooks = []
    for name, module in captured.named_modules():
        if name.endswith(("self_attn.q_proj", "self_attn.k_proj")):
            layer = int(next(p for p in name.split(".") if p.isdigit()))

            def grab(_m, _args, output, key=(layer, name[-6])):
                projected[key] = output[0].detach().float()

            hooks.append(module.register_forward_hook(grab))
    try:
        captures = {c.layer: c for c in extract_chunk(captured, tokens, [CONTEXT])}
    finally:
        for h in hooks:
            h.remove()
    for layer, rotary in ((0, True), (1, False)):
        for which, got in (("q", captures[layer].q), ("k", captures[layer].k)):
            raw = projected[(layer, which)].view(CONTEXT, got.shape[0], -1).transpose(0, 1)
            assert torch.allclose(got[:, 0], raw[:, 0], atol=1e-6)
            moved = (got[:, 1:] - raw[:, 1:]).abs().amax(dim=-1)
            if rotary:
                assert (moved > 1e-4).all(), (layer, which)
            else:
                assert torch.equal(got, raw), (layer, which)


@pytest.mark.integration
def test_the_capture_leaves_the_models_output_unchanged(family_dump):
    """What the capture hands back to the model (SDPA, or its own block-wise attention for
    soft-caps and sinks) is the model's eager attention: the last hidden states agree."""
    model_type, captured, eager, _ = family_dump
    tokens = ids()[None]
    with torch.inference_mode():
        mine = captured(tokens).last_hidden_state
        theirs = eager(tokens).last_hidden_state
    assert (mine - theirs).abs().max().item() <= 1e-4, model_type


@pytest.mark.integration
def test_sink_logits_and_the_weight_they_take():
    """GPT-OSS: each layer file records its heads' learned sink logits; a dumped row sums to
    1 - the sink's weight, which sink_weight recomputes from the dumped logits and which equals
    the weight eager attention gives its sink (1 - the sum of its row over the real keys)."""
    from attnlimits.extraction import sink_weight

    captured, eager = pair("gpt_oss")
    sinks = [m.sinks.detach() for m in captured.modules() if hasattr(m, "sinks")]
    tokens = ids()
    want = eager_rows(eager, tokens, causal=True)
    captures = list(extract_chunk(captured, tokens, LENGTHS))
    assert len(captures) == len(sinks) == 2
    taken = []
    for cap in captures:
        assert torch.equal(cap.sink_logits, sinks[cap.layer].float())
        for L in LENGTHS:
            _, logits, weights = cap.rows[L]
            to_sink = sink_weight(logits, cap.sink_logits)
            eager_sink = 1 - want[L][cap.layer].sum(-1)
            assert (to_sink - eager_sink).abs().max().item() <= TOL, (cap.layer, L)
            assert (1 - weights.sum(-1) - to_sink).abs().max().item() <= TOL, (cap.layer, L)
            taken.append(to_sink)
    taken = torch.cat(taken)
    # the test rows span a sink that takes little to one that takes most of the weight
    assert taken.min().item() < 0.05 and taken.max().item() > 0.5


@pytest.mark.integration
def test_differential_attention_is_recomputed_from_the_dump(tmp_path):
    """DiffLlama: the dump's per-head softmax rows, its value heads, lambda and head pairs give
    the model's own attention output (the input of o_proj) at the analysed row:
    (1 - lambda_init) * RMSNorm([A_h V_a, A_h V_b] - lambda [A_h' V_a, A_h' V_b]), h' = h + H/2,
    V_a / V_b the first / second half of the value heads, each read by the query's KV head."""
    from transformers.models.diffllama.modeling_diffllama import lambda_init_fn

    captured, _ = pair("diffllama")
    shape = model_shape(captured)
    tokens = ids()
    write_batch(
        tmp_path,
        captured,
        {0: tokens.numpy()},
        [CONTEXT],
        query_row="last",
        store_hidden=False,
        provenance={"weights_sha256": "w", "tokens_fingerprint": "t"},
        extra_metadata={"model": "diffllama", "model_type": "diffllama", "corpus_sha256": "c"},
    )
    seen: dict[tuple[str, int], torch.Tensor] = {}
    hooks = []
    for name, module in captured.named_modules():
        if name.endswith(("self_attn.o_proj", "self_attn.v_proj")):
            layer = int(next(p for p in name.split(".") if p.isdigit()))
            where = (name.split(".")[-1], layer)

            def grab(_m, args, out, key=where):
                seen[key] = (args[0] if key[0] == "o_proj" else out)[0].detach()

            hooks.append(module.register_forward_hook(grab))
    try:
        with torch.inference_mode():
            captured(tokens[None])
    finally:
        for h in hooks:
            h.remove()
    s = load_samples([tmp_path], CONTEXT, embedding="value")
    half_kv = shape.n_kv_heads // 2
    kv = shape.kv_head_of_query
    for layer in range(shape.n_layers):
        meta = read_metadata(tmp_path / f"layer{layer:02d}.parquet")
        lam = meta["differential_lambda"]
        module = captured.layers[layer].self_attn
        assert lam == pytest.approx(differential_lambda(module), abs=0)
        assert abs(lam - lambda_init_fn(layer)) > 1e-3  # lambda is not just its initial value
        assert meta["differential_pairs"] == [[0, 2], [1, 3]]
        rows = {
            int(h): torch.tensor(s.weights[i]) for i, h in enumerate(s.head) if s.layer[i] == layer
        }
        # the dumped v (resolved to query heads) is v_proj's output
        v_proj = seen[("v_proj", layer)].view(CONTEXT, shape.n_kv_heads, -1).transpose(0, 1)
        values = torch.stack(
            [torch.tensor(s.x[i]) for i in range(len(s.head)) if s.layer[i] == layer]
        )
        assert torch.equal(values, v_proj[list(kv)])

        def head_output(h, rows=rows, v_proj=v_proj):
            first = v_proj[kv[h] % half_kv]  # the first call's values: [V_a, V_a]
            second = v_proj[half_kv + kv[h] % half_kv]  # the second call's: [V_b, V_b]
            return torch.cat([rows[h] @ first, rows[h] @ second])

        mine = []
        for h, partner in meta["differential_pairs"]:
            combined = head_output(h) - lam * head_output(partner)
            mine.append(
                (1 - lambda_init_fn(layer))
                * torch.nn.functional.rms_norm(
                    combined, (combined.numel(),), eps=captured.config.rms_norm_eps
                )
            )
        theirs = seen[("o_proj", layer)][CONTEXT - 1]
        assert (torch.cat(mine) - theirs).abs().max().item() <= 1e-5, layer


@pytest.mark.integration
def test_llama4_records_its_query_temperature(tmp_path):
    """Llama 4's NoPE layer scales each query by its position's temperature before scoring: the
    layer file records the parameters and each analysed row's scale, and the dumped q is q_proj's
    output times query_temperature(position) (no rotation, no q-norm on a NoPE layer); the
    rotary layer records none, and its chunked rows mask the keys of earlier chunks."""
    from attnlimits.families import query_temperature

    captured, _ = pair("llama4_text")
    tokens = ids()
    write_batch(
        tmp_path,
        captured,
        {0: tokens.numpy()},
        LENGTHS,
        query_row="last",
        store_hidden=False,
        provenance={"weights_sha256": "w", "tokens_fingerprint": "t"},
        extra_metadata={"model": "llama4", "model_type": "llama4_text", "corpus_sha256": "c"},
    )
    rotary, nope = (read_metadata(tmp_path / f"layer{i:02d}.parquet") for i in (0, 1))
    assert rotary["query_temperature"] is None
    # hand-computed: floor(L / 8) = 0, 0, 2, 2, 6 for L = 2, 7, 16, 17, 48
    want = [1.0, 1.0, 1 + 0.5 * np.log(3), 1 + 0.5 * np.log(3), 1 + 0.5 * np.log(7)]
    assert nope["query_temperature"]["floor_scale"] == 8
    assert nope["query_temperature"]["attn_scale"] == 0.5
    np.testing.assert_allclose(nope["query_temperature"]["analysed"], want, rtol=1e-12)
    projected = {}
    module = captured.layers[1].self_attn
    hook = module.q_proj.register_forward_hook(
        lambda _m, _a, out: projected.setdefault("q", out[0].detach())
    )
    try:
        captures = {c.layer: c for c in extract_chunk(captured, tokens, LENGTHS)}
    finally:
        hook.remove()
    raw = projected["q"].view(CONTEXT, 4, -1).transpose(0, 1)
    scale = torch.tensor([query_temperature(p, 8, 0.5) for p in range(CONTEXT)])
    assert scale[-1] > 1.9  # the test spans temperatures well away from 1
    assert torch.allclose(captures[1].q, raw * scale[None, :, None], rtol=1e-6, atol=1e-6)
    _, logits, _ = captures[0].rows[CONTEXT]  # row 47 of a layer with chunks of 16 keys
    assert torch.isneginf(logits[:, :32]).all() and torch.isfinite(logits[:, 32:]).all()


@pytest.mark.integration
@pytest.mark.parametrize("model_type", ["smollm3", "gpt_oss", "llama4_text", "diffllama"])
def test_a_pack_carries_each_layers_normalizer_per_sample(model_type, tmp_path):
    """Families whose layers differ (NoPE layers, per-head sinks, lambda, query temperature):
    the pack's per-sample values are those of each sample's own layer file, not layer 0's."""
    from attnlimits_workflow.dumps.pack import pack_dumps
    from attnlimits_workflow.packs import read_pack

    captured, _ = pair(model_type)
    batch = tmp_path / "batch000"
    batch.mkdir()
    write_batch(
        batch,
        captured,
        {0: ids().numpy(), 1: ids(2).numpy()},
        LENGTHS,
        query_row="last",
        store_hidden=False,
        provenance={"weights_sha256": "w", "tokens_fingerprint": "t"},
        extra_metadata={"model": model_type, "model_type": model_type, "corpus_sha256": "c"},
    )
    files = [read_metadata(batch / f"layer{layer:02d}.parquet") for layer in range(2)]
    L = 16
    pack_dumps([batch], L, "value", tmp_path / "pack")
    pack = read_pack(tmp_path / "pack")
    embedding = pack.per_sample("position_embedding")
    sink = pack.per_sample("sink_logit")
    lam = pack.per_sample("differential_lambda")
    partner = pack.per_sample("differential_partner")
    temperature = pack.per_sample("query_temperature")
    assert len(embedding) == len(pack.layer) == 2 * 2 * 4  # layers x chunks x heads
    for i in range(len(pack.layer)):
        layer, h = int(pack.layer[i]), int(pack.head[i])
        meta = files[layer]
        assert embedding[i] == meta["position_embedding"], (model_type, i)
        want_sink = np.nan if meta["sink_logits"] is None else meta["sink_logits"][h]
        np.testing.assert_equal(sink[i], want_sink)
        want_lam = meta["differential_lambda"]
        np.testing.assert_equal(lam[i], np.nan if want_lam is None else want_lam)
        want_partner = np.nan
        for a, b in meta["differential_pairs"] or []:
            want_partner = b if a == h else a if b == h else want_partner
        np.testing.assert_equal(partner[i], want_partner)
        tuning = meta["query_temperature"]
        want_t = np.nan if tuning is None else tuning["analysed"][LENGTHS.index(L)]
        np.testing.assert_equal(temperature[i], want_t)
        assert pack.normalizer(i) == pack.layer_normalizer(layer)
    # hand-written values of the tiny configs (build and TINY)
    by_layer = {layer: np.asarray(pack.layer) == layer for layer in (0, 1)}
    if model_type in ("smollm3", "llama4_text"):
        assert set(embedding[by_layer[0]]) == {"rotary"}
        assert set(embedding[by_layer[1]]) == {"none"}
    if model_type == "gpt_oss":  # linspace(-2, 4, 4) + layer: layer 1's head 3 is 5
        at = np.nonzero(by_layer[1] & (np.asarray(pack.head) == 3))[0]
        np.testing.assert_allclose(sink[at], 5.0, rtol=1e-6)
        assert pack.layer_normalizer(0).sink_logits == pytest.approx((-2.0, 0.0, 2.0, 4.0))
    if model_type == "llama4_text":  # floor(16 / 8) = 2 on the NoPE layer only
        assert np.isnan(temperature[by_layer[0]]).all()
        np.testing.assert_allclose(temperature[by_layer[1]], 1 + 0.5 * np.log(3), rtol=1e-12)
    if model_type == "diffllama":
        assert lam[by_layer[0]][0] != lam[by_layer[1]][0]  # lambda differs per layer
        assert partner[:4].tolist() == [2, 3, 0, 1]  # layer 0, chunk 0's heads 0..3
