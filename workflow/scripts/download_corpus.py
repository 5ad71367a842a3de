"""Obtain the corpus (download with pinned sha256, or corpus.path), strip the Gutenberg licence."""

from attnlimits.corpus import strip_gutenberg
from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.config import MAX_CONTROL_FRACTION, control_fraction
from attnlimits_workflow.corpus_io import CorpusError, decode, download, read_local
from attnlimits_workflow.jobs import job_logger

log = job_logger(snakemake, "download_corpus")
cfg = snakemake.params.corpus
try:
    if cfg.get("path"):
        log.info("reading local corpus %s (corpus.path overrides the download)", cfg["path"])
        data, where = read_local(cfg["path"]), cfg["path"]
    else:
        log.info("downloading %s", cfg["url"])
        data, where = download(cfg["url"], cfg.get("sha256")), cfg["url"]
        log.info("sha256 verified (%d bytes)", len(data))
    share = control_fraction(data[: 1 << 20])
    if share > MAX_CONTROL_FRACTION:
        raise CorpusError(
            f"{where}: not text: {100 * share:.0f}% of its first bytes are NULs or control characters"
        )
    text = decode(data, cfg["encoding"], where)
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
log.info("wrote %s (%d characters)", snakemake.output[0], len(text))
