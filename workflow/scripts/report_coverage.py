"""Multi-head coverage: measured against the paper's 1 - (1 - p)^H and the overlap-aware
prediction, table and figure (attnlimits_workflow.assemble.coverage_report)."""

import json

import polars as pl

from attnlimits_workflow.assemble.coverage_report import (
    NOTE,
    coverage_by,
    coverage_figure,
    coverage_header,
    coverage_table,
)
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import save_run_figure, use_style
from attnlimits_workflow.tables import write_csv, write_markdown

log = job_logger(snakemake, "coverage")
use_style(snakemake.input.style)
cov = pl.read_parquet(snakemake.input.coverage)
n_conf = snakemake.params.n
table = coverage_table(cov, n_conf)
run = json.loads(open(snakemake.input.run).read())
write_csv(table, snakemake.output.csv)
write_markdown(table, snakemake.output.md, coverage_header(cov, n_conf, run))
save_run_figure(coverage_figure(cov, n_conf), snakemake, NOTE, analysed_rows=True)
by_layer = coverage_by(cov, n_conf)[1]
log.info("coverage: mean %.3f at N=%d", by_layer["coverage"].mean(), n_conf)
