"""Write-then-rename, so an interrupted job never leaves a file that looks complete."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(final: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling path; on success rename it to ``final`` (file or directory).

    On any exception the temporary is removed and ``final`` is left untouched (absent, or as
    before). The rename is atomic on one file system (os.replace / rename of a directory).
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(final)
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    _remove(tmp)
    try:
        yield tmp
        if final.is_dir():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        _remove(tmp)
        raise


def _remove_stale(final: Path) -> None:
    """Remove temporaries of ``final`` left by processes that no longer exist (a SIGKILL leaves
    them: nothing runs at that signal). Snakemake never runs two jobs for one output, so a
    temporary whose writer is gone cannot belong to a live job."""
    for tmp in final.parent.glob(f".{final.name}.tmp-*"):
        try:
            pid = int(tmp.name.rsplit("-", 1)[1])
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError):
            _remove(tmp)
        except PermissionError:  # alive, owned by someone else
            pass


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()
