"""Corpus acquisition: download with a pinned checksum, or read a local file."""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from pathlib import Path


class CorpusError(RuntimeError):
    """The corpus cannot be obtained or decoded; the message says how to fix it."""


def download(url: str, expected_sha256: str | None, timeout: float = 20.0) -> bytes:
    """Fetch ``url`` and verify its sha256; raise CorpusError with advice on any failure."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            data = resp.read()
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CorpusError(
            f"could not download {url}: {reason}. Offline? Set corpus.path to a local copy of the text"
        ) from exc
    digest = hashlib.sha256(data).hexdigest()
    if expected_sha256 and digest != expected_sha256.lower():
        raise CorpusError(
            f"sha256 mismatch for {url}: expected {expected_sha256}, got {digest}. The file changed "
            "upstream or the download was corrupted; set corpus.sha256 to accept it, or corpus.path to a local copy"
        )
    return data


def read_local(path: str | Path) -> bytes:
    p = Path(path)
    if not p.is_file():
        raise CorpusError(f"corpus.path: {p} does not exist or is not a file")
    return p.read_bytes()


def decode(data: bytes, encoding: str, where: str) -> str:
    """Decode strictly: a wrong encoding is an error naming the byte offset, never mojibake."""
    try:
        return data.decode(encoding).lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        raise CorpusError(
            f"{where}: not valid {encoding} at byte {exc.start} ({data[exc.start : exc.start + 4]!r}); "
            "set corpus.encoding (e.g. latin-1) or convert the file with iconv"
        ) from exc
