"""The README's offline quick start, as a new user runs it (issue 49): a clean copy of the
repository, the README's install command, then its offline run command, with nothing else, must
produce the figures, Table 1 and the at-a-glance table.

It installs a fresh virtual environment from the package registries (~1.5 min) and runs the
whole quick start (~2 min on 2 cores), so it runs only when asked, as CI does (.ci/run):
ATTNLIMITS_QUICKSTART=1 pytest tests/test_quickstart.py."""

import os
import re
import subprocess

import pytest
from project import REPO
from test_download import closed_port

ASKED = pytest.mark.skipif(
    os.environ.get("ATTNLIMITS_QUICKSTART") != "1",
    reason="installs a fresh environment and runs the quick start: ATTNLIMITS_QUICKSTART=1",
)


def quick_start_commands() -> list[str]:
    """Step 1 of the README's quick start: its install line and its offline run line."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    step = block.split("# 2.", 1)[0]
    commands = [line for line in step.splitlines() if line and not line.startswith("#")]
    assert any("config/offline.yaml" in c for c in commands), commands
    return commands


@pytest.mark.unit
def test_the_quick_start_is_install_then_one_offline_command():
    install, run = quick_start_commands()
    assert install.startswith("python3 -m venv .venv") and "pip install -e ." in install
    assert re.fullmatch(r"snakemake --cores 2 all --configfile config/offline.yaml", run)


@pytest.mark.workflow
@ASKED
def test_the_offline_quick_start_from_a_clean_copy(tmp_path):
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    copy = tmp_path / "attnlimits"
    for name in filter(None, tracked):
        source, target = REPO / name, copy / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if not p.startswith(str(REPO))
    )
    install, run = quick_start_commands()
    # the run itself with no network: the hub and any URL unreachable (the install may use the
    # package registries, as a new user's does)
    dead = f"http://127.0.0.1:{closed_port()}"
    offline = "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "
    offline += f"HF_ENDPOINT={dead} http_proxy={dead} https_proxy={dead} "
    script = f"{install} && {offline}{run}"
    proc = subprocess.run(
        ["bash", "-c", script], cwd=copy, env=env, capture_output=True, text=True, timeout=1800
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for figure in ("fig1", "fig2", "fig3", "fig4", "fig5"):
        assert (copy / f"figures/{figure}.png").stat().st_size > 0
    table1 = (copy / "tables/table1.csv").read_text().splitlines()
    assert table1[0].split(",")[:2] == ["claim_id", "claim"] and len(table1) > 10
    glance = (copy / "tables/compare/at_a_glance.md").read_text()
    assert "| claim | minilm-l6 |" in glance
    assert (copy / "resources/corpus/python_docs.txt").exists()
