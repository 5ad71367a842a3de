"""docs/extending.md's recipe for a model family, applied in a fresh copy of the repository: a
plain-softmax family is its row in the table and its tiny configuration in the eager tests (two
files of code), the lists users read are written from the table, and every test of the family
module then holds for it."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from project import REPO
from test_generic_analysis import copy_of_repository, git

from attnlimits.families import FAMILIES

# A plain-softmax causal family transformers ships that the table does not list (Kyutai's
# Helium: Llama's attention under another model_type).
NEW_FAMILY = "helium"


def insert_after(path, anchor: str, line: str) -> None:
    text = path.read_text()
    assert text.count(anchor) == 1, anchor
    path.write_text(text.replace(anchor, anchor + line))


@pytest.mark.workflow
def test_the_family_recipe_is_two_files_of_code_and_the_family_tests_hold(tmp_path):
    assert NEW_FAMILY not in FAMILIES  # else pick another for the recipe
    copy = copy_of_repository(tmp_path)
    insert_after(
        copy / "src/attnlimits/families.py",
        '    "olmo3": Family(causal=True),\n',
        f'    "{NEW_FAMILY}": Family(causal=True),\n',
    )
    insert_after(
        copy / "tests/test_families.py",
        '    "olmo2": {**DECODER, "num_key_value_heads": 4},\n',
        f'    "{NEW_FAMILY}": {{**DECODER, "num_key_value_heads": 2}},\n',
    )
    env = {**os.environ, "PYTHONPATH": str(copy / "src"), "OPENBLAS_NUM_THREADS": "1"}
    # the lists users read are written from the table
    docs = [sys.executable, "-m", "attnlimits_workflow.config_docs", "--root", str(copy)]
    subprocess.run([*docs, "--write"], env=env, check=True, capture_output=True)
    touched = sorted(line[3:] for line in git(copy, "status", "--porcelain", "-uall").splitlines())
    assert touched == [
        "README.md",  # generated
        "config/README.md",  # generated
        "src/attnlimits/families.py",
        "tests/test_families.py",
    ]
    assert f"`olmo3`, `{NEW_FAMILY}`, `phi3`" in (copy / "README.md").read_text()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_families.py"]
        + ["-k", NEW_FAMILY],
        cwd=copy,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    # the eager comparison, the q/k logits, the KV map, the projections' input and the
    # unchanged output, each for the new family
    passed = int(re.search(r"(\d+) passed", proc.stdout).group(1))
    assert passed >= 6, proc.stdout[-2000:]


@pytest.mark.unit
@pytest.mark.parametrize("page", ["README.md", "config/README.md"])
def test_the_family_lists_users_read_name_every_family(page):
    text = (REPO / page).read_text()
    missing = [name for name in FAMILIES if f"`{name}`" not in text]
    assert not missing, f"{page} does not name {missing} (docs/extending.md: Adding a model family)"


@pytest.mark.unit
def test_one_spelling_of_normalizer_file_names_included():
    """docs/extending.md: "normalizer" (the code's, the config keys' and the paper's title's
    spelling) in every tracked file and file name, never the British form."""
    files = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    british = "normali" + "s"  # spelt apart so that this file passes its own check
    named = [f for f in files if british in f.lower()]
    spelt = [
        f
        for f in files
        if (REPO / f).is_file()
        and british in (REPO / f).read_bytes().decode("utf-8", "ignore").lower()
    ]
    assert not named and not spelt, named + spelt
