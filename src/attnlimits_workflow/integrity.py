"""Checksums of the files a job writes for other jobs to read: the dumps' layer files and the
sample packs' arrays.

Each folder (a dump batch, a sample pack) holds a ``checksums.json`` written last, recording every
file's size and CRC-32 (zlib's, the polynomial Parquet's page checksums use). CRC-32 is there to
catch what happens to files that sit on disks for days (bit rot, a half-synced copy, a file
rewritten in place), not tampering, and it runs at ~3.6 GB/s on one core (docs/performance.md).

A reader verifies every file it opens before it decodes a byte, so that a damaged footer, page
header or data page is refused alike; Parquet's own page checksums (written too) cover only the
data pages. Pure standard library: analysis jobs import this through packs.py without pyarrow.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MANIFEST = "checksums.json"
ALGORITHM = "crc32"
_BLOCK = 64 << 20  # zlib.crc32 releases the GIL on each block: files are hashed in parallel
_log = logging.getLogger("attnlimits.integrity")
# (path, size, mtime_ns, inode) -> crc already computed in this process: the readers of a job
# list a batch's files several times (layer_files, then each layer_parts pass)
_verified: dict[tuple[str, int, int, int], str] = {}
_warned: set[str] = set()


class ChecksumMismatch(Exception):
    """A file whose bytes differ from those recorded when it was written (``path``, ``detail``)."""

    def __init__(self, path: Path, detail: str):
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.detail = detail


class MissingFile(ChecksumMismatch):
    """A file the manifest lists that is not there (deleted, or set aside by another job)."""


def file_crc32(path: str | os.PathLike) -> str:
    """The CRC-32 of the file's bytes, as 8 hex digits."""
    crc = 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return f"{crc:08x}"
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            with memoryview(mapped) as view:  # slices of a memoryview are not copies
                for start in range(0, size, _BLOCK):
                    crc = zlib.crc32(view[start : start + _BLOCK], crc)
    return f"{crc:08x}"


def _crc_or_none(path: Path) -> str | None:
    try:
        return file_crc32(path)
    except FileNotFoundError:
        return None


def _crcs(paths: list[Path], threads: int) -> list[str | None]:
    """Each file's CRC-32, None for a file that is gone."""
    if threads <= 1 or len(paths) <= 1:
        return [_crc_or_none(p) for p in paths]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="crc32") as pool:
        return list(pool.map(_crc_or_none, paths))


def write_checksums(folder: str | os.PathLike, names: list[str], threads: int = 2) -> Path:
    """Record the size and CRC-32 of ``names`` (files in ``folder``) in folder/checksums.json,
    written last and atomically, and return its path."""
    folder = Path(folder)
    paths = [folder / n for n in sorted(names)]
    records = {
        p.name: {"bytes": p.stat().st_size, ALGORITHM: crc}
        for p, crc in zip(paths, _crcs(paths, threads), strict=True)
    }
    if None in (r[ALGORITHM] for r in records.values()):
        raise FileNotFoundError(f"{folder}: a file vanished while its checksum was taken")
    target = folder / MANIFEST
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps({"algorithm": ALGORITHM, "files": records}, indent=1, sort_keys=True))
    os.replace(tmp, target)
    return target


def read_checksums(folder: str | os.PathLike) -> dict[str, dict] | None:
    """name -> {"bytes", "crc32"} from folder/checksums.json; None where the folder has none (it
    was written before checksums were). A manifest that does not parse raises ChecksumMismatch."""
    path = Path(folder) / MANIFEST
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        recorded = json.loads(raw)
        if recorded["algorithm"] != ALGORITHM:
            raise ValueError(f"algorithm {recorded['algorithm']!r}, not {ALGORITHM!r}")
        files = recorded["files"]
        for name, entry in files.items():
            if not isinstance(name, str) or set(entry) != {"bytes", ALGORITHM}:
                raise ValueError(f"entry {name!r}: {entry!r}")
            int(entry["bytes"]), int(entry[ALGORITHM], 16)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ChecksumMismatch(path, f"damaged checksum manifest ({exc})") from None
    return files


