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
    """A dump that cannot be used: missing, truncated, wrong schema, or from another config.
    Its message is one line (a reader's own message may hold newlines): the job prints it."""

    def __init__(self, message: object = ""):
        super().__init__(" ".join(str(message).split()))


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


def read_pack(pack_dir: str | os.PathLike, embedding: str | None = None) -> Pack:
    """One L's pack, memory-mapped, its x that of ``embedding`` (None: the one the pack was made
    for, x.npy; another: x_<embedding>.npy, packed for a reading of analysis.readings; a pack
    without it raises DumpError). A damaged pack (a file unreadable, truncated, or of the wrong
    shape) raises DumpError naming the file, which is set aside as <name>.corrupt and its pack
    made stale (set_aside), so that the next run rebuilds the pack, as a damaged dump's batch."""
    d = Path(pack_dir)
    current = d / "metadata.json"
    try:
        meta = json.loads(current.read_text())
        length = int(meta["length"])
        arrays = {}
        x_file = pack_x_file(d, meta, embedding)
        for name in PACK_ARRAYS + ROW_ARRAYS:
            current = d / (x_file if name == "x" else f"{name}.npy")
            if name in PACK_ARRAYS or current.exists():
                arrays[name] = np.load(current, mmap_mode="r")
        current = pack_shape_problem(d, arrays, length)
        if current is not None and current.name == "x.npy":
            current = d / x_file
        if current is not None:
            raise ValueError("its shape does not match the pack's other arrays")
    except DumpError:
        raise
    except Exception as exc:  # np.load alone raises OSError, EOFError, ValueError, SyntaxError...
        moved = set_aside(current)
        raise DumpError(
            f"{current}: unreadable sample pack file ({exc}); set aside as {moved.name}. "
            "Rerun the workflow to rebuild the pack"
        ) from None
    return Pack(length=length, metadata=meta, **arrays)


def pack_x_file(d: Path, meta: dict[str, Any], embedding: str | None) -> str:
    """The file of a pack's x for ``embedding`` (pack_dumps' x.npy or x_<embedding>.npy)."""
    if embedding is None or embedding == meta.get("embedding", embedding):
        return "x.npy"
    if embedding not in meta.get("extra_embeddings", []):
        raise DumpError(
            f"{d}: this pack holds x for {meta.get('embedding')!r} and "
            f"{meta.get('extra_embeddings', [])}, not {embedding!r}; delete the pack and rerun"
        )
    return f"x_{embedding}.npy"


def pack_shape_problem(d: Path, arrays: dict[str, np.ndarray], length: int) -> Path | None:
    """The first array of a pack whose shape disagrees with the others (S samples of L), or None."""
    n = arrays["layer"].shape[0] if arrays["layer"].ndim == 1 else -1
    want = {
        "layer": (n,),
        "chunk": (n,),
        "head": (n,),
        "weights": (n, length),
        "logits": (n, length),
        "query_norm": (n,),
        "key_norm_max": (n,),
        "score_scale": (n,),
    }
    for name, shape in want.items():
        if n < 0 or arrays[name].shape != shape:
            return d / f"{name}.npy"
    if arrays["x"].ndim != 3 or arrays["x"].shape[:2] != (n, length):
        return d / "x.npy"
    return None


def set_aside(path: Path) -> Path:
    """Rename a damaged pack file to <name>.corrupt (set_aside_file) and age its pack folder (its
    .snakemake_timestamp, which Snakemake reads as a directory output's time, set to 1970), so
    the next run sees the pack outdated and rebuilds it."""
    moved = set_aside_file(path)
    if path.parent.is_dir():
        age_folder(path.parent)
    return moved


def age_folder(folder: Path) -> None:
    """Make a directory output older than its inputs: its .snakemake_timestamp (which Snakemake
    reads as a directory output's time) and the folder set to 1970, so the next run rebuilds it."""
    stamp = folder / ".snakemake_timestamp"
    stamp.touch()
    os.utime(stamp, (0, 0))
    os.utime(folder, (0, 0))


def set_aside_file(path: Path) -> Path:
    """Rename a damaged file to <name>.corrupt (or .corrupt1, ...): nothing is deleted, and the
    next run sees the file missing. Jobs read one file in parallel: when another job set it aside
    first, the latest .corrupt* copy is reported."""
    try:
        return rename_corrupt(path)
    except FileNotFoundError:
        earlier = sorted(
            path.parent.glob(f"{path.name}.corrupt*"), key=lambda p: p.stat().st_mtime_ns
        )
        return earlier[-1] if earlier else path


def rename_corrupt(path: Path) -> Path:
    """Rename ``path`` to the first free <name>.corrupt, <name>.corrupt1, ... and return that
    name (FileNotFoundError where ``path`` is gone)."""
    moved = path.with_name(f"{path.name}.corrupt")
    n = 1
    while moved.exists():
        moved, n = path.with_name(f"{path.name}.corrupt{n}"), n + 1
    os.replace(path, moved)
    return moved
