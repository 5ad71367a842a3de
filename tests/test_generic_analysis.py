"""The generic path of an analysis (attnlimits_workflow.analyses.generic): a module with the
conventional entry points is run, summarised and drawn by the generic rules, with no script, rule
or caption file of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from test_analyses import make_pack

from attnlimits_workflow.analyses import generic, vanishing
from attnlimits_workflow.runner import snakemake_command

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ToySettings:
    seed: int
    scale: float


def toy_module() -> types.ModuleType:
    """A toy analysis: per sample, its largest weight times ``scale``; summary: the mean per L."""
    module = types.ModuleType("attnlimits_workflow.analyses.toy")
    module.Settings = ToySettings

    def run(job):
        w = job.pack.weights
        return pl.DataFrame(
            {"L": np.full(w.shape[0], w.shape[1]), "top": w.max(axis=1) * job.settings.scale}
        )

    def summarise(table):
        summary = table.group_by("L").agg(pl.col("top").mean()).sort("L")
        return {"summary": summary, "violations": pl.DataFrame({"checked": [table.height]})}

    module.run, module.summarise = run, summarise
    return module


def job(tmp_path: Path, analysis: str, settings: dict, outputs: dict) -> SimpleNamespace:
    """A stand-in for the generic rules' ``snakemake`` object."""
    names = SimpleNamespace(**outputs)
    return SimpleNamespace(
        params=SimpleNamespace(
            analysis=analysis, settings=settings, bootstrap={"resamples": 5, "seed": 0}
        ),
        input=SimpleNamespace(pack=str(tmp_path / "pack"), tables=[]),
        output=names,
        log=[str(tmp_path / f"{analysis}.log")],
        wildcards=SimpleNamespace(),
    )


@pytest.mark.unit
def test_generic_adapter_runs_a_modules_run_with_its_settings(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "attnlimits_workflow.analyses.toy", toy_module())
    pack = make_pack([[0.5, 0.25, 0.25, 0.0], [0.1, 0.2, 0.3, 0.4]], np.zeros((4, 2)))
    monkeypatch.setattr(generic, "read_pack", lambda path, embedding=None: pack)
    out = tmp_path / "L4.parquet"
    # settings the module's Settings does not name (protocol) are ignored
    snakemake = job(tmp_path, "toy", {"seed": 7, "scale": 2.0, "protocol": "last_row"}, {})
    snakemake.output = [str(out)]
    table = generic.run_analysis(snakemake)
    assert pl.read_parquet(out)["top"].to_list() == pytest.approx([1.0, 0.8])
    assert table.equals(pl.read_parquet(out))


@pytest.mark.unit
def test_generic_summary_reduces_every_length_and_writes_each_output(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "attnlimits_workflow.analyses.toy", toy_module())
    paths = []
    for L, tops in ((4, [1.0, 3.0]), (8, [0.5])):
        paths.append(tmp_path / f"L{L}.parquet")
        pl.DataFrame({"L": [L] * len(tops), "top": tops}).write_parquet(paths[-1])
    outputs = {
        "summary": str(tmp_path / "toy.csv"),
        "violations": str(tmp_path / "v.csv"),
        "replicates": str(tmp_path / "r.parquet"),
    }
    snakemake = job(tmp_path, "toy", {}, outputs)
    snakemake.input.tables = [str(p) for p in paths]
    generic.summarise_analysis(snakemake)
    summary = pl.read_csv(outputs["summary"])
    assert summary["L"].to_list() == [4, 8] and summary["top"].to_list() == [2.0, 0.5]
    assert pl.read_csv(outputs["violations"])["checked"].to_list() == [3]
    # a module without REPLICATED: no claim reads its intervals, the rule's output is empty
    assert pl.read_parquet(outputs["replicates"]).height == 0


@pytest.mark.unit
def test_vanishing_through_the_generic_adapter_is_its_last_row_table(tmp_path, monkeypatch):
    pack = make_pack([[0.5, 0.25, 0.25, 0.0], [0.1, 0.2, 0.3, 0.4]], np.zeros((4, 2)))
    monkeypatch.setattr(generic, "read_pack", lambda path, embedding=None: pack)
    snakemake = job(tmp_path, "vanishing", {"seed": 7, "protocol": "all_rows"}, {})
    snakemake.output = [str(tmp_path / "L4.parquet")]
    assert generic.run_analysis(snakemake).equals(vanishing.last_row(pack))


