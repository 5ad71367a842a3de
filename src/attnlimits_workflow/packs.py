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

from .integrity import (
    MANIFEST,
    ChecksumMismatch,
    MissingFile,
    read_checksums,
    verify_files,
    warn_unverified,
)


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
# Each layer file's normalizer metadata (docs/dumps.md), copied per layer into the pack's
# metadata.json under "layers" (layer index -> these keys; null where the dump has none).
LAYER_KEYS = (
    "position_embedding",
    "sink_logits",
    "differential_lambda",
    "differential_pairs",
    "query_temperature",
    "softcap",
    "sliding_window",
)
# the per-sample values Pack.per_sample gives (LayerNormalizer.value of the sample's head)
SAMPLE_FIELDS = (
    "position_embedding",
    "sink_logit",
    "differential_lambda",
    "differential_partner",
    "query_temperature",
    "softcap",
    "sliding_window",
)


@dataclass(frozen=True)
class LayerNormalizer:
    """One layer's normalizer metadata at one L, as its dump files record it (docs/dumps.md,
    docs/paper-notes.md sections 12-14); None where the layer has none, or where the dump (or
    the pack) predates the key."""

    position_embedding: str | None = None  # "rotary", "none" (a NoPE layer) or "absolute"
    sink_logits: tuple[float, ...] | None = None  # GPT-OSS: one learned sink logit per head
    differential_lambda: float | None = None  # DiffLlama: A_h - lambda A_h'
    differential_pairs: tuple[tuple[int, int], ...] | None = None  # DiffLlama: (h, h') pairs
    # Llama 4 NoPE layers: the query scale of this L's analysed row (the dump's
    # query_temperature "analysed" entry for this L)
    query_temperature: float | None = None
    softcap: float | None = None
    sliding_window: int | None = None

    @classmethod
    def of(cls, recorded: dict[str, Any], length: int, lengths: list[int]) -> LayerNormalizer:
        """From a pack's "layers" entry (``recorded``) for the pack's L, the dump's ``lengths``
        fixing which analysed row's query temperature is this L's."""
        sinks = recorded.get("sink_logits")
        pairs = recorded.get("differential_pairs")
        tuning = recorded.get("query_temperature")
        return cls(
            position_embedding=recorded.get("position_embedding"),
            sink_logits=None if sinks is None else tuple(float(s) for s in sinks),
            differential_lambda=recorded.get("differential_lambda"),
            differential_pairs=None if pairs is None else tuple((int(a), int(b)) for a, b in pairs),
            query_temperature=None
            if tuning is None
            else float(tuning["analysed"][list(lengths).index(length)]),
            softcap=recorded.get("softcap"),
            sliding_window=recorded.get("sliding_window"),
        )

    def value(self, field: str, head: int) -> Any:
        """The value of ``field`` (one of SAMPLE_FIELDS) for query head ``head`` of this layer:
        its sink logit, its differential partner (the other head of its pair), or a layer-wide
        value; None where the layer has none."""
        if field == "sink_logit":
            return None if self.sink_logits is None else self.sink_logits[head]
        if field == "differential_partner":
            if self.differential_pairs is None:
                return None
            return next(
                (b if a == head else a for a, b in self.differential_pairs if head in (a, b)), None
            )
        if field not in SAMPLE_FIELDS:
            raise KeyError(f"{field!r} is not one of {SAMPLE_FIELDS}")
        return getattr(self, field)


class SharedRows:
    """Per-sample rows stored once each (a pack's x: pack_dumps): indexed like the (S, L, width)
    array ``rows[index]`` without building it; an integer, a slice or an index array gives an
    ndarray."""

    def __init__(self, rows: np.ndarray, index: np.ndarray):
        self.rows, self.index = rows, index

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.index), *self.rows.shape[1:])

    @property
    def ndim(self) -> int:
        return self.rows.ndim

    @property
    def dtype(self) -> np.dtype:
        return self.rows.dtype

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, tuple):
            first, *rest = key
            if not all(isinstance(k, int | np.integer | slice) for k in rest):
                # numpy pairs several index arrays element by element; one by one, as here,
                # would give their outer product instead: refused rather than wrong
                raise IndexError("SharedRows: only integers and slices after the first index")
            return self[first][(slice(None), *rest) if np.ndim(self.index[first]) else tuple(rest)]
        at = self.index[key]
        if np.ndim(at) == 0:
            return self.rows[int(at)]
        at = np.asarray(at)
        if len(at) and at[-1] - at[0] == len(at) - 1 and np.all(np.diff(at) == 1):
            return self.rows[int(at[0]) : int(at[-1]) + 1]  # consecutive: a view, no copy
        return self.rows[at]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.rows[np.asarray(self.index)]
        return out if dtype is None else out.astype(dtype)


