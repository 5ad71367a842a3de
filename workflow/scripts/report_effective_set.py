"""N* per (variant, L) with its interval, beside the critical N: table, figure and the rank
correlation (attnlimits_workflow.assemble.effective_set_report)."""

import polars as pl

from attnlimits_workflow.assemble.effective_set_report import (
    NOTE,
    correlation_sentence,
    critical_by_length,
    effective_set_figure,
    effective_set_table,
    rank_correlations,
)
from attnlimits_workflow.effective_set import summarise
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import save_run_figure, use_style
from attnlimits_workflow.tables import write_csv, write_markdown

log = job_logger(snakemake, "effective_set_report")
use_style(snakemake.input.style)
p = snakemake.params
section = p.section
summary = summarise(
    [pl.read_parquet(t) for t in snakemake.input.tables],
    section["tau"],
    p.bootstrap["resamples"],
    p.bootstrap["level"],
    p.seed,
    section["max_n"],
)
critical = critical_by_length(pl.read_csv(snakemake.input.critical_n), p.masked, p.ks_alpha)
correlations = rank_correlations(summary, critical)
table = effective_set_table(summary, critical)
sentence = correlation_sentence(correlations)
write_csv(table, snakemake.output.csv)
write_csv(correlations, snakemake.output.correlations)
write_markdown(
    table,
    snakemake.output.md,
    f"N*_{section['tau']:g} per variant and L ({p.bootstrap['level']:.0%} paired-chunk "
    f"bootstrap intervals), beside N_crit/L. {sentence}",
)
save_run_figure(effective_set_figure(summary, critical, section["tau"]), snakemake, NOTE)
log.info(sentence)
