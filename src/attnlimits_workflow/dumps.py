"""Per-layer Parquet dumps: writing, schema enforcement, and reading analysis samples.

Layout: <dump_dir>/layer<NN>.parquet, one directory per extraction batch. The schema lives in
dump_schema.json next to this file (documented in docs/dumps.md) and every reader checks it.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .packs import PACK_ARRAYS, DumpError

SCHEMA_SPEC: dict[str, Any] = json.loads(
    resources.files(__package__).joinpath("dump_schema.json").read_text()
)
META_KEY = SCHEMA_SPEC["metadata_key"].encode()
ROW_GROUP_POSITIONS = 128  # positions per row group: lets position < L filters skip row groups


VECTOR_DTYPES = {"float32": pa.float32(), "float16": pa.float16()}
VECTOR_COLUMNS = ("q", "k", "v")


def arrow_schema(head_dim: int, d_model: int, vector_dtype: str = "float32") -> pa.Schema:
    """The concrete Arrow schema of a dump, built from dump_schema.json."""
    sizes = {"head_dim": head_dim, "d_model": d_model}
    fields = []
    for col in SCHEMA_SPEC["columns"]:
        fields.append(
            pa.field(
                col["name"],
                _arrow_type(col["type"], sizes, VECTOR_DTYPES[vector_dtype]),
                nullable=col["nullable"],
            )
        )
    return pa.schema(fields)


def _arrow_type(spec: str, sizes: dict[str, int], vector: pa.DataType) -> pa.DataType:
    if spec.startswith("fixed_size_list<"):
        element = spec.split("<")[1].split(">")[0]
        dtype = vector if element == "vector" else pa.float32()
        return pa.list_(dtype, sizes[spec.split("[")[1].rstrip("]")])
    if spec == "list<float32>":
        return pa.list_(pa.float32())
    return {"int16": pa.int16(), "int32": pa.int32(), "float32": pa.float32()}[spec]


def fingerprint(parts: dict[str, Any]) -> str:
    """Stable short hash of everything a dump depends on (model, corpus, chunking, extraction)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