def distinct_rows(x: np.ndarray | SharedRows) -> tuple[np.ndarray, np.ndarray]:
    """A pack's x as its distinct vectors and each sample's row of them (every row its own in
    an array, or in a pack written before x was stored once per vector)."""
    if isinstance(x, SharedRows):
        return x.rows, np.asarray(x.index)
    return x, np.arange(len(x))


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
    x: np.ndarray | SharedRows  # (S, L, d) float32
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

    def layer_normalizer(self, layer: int) -> LayerNormalizer:
        """Layer ``layer``'s normalizer metadata at this pack's L (all None in a pack written
        before packs recorded them per layer)."""
        recorded = self.metadata.get("layers", {}).get(str(int(layer)), {})
        return LayerNormalizer.of(recorded, self.length, self.metadata.get("lengths", []))

    def normalizer(self, sample: int) -> LayerNormalizer:
        """The normalizer metadata of ``sample``'s layer."""
        return self.layer_normalizer(int(self.layer[sample]))

    def per_sample(self, field: str) -> np.ndarray:
        """``field`` (one of SAMPLE_FIELDS) for every sample, aligned with the pack's samples:
        position_embedding as an object array (None where unrecorded), every other field as
        float64 with NaN where the sample's layer has none."""
        if field not in SAMPLE_FIELDS:
            raise KeyError(f"{field!r} is not one of {SAMPLE_FIELDS}")
        layer, head = np.asarray(self.layer), np.asarray(self.head)
        text = field == "position_embedding"
        out = np.full(len(layer), None if text else np.nan, dtype=object if text else np.float64)
        for lay in np.unique(layer).tolist():
            normalizer = self.layer_normalizer(lay)
            at = np.nonzero(layer == lay)[0]
            for h in np.unique(head[at]).tolist():
                value = normalizer.value(field, h)
                if value is not None:
                    out[at[head[at] == h]] = value
        return out


def read_pack(pack_dir: str | os.PathLike, embedding: str | None = None) -> Pack:
    """One L's pack, memory-mapped, its x that of ``embedding`` (None: the one the pack was made
    for, x.npy; another: x_<embedding>.npy, packed for a reading of analysis.readings; a pack
    without it raises DumpError).

    Every file it maps is first verified against the pack's checksums.json (integrity.py); a pack
    written before packs had one is read with one warning. A damaged pack (a file that fails its
    checksum, unreadable, truncated, or of the wrong shape) raises DumpError naming the file,
    which is set aside as <name>.corrupt and its pack made stale (set_aside), so that the next
    run rebuilds the pack, as a damaged dump's batch."""
    d = Path(pack_dir)
    current = d / "metadata.json"
    set_aside_earlier(d, "pack")
    try:
        recorded = read_checksums(d)
        if recorded is not None:  # the metadata first: a damaged one may name other files
            verify_files(d, [current.name], recorded)
        meta = json.loads(current.read_text())
        length = int(meta["length"])
        x_file = pack_x_file(d, meta, embedding)
        files = {
            name: d / (x_file if name == "x" else f"{name}.npy")
            for name in PACK_ARRAYS + ROW_ARRAYS
        }
        files["x_index"] = d / x_index_file(x_file)
        listed = recorded or {}
        files = {
            k: f
            for k, f in files.items()
            if k in PACK_ARRAYS or f.name in listed or (recorded is None and f.exists())
        }
        if recorded is not None:
            verify_files(d, [f.name for f in files.values()], recorded)
            clear_damage(d, [current.name, *(f.name for f in files.values())])
        elif meta.get("checksums"):
            age_folder(d)
            raise DumpError(
                f"{d / MANIFEST}: missing, so the pack cannot be verified; the pack is marked "
                "outdated: rerun the workflow to rebuild it"
            )
        else:
            warn_unverified(d, "a sample pack")
        arrays = {}
        for name, current in files.items():
            arrays[name] = np.load(current, mmap_mode="r")
        current = pack_shape_problem(d, arrays, length)
        if current is not None and current.name.startswith("x"):
            current = d / current.name.replace("x", x_file.removesuffix(".npy"), 1)
        if current is not None:
            raise ValueError("its shape does not match the pack's other arrays")
        if "x_index" in arrays:  # a pack written before x was stored once per vector has none
            arrays["x"] = SharedRows(arrays["x"], arrays.pop("x_index"))
    except DumpError:
        raise
    except MissingFile as exc:
        set_aside_earlier(d, "pack")  # another job of this run set it aside
        age_folder(d)
        raise DumpError(
            f"{exc}: the pack is marked outdated; rerun the workflow to rebuild it"
        ) from None
    except ChecksumMismatch as exc:
        moved = set_aside(exc.path)
        raise DumpError(
            f"{exc}; set aside as {moved.name}. Rerun the workflow to rebuild the pack"
        ) from None
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
    x, index = arrays["x"], arrays.get("x_index")
    if index is not None:
        if index.shape != (n,) or index.dtype.kind not in "iu":
            return d / "x_index.npy"
        if n and (int(index.min()) < 0 or int(index.max()) >= len(x)):
            return d / "x_index.npy"
    if x.ndim != 3 or x.shape[1] != length or (index is None and x.shape[0] != n):
        return d / "x.npy"
    return None


