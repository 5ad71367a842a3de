"""Reading dumps: a batch's layer files, each checked against the schema and the run's
fingerprint, and one L's analysis samples decoded from them (only the rows and columns asked for)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..integrity import (
    MANIFEST,
    ChecksumMismatch,
    MissingFile,
    read_checksums,
    verify_files,
    warn_unverified,
)
from ..packs import DumpError, age_folder, clear_damage, set_aside, set_aside_earlier
from .schema import LAYER_COLUMNS, META_KEY, SCHEMA_SPEC, arrow_schema


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
        set_aside_earlier(Path(d), "batch")
        if not files:
            raise DumpError(
                f"{d}: no layer*.parquet files; delete the directory and rerun to rebuild it"
            )
        verify_batch(Path(d), files)
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


def verify_batch(batch: Path, files: list[Path]) -> None:
    """Verify a batch's layer files against its checksums.json before any is decoded (footers,
    page headers and pages alike). A file that fails is set aside and its batch aged (the next
    run rebuilds it); a batch written before checksums were is read with one warning."""
    try:
        recorded = read_checksums(batch)
        if recorded is not None:
            verify_files(batch, [f.name for f in files], recorded)
            clear_damage(batch, [f.name for f in files])
            return
    except MissingFile as exc:
        set_aside_earlier(batch, "batch")  # another job of this run set it aside
        raise DumpError(f"{exc}: {_rebuild(batch)}") from None
    except ChecksumMismatch as exc:
        moved = _quarantine(exc.path)
        raise DumpError(
            f"{exc}; set aside as {moved.name}. Rerun the workflow to rebuild the batch"
        ) from None
    if read_metadata(files[0]).get("checksums"):
        age_folder(batch)
        raise DumpError(
            f"{batch / MANIFEST}: missing, so the batch cannot be verified; the batch is marked "
            "outdated: rerun the workflow to rebuild it"
        )
    warn_unverified(batch, "a dump batch")


def _rebuild(batch: str | os.PathLike) -> str:
    return f"delete {batch} and rerun to rebuild it"


def read_metadata(path: Path, expected: dict[str, Any] | None = None) -> dict[str, Any]:
    """The dump's metadata, after the checks of :func:`open_dump`."""
    return open_dump(path, expected)[0]


