"""One L's samples decoded from the dumps straight into a sample pack's .npy files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..integrity import MANIFEST, write_checksums
from ..packs import LAYER_KEYS, DumpError
from .read import distinct_x_rows, layer_files, layer_parts, open_dump

_PACK_SOURCES = {
    "layer": "layer",
    "chunk": "chunk",
    "head": "head",
    "weights": "w",
    "logits": "l",
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
    memory and copying them once more to concatenate. Returns (samples, shape of x: samples, L,
    width).

    x.npy holds each distinct vector once, x_index.npy each sample's row of it: the query heads
    of a chunk share one attention_input (or hidden), those of a GQA KV head its keys and
    values. Stored per sample, SmolLM2's attention_input was 5.1 of a 6.2 GB pack at L = 1024
    (docs/performance.md); read_pack gives them back per sample (SharedRows).

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

    def write_x(name: str, parts: dict[str, Any], offsets: list[int], rows: int) -> None:
        """A part's distinct x vectors at offsets[1], each sample's row of them at offsets[0]."""
        write(name, parts["x"], offsets[1], rows)
        write(f"{name}_index", offsets[1] + parts["xi"].astype(np.int64), offsets[0], total)
        offsets[1] += len(parts["x"])

    offset = row_offset = 0
    x_offsets = [0, 0]
    x_total = sum(distinct_x_rows(meta, embedding) for meta in footers)
    meta0 = None
    layers: dict[str, dict[str, Any]] = {}
    for meta, parts in layer_parts(
        dump_dirs, length, embedding, True, row_chunks > 0, True, expected, expected_chunks
    ):
        meta0 = meta0 or meta
        layers.setdefault(str(int(meta["layer"])), layer_entry(meta))
        for name, key in _PACK_SOURCES.items():
            write(name, parts[key], offset, total)
        x_offsets[0] = offset
        write_x("x", parts, x_offsets, x_total)
        if row_chunks > 0:
            kept = np.isin(parts["chunk"], row_chunk_ids)
            for name, key in _ROW_SOURCES.items():
                write(name, parts[key][kept], row_offset, row_total)
            write(
                "row_sample", offset + np.nonzero(kept)[0].astype(np.int64), row_offset, row_total
            )
            row_offset += int(kept.sum())
        offset += len(parts["chunk"])
    if offset != total or row_offset != row_total or x_offsets[1] != x_total:
        raise DumpError(
            f"{dump_dirs}: read {offset} samples ({row_offset} with rows, {x_offsets[1]} "
            f"distinct x) for L={length}, footers promise {total} ({row_total}, {x_total})"
        )
    extras = [e for e in dict.fromkeys(extra_embeddings) if e != embedding]
    for extra in extras:
        x_offsets = [0, 0]
        x_total = sum(distinct_x_rows(meta, extra) for meta in footers)
        for _, parts in layer_parts(
            dump_dirs, length, extra, False, False, False, expected, expected_chunks
        ):
            write_x(f"x_{extra}", parts, x_offsets, x_total)
            x_offsets[0] += len(parts["chunk"])
        if x_offsets != [total, x_total]:
            raise DumpError(
                f"{dump_dirs}: read {x_offsets[0]} {extra} samples ({x_offsets[1]} distinct), "
                f"expected {total} ({x_total})"
            )
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
    return total, (total, *arrays["x"].shape[1:])


def layer_entry(meta: dict[str, Any]) -> dict[str, Any]:
    """A layer file's normalizer metadata as the pack's "layers" table holds it (Pack.
    layer_normalizer reads it): the LAYER_KEYS of its metadata, null where a dump written before
    a key was recorded lacks it. The pack's top-level keys stay those of its first file (layer
    0's): what the analyses read from them (causal, softcap) is the same in every layer file."""
    return {key: meta.get(key) for key in LAYER_KEYS}
