"""What the analysis modules share: typed settings from a rule's params, the job start of an
adapter script, and the key columns of the two protocols' tables."""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import numpy as np

from attnlimits.arrays import DEFAULT_DEVICE
from attnlimits_workflow.jobs import Timer, job_logger, sample_keys
from attnlimits_workflow.packs import Pack, read_pack

Settings = TypeVar("Settings")


def settings_from(kind: type[Settings], params: Any) -> Settings:
    """A settings dataclass filled from a rule's params (snakemake.params, or any object with
    the fields as attributes); params the analysis does not read are ignored."""
    return kind(**{f.name: getattr(params, f.name) for f in fields(kind)})  # type: ignore[arg-type]


@dataclass
class Job:
    """An analysis job's start: its logger, timer, pack and settings."""

    log: logging.Logger
    timer: Timer
    pack: Pack
    settings: Any


def start_job(snakemake: Any, name: str, kind: type | None = None) -> Job:
    """Log to the rule's log, read input ``pack`` and the settings of type ``kind`` (None: the
    analysis has none)."""
    log = job_logger(snakemake, name)
    timer = Timer()
    settings = None if kind is None else settings_from(kind, snakemake.params)
    # a reading of analysis.readings reads its embedding's x from its source run's pack
    embedding = getattr(snakemake.params, "embedding", None)
    return Job(log, timer, read_pack(snakemake.input.pack, embedding), settings)


def constant_columns(size: int, dtype=np.int32, **values: float) -> dict[str, np.ndarray]:
    """A column per keyword, each ``size`` copies of its value (L, N, T, eps...)."""
    return {name: np.full(size, value, dtype=dtype) for name, value in values.items()}


def sample_columns(pack: Pack, **values: int) -> dict[str, np.ndarray]:
    """The last-row protocol's key columns: layer, chunk, head of each sample, then one int32
    column per keyword (L, N)."""
    return {**sample_keys(pack), **constant_columns(pack.weights.shape[0], **values)}


def head_columns(pooled: dict[str, Any], **values: int) -> dict[str, np.ndarray]:
    """The all-rows protocol's key columns: layer, chunk (-1: pooled over chunks), head of each
    (layer, head), then one int32 column per keyword (L, N)."""
    size = len(pooled["layer"])
    return {
        "layer": pooled["layer"],
        "chunk": np.full(size, -1, dtype=np.int32),
        "head": pooled["head"],
        **constant_columns(size, **values),
    }


def other_reading(masked: str) -> str:
    """The other reading of a causal row's masked keys (analysis.all_rows.masked)."""
    return "prefix" if masked == "non_selected" else "non_selected"


def rows_to_analyse(all_rows: Any) -> int | None:
    """analysis.all_rows.rows as a count: None for every row (the paper's protocol)."""
    rows = all_rows.get("rows", "all")
    return None if rows in (None, "all") else int(rows)


def sampling_columns(pooled: dict[str, Any], *names: str) -> dict[str, np.ndarray]:
    """The standard error of each statistic's per-head mean from the drawn rows
    (analysis.all_rows.rows): "<name>_se" for each of ``names`` that has one; none when every
    row was analysed (the mean is exact)."""
    return {f"{n}_se": pooled[f"{n}_se"] for n in names if f"{n}_se" in pooled}


def engine_settings(settings: Any) -> dict[str, Any]:
    """The row engine's keyword arguments (attnlimits_workflow.rows.row_means_of) from an
    analysis's settings: the chunks, the device, the rows drawn and their seed, which every
    all-rows analysis reads from analysis.all_rows alike, and analysis.zero_weight."""
    all_rows = settings.all_rows
    return {
        "chunks": all_rows["chunks"],
        "zero_weight": getattr(settings, "zero_weight", "not_selected"),
        "device": all_rows.get("device", DEFAULT_DEVICE),
        "row_count": rows_to_analyse(all_rows),
        "row_seed": settings.seed,
    }
