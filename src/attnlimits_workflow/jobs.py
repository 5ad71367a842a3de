"""Helpers shared by the rule scripts: logging to the rule's log, atomic table writes, provenance."""

from __future__ import annotations

import faulthandler
import logging
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl

from .atomic import atomic_path
from .models import one_line, read_manifest
from .packs import DumpError, set_aside_file

TOKENS_META_KEY = b"attnlimits"


def job_logger(snakemake, name: str) -> logging.Logger:
    """Log to the rule's log file (and stderr), with timestamps, and log uncaught errors as one line."""
    log_file = snakemake.log[0] if len(snakemake.log) else None
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file, mode="w"))
    # Third-party libraries log at WARNING and above (fontTools alone wrote ~1,200 INFO lines per
    # run while subsetting fonts into the PDFs); the job's own logger at INFO.
    logging.basicConfig(
        level=logging.WARNING,
        format="%(asctime)s %(name)s %(message)s",
        handlers=handlers,
        force=True,
    )
    logging.captureWarnings(True)
    log = logging.getLogger(name)
    log.setLevel(logging.INFO)

    def excepthook(kind, exc, tb):
        log.error("%s: %s", kind.__name__, exc)
        # An error this project detects (DumpError, CorpusError, ...) says what to do in its
        # message: the line above is the whole report. Anything else keeps its traceback.
        if not kind.__module__.startswith("attnlimits"):
            sys.__excepthook__(kind, exc, tb)

    sys.excepthook = excepthook
    if log_file:
        # A fatal signal (abort on a failed allocation in native code, a segfault) ends the
        # process without Python's error handling: faulthandler still writes "Fatal Python error:
        # Aborted" and where each thread was to the log, so the log never ends in silence.
        global _FATAL_LOG
        _FATAL_LOG = open(log_file, "a")  # noqa: SIM115 (kept open for the process's life)
        faulthandler.enable(file=_FATAL_LOG, all_threads=True)
    return log


_FATAL_LOG = None


# At most this many threads per core of the machine: more only adds switching (Snakemake caps a
# job at --cores, which a user may set above the machine's cores; a cluster node has its own).
MAX_THREADS_PER_CORE = 2


def job_threads(requested: int, log: logging.Logger, cores: int | None = None) -> int:
    """The threads a job starts: ``requested`` (Snakemake's threads), at least 1 and at most
    MAX_THREADS_PER_CORE per core of this machine, with one warning line when clamped."""
    import os

    limit = MAX_THREADS_PER_CORE * max(1, cores or os.cpu_count() or 1)
    threads = max(1, int(requested))
    if threads > limit:
        log.warning(
            "WARNING: %d threads asked for, %d cores here; using %d",
            threads,
            limit // MAX_THREADS_PER_CORE,
            limit,
        )
        return limit
    return threads


class Timer:
    def __init__(self):
        self.start = time.perf_counter()

    def __str__(self) -> str:
        return f"{time.perf_counter() - self.start:.1f}s"


def write_table(df: pl.DataFrame, path: str | Path) -> None:
    """Write a results table atomically (Parquet or CSV by suffix)."""
    with atomic_path(path) as tmp:
        if str(path).endswith(".csv"):
            df.write_csv(tmp)
        else:
            df.write_parquet(tmp, compression="zstd", statistics=True)


def damaged_tokens(tokens_path: str | Path, exc: Exception) -> DumpError:
    """Set a damaged tokens.parquet aside (<name>.corrupt: the next run sees it missing and runs
    chunk_corpus again) and return the error naming it."""
    moved = set_aside_file(Path(tokens_path))
    return DumpError(
        f"{tokens_path}: damaged token chunks ({one_line(exc)}); set aside as {moved.name}. "
        "Rerun the workflow to rebuild it (chunk_corpus)"
    )


def _recorded_metadata(tokens_path: str | Path) -> dict[str, Any]:
    """tokens.parquet's attnlimits metadata, checked for the keys every reader needs; raises
    OSError, pyarrow's ArrowException, ValueError, KeyError or TypeError on a damaged file."""
    import json

    import pyarrow.parquet as pq  # here: analysis jobs that never read tokens skip pyarrow

    meta = pq.read_schema(tokens_path).metadata or {}
    if TOKENS_META_KEY not in meta:
        raise ValueError("no attnlimits metadata")
    found = json.loads(meta[TOKENS_META_KEY])
    int(found["first_chunk"]) + int(found["n_chunks"]) + len(found["fingerprint"])
    return found


def tokens_metadata(tokens_path: str | Path) -> dict[str, Any]:
    """tokens.parquet's metadata; a damaged file is set aside (damaged_tokens) and named."""
    import pyarrow as pa

    try:
        return _recorded_metadata(tokens_path)
    except (OSError, pa.ArrowException, ValueError, KeyError, TypeError) as exc:
        raise damaged_tokens(tokens_path, exc) from None


def chunks_cut(tokens_path: str | Path) -> int:
    """How many chunks chunk_corpus cut (chunking.n_chunks: auto records its count), for the
    planner: reads the metadata only and moves nothing, so a dry run leaves a damaged file where
    it is (the jobs that read it set it aside); raises DumpError naming it."""
    import pyarrow as pa

    try:
        return int(_recorded_metadata(tokens_path)["n_chunks"])
    except (OSError, pa.ArrowException, ValueError, KeyError, TypeError) as exc:
        raise DumpError(
            f"{tokens_path}: damaged token chunks ({one_line(exc)}); delete it and rerun the "
            "workflow to rebuild it (chunk_corpus)"
        ) from None


def read_tokens(tokens_path: str | Path):
    """tokens.parquet's table (chunk, position, token_id), after tokens_metadata's checks; a file
    whose pages are damaged is set aside like one whose footer is."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tokens_metadata(tokens_path)
    try:
        table = pq.read_table(tokens_path)
        table.select(["chunk", "position", "token_id"])
    except (OSError, pa.ArrowException, KeyError) as exc:
        raise damaged_tokens(tokens_path, exc) from None
    return table


def chunk_ids(tokens_path: str | Path) -> list[int]:
    """The chunk indices chunk_corpus wrote, which the dump batches must hold between them."""
    meta = tokens_metadata(tokens_path)
    return list(range(meta["first_chunk"], meta["first_chunk"] + meta["n_chunks"]))


def provenance(model_dir: str | Path, tokens_path: str | Path) -> dict[str, Any]:
    """The metadata every dump of this run must carry: same weights, same token chunks."""
    return {
        "weights_sha256": read_manifest(model_dir)["weights_sha256"],
        "tokens_fingerprint": tokens_metadata(tokens_path)["fingerprint"],
    }


def sample_keys(samples) -> dict[str, Any]:
    """Columns that identify each sample, for tidy tables."""
    return {
        "layer": samples.layer.astype("int32"),
        "chunk": samples.chunk.astype("int32"),
        "head": samples.head.astype("int32"),
    }


def blocks(n_samples: int, length: int, width: int, budget_bytes: int = 8 << 20):
    """Slices over the sample axis sized so one float64 (block, L, d) temporary fits the budget."""
    per_sample = max(1, length * max(width, 1) * 8)
    size = max(1, budget_bytes // per_sample)
    for start in range(0, n_samples, size):
        yield slice(start, min(start + size, n_samples))
