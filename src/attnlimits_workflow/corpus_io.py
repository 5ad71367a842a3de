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
            f"could not download {url}: {reason}. Offline? Run the offline quick start "
            "(--configfile config/offline.yaml), or set corpus.path to a local copy of the text, "
            "or corpus.bundled: python_docs"
        ) from exc
    digest = hashlib.sha256(data).hexdigest()
    if expected_sha256 and digest != expected_sha256.lower():
        raise CorpusError(
            f"sha256 mismatch for {url}: expected {expected_sha256}, got {digest}. The file changed "
            "upstream or the download was corrupted; set corpus.sha256 to accept it, or corpus.path to a local copy"
        )
    return data


# The second text: documentation every Python ships (the Language Reference topics that pydoc
# prints), a genre far from a novel, on every offline machine that runs this workflow.
PYTHON_DOCS = "python_docs"


def python_docs() -> tuple[bytes, str]:
    """The Language Reference topics bundled with this Python (``pydoc_data.topics``), in sorted
    topic order, as UTF-8 bytes, and where they came from (the Python version: another version
    ships another text, so the corpus file's sha256 is what a rerun must match)."""
    import platform

    try:
        from pydoc_data.topics import topics
    except ImportError as exc:  # a stripped-down Python without its documentation data
        raise CorpusError(
            "corpus.bundled: python_docs: this Python has no pydoc_data.topics; "
            "set corpus.path to a local text instead"
        ) from exc
    text = "\n\n".join(topics[name].strip() for name in sorted(topics)) + "\n"
    return text.encode("utf-8"), f"pydoc_data.topics of Python {platform.python_version()}"


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


# Tokens at the end of an encoded prefix that are dropped: the text beyond the cut could have
# merged with them. BPE and WordPiece pre-tokenise into words first, so a word or two is enough.
PREFIX_MARGIN_TOKENS = 64


def leading_tokens(path: str | Path, encode, n_tokens: int, chars_per_token: int = 8) -> list[int]:
    """The first ``n_tokens`` ids of ``encode`` applied to the whole UTF-8 text file, reading and
    encoding only a prefix of it: memory follows the tokens asked for, not the corpus size.

    The prefix starts at ``chars_per_token`` characters per token asked for (plus 64 KiB) and
    doubles until it yields ``n_tokens`` plus PREFIX_MARGIN_TOKENS, or holds the whole text (then
    fewer than asked come back if the text is short). Tokens far from the cut
    are those of the whole text (tested on War and Peace against encoding it whole).
    """
    size = n_tokens * chars_per_token + (1 << 16)
    while True:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read(size)
                whole = not fh.read(1)
        except UnicodeDecodeError as exc:
            raise damaged_text(path, exc) from None
        ids = encode(text)
        if whole or len(ids) >= n_tokens + PREFIX_MARGIN_TOKENS:
            return list(ids[:n_tokens])
        size *= 2


def text_sha256(path: str | Path, block: int = 1 << 20) -> str:
    """sha256 of the UTF-8 encoding of the file's text as Python reads it (universal newlines,
    as the tokenizer sees it), read in blocks."""
    digest = hashlib.sha256()
    try:
        with open(path, encoding="utf-8") as fh:
            while chunk := fh.read(block):
                digest.update(chunk.encode())
    except UnicodeDecodeError as exc:
        raise damaged_text(path, exc) from None
    return digest.hexdigest()


def read_text(path: str | Path) -> str:
    """The workflow's UTF-8 copy of the corpus, whole (damaged_text when it no longer decodes)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise damaged_text(path, exc) from None


def damaged_text(path: str | Path, exc: UnicodeDecodeError) -> CorpusError:
    """The workflow's own UTF-8 copy of the corpus no longer decodes: set it aside (the next run
    writes it again from corpus.path or the download) and name it."""
    from .packs import set_aside_file

    moved = set_aside_file(Path(path))
    return CorpusError(
        f"{path}: damaged, not UTF-8 ({exc.reason}); set aside as "
        f"{moved.name}. Rerun the workflow to write it again"
    )


def obtain_corpus(cfg: dict, log=print) -> tuple[str, str]:
    """The corpus section's text (corpus.path, else corpus.bundled, else the pinned download) and
    where it came from: the download_corpus job's reading, checked to be text in its encoding
    (CorpusError naming the file otherwise)."""

    if cfg.get("path"):
        log(f"reading local corpus {cfg['path']} (corpus.path overrides the download)")
        data, where = read_local(cfg["path"]), cfg["path"]
    elif cfg.get("bundled") == PYTHON_DOCS:
        data, where = python_docs()
        log(f"reading {where} (corpus.bundled: {PYTHON_DOCS}; no download)")
    else:
        log(f"downloading {cfg['url']}")
        data, where = download(cfg["url"], cfg.get("sha256")), cfg["url"]
        log(f"sha256 verified ({len(data)} bytes)")
    share = control_fraction(data[: 1 << 20])
    if share > MAX_CONTROL_FRACTION:
        raise CorpusError(
            f"{where}: not text: {100 * share:.0f}% of its first bytes are NULs or control characters"
        )
    return decode(data, cfg["encoding"], where), where


# A text corpus has tabs, newlines and the odd form feed; a file where more than this share of
# the bytes are other control characters (or NULs) is not text.
MAX_CONTROL_FRACTION = 0.01


def control_fraction(data: bytes) -> float:
    """Share of NULs and C0 control bytes other than tab, newline, carriage return, form feed."""
    if not data:
        return 0.0
    control = [i for i in range(32) if i not in (9, 10, 12, 13)] + [127]
    return sum(data.count(bytes([i])) for i in control) / len(data)
