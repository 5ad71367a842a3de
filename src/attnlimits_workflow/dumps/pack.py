"""One L's samples decoded from the dumps straight into a sample pack's .npy files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..integrity import MANIFEST, write_checksums
from ..packs import LAYER_KEYS, DumpError
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
# with the all-rows protocol: every position's query and key (resolved to the query head), for
# the samples of the chunks it analyses only
_ROW_SOURCES = {"q_rows": "qa", "k_rows": "k"}


def pack_dumps(
    dump_dirs: list[str | os.PathLike],
    length: int,
    embedding: str,
    out_dir: Path,
    *,
    expected: dict[str, Any] | None = None,
    expected_chunks: list[int] | None = None,
    row_chunks: int = 0,
    extra_embeddings: tuple[str, ...] | list[str] = (),
) -> tuple[int, tuple[int, ...]]:
    """Decode one L's samples from the dumps straight into the pack's .npy files, one dump file
    at a time: the same arrays as ``write_pack(load_samples(...))`` without holding them all in
    memory and copying them once more to concatenate. Returns (samples, shape of x).

    ``row_chunks``: also pack every position's query and key (q_rows, k_rows) for the samples of
    the run's first that many chunks, the ones the all-rows protocol analyses
    (analysis.all_rows.chunks), with their sample indices in row_sample; 0 packs none. Packing
    them for every chunk tripled the book's packs (docs/performance.md).

    ``extra_embeddings``: the x of each other embedding the run's readings name
    (analysis.readings), as x_<embedding>.npy beside x.npy, so that one pack serves every reading
    (read_pack's ``embedding``).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [p for fs in layer_files(dump_dirs, expected, expected_chunks).values() for p in fs]
    total = 0
    footers = []
    for path in files:  # footers only: the sample count fixes every array's first dimension
        meta, _ = open_dump(path, expected)
        footers.append(meta)
        total += len(meta["chunks"]) * int(meta["n_heads"])
    row_chunk_ids = sorted({int(c) for meta in footers for c in meta["chunks"]})[:row_chunks]
    row_total = sum(
        len(set(row_chunk_ids).intersection(map(int, meta["chunks"]))) * int(meta["n_heads"])
        for meta in footers
    )
    arrays: dict[str, np.ndarray] = {}

    def write(name: str, part: np.ndarray, start: int, rows: int) -> None:
        if name not in arrays:
            arrays[name] = np.lib.format.open_memmap(
                out_dir / f"{name}.npy",
                mode="w+",
                dtype=part.dtype,
                shape=(rows, *part.shape[1:]),
            )
        arrays[name][start : start + len(part)] = part

    offset = row_offset = 0
    meta0 = None
    layers: dict[str, dict[str, Any]] = {}
    for meta, parts in layer_parts(
        dump_dirs, length, embedding, True, row_chunks > 0, True, expected, expected_chunks
    ):
        meta0 = meta0 or meta
        layers.setdefault(str(int(meta["layer"])), layer_entry(meta))
        for name, key in _PACK_SOURCES.items():
            write(name, parts[key], offset, total)
        if row_chunks > 0:
            kept = np.isin(parts["chunk"], row_chunk_ids)
            for name, key in _ROW_SOURCES.items():
                write(name, parts[key][kept], row_offset, row_total)
            write(
                "row_sample", offset + np.nonzero(kept)[0].astype(np.int64), row_offset, row_total
            )
            row_offset += int(kept.sum())
        offset += len(parts["chunk"])
    if offset != total or row_offset != row_total:
        raise DumpError(
            f"{dump_dirs}: read {offset} samples ({row_offset} with rows) for L={length}, "
            f"footers promise {total} ({row_total})"
        )
    extras = [e for e in dict.fromkeys(extra_embeddings) if e != embedding]
    for extra in extras:
        offset = 0
        for _, parts in layer_parts(
            dump_dirs, length, extra, False, False, False, expected, expected_chunks
        ):
            write(f"x_{extra}", parts["x"], offset, total)
            offset += len(parts["chunk"])
        if offset != total:
            raise DumpError(f"{dump_dirs}: read {offset} {extra} samples, expected {total}")
    # No msync (memmap.flush): the pages are already visible to every process through the page
    # cache, and like every other output the pack becomes visible only by the atomic rename of
    # its folder; forcing them to disk only adds I/O wait (docs/performance.md).
    (out_dir / "metadata.json").write_text(
        json.dumps(
            {
                "length": length,
                **meta0,
                "embedding": embedding,
                "extra_embeddings": extras,
                "layers": layers,
                "checksums": MANIFEST,
            },
            sort_keys=True,
        )
    )
    # last: a pack whose checksums.json is missing while its metadata names one is refused
    write_checksums(out_dir, sorted(p.name for p in out_dir.glob("*.npy")) + ["metadata.json"])
    return total, tuple(arrays["x"].shape)


def layer_entry(meta: dict[str, Any]) -> dict[str, Any]:
    """A layer file's normalizer metadata as the pack's "layers" table holds it (Pack.
    layer_normalizer reads it): the LAYER_KEYS of its metadata, null where a dump written before
    a key was recorded lacks it. The pack's top-level keys stay those of its first file (layer
    0's): what the analyses read from them (causal, softcap) is the same in every layer file."""
    return {key: meta.get(key) for key in LAYER_KEYS}
