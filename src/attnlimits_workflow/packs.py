"""Sample packs: one L's analysis samples as .npy files that analysis jobs memory-map.

Kept apart from :mod:`attnlimits_workflow.dumps` so that the analysis jobs, which only map packs,
do not import pyarrow (~60 ms of each job's start-up; there are ~50 such jobs per run).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


class DumpError(RuntimeError):
    """A dump that cannot be used: missing, truncated, wrong schema, or from another config."""


PACK_ARRAYS = (
    "layer",
    "chunk",
    "head",
    "weights",
    "logits",
    "x",
    "query_norm",
    "key_norm_max",
    "score_scale",
)
# Packed only for the all-rows protocol (analysis.protocol: all_rows).
ROW_ARRAYS = ("q_rows", "k_rows")


@dataclass
class Pack:
    """Memory-mapped samples of one L, in (layer, chunk, head) order (written by
    :func:`attnlimits_workflow.dumps.pack.pack_dumps`)."""

    length: int
    layer: np.ndarray
    chunk: np.ndarray
    head: np.ndarray
    weights: np.ndarray  # (S, L) float32
    logits: np.ndarray  # (S, L) float32
    x: np.ndarray  # (S, L, d) float32
    query_norm: np.ndarray  # (S,)
    key_norm_max: np.ndarray  # (S,)
    score_scale: np.ndarray  # (S,)
    metadata: dict[str, Any]
    q_rows: np.ndarray | None = None  # (S, L, head_dim): every position's query
    k_rows: np.ndarray | None = None  # (S, L, head_dim): every key, resolved to the query head


def read_pack(pack_dir: str | os.PathLike) -> Pack:
    d = Path(pack_dir)
    try:
        meta = json.loads((d / "metadata.json").read_text())
        arrays = {name: np.load(d / f"{name}.npy", mmap_mode="r") for name in PACK_ARRAYS}
        for name in ROW_ARRAYS:
            if (d / f"{name}.npy").exists():
                arrays[name] = np.load(d / f"{name}.npy", mmap_mode="r")
    except (OSError, ValueError) as exc:
        raise DumpError(f"{d}: unreadable sample pack ({exc}); delete it and rerun") from exc
    return Pack(length=int(meta["length"]), metadata=meta, **arrays)
