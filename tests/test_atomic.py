"""Write-then-rename: nothing that looks complete after a failure, stale temporaries swept."""

import subprocess
import sys

import pytest

from attnlimits_workflow.atomic import atomic_path


@pytest.mark.unit
def test_success_renames(tmp_path):
    with atomic_path(tmp_path / "out.txt") as tmp:
        tmp.write_text("done")
        assert not (tmp_path / "out.txt").exists()
    assert (tmp_path / "out.txt").read_text() == "done"


@pytest.mark.unit
def test_failure_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "out") as tmp:
        tmp.mkdir()
        (tmp / "part").write_text("half")
        raise RuntimeError("crash")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.unit
def test_replaces_an_existing_directory(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old").write_text("old")
    with atomic_path(tmp_path / "out") as tmp:
        tmp.mkdir()
        (tmp / "new").write_text("new")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["new"]


@pytest.mark.integration
def test_stale_temporaries_of_dead_writers_are_swept(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = tmp_path / f".out.tmp-{int(dead.stdout)}"
    stale.mkdir()
    with atomic_path(tmp_path / "out") as tmp:
        tmp.write_text("x")
    assert not stale.exists() and (tmp_path / "out").exists()
