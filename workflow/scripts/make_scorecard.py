"""The cross-model scorecard: one row per claim of Table 1, one verdict per model.

Rows join on Table 1's claim_id (the claim texts name each run's own grid values); a claim a
model's table lacks reads "not scored"."""

import json

import polars as pl

from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import protocol_text
from attnlimits_workflow.tables import write_csv, write_markdown

log = job_logger(snakemake, "scorecard")
models = list(snakemake.params.models)
tables = {m: pl.read_csv(p) for m, p in zip(models, snakemake.input.tables, strict=True)}
runs = {m: json.load(open(p)) for m, p in zip(models, snakemake.input.runs, strict=True)}

ids: list[str] = []
text: dict[str, str] = {}
for t in tables.values():
    for r in t.iter_rows(named=True):
        if r["claim_id"] not in text:
            ids.append(r["claim_id"])
            text[r["claim_id"]] = r["claim"]
cells = {
    m: {r["claim_id"]: (r["verdict"], r["measured"]) for r in t.iter_rows(named=True)}
    for m, t in tables.items()
}
rows = []
for claim_id in ids:
    row = {"claim_id": claim_id, "claim": text[claim_id]}
    for m in models:
        verdict, measured = cells[m].get(claim_id, ("not scored", ""))
        row[m] = verdict
        row[f"{m} measured"] = measured
    rows.append(row)
table = pl.DataFrame(rows)
write_csv(table, snakemake.output.csv)

lines = []
for m in models:
    run = runs[m]
    weights = "seeded random weights" if run["weights"] == "random_init" else "trained weights"
    lines.append(
        f"- {m}: {run['model_type']}, {weights}, {run['layers']} layers x {run['heads']} heads; {protocol_text(run)}"
    )
    verdicts = table[m].to_list()
    lines[-1] += f"; {verdicts.count('reproduced')} of {len(verdicts)} rows reproduced"
header = (
    "Reproduction scorecard, models side by side (verdicts by Table 1's rules):\n\n"
    + "\n".join(lines)
)
write_markdown(table.select("claim", *models), snakemake.output.md, header)
log.info("scorecard: %d claims x %d models", len(ids), len(models))
