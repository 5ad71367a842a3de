"""The cross-model scorecard: one row per claim of Table 1, one verdict per model
(attnlimits_workflow.assemble.scorecard)."""

import json
from pathlib import Path

import polars as pl
import yaml

from attnlimits_workflow.assemble.findings import (
    GLANCE_TITLE,
    glance_inputs,
    glance_markdown,
    glance_report_text,
    glance_rows,
)
from attnlimits_workflow.assemble.scorecard import scorecard, scorecard_header
from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.tables import write_csv, write_markdown

log = job_logger(snakemake, "scorecard")
models = list(snakemake.params.models)
tables = {m: pl.read_csv(p) for m, p in zip(models, snakemake.input.tables, strict=True)}
runs = {m: json.load(open(p)) for m, p in zip(models, snakemake.input.runs, strict=True)}
table = scorecard(tables)
write_csv(table, snakemake.output.csv)
# each model's verdict beside the interval it read
shown = table.select("claim", *(c for m in models for c in (m, f"{m} interval")))
write_markdown(shown, snakemake.output.md, scorecard_header(table, runs))
configs = {m: yaml.safe_load(open(p)) for m, p in zip(models, snakemake.input.configs, strict=True)}
glance = glance_rows(*glance_inputs(table, configs))
with atomic_path(snakemake.output.glance) as tmp:
    Path(tmp).write_text(f"# {GLANCE_TITLE}\n\n{glance_markdown(*glance)}\n")
# the HTML report opens with the same table (Snakefile's report: reads this file once made)
description = Path(snakemake.input.description).read_text()
with atomic_path(snakemake.output.report_text) as tmp:
    Path(tmp).write_text(glance_report_text(description, *glance))
log.info("scorecard: %d claims x %d models", table.height, len(models))
