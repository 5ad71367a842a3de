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
# Packed only for the all-rows protocol (analysis.protocol: all_rows), and only for the samples
# of the chunks it analyses (row_sample: their indices among the pack's samples).
ROW_ARRAYS = ("q_rows", "k_rows", "row_sample")


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
    q_rows: np.ndarray | None = None  # (R, L, head_dim): every position's query
    k_rows: np.ndarray | None = None  # (R, L, head_dim): every key, resolved to the query head
    row_sample: np.ndarray | None = None  # (R,) sample of each q/k row; None: one per sample

    def rows(self, sample: int) -> tuple[np.ndarray, np.ndarray]:
        """Every position's query and key of ``sample``: (L, head_dim) each."""
        if self.q_rows is None or self.k_rows is None:
            raise DumpError(
                "this pack holds no q/k rows: only analysis.protocol all_rows packs them"
            )
        at = sample
        if self.row_sample is not None:
            at = int(np.searchsorted(self.row_sample, sample))
            if at == len(self.row_sample) or int(self.row_sample[at]) != sample:
                held = np.unique(np.asarray(self.chunk)[np.asarray(self.row_sample)]).tolist()
                raise DumpError(
                    f"sample {sample} (chunk {int(self.chunk[sample])}) has no q/k rows in this "
                    f"pack, which holds those of chunks {held} (analysis.all_rows.chunks); "
                    "delete the pack and rerun"
                )
        return self.q_rows[at], self.k_rows[at]


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