# docs/extending.md's recipe for a scored analysis, applied to a toy one: attention entropy per
# head against L. Each entry is one file the recipe writes or edits (path -> new text, or for the
# registry the record appended to REGISTRY).
TOY_CORE = """\
\"\"\"Attention entropy of a row (a toy analysis of tests/test_generic_analysis.py).\"\"\"

import numpy as np


def row_entropy(weights: np.ndarray) -> np.ndarray:
    \"\"\"Shannon entropy (nats) of each row of ``weights``; 0 log 0 = 0.\"\"\"
    w = np.asarray(weights, dtype=np.float64)
    logs = np.log(np.where(w > 0, w, 1.0))
    return -(w * logs).sum(axis=1)


def row_entropy_reference(weights) -> list[float]:
    \"\"\"The same, one row and one weight at a time.\"\"\"
    import math

    return [-sum(x * math.log(x) for x in row if x > 0) for row in weights]
"""

TOY_MODULE = """\
\"\"\"Attention entropy per sample against L: a toy scored analysis.\"\"\"

from dataclasses import dataclass

import numpy as np
import polars as pl

from attnlimits.bootstrap import Band, joint_verdict
from attnlimits.checks import RTOL_FLOAT64, check_bound
from attnlimits.toy_entropy import row_entropy
from attnlimits_workflow.assemble.claims import interval_text, measure, partitions
from attnlimits_workflow.analyses.common import sample_columns
from attnlimits_workflow.assemble.summaries import count, violation_table

CLAIMS = {
    "entropy_grows": {
        "claim": "entropy grows with L",
        "paper": "not in the paper",
        "rule": "slope of the mean entropy against log L > 0",
    }
}
REPLICATED = (("L",), {"entropy_mean": ("entropy", "mean")})


@dataclass(frozen=True)
class Settings:
    seed: int
    unit: str


def run(job):
    w = job.pack.weights
    length = w.shape[1]
    per_nat = 1.0 / np.log(2.0) if job.settings.unit == "bits" else 1.0
    entropy = row_entropy(w) * per_nat
    # Gibbs: no distribution over L keys has more entropy than log L
    check = check_bound(entropy, np.log(length) * per_nat, upper=True, rtol=RTOL_FLOAT64)
    # layer, chunk and head of each sample: the bootstrap resamples them
    keys = sample_columns(job.pack, L=length)
    return pl.DataFrame(
        {**keys, "entropy": entropy, "entropy_bound_check": check.tolist(), "unit": job.settings.unit}
    )


def summarise(table):
    summary = table.group_by("L").agg(entropy_mean=pl.col("entropy").mean()).sort("L")
    bound = count(table, "entropy_bound_check", "entropy <= log L", "every (L) sample")
    return {"summary": summary, "violations": violation_table([bound])}


def score(card, summary, replicates, scoring):
    def slope(frame):
        g = frame.sort("L")
        return (float(np.polyfit(np.log(g["L"].to_numpy()), g["entropy_mean"].to_numpy(), 1)[0]),)

    (s,) = measure(slope, summary, partitions(replicates), card.level)
    claim_id, claim, paper, rule = card.texts("entropy_grows")
    verdict = joint_verdict((s,), (Band(low=1e-12),))
    card.add_measured(claim_id, claim, paper, f"slope {interval_text(s)}", rule, verdict, s)


def figure(summary, run):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot(summary["L"], summary["entropy_mean"])
    return fig, ""
"""

TOY_TEST = """\
import numpy as np
import pytest

from attnlimits.toy_entropy import row_entropy, row_entropy_reference


@pytest.mark.unit
def test_row_entropy_by_hand_and_against_its_reference():
    w = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    assert row_entropy(w) == pytest.approx([np.log(2), 0.0])
    assert row_entropy(w) == pytest.approx(row_entropy_reference(w.tolist()))
"""

