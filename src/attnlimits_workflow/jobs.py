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
from .models import read_manifest

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


def tokens_metadata(tokens_path: str | Path) -> dict[str, Any]:
    import json

    import pyarrow.parquet as pq  # here: analysis jobs that never read tokens skip pyarrow

    meta = pq.read_schema(tokens_path).metadata or {}
    if TOKENS_META_KEY not in meta:
        raise RuntimeError(f"{tokens_path}: no attnlimits metadata; rerun chunk_corpus")
    return json.loads(meta[TOKENS_META_KEY])


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