class LayerDumpWriter:
    """Streams one layer's rows to Parquet, one row group per 128 positions of one pass."""

    def __init__(
        self, path: Path, metadata: dict[str, Any], compression: str, compression_level: int | None
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
        hidden = None
        if capture.hidden is not None:
            hidden = np.zeros((n, self.d_model), dtype=np.float32)
            hidden[::heads] = capture.hidden.numpy()
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
            "hidden": _fixed(hidden, valid=(head == 0))
            if hidden is not None
            else pa.nulls(n, pa.list_(pa.float32(), self.d_model)),
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


# ----------------------------------------------------------------------------------------- read


def layer_files(
    dump_dirs: list[str | os.PathLike],
    expected: dict[str, Any] | None = None,
    expected_chunks: list[int] | None = None,
) -> dict[int, list[Path]]:
    """layer -> its dump files across batches, after checking that the batches are complete and
    consistent: every batch holds every layer (0..n_layers-1) once, its files agree on their
    chunks and fingerprint and each names its own layer, no chunk is in two batches, and the
    chunks together are ``expected_chunks`` when given. Reads the footers only.

    A missing or foreign layer file would otherwise be read as if the batch were whole: that
    layer would silently use fewer (or twice the same) chunks in every table.
    """
    out: dict[int, list[Path]] = {}
    owner: dict[int, Path] = {}  # chunk -> the batch that holds it
    layers_seen: set[int] | None = None
    fingerprint0 = None
    for d in dump_dirs:
        files = sorted(Path(d).glob("layer*.parquet"))
        damaged = sorted(p.name for p in Path(d).glob("layer*.parquet.corrupt*"))
        if damaged:
            raise DumpError(
                f"{d}: {', '.join(damaged)} set aside as damaged by a job that read it (see the "
                "error naming its file); rerun the workflow to rebuild the batch"
            )
        if not files:
            raise DumpError(
                f"{d}: no layer*.parquet files; delete the directory and rerun to rebuild it"
            )
        batch_chunks = None
        layers = set()
        for f in files:
            layer = int(f.stem.removeprefix("layer"))
            meta = read_metadata(f, expected)
            if int(meta["layer"]) != layer:
                raise DumpError(f"{f}: holds layer {meta['layer']}, not {layer}: {_rebuild(d)}")
            fingerprint0 = fingerprint0 or meta["fingerprint"]
            if meta["fingerprint"] != fingerprint0:
                raise DumpError(
                    f"{f}: fingerprint differs from {dump_dirs[0]}: dumps from two configs are mixed"
                )
            if batch_chunks is None:
                batch_chunks = list(meta["chunks"])
            elif list(meta["chunks"]) != batch_chunks:
                raise DumpError(
                    f"{f}: chunks {meta['chunks']} differ from {files[0].name}'s {batch_chunks} "
                    f"(a file from another batch?): {_rebuild(d)}"
                )
            n_layers = meta.get("n_layers")  # absent from dumps written before it was recorded
            if n_layers is not None and not 0 <= layer < n_layers:
                raise DumpError(f"{f}: layer {layer} outside the model's {n_layers}: {_rebuild(d)}")
            layers.add(layer)
            out.setdefault(layer, []).append(f)
        want_layers = set(range(n_layers)) if n_layers is not None else layers_seen
        if want_layers is not None and layers != want_layers:
            missing = sorted(want_layers - layers)
            names = ", ".join(f"layer{m:02d}.parquet" for m in missing) or "none"
            raise DumpError(
                f"{d}: has layers {sorted(layers)}, expected {sorted(want_layers)} "
                f"(missing: {names}): {_rebuild(d)}"
            )
        layers_seen = layers if layers_seen is None else layers_seen
        for c in batch_chunks:
            if c in owner:
                raise DumpError(f"{d}: chunk {c} is also in {owner[c]}: {_rebuild(d)}")
            owner[c] = Path(d)
    if layers_seen is not None and layers_seen != set(range(len(layers_seen))):
        raise DumpError(
            f"{dump_dirs}: layers {sorted(layers_seen)} are not 0..n-1: delete them and rerun"
        )
    if expected_chunks is not None and sorted(owner) != sorted(expected_chunks):
        missing = sorted(set(expected_chunks) - set(owner))
        extra = sorted(set(owner) - set(expected_chunks))
        raise DumpError(
            f"{dump_dirs}: the batches hold chunks {sorted(owner)}, the run expects "
            f"{sorted(expected_chunks)} (missing {missing}, extra {extra}): delete results/<model>/dumps and rerun"
        )
    return dict(sorted(out.items()))


def _rebuild(batch: str | os.PathLike) -> str:
    return f"delete {batch} and rerun to rebuild it"


def read_metadata(path: Path, expected: dict[str, Any] | None = None) -> dict[str, Any]:
    """The dump's metadata, after the checks of :func:`open_dump`."""
    return open_dump(path, expected)[0]


def open_dump(
    path: Path, expected: dict[str, Any] | None = None
) -> tuple[dict[str, Any], pq.ParquetFile]:
    """Open a dump, check its schema against dump_schema.json and its provenance; return metadata.

    ``expected`` maps metadata fields (e.g. weights_sha256, tokens_fingerprint) to the values of
    the current run: a dump of another model or corpus is refused, never mixed in.

    A truncated or corrupt file is renamed to <name>.corrupt, so that the next run of the workflow
    sees it missing and rebuilds it, and a DumpError naming the file is raised.
    """
    try:
        handle = pq.ParquetFile(path)  # reads the footer: catches truncation
        schema = handle.schema_arrow
    except (OSError, pa.ArrowInvalid) as exc:
        moved = _quarantine(path)
        raise DumpError(
            f"{path}: not a readable Parquet dump ({exc}); set aside as {moved.name}. "
            "Rerun the workflow to rebuild it (snakemake --rerun-incomplete ...)."
        ) from exc
    raw = (schema.metadata or {}).get(META_KEY)
    if raw is None:
        raise DumpError(f"{path}: no '{META_KEY.decode()}' metadata: not written by this workflow")
    meta = json.loads(raw)
    if meta.get("schema_version") != SCHEMA_SPEC["schema_version"]:
        raise DumpError(
            f"{path}: dump schema_version {meta.get('schema_version')}, this version of the "
            f"workflow reads {SCHEMA_SPEC['schema_version']} (docs/dumps.md): delete results/<model>/dumps "
            "and results/<model>/samples and rerun to rebuild them"
        )
    want = arrow_schema(int(meta["head_dim"]), int(meta["d_model"]), meta["vector_dtype"])
    if not schema.remove_metadata().equals(want):
        raise DumpError(
            f"{path}: columns do not match dump_schema.json:\n  got  {schema.remove_metadata()}\n  want {want}"
        )
    for key, want_value in (expected or {}).items():
        if meta.get(key) != want_value:
            raise DumpError(
                f"{path}: written for another model/corpus ({key} {meta.get(key)!r}, this run has "
                f"{want_value!r}); delete results/<model>/dumps and rerun"
            )
    return meta, handle


def _quarantine(path: Path) -> Path:
    """Rename a damaged dump file to <name>.corrupt and mark its batch stale, so the next run
    rebuilds it.

    The batch directory stays where it is: jobs of this run already scheduled on it then fail on
    the missing file with the same clear error, where a missing directory would make Snakemake
    wait for it and end in a "Missing files" error. It is made older than its inputs (its
    .snakemake_timestamp, which Snakemake reads as a directory output's time, set to 1970): the
    next run sees it outdated and rebuilds it.
    """
    moved = path.with_name(f"{path.name}.corrupt")
    n = 1
    while moved.exists():
        moved, n = path.with_name(f"{path.name}.corrupt{n}"), n + 1
    os.replace(path, moved)
    batch = path.parent
    if batch.name.startswith("batch"):
        stamp = batch / ".snakemake_timestamp"
        stamp.touch()
        os.utime(stamp, (0, 0))
        os.utime(batch, (0, 0))
    return moved


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
    metadata: dict[str, Any]


_PART_KEYS = ("layer", "chunk", "head", "w", "l", "x", "q", "qa", "k", "qn", "kn", "scale")


def _layer_parts(
    dump_dirs: list[str | os.PathLike],
    length: int,
    embedding: str | None,
    with_logits: bool,
    with_query_keys: bool,
    with_norms: bool,
    expected: dict[str, Any] | None,
    expected_chunks: list[int] | None = None,
):
    """Yield (metadata, parts) per dump file, in (layer, batch) order, after every file's checks.

    ``parts`` maps the keys of ``_PART_KEYS`` to that file's arrays (None when not requested).
    """
    layers = layer_files(dump_dirs, expected, expected_chunks)
    meta0 = None
    for layer, files in layers.items():
        for path in files:
            meta, handle = open_dump(path, expected)
            if meta0 is None:
                meta0 = meta
            elif meta["fingerprint"] != meta0["fingerprint"]:
                raise DumpError(
                    f"{path}: fingerprint differs from {layers[min(layers)][0]}: dumps from two configs are mixed"
                )
            if length not in meta["lengths"]:
                raise DumpError(
                    f"{path}: L={length} was not extracted (dumped lengths: {meta['lengths']})"
                )
            parts: dict[str, list] = {k: [] for k in _PART_KEYS}
            _read_one(
                path,
                handle,
                meta,
                layer,
                length,
                embedding,
                with_logits,
                with_query_keys,
                with_norms,
                parts,
            )
            yield meta, {k: (v[0] if v else None) for k, v in parts.items()}


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
    collected: dict[str, list] = {k: [] for k in _PART_KEYS}
    meta0 = None
    for meta, parts in _layer_parts(
        dump_dirs, length, embedding, with_logits, with_query_keys, with_norms, expected
    ):
        meta0 = meta0 or meta
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
    )