TOY_RECORD = """\
    Analysis(
        "toy_entropy",
        claims=("entropy_grows",),
        figure="toy_entropy",
        caption="Mean attention entropy per sample against L.",
    ),
"""


# Its one setting, analysis.toy_entropy.unit, defined once: in the schema, with its default.
TOY_SCHEMA = """\
      toy_entropy:
        type: object
        additionalProperties: false
        description: attention entropy per sample against L (a toy analysis)
        properties:
          unit:
            enum: [nats, bits]
            default: bits
            description: the entropy's unit
"""


def apply_toy_recipe(root: Path) -> None:
    """docs/extending.md's recipe for a scored analysis with one setting, in ``root``."""
    (root / "src/attnlimits/toy_entropy.py").write_text(TOY_CORE)
    (root / "src/attnlimits_workflow/analyses/toy_entropy.py").write_text(TOY_MODULE)
    (root / "tests/test_toy_entropy.py").write_text(TOY_TEST)
    registry = root / "src/attnlimits_workflow/registry.py"
    text = registry.read_text()
    anchor = "\n)\n\nANALYSES: dict[str, Analysis]"
    assert text.count(anchor) == 1
    registry.write_text(
        text.replace(anchor, "\n" + TOY_RECORD + ")\n\nANALYSES: dict[str, Analysis]")
    )
    schema = root / "workflow/schemas/config.schema.yaml"
    text = schema.read_text()
    anchor = "    properties:\n      protocol:\n        enum: [all_rows, last_row]\n"
    assert text.count(anchor) == 1
    schema.write_text(text.replace(anchor, "    properties:\n" + TOY_SCHEMA + anchor[16:]))


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def copy_of_repository(tmp_path: Path) -> Path:
    """This checkout's tracked and unignored files, committed in a fresh repository."""
    copy = tmp_path / "repo"
    files = git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, files.split("\0")):
        if (REPO / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, copy / name)
    git(copy, "init", "-q")
    git(copy, "add", "-A")
    git(copy, "commit", "-q", "-m", "copy")
    return copy


@pytest.mark.workflow
def test_the_scored_analysis_recipe_is_five_files_and_plans_end_to_end(tmp_path):
    """docs/extending.md's recipe in a copy of the repository: a scored analysis with a setting
    touches five files by hand (its core function beside its reference, its module, its test,
    its record, its setting in the schema) and one generated (config/README.md); `snakemake -n
    all` then plans its table at every L, its summary, its figure (under
    `all`), and its summary and checks in table1's inputs; and the copy's unit tests pass (the
    real run: the next test)."""
    copy = copy_of_repository(tmp_path)
    apply_toy_recipe(copy)
    env = {**os.environ, "PYTHONPATH": str(copy / "src")}
    docs = [sys.executable, "-m", "attnlimits_workflow.config_docs", "--root", str(copy)]
    assert subprocess.run([*docs, "--check"], env=env, capture_output=True).returncode == 1
    subprocess.run([*docs, "--write"], env=env, check=True, capture_output=True)
    touched = sorted(line[3:] for line in git(copy, "status", "--porcelain", "-uall").splitlines())
    assert touched == [
        "config/README.md",  # generated: the setting's row
        "src/attnlimits/toy_entropy.py",
        "src/attnlimits_workflow/analyses/toy_entropy.py",
        "src/attnlimits_workflow/registry.py",
        "tests/test_toy_entropy.py",
        "workflow/schemas/config.schema.yaml",
    ]
    assert (
        "| `toy_entropy.unit` | `bits` | the entropy's unit |"
        in (copy / "config/README.md").read_text()
    )
    cmd = snakemake_command(
        copy / "Snakefile",
        copy / ".test",
        copy / ".test/config/config.yaml",
        "-n",
        "all",
        "--forceall",
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    lengths = [8, 16, 32, 64]  # .test's analysis.lengths
    for L in lengths:
        assert f"results/tiny-gpt2/analysis/toy_entropy/L{L}.parquet" in out
    for path in (
        "results/tiny-gpt2/summary/toy_entropy.csv",
        "results/tiny-gpt2/summary/toy_entropy_replicates.parquet",
        "results/tiny-gpt2/summary/violations_toy_entropy.csv",  # only table1 asks for it
        "figures/tiny-gpt2/toy_entropy.pdf",
        "figures/toy_entropy.png",  # the default model's copy
        "figures/compare/vanishing.pdf",  # not compared: the toy's record says so
    ):
        assert path in out, path
    assert "figures/compare/toy_entropy.pdf" not in out
    # the copy's own test of the toy passes, and so do the registry's and Table 1's unit tests,
    # which follow the records (the toy's included)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "unit"]
        + ["tests/test_toy_entropy.py", "tests/test_registry.py", "tests/test_assemble.py"],
        cwd=copy,
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]


