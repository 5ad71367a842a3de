"""The .test matrix (.test/config/ and .test/config-*/), which serves both the tests (tests/project.py)
and CI: every configuration is accepted, each differs from the main one only where it says, and its
committed data is what tests/project.py's generators make."""

import json
from pathlib import Path

import pytest
import yaml
from project import REPO, TEST, TINY_CONFIGS, synthetic_text, tiny_model_folder

from attnlimits_workflow.config import load_config

MATRIX = sorted(TEST.glob("config*/config.yaml"))


def read(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


@pytest.mark.unit
def test_the_matrix_holds_the_main_configuration_and_the_tests_ones():
    names = {path.parent.name for path in MATRIX}
    # config-readings: the main one with analysis.readings and a decade grid of T
    # (tests/test_readings.py)
    assert names == {"config", "config-readings", *TINY_CONFIGS.values()}, names


@pytest.mark.unit
@pytest.mark.parametrize("path", MATRIX, ids=lambda path: path.parent.name)
def test_every_configuration_of_the_matrix_is_accepted(path):
    cfg = read(path)
    for key in ("corpus", "model"):  # relative to .test, the runs' working directory
        cfg[key]["path"] = str(TEST / cfg[key]["path"])
    defaults = read(REPO / "config/config.yaml")
    _, runs, default = load_config(
        defaults, cfg, REPO / "workflow/schemas/config.schema.yaml", REPO
    )
    assert default == cfg["model"]["name"]
    assert runs[default]["model"]["path"] == cfg["model"]["path"]
    assert runs[default]["analysis"]["protocol"] == cfg["analysis"].get("protocol", "all_rows")


@pytest.mark.unit
def test_each_configuration_differs_from_the_main_one_only_where_it_says():
    main = read(TEST / "config/config.yaml")
    # the main configuration alone runs N*'s search (CI runs it whole; the others are dry-run)
    assert main.pop("effective_set")["enabled"] is True
    last_row = read(TEST / "config-last-row/config.yaml")
    assert last_row["analysis"].pop("protocol") == "last_row"
    assert "protocol" not in main["analysis"]  # the default, all_rows
    assert last_row == main
    llama = read(TEST / "config-llama/config.yaml")
    assert llama.pop("model") == {
        "name": "tiny-llama",
        "path": "data/tiny-llama",
        "random_init": True,
    }
    assert llama["analysis"].pop("protocol") == "last_row"
    assert {**llama, "model": main["model"]} == main
    readings = read(TEST / "config-readings/config.yaml")
    # a decade grid of T (one per decade from 0.001) on which T on the raw scores flips a claim
    assert readings["analysis"]["gradient"].pop("temperatures") == [0.001, 0.01, 0.1, 1.0, 10.0]
    main["analysis"]["gradient"].pop("temperatures")
    assert readings["analysis"].pop("readings") == {
        "x_key": {"embedding": "key"},
        "t_raw": {"temperature_on": "raw_scores"},
        "x_in": {"embedding": "attention_input"},
    }
    assert readings == main


@pytest.mark.integration
@pytest.mark.parametrize("architecture", sorted(TINY_CONFIGS))
def test_the_committed_data_is_what_the_generators_make(architecture, tmp_path):
    cfg = read(TEST / TINY_CONFIGS[architecture] / "config.yaml")
    text = (TEST / cfg["corpus"]["path"]).read_text()
    assert text == synthetic_text()
    made = tiny_model_folder(tmp_path / "made", text, architecture=architecture)
    committed = TEST / cfg["model"]["path"]
    assert sorted(p.name for p in committed.iterdir()) == sorted(p.name for p in made.iterdir())
    for path in committed.iterdir():
        if path.name == "config.json":  # equal but for the transformers version that wrote it
            ours, theirs = (json.loads(p.read_text()) for p in (path, made / path.name))
            ours.pop("transformers_version"), theirs.pop("transformers_version")
            assert ours == theirs, architecture
        else:
            assert path.read_bytes() == (made / path.name).read_bytes(), path.name
