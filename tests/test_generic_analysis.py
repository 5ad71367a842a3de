"""The generic path of an analysis (attnlimits_workflow.analyses.generic): a module with the
conventional entry points is run, summarised and drawn by the generic rules, with no script, rule
or caption file of its own."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
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


TOY_MODULE = '''
"""A toy analysis registered the generic way (test_generic_analysis)."""
from dataclasses import dataclass

import polars as pl

CAPTION = "The toy's figure."


@dataclass(frozen=True)
class Settings:
    seed: int


def run(job):
    return pl.DataFrame({"L": [job.pack.length]})


def summarise(table):
    return {"summary": table, "violations": table}


def figure(summary, run):
    raise NotImplementedError
'''


@pytest.mark.workflow
def test_a_registered_module_is_planned_end_to_end(tmp_path):
    """A copy of the repository plus one module and one registration line: `snakemake -n all`
    plans its table at every L, its summary, its figure (under `all`) and its checks in table1."""
    copy = tmp_path / "repo"
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, files):
        if (REPO / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, copy / name)
    (copy / "src/attnlimits_workflow/analyses/toy.py").write_text(textwrap.dedent(TOY_MODULE))
    rules = copy / "workflow/rules/analysis.smk"
    anchor = 'register_analysis("vanishing")'
    assert anchor in rules.read_text()
    rules.write_text(
        rules.read_text().replace(anchor, f'{anchor}\nregister_analysis("toy", figure="toy")')
    )
    cmd = snakemake_command(
        copy / "Snakefile",
        copy / ".test",
        copy / ".test/config/config.yaml",
        "-n",
        "all",
        "--forceall",
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    lengths = [8, 16, 32, 64]  # .test's analysis.lengths
    for L in lengths:
        assert f"results/tiny-gpt2/analysis/toy/L{L}.parquet" in out
    for path in (
        "results/tiny-gpt2/summary/toy.csv",
        "results/tiny-gpt2/summary/violations_toy.csv",  # only table1 asks for it
        "figures/tiny-gpt2/toy.pdf",
        "figures/toy.png",  # the default model's copy
    ):
        assert path in out, path


@pytest.mark.unit
def test_an_analysis_modules_own_config_rule_is_checked(tmp_path, monkeypatch):
    """analysis.<name>'s cross-key rule sits in its module (config_errors), not in config.py."""
    import copy

    import yaml

    from attnlimits_workflow import config_sections as checks

    (tmp_path / "toy.py").write_text("\ndef config_errors(config):\n    ...\n")
    toy = types.ModuleType("attnlimits_workflow.analyses.toy")

    def config_errors(config):
        n, lengths = config["analysis"]["toy"]["n"], config["analysis"]["lengths"]
        return [f"analysis.toy.n: {n} must be below every L" for L in lengths[:1] if n >= L]

    toy.config_errors = config_errors
    monkeypatch.setitem(sys.modules, toy.__name__, toy)
    monkeypatch.setattr(checks, "ANALYSES_DIR", tmp_path)
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())  # lengths from 32 up
    for n, errors in ((8, []), (32, ["analysis.toy.n: 32 must be below every L"])):
        cfg["analysis"]["toy"] = {"n": n}
        assert checks.semantic_errors(copy.deepcopy(cfg)) == errors
    # a section without a module, or whose module states no rule, adds nothing
    cfg["analysis"]["toy"] = {"n": 32}
    (tmp_path / "toy.py").write_text("CAPTION = 'no rules'\n")
    assert checks.semantic_errors(cfg) == []
