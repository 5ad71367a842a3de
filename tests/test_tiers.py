"""tests/conftest.py's tier check: a test with no tier or two stops collection, naming it."""

import shutil
import subprocess
import sys

import pytest
from project import REPO

pytestmark = pytest.mark.integration  # each case runs pytest in a subprocess

CASES = {
    "no tier": ("def test_a():\n    pass\n", 4, "test_case.py::test_a: no tier"),
    "two tiers": (
        "import pytest\n\npytestmark = pytest.mark.unit\n\n\n"
        "@pytest.mark.workflow\ndef test_b():\n    pass\n",
        4,
        "test_case.py::test_b: unit, workflow",
    ),
    "one tier": ("import pytest\n\n\n@pytest.mark.unit\ndef test_c():\n    pass\n", 0, "1 passed"),
}


@pytest.mark.parametrize("case", CASES)
def test_collection_needs_exactly_one_tier(case, tmp_path):
    source, code, line = CASES[case]
    shutil.copy(REPO / "tests/conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_case.py").write_text(source)
    # `-m unit` too: the check runs before a marker expression deselects anything
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "unit"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert line in proc.stdout + proc.stderr
