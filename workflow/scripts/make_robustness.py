"""tables/<model>/robustness.{csv,md}: every claim of Table 1 under every reading of
analysis.readings (and of a causal row's masked keys), robust, fragile, unresolved or untested
(attnlimits_workflow.robustness.robustness_table)."""

import polars as pl

from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.robustness import robustness_table
from attnlimits_workflow.tables import write_csv, write_markdown

log = job_logger(snakemake, "robustness")
readings = snakemake.params.readings
tables = {
    reading: pl.read_csv(path, infer_schema_length=None)
    for reading, path in zip(readings, snakemake.input.tables, strict=True)
}
applies = {reading: set(kinds) for reading, kinds in snakemake.params.applies.items()}
by_reading, by_claim = robustness_table(tables, readings[0], snakemake.params.masked, applies)
write_csv(by_reading, snakemake.output.csv)
header = (
    f"Robustness of Table 1 over the readings {', '.join(readings)} of {snakemake.wildcards.model}"
    " (and both readings of a causal row's masked keys): robust = decided the same way under every"
    " one; fragile = decided differently; unresolved = undecided under one; untested = undecidable"
    " under one (vacuous, not testable) or decided under fewer than two, and a maximum over heads"
    " however its readings decide it (its head bootstrap understates the uncertainty)"
)
write_markdown(by_claim, snakemake.output.md, header)
log.info("robustness: %s", dict(by_claim["robustness"].value_counts().iter_rows()))