def _read_one(
    path, handle, meta, layer, length, embedding, with_logits, with_query_keys, with_norms, parts
) -> None:
    heads, dh, causal = int(meta["n_heads"]), int(meta["head_dim"]), bool(meta["causal"])
    context = int(meta["chunk_length"]) if causal else length
    chunks = [int(c) for c in meta["chunks"]]
    try:
        rows = _read_selected(
            handle,
            ["chunk", "head", "position", "weights"] + (["logits"] if with_logits else []),
            context,
            length,
            analysed=True,
        )
    except (OSError, pa.ArrowInvalid) as exc:
        raise DumpError(f"{path}: could not be read ({exc}); delete it and rerun") from exc
    expected = len(chunks) * heads
    if rows.num_rows != expected:
        raise DumpError(
            f"{path}: {rows.num_rows} analysed rows for L={length}, expected {expected}"
        )
    n_pass = len(chunks)
    parts["layer"].append(np.full(expected, layer))
    parts["chunk"].append(rows["chunk"].to_numpy())
    parts["head"].append(rows["head"].to_numpy().astype(np.int64))
    parts["w"].append(_list_matrix(rows["weights"], length))
    parts["scale"].append(np.full(expected, float(meta["score_scale"])))
    if with_logits:
        parts["l"].append(_list_matrix(rows["logits"], length))
    query_positions = rows["position"].to_numpy()

    kv_map = np.asarray(meta["kv_head_of_query"])
    vector_cols = []
    if embedding in ("value", "key"):
        vector_cols.append(embedding[0])
    if with_query_keys:
        vector_cols += [c for c in ("q", "k") if c not in vector_cols]
    for col in vector_cols:
        if col not in meta["vectors"]:
            raise DumpError(
                f"{path}: {col} was not stored (extraction.vectors: {meta['vectors']}); add it "
                "and rerun the extraction"
            )
    if with_norms:
        vector_cols += ["q_norm", "k_norm"]
    if embedding == "hidden":
        vector_cols.append("hidden")
    if not vector_cols:
        return
    table = _read_selected(handle, vector_cols + ["head"], context, length, analysed=False)
    hidden_only = vector_cols == ["hidden"]
    if hidden_only:  # hidden states sit on head-0 rows only
        table = table.filter(pc.equal(table["head"], 0))
    per_pass = length * (1 if hidden_only else heads)
    if table.num_rows != n_pass * per_pass:
        raise DumpError(
            f"{path}: {table.num_rows} rows with position < {length}, expected {n_pass * per_pass}"
        )

    def grid(col: str, width: int, kv: bool = False) -> np.ndarray:
        """(chunk, position, head)-sorted rows -> (chunk x query head, position, width); a KV
        column (null off the KV rows) is resolved to each query head through kv_head_of_query."""
        column = table[col].combine_chunks()
        if pa.types.is_fixed_size_list(column.type):
            column = column.flatten()  # skips null rows: the KV columns keep their KV heads
        elif column.null_count:
            column = column.drop_null()
        flat = column.to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
        per_position = len(kv_map) if not kv else int(kv_map.max()) + 1
        cube = flat.reshape(n_pass, length, per_position, width)
        if kv:
            cube = cube[:, :, kv_map]
        return cube.transpose(0, 2, 1, 3).reshape(n_pass * heads, length, width)

    if embedding in ("value", "key"):
        parts["x"].append(grid(embedding[0], dh, kv=True))
    if embedding == "hidden":
        if not meta["store_hidden"]:
            raise DumpError(
                f"{path}: no hidden states stored; set analysis.embedding before extraction"
            )
        hid = table if hidden_only else table.filter(pc.equal(table["head"], 0))
        hid = hid["hidden"].combine_chunks().flatten().to_numpy()
        hid = hid.reshape(n_pass, length, 1, -1)
        parts["x"].append(
            np.repeat(hid, heads, axis=2).transpose(0, 2, 1, 3).reshape(n_pass * heads, length, -1)
        )
    if with_norms:
        k_norm = grid("k_norm", 1, kv=True)[:, :, 0]
        q_norm = grid("q_norm", 1)[:, :, 0]
        parts["kn"].append(k_norm.max(axis=1))
        parts["qn"].append(q_norm[np.arange(len(query_positions)), query_positions])
    if with_query_keys:
        keys = grid("k", dh, kv=True)
        queries = grid("q", dh)
        parts["k"].append(keys)
        parts["qa"].append(queries)
        parts["q"].append(queries[np.arange(len(query_positions)), query_positions])


