"""A byte-level BPE tokenizer trained on the corpus for the study's small models."""

from pathlib import Path

from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.jobs import Timer, job_logger
from attnlimits_workflow.training import train_tokenizer

log = job_logger(snakemake, "train_tokenizer")
timer = Timer()
settings = snakemake.params.tokenizer
text = Path(snakemake.input.corpus).read_text(encoding="utf-8")
tokenizer = train_tokenizer(text, settings["vocab_size"], settings["min_frequency"])
tokens = len(tokenizer.encode(text).ids)
with atomic_path(snakemake.output[0]) as tmp:
    tokenizer.save(str(tmp))
log.info(
    "vocabulary of %d (asked %d): the corpus is %d tokens (%.2f characters per token) (%s)",
    tokenizer.get_vocab_size(),
    settings["vocab_size"],
    tokens,
    len(text) / tokens,
    timer,
)
