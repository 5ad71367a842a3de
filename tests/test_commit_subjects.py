"""Commit subjects of at most 72 characters (the log reads in one line each, in any tool), for
every commit after the last one that broke the rule: the history before it is left as it is."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
# the last commit with a longer subject; every commit after it keeps the rule
LAST_LONG_SUBJECT = "6e5d1e6"
LIMIT = 72


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)


def long_subjects(subjects: list[str]) -> list[str]:
    return [s for s in subjects if len(s) > LIMIT]


def test_subjects_after_the_rule_are_short():
    if shutil.which("git") is None or git("rev-parse", "--git-dir").returncode:
        pytest.skip("not a git checkout")
    if git("rev-parse", "-q", "--verify", f"{LAST_LONG_SUBJECT}^{{commit}}").returncode:
        pytest.skip(f"{LAST_LONG_SUBJECT} is not in this clone's history (a shallow clone)")
    log = git("log", "--format=%s", f"{LAST_LONG_SUBJECT}..HEAD")
    assert log.returncode == 0, log.stderr
    assert long_subjects(log.stdout.splitlines()) == []


def test_a_long_subject_is_caught():
    assert long_subjects(["x" * 72, "y" * 73]) == ["y" * 73]
