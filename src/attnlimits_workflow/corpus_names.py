"""The corpus section's names: a text lands in resources/corpus/<corpus.name>.txt, and every
output made from it is filed under that name. A section that names a local file (corpus.path)
or a bundled text without a corpus.name is named after its text, never after the default's
war_and_peace; and a name never holds two texts.

The download job records where each copy came from in resources/corpus/<name>.source.json
(its source and the SHA-256 of the source's bytes), so that a later run whose corpus.path gives
the same name to another text is refused before any job, naming both files.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

CORPUS_DIR = Path("resources/corpus")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def name_of_path(path: str) -> str:
    """The corpus.name a local file (or a URL's last part) gets: its name without the extension,
    spaces and other characters that cannot name a folder replaced by '_' (config.NAME_PATTERN),
    at most 64 characters. A name that is not plain ASCII gets 8 hex digits of its hash, so that
    two titles in another script never share a name."""
    stem = Path(str(path)).stem
    clean = _UNSAFE.sub("_", stem).lstrip(".-") or "corpus"
    if not stem.isascii():
        digest = hashlib.sha256(stem.encode()).hexdigest()[:8]
        return f"{clean[:55]}-{digest}"
    return clean[:64]


def _given(value: Any) -> bool:
    """A value the user set: Snakemake passes nested --config values as strings, "null" too.
    An empty string is set (an empty corpus.name is refused by the schema, not renamed)."""
    return value is not None and value not in ("null", "None")


def text_name(section: dict[str, Any]) -> str:
    """The name of the text a corpus section reads, from the source the download job uses:
    corpus.path first, then corpus.bundled, then the URL's file."""
    if _given(section.get("path")):
        return name_of_path(section["path"])
    if _given(section.get("bundled")):
        return str(section["bundled"])
    if _given(section.get("url")):
        from urllib.parse import urlparse

        return name_of_path(urlparse(str(section["url"])).path or "corpus")
    return "corpus"


def named_corpus(section: Any, written: Any) -> Any:
    """The merged corpus section ``section`` with its name filled in from its text (text_name)
    where the user's own layer ``written`` sets a source (path, bundled or url) without a name,
    or sets the name to null. A name the user gives is kept, and so is the defaults' name while
    the user changes no source."""
    if not isinstance(section, dict):
        return section
    written = written if isinstance(written, dict) else {}
    if "name" in written and _given(written["name"]):
        return section
    sets_source = any(key in written for key in ("path", "bundled", "url"))
    if sets_source or ("name" in written and not _given(written["name"])):
        return {**section, "name": text_name(section)}
    return section


def corpus_file(name: str) -> Path:
    return CORPUS_DIR / f"{name}.txt"


def source_record(name: str) -> Path:
    return CORPUS_DIR / f"{name}.source.json"


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_source_record(name: str, source: str, local_path: str | None, target: Path) -> None:
    """Record where resources/corpus/<name>.txt (``target``'s folder) came from: the source, and
    for a local file its resolved path and the SHA-256 of its bytes."""
    record = {"source": source}
    if local_path:
        record |= {"path": str(Path(local_path).resolve()), "sha256": file_sha256(local_path)}
    out = target.with_name(f"{name}.source.json")
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
    tmp.replace(out)


def expected_text(section: dict[str, Any]) -> str | None:
    """The text the download job would write for ``section`` (a local file or the bundled text,
    decoded, its Gutenberg licence stripped as the job does); None for a download, whose bytes
    are known only once fetched (and pinned by corpus.sha256)."""
    from attnlimits.corpus import strip_gutenberg

    from .corpus_io import PYTHON_DOCS, decode, python_docs

    if _given(section.get("path")):
        data, where = Path(section["path"]).read_bytes(), section["path"]
    elif section.get("bundled") == PYTHON_DOCS:
        data, where = python_docs()
    else:
        return None
    text = decode(data, section.get("encoding") or "utf-8", where)
    return strip_gutenberg(text).text if section.get("strip_gutenberg") else text


def clash_errors(corpora: dict[str, tuple[str, dict[str, Any]]]) -> list[str]:
    """For each corpus.name -> (its key, its section) of the run: a text that would land on a
    copy (resources/corpus/<name>.txt, in the working directory) holding another text, naming
    both (the copy's source from its record, where it has one). A section whose file cannot be
    read is its own error elsewhere; a download's bytes are not known before its job."""
    errs = []
    for name, (key, section) in corpora.items():
        copy = corpus_file(name)
        if not copy.exists():
            continue
        try:
            want = expected_text(section)
            have = copy.read_text(encoding="utf-8")
        except (OSError, ValueError, Exception):  # noqa: BLE001 (reported by the section's checks)
            continue
        if want is None or want == have:
            continue
        try:
            record = json.loads(source_record(name).read_text())
        except (OSError, ValueError):
            record = {}
        was = record.get("path") or record.get("source") or "an earlier run's text"
        this = section.get("path") or section.get("bundled")
        if _given(section.get("path")) and was == str(Path(section["path"]).resolve()):
            errs.append(
                f"{key}: {this} changed since {copy} was copied from it; delete {copy} (and "
                f"{source_record(name).name}) to use the new text, and rerun what read the old one"
            )
        else:
            errs.append(
                f"{key}: {this} would land as {copy}, which holds another text ({was}); give "
                f"this one its own corpus.name, or delete {copy} (and "
                f"{source_record(name).name}) to replace that text"
            )
    return errs
