"""Test helpers: one L's samples of a batch as in-memory arrays (the workflow decodes them straight
into packs instead, attnlimits_workflow.dumps.pack), a pack written from them, and a random
pack of q and k rows (the all-rows analyses)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attnlimits_workflow.dumps.read import PART_KEYS, layer_parts, shared_x
from attnlimits_workflow.integrity import write_checksums
from attnlimits_workflow.packs import LAYER_KEYS, PACK_ARRAYS, Pack


@dataclass
class Samples:
    """Analysis samples for one L: one per (layer, chunk, head), in that order."""

    length: int
    layer: np.ndarray  # (S,) int
    chunk: np.ndarray  # (S,) int
    head: np.ndarray  # (S,) int
    weights: np.ndarray  # (S, L) float32
    logits: np.ndarray | None  # (S, L) float32
    x: np.ndarray | None  # (S, L, d) float32: the configured embedding of keys 0..L-1
    query: np.ndarray | None  # (S, head_dim): the analysed row's query vector
    keys: np.ndarray | None  # (S, L, head_dim)
    query_norm: np.ndarray | None  # (S,) |q| of the analysed row
    key_norm_max: np.ndarray | None  # (S,) max_i |k_i| over the L keys
    score_scale: np.ndarray  # (S,) the model's q.k scale for the sample's layer
    metadata: dict[str, Any]  # layer 0's first file's
    layer_metadata: dict[int, dict[str, Any]] = field(default_factory=dict)  # each layer's


def load_samples(
    dump_dirs: list[str | os.PathLike],
    length: int,
    embedding: str | None = "value",
    with_logits: bool = False,
    with_query_keys: bool = False,
    *,
    with_norms: bool = False,
    expected: dict[str, Any] | None = None,
) -> Samples:
    """Read what the analyses at context length ``length`` need, and nothing more.

    Only rows with position < L of the right forward pass are read (row-group statistics skip
    the rest), and only the requested columns.
    """
    collected: dict[str, list] = {k: [] for k in PART_KEYS}
    meta0 = None
    layer_metadata: dict[int, dict[str, Any]] = {}
    for meta, parts in layer_parts(
        dump_dirs, length, embedding, with_logits, with_query_keys, with_norms, expected
    ):
        meta0 = meta0 or meta
        layer_metadata.setdefault(int(meta["layer"]), meta)
        parts = {**parts, "x": shared_x(parts), "xi": None}  # one x per sample
        for k, v in parts.items():
            if v is not None:
                collected[k].append(v)
    assert meta0 is not None
    cat = lambda k: np.concatenate(collected[k]) if collected[k] else None  # noqa: E731
    return Samples(
        length=length,
        layer=cat("layer"),
        chunk=cat("chunk"),
        head=cat("head"),
        weights=cat("w"),
        logits=cat("l"),
        x=cat("x"),
        query=cat("q"),
        keys=cat("k"),
        query_norm=cat("qn"),
        key_norm_max=cat("kn"),
        score_scale=cat("scale"),
        metadata=meta0,
        layer_metadata=layer_metadata,
    )


def write_pack(samples: Samples, out_dir: Path, embedding: str | None = None) -> None:
    """Store one L's samples as .npy files that analysis jobs memory-map instead of decoding Parquet.

    The query and keys enter only through what the analyses use (|q| and max_i |k_i|).
    ``embedding``: the one ``samples`` were loaded with, recorded as pack_dumps records it.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in PACK_ARRAYS:
        np.save(out_dir / f"{name}.npy", np.ascontiguousarray(getattr(samples, name)))
    recorded = {} if embedding is None else {"embedding": embedding, "extra_embeddings": []}
    recorded["layers"] = {
        str(layer): {key: meta.get(key) for key in LAYER_KEYS}
        for layer, meta in samples.layer_metadata.items()
    }
    (out_dir / "metadata.json").write_text(
        json.dumps({"length": samples.length, **samples.metadata, **recorded}, sort_keys=True)
    )
    write_checksums(out_dir, [p.name for p in out_dir.glob("*.npy")] + ["metadata.json"])


def random_pack(causal: bool, length: int = 12, seed: int = 0, layers: int = 2) -> Pack:
    """``layers`` layers x two chunks x three heads of random q, k rows and x, float32 as in a
    pack."""
    rng = np.random.default_rng(seed)
    grid = np.meshgrid(np.arange(layers), [0, 1], [0, 1, 2], indexing="ij")
    layer, chunk, head = (a.ravel() for a in grid)
    samples = len(layer)
    return Pack(
        length=length,
        layer=layer,
        chunk=chunk,
        head=head,
        weights=np.zeros((samples, length), dtype=np.float32),
        logits=np.zeros((samples, length), dtype=np.float32),
        x=rng.standard_normal((samples, length, 3)).astype(np.float32),
        query_norm=np.ones(samples),
        key_norm_max=np.ones(samples),
        score_scale=np.full(samples, 0.5),
        metadata={"causal": causal, "softcap": None},
        q_rows=(2 * rng.standard_normal((samples, length, 4))).astype(np.float32),
        k_rows=rng.standard_normal((samples, length, 4)).astype(np.float32),
    )
