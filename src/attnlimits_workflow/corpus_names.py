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
    """The corpus.name a local file gets: its file name without the extension, with anything
    that cannot name a folder replaced by '_' (config.NAME_PATTERN), at most 64 characters."""
    stem = _UNSAFE.sub("_", Path(str(path)).stem).lstrip(".-")
    return (stem or "corpus")[:64]


def named_corpus(section: Any) -> Any:
    """A user's corpus section with its name filled in where it sets a text but no name: the
    file's (name_of_path) for corpus.path, the bundled text's for corpus.bundled. Anything else
    is returned as it is (the schema reports what is wrong with it)."""
    if not isinstance(section, dict) or section.get("name") is not None:
        return section
    if section.get("path"):
        return {**section, "name": name_of_path(section["path"])}
    if section.get("bundled"):
        return {**section, "name": str(section["bundled"])}
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


def clash_errors(corpora: dict[str, tuple[str, dict[str, Any]]]) -> list[str]:
    """For each corpus.name -> (its key, its section) of the run: a local file that would land on
    a copy another text made (resources/corpus/<name>.txt and its source record exist, and the
    record's bytes differ from this file's), naming both files. Read in the working directory."""
    errs = []
    for name, (key, section) in corpora.items():
        path = section.get("path")
        record_file = source_record(name)
        if not path or not corpus_file(name).exists() or not record_file.exists():
            continue
        try:
            record = json.loads(record_file.read_text())
            sha = file_sha256(path)
        except (OSError, ValueError):
            continue  # an unreadable path is corpus.path's own error; a damaged record is none
        if record.get("sha256") in (None, sha):
            continue
        was = record.get("path") or record.get("source")
        if was == str(Path(path).resolve()):
            errs.append(
                f"{key}: {path} changed since {corpus_file(name)} was copied from it; delete "
                f"{corpus_file(name)} to use the new text (and rerun what read the old one)"
            )
        else:
            errs.append(
                f"{key}: {path} would land as {corpus_file(name)}, which holds another text "
                f"({was}); give this one its own corpus.name, or delete {corpus_file(name)} "
                "to replace that text"
            )
    return errs