def _row_group_stats(handle: pq.ParquetFile) -> list[dict[str, tuple]]:
    """(min, max) of the indexed columns for every row group, from the footer alone."""
    md = handle.metadata
    names = [md.schema.column(i).path for i in range(md.num_columns)]
    out = []
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        stats = {}
        for col in ("context_length", "position", "analysed_length"):
            st = rg.column(names.index(col)).statistics
            stats[col] = (st.min, st.max) if st is not None and st.has_min_max else (None, None)
        out.append(stats)
    return out


def _read_selected(
    handle: pq.ParquetFile, columns: list[str], context: int, length: int, analysed: bool
) -> pa.Table:
    """Rows of the pass with ``context_length == context`` and, either, position < ``length``
    (analysed=False) or ``analysed_length == length`` (analysed=True).

    Row groups are chosen from footer statistics (a row group never spans two passes and starts at
    a multiple of 128 positions), so nothing outside them is decoded; within the chosen groups the
    rows are cut by position, not by a per-row filter, which would copy every column.
    """
    wanted = []
    for g, st in enumerate(_row_group_stats(handle)):
        lo_ctx, hi_ctx = st["context_length"]
        if lo_ctx != context or hi_ctx != context:
            continue
        if analysed:
            lo, hi = st["analysed_length"]
            if lo is not None and lo <= length <= hi:
                wanted.append(g)
        elif st["position"][0] < length:
            wanted.append(g)
    table = handle.read_row_groups(
        wanted,
        columns=columns + (["analysed_length"] if analysed else ["position"]),
        use_threads=True,
    )
    if analysed:
        table = table.filter(pc.equal(table["analysed_length"], length))
        return table.drop_columns(["analysed_length"])
    positions = table["position"].to_numpy()
    if positions.size and positions.max() >= length:
        keep = positions < length
        table = table.filter(pa.array(keep))
    return table.drop_columns(["position"])