def verify_files(
    folder: str | os.PathLike, names: list[str], recorded: dict[str, dict], threads: int = 2
) -> None:
    """Raise ChecksumMismatch for the first of ``names`` (files in ``folder``) whose size or CRC-32
    differs from ``recorded`` (read_checksums), or which it does not list."""
    folder = Path(folder)
    todo: list[tuple[Path, tuple, str]] = []
    for name in names:
        path = folder / name
        entry = recorded.get(name)
        if entry is None:
            raise ChecksumMismatch(path, f"not listed in {MANIFEST} (a file from another run?)")
        try:
            st = path.stat()
        except FileNotFoundError:
            raise MissingFile(path, f"missing, though {MANIFEST} lists it") from None
        if st.st_size != int(entry["bytes"]):
            raise ChecksumMismatch(
                path, f"{st.st_size} bytes, {MANIFEST} records {entry['bytes']} (truncated?)"
            )
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
        if _verified.get(key) != entry[ALGORITHM]:
            todo.append((path, key, entry[ALGORITHM]))
    for (path, key, want), got in zip(todo, _crcs([t[0] for t in todo], threads), strict=True):
        if got is None:  # gone since its stat: another job set it aside
            raise MissingFile(path, f"missing, though {MANIFEST} lists it")
        if got != want:
            raise ChecksumMismatch(
                path, f"CRC-32 {got}, {MANIFEST} records {want}: changed since it was written"
            )
        _verified[key] = got


def warn_unverified(folder: str | os.PathLike, what: str) -> None:
    """Note once in the job's log that ``folder`` (written before checksums were) is read
    unverified. The run says it once for all such folders, at its start (unverifiable_folders)."""
    key = str(folder)
    if key not in _warned:
        _warned.add(key)
        _log.info(
            "%s: %s written without %s: its files cannot be verified and are read as they are",
            folder,
            what,
            MANIFEST,
        )


def unverifiable_folders(folders: list[str | os.PathLike]) -> list[Path]:
    """The finished folders (directory outputs Snakemake stamped) that have no checksums.json:
    written before checksums were, read unverified."""
    return [
        Path(f)
        for f in folders
        if (Path(f) / ".snakemake_timestamp").exists() and not (Path(f) / MANIFEST).exists()
    ]


def refresh_changed_folders(folders: list[str | os.PathLike], slack_s: float = 1.0) -> list[Path]:
    """Folders (directory outputs) holding a file modified after the folder's job finished: its
    ``.snakemake_timestamp`` (the time Snakemake gives a directory output) is moved to now, so
    that Snakemake reruns the jobs that read the folder, and they verify its files.

    A file rewritten inside a directory output moves neither the folder's time nor that stamp's,
    so without this Snakemake would see nothing to do. Cheap: one stat per file. It sees a file
    whose time moved (a rewrite, an edit): bit rot, or a change that restored the old time
    (cp -p, rsync -a), is seen only by the checksums, when a reader next runs. A copy that does
    not keep times (cp without -p) makes every file newer: the readers rerun once and find the
    checksums sound.
    """
    refreshed = []
    for folder in map(Path, folders):
        stamp = folder / ".snakemake_timestamp"
        try:
            stamped = stamp.stat().st_mtime
        except FileNotFoundError:
            continue
        if stamped == 0:  # aged by a job that set a file aside: it is rebuilt anyway
            continue
        newest = 0.0
        for p in folder.iterdir():
            try:  # a job of a running workflow may be setting a file aside right now
                if p != stamp and p.is_file():
                    newest = max(newest, p.stat().st_mtime)
            except FileNotFoundError:
                continue
        if newest > stamped + slack_s:
            os.utime(stamp)
            refreshed.append(folder)
    return refreshed
