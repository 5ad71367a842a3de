"""A fuzzer over configurations derived from the schema: each one is either accepted, and plans
paths inside their folders, or refused with lines that name keys, never a traceback."""

import copy
import os
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from project import REPO
from strategies import FUZZ_SETTINGS, mutated_configs

from attnlimits_workflow.config import (
    MAX_BATCHES,
    ConfigError,
    command_line_hint,
    load_config,
)
from attnlimits_workflow.config_sections import most_chunks

SCHEMA_PATH = REPO / "workflow/schemas/config.schema.yaml"
SCHEMA = yaml.safe_load(SCHEMA_PATH.read_text())
DEFAULTS = yaml.safe_load((REPO / "config/config.yaml").read_text())

# Fixed seed (derandomize) and budget: CI tries the same configurations every run.
BUDGET = 500


def fuzz_base():
    """The .test configuration with its files' paths absolute, so any working directory reads it."""
    cfg = yaml.safe_load((REPO / ".test/config/config.yaml").read_text())
    cfg["corpus"]["path"] = str(REPO / ".test" / cfg["corpus"]["path"])
    cfg["model"]["path"] = str(REPO / ".test" / cfg["model"]["path"])
    return cfg


BASE = fuzz_base()
TOP_KEYS = set(SCHEMA["properties"])
# A line names a key first: `key.path[0]: ...`, `models.<name> -> key: ...`, `study.diagnostics ->`
SEGMENT = r"(?:[A-Za-z0-9_.-]+|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
KEY = rf"{SEGMENT}(?:\.{SEGMENT}|\[\d+\])*"
KEY_LINE = re.compile(rf"^(?P<key>{KEY}(?: key)?(?: -> {KEY})*): .*\S")


def check_refusal(message: str, user: dict) -> None:
    lines = message.splitlines()
    assert lines, "a refusal without a line"
    for line in lines:
        assert "Traceback" not in line and 'File "' not in line, line
        found = KEY_LINE.match(line)
        assert found, f"a line that names no key: {line!r}"
        top = re.match(SEGMENT, found.group("key")).group(0)
        top = top if top.startswith(("'", '"')) else top.split(".")[0]
        key = found.group("key")
        named = top in TOP_KEYS or any(key.startswith((str(k), repr(k))) for k in user)
        assert named, f"a line naming no key of the config: {line!r}"
    command_line_hint(message)  # the workflow prints it after the lines: must not fail either


def check_plan(runs: dict[str, dict], config: dict) -> None:
    """What the workflow builds paths from, for an accepted configuration: every name a safe
    folder name (results/<model>/..., resources/corpus/<corpus>.txt, normalizers/<name>/), the
    extraction jobs within MAX_BATCHES, every job's threads within the schema's limit."""
    segments = [config["corpus"]["name"]]
    for name, run in runs.items():
        segments.append(name)
        segments += list(run["beyond"]["normalizers"])
        batches = -(-most_chunks(run["chunking"]) // run["extraction"]["chunks_per_batch"])
        assert batches <= MAX_BATCHES
        assert 1 <= run["extraction"]["threads"] <= 256
    for segment in segments:
        path = os.path.join("results", segment, "x")
        assert os.path.normpath(path) == path and Path(path).parts[1] == segment, segment
        assert not segment.startswith((".", "-")) and len(segment) <= 70, segment


@pytest.mark.unit
def test_the_fuzzer_base_is_accepted():
    _, runs, _ = load_config(DEFAULTS, BASE, SCHEMA_PATH, REPO)
    check_plan(runs, BASE)


@pytest.mark.integration
def test_configurations_from_the_schema_are_accepted_or_refused_by_key(tmp_path):
    outcomes: Counter = Counter()
    cwd = os.getcwd()
    os.chdir(tmp_path)  # relative paths a mutation names resolve in an empty folder

    @settings(FUZZ_SETTINGS, max_examples=BUDGET)
    @given(mutated_configs(SCHEMA, BASE))
    def one(user):
        before = copy.deepcopy(user)
        try:
            config, runs, _ = load_config(DEFAULTS, user, SCHEMA_PATH, REPO)
        except ConfigError as exc:
            outcomes["refused"] += 1
            check_refusal(str(exc), user)
        else:
            outcomes["accepted"] += 1
            check_plan(runs, config)
        assert repr(user) == repr(before), "load_config changed the user's config"

    try:
        one()
    finally:
        os.chdir(cwd)
    # Not vacuous: the fuzzer reaches both outcomes, mostly refusals.
    assert outcomes["refused"] + outcomes["accepted"] >= BUDGET
    assert outcomes["accepted"] >= 10 and outcomes["refused"] >= BUDGET // 2, outcomes
    print(f"fuzzed {sum(outcomes.values())} configurations: {dict(outcomes)}")


# What the fuzzers found (each a traceback or a broken line before): kept as rows.
FOUND = [
    ("name-too-long-for-the-system", {"corpus": {"path": "x" * 300}}, "corpus.path: xxx"),
    ("nul-in-encoding", {"corpus": {"encoding": "a\x00b"}}, "corpus.encoding: 'a\\x00b' is not"),
    (
        "float-as-integer",
        {"study": {"architecture": {"layers": 4.5e128}}},
        "study.architecture.layers: 4.5e+128 is not of type 'integer'",
    ),
    ("integral-float-threads", {"extraction": {"threads": 2.0}}, "extraction.threads: 2.0 is not"),
    ("control-character", {"corpus": {"path": "a\x1cb"}}, "corpus.path: a\\x1cb does not exist"),
    ("empty-unknown-key", {"": 1}, "'': unknown key"),
    ("configfile-not-a-string", {"models": {"a": {"configfile": 3}}}, "models.a.configfile: 3"),
    ("periodic-name", {"models": {"ab" * 20: None}}, "ends in 'ab' repeated 20 times"),
    (
        "blank-override",
        {"model": {"config_overrides": {" ": 0}}},
        "model.config_overrides.' ': not a setting",
    ),
]


@pytest.mark.unit
@pytest.mark.parametrize(("case", "change", "fragment"), FOUND, ids=[f[0] for f in FOUND])
def test_what_the_fuzzer_found_is_refused_by_key(case, change, fragment):
    from attnlimits_workflow.config import deep_merge

    with pytest.raises(ConfigError) as err:
        load_config(DEFAULTS, deep_merge(BASE, change), SCHEMA_PATH, REPO)
    check_refusal(str(err.value), change)
    assert all(line.isprintable() for line in str(err.value).splitlines())
    assert fragment in str(err.value)
