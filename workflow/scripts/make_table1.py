"""Table 1: the reproduction scorecard, one row per quantitative claim of the paper with this
run's value and verdict (attnlimits_workflow.assemble.table1; the claims are data in
workflow/resources/paper_claims.yaml; the summaries it reads are the registry's)."""

import json

import polars as pl
import yaml

from attnlimits_workflow.assemble.table1 import (
    NUMBER_COLUMNS,
    VIOLATION_TYPES,
    table1,
    table1_header,
)
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.registry import BOUND_CHECKS, SCORED
from attnlimits_workflow.tables import write_csv, write_latex, write_markdown

log = job_logger(snakemake, "table1")
inp, out = snakemake.input, snakemake.output
run = json.load(open(inp.run))
# every scored analysis of the registry: its summary and bootstrap replicates, named by it
table = table1(
    summaries={name: pl.read_csv(getattr(inp, name)) for name in SCORED},
    # each check tagged with its summary: a reading reaches a bound only through it
    violations=pl.concat(
        [
            pl.read_csv(p, schema_overrides=VIOLATION_TYPES).with_columns(summary=pl.lit(kind))
            for kind, p in zip(BOUND_CHECKS, inp.violations, strict=True)
        ]
    ),
    claims=yaml.safe_load(open(inp.claims)),
    run=run,
    analysis=snakemake.params.analysis,
    replicates={name: pl.read_parquet(getattr(inp, f"{name}_replicates")) for name in SCORED},
)
header = table1_header(run, snakemake.params.analysis["bootstrap"].get("unit", "head"))
write_csv(table, out.csv)
# the readable tables carry the interval in "measured"; its numbers are the CSV's columns
shown = table.drop("claim_id", "summary", *NUMBER_COLUMNS)
write_markdown(shown, out.md, header)
write_latex(shown, out.tex, header, "p{4.2cm}p{2.2cm}p{4.2cm}p{3.2cm}p{1.8cm}")
log.info("table1: %d claims, %d reproduced", table.height, (table["verdict"] == "reproduced").sum())
