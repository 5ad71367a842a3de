"""One L's samples decoded from the dumps straight into a sample pack's .npy files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..packs import DumpError
from .read import layer_files, layer_parts, open_dump

_PACK_SOURCES = {
    "layer": "layer",
    "chunk": "chunk",
    "head": "head",
    "weights": "w",
    "logits": "l",
    "x": "x",
    "query_norm": "qn",
    "key_norm_max": "kn",
    "score_scale": "scale",
}
# with the all-rows protocol: every position's query and key (resolved to the query head)
_ROW_SOURCES = {"q_rows": "qa", "k_rows": "k"}


def pack_dumps(
    dump_dirs: list[str | os.PathLike],
    length: int,
    embedding: str,
    out_dir: Path,
    *,
    expected: dict[str, Any] | None = None,
    expected_chunks: list[int] | None = None,
    with_rows: bool = False,
) -> tuple[int, tuple[int, ...]]:
    """Decode one L's samples from the dumps straight into the pack's .npy files, one dump file
    at a time: the same arrays as ``write_pack(load_samples(...))`` without holding them all in
    memory and copying them once more to concatenate. Returns (samples, shape of x).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [p for fs in layer_files(dump_dirs, expected, expected_chunks).values() for p in fs]
    total = 0
    for path in files:  # footers only: the sample count fixes every array's first dimension
        meta, _ = open_dump(path, expected)
        total += len(meta["chunks"]) * int(meta["n_heads"])
    arrays: dict[str, np.ndarray] = {}
    offset = 0
    meta0 = None
    sources = {**_PACK_SOURCES, **(_ROW_SOURCES if with_rows else {})}
    for meta, parts in layer_parts(
        dump_dirs, length, embedding, True, with_rows, True, expected, expected_chunks
    ):
        meta0 = meta0 or meta
        rows = None
        for name, key in sources.items():
            part = parts[key]
            if name not in arrays:
                arrays[name] = np.lib.format.open_memmap(
                    out_dir / f"{name}.npy",
                    mode="w+",
                    dtype=part.dtype,
                    shape=(total, *part.shape[1:]),
                )
            rows = len(part)
            arrays[name][offset : offset + rows] = part
        offset += rows
    if offset != total:
        raise DumpError(
            f"{dump_dirs}: read {offset} samples for L={length}, footers promise {total}"
        )
    # No msync (memmap.flush): the pages are already visible to every process through the page
    # cache, and like every other output the pack becomes visible only by the atomic rename of
    # its folder; forcing them to disk only adds I/O wait (docs/performance.md).
    (out_dir / "metadata.json").write_text(json.dumps({"length": length, **meta0}, sort_keys=True))
    return total, tuple(arrays["x"].shape)