def open_dump(
    path: Path, expected: dict[str, Any] | None = None
) -> tuple[dict[str, Any], pq.ParquetFile]:
    """Open a dump, check its schema against dump_schema.json and its provenance; return metadata.

    It does not verify the batch's checksums.json: readers go through layer_files (or
    verify_batch) first, which does, before any footer is read.

    ``expected`` maps metadata fields (e.g. weights_sha256, tokens_fingerprint) to the values of
    the current run: a dump of another model or corpus is refused, never mixed in.

    A truncated or corrupt file is renamed to <name>.corrupt, so that the next run of the workflow
    sees it missing and rebuilds it, and a DumpError naming the file is raised.
    """
    try:
        # reads the footer (catches truncation); each page read is checked against its CRC
        handle = pq.ParquetFile(path, page_checksum_verification=True)
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
    try:
        meta = json.loads(raw)
        version = meta.get("schema_version")
        if version == SCHEMA_SPEC["schema_version"]:
            want = arrow_schema(int(meta["head_dim"]), int(meta["d_model"]), meta["vector_dtype"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # flipped bytes in the footer
        moved = _quarantine(path)
        raise DumpError(
            f"{path}: damaged dump metadata ({type(exc).__name__}: {exc}); set aside as "
            f"{moved.name}. Rerun the workflow to rebuild it"
        ) from None
    if version != SCHEMA_SPEC["schema_version"]:
        raise DumpError(
            f"{path}: dump schema_version {meta.get('schema_version')}, this version of the "
            f"workflow reads {SCHEMA_SPEC['schema_version']} (docs/dumps.md): delete results/<model>/dumps "
            "and results/<model>/samples and rerun to rebuild them"
        )
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
    """Set a damaged dump file aside as <name>.corrupt and mark its batch stale, so the next run
    rebuilds it (packs.set_aside, which also stops a second rebuild of the same file).

    The batch directory stays where it is: jobs of this run already scheduled on it then fail on
    the missing file with the same clear error, where a missing directory would make Snakemake
    wait for it and end in a "Missing files" error. It is made older than its inputs (its
    .snakemake_timestamp, which Snakemake reads as a directory output's time, set to 1970): the
    next run sees it outdated and rebuilds it.
    """
    return set_aside(path, age=path.parent.name.startswith("batch"))


# "x": the embedding's distinct vectors (one per chunk for a layer column, one per (chunk, KV
# head) for keys and values); "xi": each sample's row of "x" (shared_x expands them).
PART_KEYS = ("layer", "chunk", "head", "w", "l", "x", "xi", "q", "qa", "k", "qn", "kn", "scale")


def distinct_x_rows(meta: dict[str, Any], embedding: str | None) -> int:
    """How many distinct x vectors (each L x width) a dump file holds for ``embedding``: the
    query heads of a chunk share its layer column (hidden, attention_input), and those of a KV
    head share its keys and values, so a pack stores each once (parts "x" and "xi")."""
    chunks = len(meta["chunks"])
    if embedding in LAYER_COLUMNS:
        return chunks
    if embedding in ("value", "key"):
        return chunks * (int(max(meta["kv_head_of_query"])) + 1)
    return 0


def shared_x(parts: dict[str, np.ndarray | None]) -> np.ndarray | None:
    """One x per sample, (samples, L, width), from a part's distinct vectors and their index."""
    if parts["x"] is None:
        return None
    return parts["x"][parts["xi"]]


def layer_parts(
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

    ``parts`` maps the keys of ``PART_KEYS`` to that file's arrays (None when not requested).
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
            parts: dict[str, list] = {k: [] for k in PART_KEYS}
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


def _read_one(
    path, handle, meta, layer, length, embedding, with_logits, with_query_keys, with_norms, parts
) -> None:
    heads, dh, causal = int(meta["n_heads"]), int(meta["head_dim"]), bool(meta["causal"])
    context = int(meta["chunk_length"]) if causal else length
    chunks = [int(c) for c in meta["chunks"]]
    rows = _read_or_set_aside(
        path,
        handle,
        ["chunk", "head", "position", "weights"] + (["logits"] if with_logits else []),
        context,
        length,
        analysed=True,
    )
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
    layer_column = embedding if embedding in LAYER_COLUMNS else None
    if layer_column is not None:
        if not meta.get(LAYER_COLUMNS[layer_column]):
            raise DumpError(
                f"{path}: no {layer_column} vectors stored; set analysis.embedding: "
                f"{layer_column} before extraction"
            )
        vector_cols.append(layer_column)
    if not vector_cols:
        return
    table = _read_or_set_aside(
        path, handle, vector_cols + ["head"], context, length, analysed=False
    )
    layer_only = vector_cols == [layer_column]
    if layer_only:  # d_model-wide vectors sit on head-0 rows only
        table = table.filter(pc.equal(table["head"], 0))
    per_pass = length * (1 if layer_only else heads)
    if table.num_rows != n_pass * per_pass:
        raise DumpError(
            f"{path}: {table.num_rows} rows with position < {length}, expected {n_pass * per_pass}"
        )

    def grid(col: str, width: int, kv: bool | str = False) -> np.ndarray:
        """(chunk, position, head)-sorted rows -> (chunk x query head, position, width); a KV
        column (null off the KV rows) is resolved to each query head through kv_head_of_query,
        or with kv="distinct" kept as (chunk x KV head, position, width)."""
        column = table[col].combine_chunks()
        if pa.types.is_fixed_size_list(column.type):
            column = column.flatten()  # skips null rows: the KV columns keep their KV heads
        elif column.null_count:
            column = column.drop_null()
        flat = column.to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
        per_position = len(kv_map) if not kv else int(kv_map.max()) + 1
        cube = flat.reshape(n_pass, length, per_position, width)
        if kv == "distinct":
            return cube.transpose(0, 2, 1, 3).reshape(-1, length, width)
        if kv:
            cube = cube[:, :, kv_map]
        return cube.transpose(0, 2, 1, 3).reshape(n_pass * heads, length, width)

    passes = np.arange(n_pass)[:, None]
    if embedding in ("value", "key"):  # once per (chunk, KV head): GQA's query heads share it
        parts["x"].append(grid(embedding[0], dh, kv="distinct"))
        parts["xi"].append((passes * (int(kv_map.max()) + 1) + kv_map[None, :]).reshape(-1))
    if layer_column is not None:  # one vector per position, shared by the layer's heads
        head0 = table if layer_only else table.filter(pc.equal(table["head"], 0))
        flat = head0[layer_column].combine_chunks().flatten().to_numpy()
        parts["x"].append(flat.reshape(n_pass, length, -1))
        parts["xi"].append(np.repeat(passes, heads, axis=1).reshape(-1))
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


# pyarrow before 26 cannot read a null entry of a fixed-size list column from Parquet
# (apache/arrow#35692, fixed by apache/arrow#50271), and a dump has such entries: k and v of the
# query heads that share a KV head, hidden and attention_input where they are not stored.
PYARROW_NULL_FIXED_LISTS = 26


def pyarrow_reads_null_fixed_lists(version: str = pa.__version__) -> bool:
    """Whether this pyarrow reads a dump's null fixed-size list entries (see above)."""
    return int(version.split(".")[0]) >= PYARROW_NULL_FIXED_LISTS


def _read_or_set_aside(
    path, handle: pq.ParquetFile, columns: list[str], context: int, length: int, analysed: bool
) -> pa.Table:
    """:func:`_read_selected`, with a damaged page past a readable footer set aside like a
    truncated file and named in one line. A sound dump that this pyarrow cannot read is not set
    aside: rebuilding it would fail the same way, forever."""
    try:
        return _read_selected(handle, columns, context, length, analysed)
    except (OSError, pa.ArrowInvalid) as exc:
        if not pyarrow_reads_null_fixed_lists() and "Expected all lists to be of size" in str(exc):
            raise DumpError(
                f"{path}: pyarrow {pa.__version__} cannot read its null fixed-size lists "
                f"(apache/arrow#35692); install pyarrow>={PYARROW_NULL_FIXED_LISTS}"
            ) from exc
        moved = _quarantine(Path(path))
        raise DumpError(
            f"{path}: could not be read ({exc}); set aside as {moved.name}. Rerun the workflow "
            "to rebuild it"
        ) from exc


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
