"""Writing one extraction batch: the model pass over its chunks, one Parquet file per layer."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..integrity import MANIFEST, write_checksums
from .schema import (
    META_KEY,
    ROW_GROUP_POSITIONS,
    SCHEMA_SPEC,
    VECTOR_COLUMNS,
    VECTOR_DTYPES,
    arrow_schema,
    fingerprint,
)


class LayerDumpWriter:
    """Streams one layer's rows to Parquet, one row group per 128 positions of one pass."""

    def __init__(
        self,
        path: Path,
        metadata: dict[str, Any],
        compression: str,
        compression_level: int | None,
        page_checksums: bool = True,
    ):
        self.head_dim = int(metadata["head_dim"])
        self.d_model = int(metadata["d_model"])
        self.n_heads = int(metadata["n_heads"])
        self.n_kv_heads = int(metadata["n_kv_heads"])
        self.vectors = tuple(metadata["vectors"])
        self.vector_dtype = np.dtype(metadata["vector_dtype"])
        schema = arrow_schema(self.head_dim, self.d_model, metadata["vector_dtype"]).with_metadata(
            {META_KEY: json.dumps(metadata, sort_keys=True).encode()}
        )
        list_columns = [c["name"] for c in SCHEMA_SPEC["columns"] if "list<" in c["type"]]
        self.writer = pq.ParquetWriter(
            path,
            schema,
            compression=compression,
            compression_level=compression_level,
            use_dictionary=False,
            # Byte-stream split groups the exponent bytes of neighbouring floats, which is what
            # lets zstd find redundancy in float32 activations.
            use_byte_stream_split=[f"{c}.list.element" for c in list_columns]
            + ["q_norm", "k_norm"],
            write_statistics=["chunk", "context_length", "position", "analysed_length"],
            # CRC-32 of every page, verified by every reader (dumps.read.open_dump)
            write_page_checksum=page_checksums,
        )
        self.schema = schema

    def write_pass(self, chunk: int, token_ids: np.ndarray, capture) -> None:
        """Append one (chunk, context_length) pass of one layer (a LayerCapture)."""
        heads, positions, dh = capture.q.shape
        kv_heads = capture.k.shape[0]
        n = heads * positions
        # Row order within the pass: position-major, then head. KV head j sits on head-j rows.
        head = np.tile(np.arange(heads, dtype=np.int16), positions)
        kv_row = head < kv_heads

        def per_row(t, rows_per_position):
            out = t.numpy().transpose(1, 0, 2).reshape(positions * rows_per_position, dh)
            return out.astype(self.vector_dtype, copy=False)

        def vectors(name, t, valid):
            if name not in self.vectors:
                return pa.nulls(n, self.schema.field(name).type)
            return _fixed(per_row(t, t.shape[0]), valid=valid, dtype=self.vector_dtype)

        analysed = np.full(n, -1, dtype=np.int32)
        logit_rows: dict[int, np.ndarray] = {}
        weight_rows: dict[int, np.ndarray] = {}
        for L, (pos, logits, weights) in capture.rows.items():
            for h in range(heads):
                r = pos * heads + h
                analysed[r] = L
                logit_rows[r] = logits[h].numpy()
                weight_rows[r] = weights[h].numpy()

        def per_layer(name):
            """A d_model-wide vector per position on the head-0 rows, null elsewhere and
            everywhere when the capture did not keep it."""
            t = getattr(capture, name)
            if t is None:
                return pa.nulls(n, self.schema.field(name).type)
            return _fixed(t.numpy(), valid=(head == 0))

        position = np.repeat(np.arange(positions, dtype=np.int32), heads)
        ids = np.repeat(np.asarray(token_ids[:positions], dtype=np.int32), heads)
        k_norm = np.zeros(n, dtype=np.float32)
        k_norm[kv_row] = capture.k.norm(dim=-1).numpy().T.reshape(-1)
        columns = {
            "chunk": pa.array(np.full(n, chunk, dtype=np.int32)),
            "context_length": pa.array(np.full(n, capture.context_length, dtype=np.int32)),
            "position": pa.array(position),
            "head": pa.array(head),
            "token_id": pa.array(ids),
            "q": vectors("q", capture.q, None),
            "k": vectors("k", capture.k, kv_row),
            "v": vectors("v", capture.v, kv_row),
            "q_norm": pa.array(capture.q.norm(dim=-1).numpy().T.reshape(n)),
            "k_norm": pa.array(k_norm, mask=~kv_row),
            "analysed_length": pa.array(analysed, mask=analysed < 0),
            "logits": _ragged(n, logit_rows),
            "weights": _ragged(n, weight_rows),
            "hidden": per_layer("hidden"),
            "attention_input": per_layer("attention_input"),
        }
        table = pa.table(columns, schema=self.schema)
        self.writer.write_table(table, row_group_size=ROW_GROUP_POSITIONS * heads)

    def close(self) -> None:
        self.writer.close()


