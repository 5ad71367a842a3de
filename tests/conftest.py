import os

import numpy as np
import pytest
from hypothesis import settings

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
