"""The GGUF probes' cache (attnlimits_workflow.models.cached_gguf_probe): one probe per file
state, a changed file probed again, and a cache that cannot be written skipped."""

import os

import pytest

from attnlimits_workflow import models

pytestmark = pytest.mark.unit


def test_one_probe_per_file_state_and_a_changed_file_is_probed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIMITS_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    calls = []

    def probe(path):
        calls.append(path)
        return {"size": path.stat().st_size}

    assert models.cached_gguf_probe("config", gguf, probe) == {"size": 64}
    assert models.cached_gguf_probe("config", gguf, probe) == {"size": 64}
    assert len(calls) == 1
    # another kind of probe of the same file has its own entry
    assert models.cached_gguf_probe("problem", gguf, lambda p: None) is None
    gguf.write_bytes(b"GGUF" + bytes(10))  # a re-downloaded (here: truncated) file
    assert models.cached_gguf_probe("config", gguf, probe) == {"size": 14}
    assert len(calls) == 2
    stat = gguf.stat()
    os.utime(gguf, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # same size, touched
    models.cached_gguf_probe("config", gguf, probe)
    assert len(calls) == 3


def test_an_unwritable_or_damaged_cache_is_skipped(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("ATTNLIMITS_CACHE", str(blocker))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert models.cached_gguf_probe("problem", gguf, lambda p: "damaged") == "damaged"
    monkeypatch.setenv("ATTNLIMITS_CACHE", str(tmp_path / "cache"))
    models.cached_gguf_probe("problem", gguf, lambda p: "first")
    for entry in (tmp_path / "cache" / "gguf-probe").iterdir():
        entry.write_text("{not json")
    assert models.cached_gguf_probe("problem", gguf, lambda p: "again") == "again"


def test_a_missing_file_is_probed_and_nothing_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIMITS_CACHE", str(tmp_path / "cache"))
    missing = tmp_path / "absent.gguf"
    assert models.cached_gguf_probe("config", missing, lambda p: {"error": "none"}) == {
        "error": "none"
    }
    assert not (tmp_path / "cache").exists()
