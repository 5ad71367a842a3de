"""Obtain the corpus (corpus.path, corpus.bundled, or the download with pinned sha256), strip the
Gutenberg licence."""

from pathlib import Path

from attnlimits.corpus import strip_gutenberg
from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.corpus_io import CorpusError, obtain_corpus
from attnlimits_workflow.corpus_names import write_source_record
from attnlimits_workflow.jobs import job_logger

log = job_logger(snakemake, "download_corpus")
cfg = snakemake.params.corpus
try:
    text, where = obtain_corpus(cfg, log=log.info)
except CorpusError as exc:
    log.error("%s", exc)
    raise SystemExit(1) from None

if cfg["strip_gutenberg"]:
    stripped = strip_gutenberg(text)
    if not stripped.had_markers:
        log.warning(
            "WARNING: no Project Gutenberg START/END markers in %s: the text is used whole", where
        )
    text = stripped.text
if not text.strip():
    log.error("the corpus %s is empty after stripping", where)
    raise SystemExit(1)
with atomic_path(snakemake.output[0]) as tmp:
    tmp.write_text(text, encoding="utf-8")
# where the copy came from: a later corpus.path giving this name to another text is refused
write_source_record(snakemake.wildcards.corpus, where, cfg.get("path"), Path(snakemake.output[0]))
log.info("wrote %s (%d characters)", snakemake.output[0], len(text))
