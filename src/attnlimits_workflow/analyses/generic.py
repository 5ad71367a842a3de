"""The generic path of an analysis: one rule, one adapter script per stage, serving every module
of this package whose record in the analyses' registry (attnlimits_workflow.registry) asks for
it. A registered module ``attnlimits_workflow.analyses.<name>`` holds, by convention:

- ``run(job) -> polars.DataFrame``: the table at one L (``job.pack``; ``job.settings`` filled from
  the rule's settings when the module has a ``Settings`` dataclass), written by rule ``analyse``;
- ``summarise(table) -> {"summary": ..., "violations": ...}``: the per-L tables reduced to
  summary/<name>.csv and the bound checks' counts (summary/violations_<name>.csv, which the
  scorecard reads), written by rule ``summarise_analysis``;
- where Table 1 reads its summary, ``REPLICATED = (groups, {summary column: (column, aggregation)})``:
  those summary columns recomputed on bootstrap resamples of the heads (and chunks) by the same
  rule (summary/<name>_replicates.parquet; empty where the module has none);
- where it has a figure, ``figure(summary, run) -> (Figure, note)``, drawn by rule
  ``analysis_figure`` with its record's caption;
- where Table 1 scores it, ``score(card, summary, replicates, scoring)`` (assemble.table1).

So a new analysis needs no script, no rule and no caption file of its own."""

from __future__ import annotations

import importlib
import json
from types import ModuleType, SimpleNamespace
from typing import Any

import polars as pl

from attnlimits_workflow.assemble.summaries import replicates_of
from attnlimits_workflow.jobs import Timer, job_logger, write_table
from attnlimits_workflow.packs import read_pack

from .common import Job, settings_from


def analysis_module(name: str) -> ModuleType:
    """The module of analysis ``name`` (attnlimits_workflow.analyses.<name>)."""
    return importlib.import_module(f"{__package__}.{name}")


def start_generic_job(snakemake: Any) -> tuple[ModuleType, Job]:
    """The analysis module named by the rule's ``analysis`` param and its job: log, pack, and
    the settings dataclass (if any) filled from the rule's ``settings`` mapping."""
    module = analysis_module(snakemake.params.analysis)
    log = job_logger(snakemake, snakemake.params.analysis)
    timer = Timer()
    kind = getattr(module, "Settings", None)
    settings = (
        None if kind is None else settings_from(kind, SimpleNamespace(**snakemake.params.settings))
    )
    # a reading of analysis.readings reads its embedding's x from its source run's pack
    pack = read_pack(snakemake.input.pack, snakemake.params.settings.get("embedding"))
    return module, Job(log, timer, pack, settings)


def run_analysis(snakemake: Any) -> pl.DataFrame:
    """Rule ``analyse``: the module's ``run`` at the pack's L, written to the rule's output."""
    module, job = start_generic_job(snakemake)
    table = module.run(job)
    write_table(table, snakemake.output[0])
    job.log.info(
        "%s L=%d: %d rows in %s",
        snakemake.params.analysis,
        job.pack.length,
        table.height,
        job.timer,
    )
    return table


def summarise_analysis(snakemake: Any) -> dict[str, pl.DataFrame]:
    """Rule ``summarise_analysis``: the module's ``summarise`` of its per-L tables, written to the
    rule's ``summary`` and ``violations`` outputs."""
    name = snakemake.params.analysis
    log = job_logger(snakemake, "summarise")
    timer = Timer()
    table = pl.concat([pl.read_parquet(p) for p in snakemake.input.tables], how="vertical_relaxed")
    module = analysis_module(name)
    tables = module.summarise(table)
    for output, frame in tables.items():
        write_table(frame, getattr(snakemake.output, output))
    log.info("%s summary written in %s", name, timer)
    timer = Timer()
    bootstrap = snakemake.params.bootstrap
    replicated = getattr(module, "REPLICATED", None)
    replicates = (
        pl.DataFrame({"replicate": []}, schema={"replicate": pl.Int64})
        if replicated is None
        else replicates_of(table, *replicated, bootstrap)
    )
    write_table(replicates, snakemake.output.replicates)
    log.info("%s bootstrap: %d rows in %s", name, replicates.height, timer)
    return tables


def draw_figure(snakemake: Any) -> None:
    """Rule ``analysis_figure``: the module's ``figure`` of its summary and the run description,
    saved to the rule's ``pdf`` and ``png`` outputs with the run caption."""
    from attnlimits_workflow.plotting import save_run_figure, use_style

    log = job_logger(snakemake, snakemake.wildcards.figure)
    use_style(snakemake.input.style)
    with open(snakemake.input.run) as f:
        run = json.load(f)
    fig, note = analysis_module(snakemake.params.analysis).figure(
        pl.read_csv(snakemake.input.summary), run
    )
    save_run_figure(fig, snakemake, note)
    log.info("%s written", snakemake.wildcards.figure)