def x_index_file(x_file: str) -> str:
    """The file of each sample's row of ``x_file`` (x_index.npy, x_<embedding>_index.npy)."""
    return x_file.removesuffix(".npy") + "_index.npy"


def set_aside_earlier(folder: Path, what: str) -> None:
    """Raise DumpError naming the files of ``folder`` that a job (of this run, or of an earlier
    one) set aside as damaged; jobs that read a folder in parallel then all end on one line."""
    damaged = sorted(p.name for p in folder.glob("*.corrupt*"))
    if damaged:
        raise DumpError(
            f"{folder}: {', '.join(damaged)} set aside as damaged by a job that read it (see "
            f"the error naming its file); rerun the workflow to rebuild the {what}"
        )


def clear_damage(folder: Path, names: list[str]) -> None:
    """Drop ``names`` from the folder's damage record once a reader has verified them: a file
    rebuilt and read sound is no longer one damage away from stopping the run (set_aside)."""
    record = damage_record(folder)
    if not record.exists():
        return
    try:
        listed = record.read_text().split()
    except FileNotFoundError:
        return
    kept = [n for n in listed if n not in set(names)]
    if kept == listed:
        return
    tmp = record.with_name(f".{record.name}.{os.getpid()}")
    tmp.write_text("".join(f"{n}\n" for n in kept))
    os.replace(tmp, record)
    if not kept:
        record.unlink(missing_ok=True)


def damage_record(folder: Path) -> Path:
    """The file beside a directory output that lists the files set aside from it: <folder>.damaged.
    It outlives the folder, which Snakemake deletes before it rebuilds it."""
    return folder.with_name(f"{folder.name}.damaged")


def set_aside(path: Path, age: bool = True) -> Path:
    """Rename a damaged file of a directory output (a pack's, a dump batch's) to <name>.corrupt
    (set_aside_file), record it in the folder's damage record, and age the folder (its
    .snakemake_timestamp, which Snakemake reads as a directory output's time, set to 1970), so
    the next run sees it outdated and rebuilds it.

    A rebuild never loops: when the record still lists the file (no reader has verified a
    rebuilt copy since: clear_damage), this file is the rebuilt copy damaged again, which points
    at the storage or the writer. Then nothing is moved or aged, and the DumpError says so and
    what to do: every later run stops at the same line until someone acts."""
    record = damage_record(path.parent)
    listed = record.read_text().split() if record.exists() else []
    if path.name in listed and path.exists():
        raise DumpError(
            f"{path}: damaged again after it was rebuilt (the first damage is recorded in "
            f"{record}). The storage may be failing, so the workflow stops instead of rebuilding "
            f"it once more: check the disk, then delete {path.parent} and {record} and rerun"
        )
    moved = set_aside_file(path)
    if moved != path:
        with open(record, "a") as f:
            f.write(f"{path.name}\n")
    if age and path.parent.is_dir():
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
