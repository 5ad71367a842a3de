"""A trained model's held-out loss and perplexity at each evaluation context (length
generalisation: the training context, then longer ones), over whole windows and over their last
positions (attnlimits_workflow.training.evaluate)."""

import json
from pathlib import Path

import numpy as np
import torch

from attnlimits.extraction import register_rule_attention
from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.corpus_io import read_text
from attnlimits_workflow.jobs import Timer, job_logger, job_threads
from attnlimits_workflow.models import CorpusTokenizer
from attnlimits_workflow.training import evaluate, load_trained, split_tokens

log = job_logger(snakemake, "evaluate_model")
timer = Timer()
p = snakemake.params
torch.set_num_threads(job_threads(snakemake.threads, log))
text = read_text(snakemake.input.corpus)
ids = np.asarray(CorpusTokenizer(snakemake.input.model).encode(text), dtype=np.int64)
held_out, _ = split_tokens(ids, p.validation_fraction)
model = load_trained(snakemake.input.model, register_rule_attention(), causal_lm=True)
# Every context reads the same held-out tokens (max_windows windows of the longest), so that the
# contexts differ only in how much of the text each prediction sees.
contexts = sorted(p.evaluation["contexts"])
span = min(p.evaluation["max_windows"], (held_out.size - 1) // contexts[-1]) * contexts[-1]
if span < 1:
    raise SystemExit(
        f"{held_out.size} held-out tokens cannot fill one window of {contexts[-1]}: raise "
        "study.training.validation_fraction or lower study.evaluation.contexts"
    )
log.info("%d held-out tokens, the first %d evaluated at every context", held_out.size, span)
results = []
for context in contexts:
    result = evaluate(
        model, held_out[: span + 1], context, span // context, p.evaluation["tail_fraction"]
    )
    results.append(result)
    log.info(
        "context %d: held-out loss %.4f (perplexity %.1f), last %d positions %.4f (%.1f), "
        "over %d windows (%s)",
        context,
        result["loss"],
        result["perplexity"],
        result["tail_positions"],
        result["tail_loss"],
        result["tail_perplexity"],
        result["windows"],
        timer,
    )
with atomic_path(snakemake.output[0]) as tmp:
    Path(tmp).write_text(
        json.dumps({"held_out_tokens": int(held_out.size), "contexts": results}, indent=2)
    )
