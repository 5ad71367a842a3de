"""One (L, variant) of N*'s search: the intervened forward passes over the model's chunks
(attnlimits_workflow.effective_set.run_variant)."""

import numpy as np
import torch

from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.effective_set import load_causal_lm, run_variant
from attnlimits_workflow.jobs import job_logger, job_threads, read_tokens

log = job_logger(snakemake, "effective_set")
section = snakemake.params.section
torch.set_num_threads(job_threads(snakemake.threads, log))
table = read_tokens(snakemake.input.tokens)
chunks = np.unique(table["chunk"].to_numpy())
tokens = table["token_id"].to_numpy().reshape(chunks.size, -1)
if section["device"].startswith("cuda") and not torch.cuda.is_available():
    log.error(
        "effective_set.device=%s but torch sees no CUDA device; set effective_set.device: cpu",
        section["device"],
    )
    raise SystemExit(1)
model = load_causal_lm(snakemake.input.model, section["device"])
result = run_variant(
    model,
    tokens,
    int(snakemake.wildcards.length),
    snakemake.wildcards.variant,
    section,
    snakemake.params.seed,
    log,
)
with atomic_path(snakemake.output[0]) as tmp:
    result.write_parquet(tmp)