def _fixed(
    rows: np.ndarray, valid: np.ndarray | None = None, dtype=np.float32
) -> pa.FixedSizeListArray:
    """Rows as a fixed-size list column. With ``valid``, ``rows`` holds only the valid rows
    (in order) and the others are null."""
    rows = np.ascontiguousarray(rows, dtype=dtype)
    width = rows.shape[1]
    if valid is None:
        return pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), width)
    if len(rows) != len(valid):
        full = np.zeros((len(valid), width), dtype=dtype)
        full[valid] = rows
        rows = full
    return pa.FixedSizeListArray.from_arrays(
        pa.array(rows.reshape(-1)), width, mask=pa.array(~valid)
    )


def _ragged(n: int, rows: dict[int, np.ndarray]) -> pa.ListArray:
    lengths = np.zeros(n, dtype=np.int32)
    for r, vals in rows.items():
        lengths[r] = len(vals)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    flat = np.concatenate([rows[r] for r in sorted(rows)]) if rows else np.zeros(0, np.float32)
    valid = np.zeros(n, dtype=bool)
    valid[list(rows)] = True
    return pa.ListArray.from_arrays(
        pa.array(offsets), pa.array(flat.astype(np.float32)), mask=pa.array(~valid)
    )


def write_batch(
    out_dir: Path,
    model,
    chunks: dict[int, np.ndarray],
    lengths: list[int],
    *,
    query_row: str,
    store_hidden: bool,
    store_attention_input: bool = False,
    provenance: dict[str, Any],
    extra_metadata: dict[str, Any],
    vectors: tuple[str, ...] = VECTOR_COLUMNS,
    vector_dtype: str = "float32",
    compression: str | None = "zstd",
    compression_level: int | None = 1,
    progress=None,
    write_threads: int = 2,
    closing_tokens: tuple[int, ...] = (),
    checksums: bool = True,
) -> None:
    """Run the model (loaded with the capture attention) over ``chunks`` (chunk index -> token
    ids) and write layerNN.parquet files into ``out_dir`` (which must exist).
    ``store_hidden`` / ``store_attention_input``: also store each layer's residual stream before
    its norm (``hidden``) / its attention input, the paper's x_i (``attention_input``).
    ``progress(chunk, seconds)`` is called after each chunk; ``closing_tokens`` as in
    attnlimits.extraction.extract_chunk.

    ``checksums``: write each page's CRC-32 and, once every file is closed, the batch's
    checksums.json (integrity.py), which every reader verifies; off only to measure their cost
    (benchmarks/checksums.py)."""
    import time

    import torch

    from attnlimits.extraction import extract_chunk
    from attnlimits.model_structure import differential_pairs, model_shape

    shape = model_shape(model)
    unknown = sorted(set(vectors) - set(VECTOR_COLUMNS))
    if unknown or vector_dtype not in VECTOR_DTYPES:
        raise ValueError(f"vectors {unknown} / vector_dtype {vector_dtype!r} not supported")
    run_fingerprint = fingerprint(
        {
            **provenance,
            "lengths": lengths,
            "query_row": query_row,
            "store_hidden": store_hidden,
            "store_attention_input": store_attention_input,
            "vectors": sorted(vectors),
            "vector_dtype": vector_dtype,
        }
    )
    chunk_length = len(next(iter(chunks.values())))
    d_model = int(model.config.get_text_config().hidden_size)
    writers: dict[int, LayerDumpWriter] = {}

    def writer_for(capture) -> LayerDumpWriter:
        """A layer's file opens with its first capture: the scaling, soft-cap and window in its
        metadata are the ones the model passed to its attention."""
        layer = capture.layer
        if layer not in writers:
            meta = {
                "schema_version": SCHEMA_SPEC["schema_version"],
                "fingerprint": run_fingerprint,
                **provenance,
                **extra_metadata,
                "chunk_length": int(chunk_length),
                "chunks": [int(c) for c in chunks],
                "layer": layer,
                "n_layers": shape.n_layers,
                "score_scale": capture.scaling,
                "softcap": capture.softcap,
                "sliding_window": capture.sliding_window,
                "position_embedding": shape.position_embeddings[layer],
                "sink_logits": None
                if capture.sink_logits is None
                else [float(x) for x in capture.sink_logits],
                "query_temperature": _query_temperature(
                    shape.temperature_tuning[layer], lengths, query_row
                ),
                "differential_lambda": capture.differential_lambda,
                "differential_pairs": None
                if capture.differential_lambda is None
                else [list(pair) for pair in differential_pairs(shape.n_heads)],
                "lengths": [int(L) for L in lengths],
                "query_row": query_row,
                "store_hidden": store_hidden,
                "store_attention_input": store_attention_input,
                "causal": shape.causal,
                "n_heads": shape.n_heads,
                "n_kv_heads": shape.n_kv_heads,
                "kv_head_of_query": list(shape.kv_head_of_query),
                "head_dim": shape.head_dim,
                "d_model": d_model,
                "vectors": [c for c in VECTOR_COLUMNS if c in vectors],
                "vector_dtype": vector_dtype,
                # a batch whose checksums.json went missing is refused, not read unverified
                "checksums": MANIFEST if checksums else None,
            }
            writers[layer] = LayerDumpWriter(
                Path(out_dir) / f"layer{layer:02d}.parquet",
                meta,
                compression,
                compression_level,
                page_checksums=checksums,
            )
        return writers[layer]

    # Layer files are encoded in parallel (zstd runs in C++ without the GIL). On a GPU the encoding
    # of chunk i also overlaps the forward of chunk i+1, with one chunk in flight so memory stays
    # bounded and each file keeps chunk order. On a CPU the forward already uses every core, and
    # overlapping only oversubscribes them (measured: benchmarks/extraction.py), so we wait.
    overlap = next(model.parameters()).device.type == "cuda"
    pool = ThreadPoolExecutor(max_workers=write_threads, thread_name_prefix="parquet")
    in_flight: list = []
    try:
        for chunk, ids in chunks.items():
            start = time.perf_counter()
            tokens = torch.tensor(np.asarray(ids), dtype=torch.long)
            captures = list(
                extract_chunk(
                    model,
                    tokens,
                    lengths,
                    query_row,
                    store_hidden,
                    closing_tokens,
                    store_attention_input=store_attention_input,
                )
            )
            for f in in_flight:
                f.result()
            # One task per layer file, writing its passes in order: an encoder makes one pass per
            # L, and two threads must never write one file (that crashed pyarrow, and would make
            # the row order depend on timing).
            by_layer: dict[int, list] = {}
            for c in captures:
                by_layer.setdefault(c.layer, []).append(c)
            in_flight = [
                pool.submit(
                    _write_passes, writer_for(passes[0]), int(chunk), tokens.numpy(), passes
                )
                for passes in by_layer.values()
            ]
            if not overlap:
                for f in in_flight:
                    f.result()
            if progress:
                progress(int(chunk), time.perf_counter() - start)
        for f in in_flight:
            f.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for w in writers.values():
            w.close()
    if checksums:  # last: a batch whose job died earlier has none, and is never complete
        write_checksums(out_dir, [f"layer{layer:02d}.parquet" for layer in sorted(writers)])


def _query_temperature(
    tuning: dict[str, float] | None, lengths: list[int], query_row: str
) -> dict[str, Any] | None:
    """Llama 4's query temperature of a NoPE layer: its parameters (any position's scale is
    attnlimits.families.query_temperature of them) and the scale of each analysed row, in the
    order of ``lengths``; None for a layer that does not scale its queries."""
    if tuning is None:
        return None
    from attnlimits.attention_capture import analysed_position
    from attnlimits.families import query_temperature

    return {
        **tuning,
        "analysed": [
            query_temperature(analysed_position(int(L), query_row), **tuning) for L in lengths
        ],
    }


def _write_passes(writer: LayerDumpWriter, chunk: int, token_ids: np.ndarray, captures) -> None:
    for capture in captures:
        writer.write_pass(chunk, token_ids, capture)
