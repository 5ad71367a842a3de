import os

import numpy as np
import pytest
from hypothesis import settings

# Every test is in exactly one tier (pyproject.toml's markers say what each tier holds).
TIERS = ("unit", "integration", "workflow")

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(scope="session")
def done_run(tmp_path_factory):
    """One complete local `snakemake --cores 2 all` on the tiny project, shared by the read-only
    end-to-end checks and by the SLURM test (whose outputs must equal it)."""
    import shutil

    from project import REPO, snakemake, tiny_config, write_config

    tmp = tmp_path_factory.mktemp("e2e")
    style = tmp / "style.mplstyle"  # a copy we may edit, standing for the user's style file
    shutil.copy(REPO / "workflow/report/attnlimits.mplstyle", style)
    cfg = write_config(tmp, tiny_config(tmp, **{"figures.style": str(style)}))
    snakemake(tmp, cfg, "--cores", "2", "all")
    return tmp, cfg


# The files whose tests run longest (pytest --durations), started first so that, over pytest-xdist's
# workers (`-n auto --dist loadfile`: each file on one worker), no worker is left running one of
# them alone at the end. Only the order depends on this; a stale entry costs minutes, not results.
LONGEST_FIRST = (
    "test_study.py",
    "test_quickstart.py",
    "test_slurm.py",
    "test_readings.py",
    "test_workflow_e2e.py",
    "test_reliability.py",
)


def item_rank(item) -> tuple[int, int]:
    """The longest files first, then the workflow, integration and unit tiers."""
    name = item.path.name
    if name in LONGEST_FIRST:
        return 0, LONGEST_FIRST.index(name)
    tier = next((t for t in TIERS if item.get_closest_marker(t)), "unit")
    return 1 + TIERS[::-1].index(tier), 0


def run_order(items) -> None:
    """In place: whole files by the rank of their first-ranked test (:func:`item_rank`), each
    file's tests together and in collection order, so a module's fixtures are set up once."""
    rank: dict = {}
    for item in items:
        rank[item.path] = min(rank.get(item.path, (9, 0)), item_rank(item))
    items.sort(key=lambda item: rank[item.path])


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects, so a filtered run checks every test too
def pytest_collection_modifyitems(config, items):
    """Fail collection when a test has no tier or more than one, naming it; mark every
    workflow test `slow`, so `-m "not slow"` keeps skipping the workflow runs; and run the
    longest first (:func:`run_order`)."""
    run_order(items)
    wrong = []
    for item in items:
        tiers = sorted({mark.name for mark in item.iter_markers() if mark.name in TIERS})
        if len(tiers) != 1:
            wrong.append(f"  {item.nodeid}: {', '.join(tiers) or 'no tier'}")
        elif tiers == ["workflow"]:
            item.add_marker(pytest.mark.slow)
    if wrong:
        raise pytest.UsageError(
            f"every test needs exactly one tier marker ({', '.join(TIERS)}; "
            "`pytestmark = pytest.mark.<tier>` at module top, or a decorator):\n" + "\n".join(wrong)
        )
