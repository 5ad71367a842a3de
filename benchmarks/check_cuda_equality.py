"""On a CUDA machine: what the GPU extraction captures equals the CPU's (GPT-2 small architecture,
random init): every layer's q, k, v and analysed rows against the same capture on the CPU, and the
rows against the model's own eager attention on the CPU. Prints the max abs errors; exits 1 above
1e-5 (the GPU's float32 matrix products round differently from the CPU's)."""

import sys

import torch
from transformers import GPT2Config, GPT2Model

from attnlimits.extraction import extract_chunk, register_capture

TOLERANCE = 1e-5
LENGTHS = [32, 256, 1024]

torch.manual_seed(0)
cfg = GPT2Config()
state = GPT2Model(cfg).state_dict()


def load(attn: str, device: str):
    return (
        GPT2Model.from_pretrained(None, config=cfg, state_dict=state, attn_implementation=attn)
        .to(device)
        .eval()
    )


eager = load("eager", "cpu")
ids = torch.randint(0, 50257, (1024,), generator=torch.Generator().manual_seed(1))
with torch.inference_mode():
    ref = eager(ids[None], output_attentions=True).attentions
on_cpu = {c.layer: c for c in extract_chunk(load(register_capture(), "cpu"), ids, LENGTHS)}
worst = {"rows vs eager": 0.0, "q": 0.0, "k": 0.0, "v": 0.0, "logits": 0.0, "weights": 0.0}
for cap in extract_chunk(load(register_capture(), "cuda"), ids, LENGTHS):
    cpu = on_cpu[cap.layer]
    assert not cap.q.is_cuda and cap.q.is_pinned(), "captures land in pinned host memory"
    for name in ("q", "k", "v"):
        worst[name] = max(worst[name], (getattr(cap, name) - getattr(cpu, name)).abs().max().item())
    for L, (_, logits, weights) in cap.rows.items():
        eager_row = ref[cap.layer][0, :, L - 1, :L]
        worst["rows vs eager"] = max(
            worst["rows vs eager"], (weights - eager_row).abs().max().item()
        )
        worst["logits"] = max(worst["logits"], (logits - cpu.rows[L][1]).abs().max().item())
        worst["weights"] = max(worst["weights"], (weights - cpu.rows[L][2]).abs().max().item())
print(f"CUDA extraction vs CPU ({torch.cuda.get_device_name()}), max abs error:")
for name, value in worst.items():
    print(f"  {name:<14} {value:.2e}")
sys.exit(0 if max(worst.values()) <= TOLERANCE else 1)
