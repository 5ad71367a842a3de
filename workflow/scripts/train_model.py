"""Train one of the study's models: its attention rule, the shared architecture, data and seed."""

import json
from pathlib import Path

import numpy as np
import polars as pl
import torch
from tokenizers import Tokenizer

from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.corpus_io import read_text
from attnlimits_workflow.jobs import Timer, job_logger, job_threads
from attnlimits_workflow.models import ModelSourceError, tokenizer_problem
from attnlimits_workflow.training import build_model, save_trained, split_tokens, train

log = job_logger(snakemake, "train_model")
timer = Timer()
p = snakemake.params
settings = p.training
torch.set_num_threads(job_threads(snakemake.threads, log))
if found := tokenizer_problem(Path(snakemake.input.tokenizer).parent):
    raise ModelSourceError(f"{found[0]}: damaged tokenizer file ({found[1]}); delete it and rerun")
tokenizer = Tokenizer.from_file(snakemake.input.tokenizer)
text = read_text(snakemake.input.corpus)
ids = np.asarray(tokenizer.encode(text).ids, dtype=np.int64)
held_out, train_ids = split_tokens(ids, settings["validation_fraction"])
log.info(
    "%s: rule %s; %d training tokens (%d held out, the corpus's first); %d steps of %d x %d "
    "tokens on %d threads",
    snakemake.wildcards.model,
    json.dumps(p.rule),
    train_ids.size,
    held_out.size,
    settings["steps"],
    settings["batch_size"],
    settings["context"],
    torch.get_num_threads(),
)
model = build_model(
    p.architecture, dict(p.rule), tokenizer.get_vocab_size(), p.seed, settings["context"]
)
log.info("%d parameters", sum(t.numel() for t in model.parameters()))
# an untrained model (study.untrained_seeds): the seed's initial weights, no step taken
history = train(model, train_ids, settings, p.seed, log=log.info) if settings["steps"] else []
with atomic_path(snakemake.output.model) as tmp:
    save_trained(
        model,
        Path(snakemake.input.tokenizer),
        tmp,
        {
            "name": snakemake.wildcards.model,
            "origin": f"trained: {json.dumps(p.rule, sort_keys=True)}",
            "seed": p.seed,
            "training_tokens": int(train_ids.size),
            "held_out_tokens": int(held_out.size),
            "parameters": int(sum(t.numel() for t in model.parameters())),
        },
    )
# The history is deterministic (byte-identical reruns); the timing is not, so it has its own file.
columns = {"step": pl.Int64, "loss": pl.Float64, "learning_rate": pl.Float64, "tokens": pl.Int64}
with atomic_path(snakemake.output.history) as tmp:
    pl.DataFrame(
        history, schema=columns | {"seconds": pl.Float64, "tokens_per_s": pl.Float64}
    ).drop("seconds", "tokens_per_s").write_csv(tmp)
last = history[-1] if history else {"seconds": 0.0, "tokens": 0, "tokens_per_s": 0.0, "loss": None}
with atomic_path(snakemake.output.timing) as tmp:
    Path(tmp).write_text(
        json.dumps(
            {
                "seconds": last["seconds"],
                "tokens": last["tokens"],
                "tokens_per_s": last["tokens_per_s"],
                "threads": torch.get_num_threads(),
            },
            indent=2,
        )
    )
if history:
    log.info("trained to loss %.4f in %s", last["loss"], timer)
else:
    log.info("left at its initial weights (an untrained model), saved in %s", timer)
