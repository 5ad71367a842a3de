"""The workflow's own process needs no torch: planning (`snakemake -n`), the config checks and the
modules of the analysis, summary, figure and table jobs import neither torch nor transformers.

Each check runs in a subprocess where importing them fails, as on a machine (or in the per-rule
analysis environment, workflow/envs/analysis.yaml) without them."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from project import REPO, tiny_config, write_config

from attnlimits_workflow.runner import snakemake_command

pytestmark = pytest.mark.integration

BLOCKED = ("torch", "transformers")
# None in sys.modules: `import torch` raises ImportError (and find_spec says "not installed").
BLOCKER = f"import sys\nsys.modules.update(dict.fromkeys({list(BLOCKED)!r}))\n"


def without_torch(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python processes cannot import torch or transformers: a
    sitecustomize on PYTHONPATH, ahead of this checkout's src."""
    site = tmp_path / "blocker"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    path = os.pathsep.join([str(site), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env
    )


def test_the_blocker_blocks(tmp_path):
    proc = run_python("import torch", without_torch(tmp_path))
    assert proc.returncode != 0 and "import of torch halted" in proc.stderr


def test_config_checks_and_analysis_modules_import_no_torch(tmp_path):
    # load_config on the defaults (which have a study section) and on a bad study rule: the
    # study's checks once imported the torch attention rules.
    code = f"""
        import yaml
        import attnlimits.critical, attnlimits.distance, attnlimits.gradient
        import attnlimits.normalizers, attnlimits.selection
        import attnlimits.separability, attnlimits.vanishing, attnlimits.corpus
        import attnlimits_workflow.dumps.read, attnlimits_workflow.dumps.pack
        import attnlimits_workflow.jobs, attnlimits_workflow.plotting, attnlimits_workflow.study
        from attnlimits_workflow.config import ConfigError, load_config

        repo = {str(REPO)!r}
        defaults = yaml.safe_load(open(repo + "/config/config.yaml"))
        assert defaults["study"]["normalizers"], "the defaults have a study section"
        schema = repo + "/workflow/schemas/config.schema.yaml"
        _, runs, _ = load_config(defaults, {{}}, schema, repo)
        assert any(name.startswith("study-") for name in runs)
        bad = {{"study": {{"normalizers": {{"a": {{"kind": "softermax"}},
                                          "b": {{"kind": "scalable_softmax", "s": 1}}}}}}}}
        try:
            load_config(defaults, bad, schema, repo)
        except ConfigError as exc:
            print(exc)
        else:
            raise SystemExit("a bad study rule passed")
    """
    proc = run_python(code, without_torch(tmp_path))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "study.normalizers.a: unknown attention rule 'softermax'" in proc.stdout
    assert "study.normalizers.b: attention rule scalable_softmax: unknown settings" in proc.stdout


@pytest.mark.parametrize(
    "config, target",
    [
        (".test/config/config.yaml", "all"),
        ("config/minilm.yaml", "all"),
        (".test/config/config.yaml", "study"),  # plans the training and the trained models' jobs
    ],
)
def test_dry_run_imports_no_torch(tmp_path, config, target):
    work = tmp_path / "work"
    if config.startswith(".test/"):  # its paths are relative to .test
        outputs = (".snakemake", "results", "logs", "figures", "tables", "resources", "*.html")
        shutil.copytree(REPO / ".test", work, ignore=shutil.ignore_patterns(*outputs))
    else:
        work.mkdir()
    cmd = snakemake_command(REPO / "Snakefile", work, REPO / config, target, "-n", "--quiet")
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=without_torch(tmp_path), timeout=300
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


# The jobs that run a model: they need torch (workflow/envs/model.yaml).
MODEL_SCRIPTS = {"extract.py", "train_model.py", "evaluate_model.py", "effective_set.py"}


def test_every_other_script_imports_no_torch(tmp_path):
    """The module-level imports of every script but the model ones. (The normalizer jobs import
    torch only inside sparsemax and 1.5-entmax, through the torch-based entmax package.)"""
    scripts = sorted(
        p for p in (REPO / "workflow/scripts").glob("*.py") if p.name not in MODEL_SCRIPTS
    )
    assert len(scripts) > 20
    code = "failed = []\n"
    for path in scripts:
        tree = ast.parse(path.read_text())
        imports = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        code += (
            f"try:\n    exec({chr(10).join(imports)!r})\n"
            f"except ImportError as exc:\n    failed.append(({path.name!r}, str(exc)))\n"
        )
    code += "assert not failed, failed\n"
    proc = run_python(code, without_torch(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_cuda_analysis_device_asks_slurm_for_a_gpu_and_plans_without_torch(tmp_path):
    """analysis.all_rows.device: cuda under the all_rows protocol: the jobs whose row-block
    kernels run on it (the row engine's passes, rows_part: distance, critical_n, separability
    and gradient at once) ask for gpu=1, the other analysis jobs (the engine's pooling job
    among them) for none; the planner checks only the device's form and imports no torch."""
    cfg = tiny_config(
        tmp_path / "work", **{"analysis.protocol": "all_rows", "analysis.all_rows.device": "cuda"}
    )
    config = write_config(tmp_path / "work", cfg)
    cmd = snakemake_command(REPO / "Snakefile", tmp_path / "work", config, "all", "-n")
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=without_torch(tmp_path), timeout=300
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    gpus: dict[str, set[int]] = {}
    rule = None
    for line in (proc.stdout + proc.stderr).splitlines():
        if line.startswith(("rule ", "localrule ")):
            rule = line.split()[1].rstrip(":")
        elif line.strip().startswith("wildcards:") and "analysis=" in line:
            rule = "analyse:" + line.split("analysis=")[1].split(",")[0]
        elif line.strip().startswith("resources:") and rule:
            found = re.search(r"\bgpu=(\d+)", line)
            gpus.setdefault(rule, set()).add(int(found.group(1)) if found else 0)
    assert gpus.get("rows_part") == {1}, gpus
    for name in ("rows", "analyse:vanishing", "pack_samples", "pairwise_separation"):
        assert gpus.get(name) == {0}, (name, gpus)
    assert gpus.get("extract_batch") == {0}, gpus


def test_a_malformed_analysis_device_is_refused_when_planning(tmp_path):
    cfg = tiny_config(tmp_path / "work", **{"analysis.all_rows.device": "gpu0"})
    config = write_config(tmp_path / "work", cfg)
    cmd = snakemake_command(REPO / "Snakefile", tmp_path / "work", config, "all", "-n")
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=without_torch(tmp_path), timeout=300
    )
    assert proc.returncode != 0
    assert "analysis.all_rows.device: 'gpu0' does not match" in proc.stdout + proc.stderr