def _list_matrix(col: pa.ChunkedArray, length: int) -> np.ndarray:
    flat = col.combine_chunks().flatten().to_numpy()
    return flat.reshape(-1, length)


# ---------------------------------------------------------------------------------------- batch


def write_batch(
    out_dir: Path,
    model,
    chunks: dict[int, np.ndarray],
    lengths: list[int],
    *,
    query_row: str,
    store_hidden: bool,
    provenance: dict[str, Any],
    extra_metadata: dict[str, Any],
    vectors: tuple[str, ...] = VECTOR_COLUMNS,
    vector_dtype: str = "float32",
    compression: str | None = "zstd",
    compression_level: int | None = 1,
    progress=None,
    write_threads: int = 2,
    closing_tokens: tuple[int, ...] = (),
) -> None:
    """Run the model (loaded with the capture attention) over ``chunks`` (chunk index -> token
    ids) and write layerNN.parquet files into ``out_dir`` (which must exist).
    ``progress(chunk, seconds)`` is called after each chunk; ``closing_tokens`` as in
    attnlimits.extraction.extract_chunk."""
    import time

    import torch

    from attnlimits.extraction import extract_chunk, model_shape

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
                "lengths": [int(L) for L in lengths],
                "query_row": query_row,
                "store_hidden": store_hidden,
                "causal": shape.causal,
                "n_heads": shape.n_heads,
                "n_kv_heads": shape.n_kv_heads,
                "kv_head_of_query": list(shape.kv_head_of_query),
                "head_dim": shape.head_dim,
                "d_model": d_model,
                "vectors": [c for c in VECTOR_COLUMNS if c in vectors],
                "vector_dtype": vector_dtype,
            }
            writers[layer] = LayerDumpWriter(
                Path(out_dir) / f"layer{layer:02d}.parquet", meta, compression, compression_level
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
                extract_chunk(model, tokens, lengths, query_row, store_hidden, closing_tokens)
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


def _write_passes(writer: LayerDumpWriter, chunk: int, token_ids: np.ndarray, captures) -> None:
    for capture in captures:
        writer.write_pass(chunk, token_ids, capture)


# ----------------------------------------------------------------------------------- sample packs

# pack file -> key of the per-file parts (see _layer_parts)
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


def write_pack(samples: Samples, out_dir: Path) -> None:
    """Store one L's samples as .npy files that analysis jobs memory-map instead of decoding Parquet.

    The query and keys enter only through what the analyses use (|q| and max_i |k_i|).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in PACK_ARRAYS:
        np.save(out_dir / f"{name}.npy", np.ascontiguousarray(getattr(samples, name)))
    (out_dir / "metadata.json").write_text(
        json.dumps({"length": samples.length, **samples.metadata}, sort_keys=True)
    )


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
    for meta, parts in _layer_parts(
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
