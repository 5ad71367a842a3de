"""Corpus download against a local HTTP server (checksum, failure modes) and offline model fetch."""

import contextlib
import hashlib
import http.server
import socket
import threading
import time

import pytest
from project import snakemake, synthetic_text, tiny_config, write_config

from attnlimits_workflow.corpus_io import CorpusError, decode, download
from attnlimits_workflow.models import ModelSourceError, check_hub_reachable

BOOK = synthetic_text(500).encode()
SHA = hashlib.sha256(BOOK).hexdigest()


@pytest.fixture(scope="module")
def server():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server API
            if self.path != "/pg.txt":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(BOOK)))
            self.end_headers()
            self.wfile.write(BOOK)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def closed_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens here once the socket closes


@pytest.mark.integration
def test_download_verifies_checksum(server):
    assert download(f"{server}/pg.txt", SHA) == BOOK


@pytest.mark.integration
def test_checksum_mismatch_is_reported(server):
    with pytest.raises(
        CorpusError, match="sha256 mismatch .* set corpus.sha256 to accept it, or corpus.path"
    ):
        download(f"{server}/pg.txt", "0" * 64)


@pytest.mark.integration
def test_http_error_is_reported(server):
    with pytest.raises(CorpusError, match="could not download .*missing.txt"):
        download(f"{server}/missing.txt", SHA)


@pytest.mark.integration
def test_offline_fails_fast_with_advice():
    start = time.monotonic()
    with pytest.raises(
        CorpusError,
        match=r"Offline\? Run the offline quick start \(--configfile config/offline.yaml\)",
    ):
        download(f"http://127.0.0.1:{closed_port()}/pg.txt", SHA)
    assert time.monotonic() - start < 30


@pytest.mark.integration
def test_hub_unreachable_fails_fast_with_advice():
    start = time.monotonic()
    with pytest.raises(
        ModelSourceError,
        match=r"Offline\? Run the offline quick start \(--configfile config/offline.yaml\)",
    ):
        check_hub_reachable(f"http://127.0.0.1:{closed_port()}")
    assert time.monotonic() - start < 30


@pytest.mark.unit
def test_non_utf8_names_the_byte():
    with pytest.raises(CorpusError, match="not valid utf-8 at byte 3"):
        decode(b"abc\xff", "utf-8", "book.txt")
    assert decode(b"abc\xff", "latin-1", "book.txt") == "abc\u00ff"


def rule_config(tmp_path, **corpus):
    cfg = tiny_config(tmp_path)
    cfg["corpus"] = {"name": "pg", "path": None, **corpus}
    return write_config(tmp_path, cfg)


@pytest.mark.workflow
def test_rule_downloads_and_strips(server, tmp_path):
    cfg = rule_config(tmp_path, url=f"{server}/pg.txt", sha256=SHA)
    snakemake(tmp_path, cfg, "--cores", "1", "resources/corpus/pg.txt")
    text = (tmp_path / "resources/corpus/pg.txt").read_text()
    assert text.startswith("prince") or text.split()[0] in synthetic_text(10)
    assert "START OF" not in text and "Licence" not in text


@pytest.mark.workflow
def test_rule_checksum_failure_leaves_no_output(server, tmp_path):
    cfg = rule_config(tmp_path, url=f"{server}/pg.txt", sha256="1" * 64)
    proc = snakemake(tmp_path, cfg, "--cores", "1", "resources/corpus/pg.txt", check=False)
    assert proc.returncode != 0
    assert "sha256 mismatch" in proc.stdout + proc.stderr
    assert not list((tmp_path / "resources").rglob("pg.txt*"))


@pytest.mark.workflow
def test_rule_offline_fails_within_30s(tmp_path, monkeypatch):
    cfg = rule_config(tmp_path, url=f"http://127.0.0.1:{closed_port()}/pg.txt", sha256=SHA)
    start = time.monotonic()
    proc = snakemake(tmp_path, cfg, "--cores", "1", "resources/corpus/pg.txt", check=False)
    assert proc.returncode != 0 and time.monotonic() - start < 30
    assert "Offline? Run the offline quick start (--configfile config/offline.yaml)" in (
        proc.stdout + proc.stderr
    )


@pytest.mark.workflow
def test_fetch_model_offline_fails_within_30s(tmp_path, monkeypatch):
    cfg = tiny_config(tmp_path)
    cfg["model"] = {"name": "gpt2-hub", "path": None, "random_init": False}
    config = write_config(tmp_path, cfg)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    start = time.monotonic()
    proc = snakemake(tmp_path, config, "--cores", "1", "resources/models/gpt2-hub", check=False)
    assert proc.returncode != 0 and time.monotonic() - start < 30
    out = proc.stdout + proc.stderr
    assert "Offline? Run the offline quick start (--configfile config/offline.yaml)" in out
