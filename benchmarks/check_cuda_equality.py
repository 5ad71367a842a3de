"""On a CUDA machine: the rows extracted on the GPU equal the model's own eager attention on the
CPU (GPT-2 small architecture, random init). Prints the max abs error; exits 1 above 1e-5."""

import sys

import torch
from transformers import GPT2Config, GPT2Model

from attnlimits.extraction import extract_chunk, register_capture

torch.manual_seed(0)
cfg = GPT2Config()
cpu = GPT2Model.from_pretrained(
    None, config=cfg, state_dict=GPT2Model(cfg).state_dict(), attn_implementation="eager"
).eval()
gpu = (
    GPT2Model.from_pretrained(
        None, config=cfg, state_dict=cpu.state_dict(), attn_implementation=register_capture()
    )
    .cuda()
    .eval()
)
ids = torch.randint(0, 50257, (1024,), generator=torch.Generator().manual_seed(1))
with torch.inference_mode():
    ref = cpu(ids[None], output_attentions=True).attentions
worst = 0.0
for cap in extract_chunk(gpu, ids, [32, 256, 1024]):
    for L, (_, _, weights) in cap.rows.items():
        worst = max(worst, (weights - ref[cap.layer][0, :, L - 1, :L]).abs().max().item())
print(
    f"CUDA extraction vs CPU eager attention: max abs error {worst:.2e} ({torch.cuda.get_device_name()})"
)
sys.exit(0 if worst <= 1e-5 else 1)