@pytest.mark.workflow
@pytest.mark.skipif(
    os.environ.get("ATTNLIMITS_RECIPE_RUN") != "1",
    reason="runs the tiny workflow through Table 1 in a copy (~1 min): ATTNLIMITS_RECIPE_RUN=1",
)
def test_the_scored_analysis_recipe_runs_through_table1(tmp_path):
    """The recipe's toy analysis really run in a copy: the setting's default from the schema
    reaches its jobs, and Table 1 scores its claim, with its interval, and its bound."""
    copy = copy_of_repository(tmp_path)
    apply_toy_recipe(copy)
    env = {**os.environ, "PYTHONPATH": str(copy / "src")}
    # the real chain: the toy's tables, summary, bootstrap and figure by the generic rules, and
    # Table 1 by its rule, with the toy's claim and bound check among its rows
    targets = ["tables/tiny-gpt2/table1.csv", "figures/tiny-gpt2/toy_entropy.png"]
    cmd = snakemake_command(
        copy / "Snakefile",
        copy / ".test",
        copy / ".test/config/config.yaml",
        "--cores",
        "2",
        *targets,
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    # the setting's default, from the schema, reached the job
    per_length = pl.read_parquet(copy / ".test/results/tiny-gpt2/analysis/toy_entropy/L8.parquet")
    assert per_length["unit"].unique().to_list() == ["bits"]
    assert (per_length["entropy"] <= np.log2(8) + 1e-12).all()
    table = pl.read_csv(copy / ".test/tables/tiny-gpt2/table1.csv")
    rows = {r["claim_id"]: r for r in table.iter_rows(named=True)}
    toy = rows["entropy_grows"]
    assert toy["summary"] == "toy_entropy" and toy["resamples"] > 0, toy
    assert toy["low"] <= toy["value"] <= toy["high"]
    bound = rows["bound:entropy <= log L"]
    assert bound["summary"] == "toy_entropy" and bound["verdict"] != "not reproduced", bound
    # the toy's rows follow the other analyses' claims and come before the bound rows
    ids = table["claim_id"].to_list()
    assert ids.index("entropy_grows") == max(
        i for i, c in enumerate(ids) if not c.startswith("bound:")
    )


@pytest.mark.unit
def test_an_analysis_records_own_config_rule_is_checked(monkeypatch):
    """analysis.<name>'s cross-key rule is its record's config_errors (the registry), which the
    config check runs with the sections' rules, not a function of config_sections."""
    import copy
    import dataclasses

    import yaml

    from attnlimits_workflow import config_sections as checks
    from attnlimits_workflow import registry

    def config_errors(config):
        n, lengths = config["analysis"]["toy"]["n"], config["analysis"]["lengths"]
        return [f"analysis.toy.n: {n} must be below every L" for L in lengths[:1] if n >= L]

    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())  # lengths from 32 up
    cfg["analysis"]["toy"] = {"n": 32}
    toy = registry.Analysis("toy")
    monkeypatch.setattr(registry, "REGISTRY", (*registry.REGISTRY, toy))
    # a record without config_errors adds nothing
    assert checks.semantic_errors(copy.deepcopy(cfg)) == []
    toy = dataclasses.replace(toy, config_errors=config_errors)
    monkeypatch.setattr(registry, "REGISTRY", (*registry.REGISTRY[:-1], toy))
    for n, errors in ((8, []), (32, ["analysis.toy.n: 32 must be below every L"])):
        cfg["analysis"]["toy"] = {"n": n}
        assert checks.semantic_errors(copy.deepcopy(cfg)) == errors
