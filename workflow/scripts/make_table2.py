"""Table 2: normalizer x diagnostic at the largest L (and N_s/N at beyond.n)
(attnlimits_workflow.assemble.table2)."""

import json

import polars as pl

from attnlimits_workflow.assemble.table2 import table2, table2_header
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.tables import write_csv, write_latex, write_markdown

log = job_logger(snakemake, "table2")
inp, out, n = snakemake.input, snakemake.output, snakemake.params.n
by_length = pl.read_csv(inp.by_length)
sep = pl.read_csv(inp.separability)
table = table2(by_length, sep, n, list(snakemake.params.normalizers))
header = table2_header(json.load(open(inp.run)), by_length, sep, n)
write_csv(table, out.csv)
write_markdown(table, out.md, header)
write_latex(table, out.tex, header, "ll" + "r" * (table.width - 2))
log.info("table2: %d normalizers", table.height)
