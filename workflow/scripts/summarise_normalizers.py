"""Per (normalizer, L) aggregates of the normalizer diagnostics, and N_s/N per (normalizer, N)
(attnlimits_workflow.assemble.normalizer_summary.summarise_normalizers)."""

import polars as pl

from attnlimits_workflow.assemble.normalizer_summary import summarise_normalizers
from attnlimits_workflow.jobs import job_logger, write_table

log = job_logger(snakemake, "summarise_normalizers")
inp, out = snakemake.input, snakemake.output
kinds = {name: entry["kind"] for name, entry in snakemake.params.normalizers.items()}
tables = summarise_normalizers(
    samples=pl.concat([pl.read_parquet(p) for p in inp.samples]),
    critical_n=pl.concat([pl.read_parquet(p) for p in inp.critical_n]),
    separability=pl.concat([pl.read_parquet(p) for p in inp.separability]),
    kinds=kinds,
)
write_table(tables["by_length"], out.by_length)
write_table(tables["separability"], out.separability)
log.info("%d normalizers x %d lengths summarised", len(kinds), tables["by_length"]["L"].n_unique())
