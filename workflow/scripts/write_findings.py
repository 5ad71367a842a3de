"""docs/findings.md: what the paper's claims look like on the configured models, from this run.

Every number on the page comes from the run's own files: each model's recorded run description
and config, its Table 1 and the cross-model scorecard. The prose lives in a template
(workflow/resources/findings_template.md) whose [[kind|claim_id|model]] fields are filled from the
scorecard (kind: verdict or measured), so a rerun rewrites the numbers with the text."""

import json
import re
import shutil
from pathlib import Path

import polars as pl
import yaml

from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import protocol_text
from attnlimits_workflow.tables import markdown_table

log = job_logger(snakemake, "findings")
inp, out = snakemake.input, snakemake.output
models = list(snakemake.params.models)
runs = {m: json.load(open(p)) for m, p in zip(models, inp.runs, strict=True)}
configs = {m: yaml.safe_load(open(p)) for m, p in zip(models, inp.configs, strict=True)}
score = pl.read_csv(inp.scorecard)
cells = {
    (r["claim_id"], m): (r[m], r[f"{m} measured"] or "")
    for r in score.iter_rows(named=True)
    for m in models
}
figures = Path(out.figures)


def field(match: re.Match) -> str:
    kind, rest = match.group(1).split("|", 1)
    claim_id, model = rest.rsplit("|", 1)  # claim ids may hold "|" (||J||)
    if (claim_id, model) not in cells:
        raise SystemExit(f"findings template: no scorecard cell {claim_id!r} x {model!r}")
    verdict, measured = cells[(claim_id, model)]
    return {"verdict": verdict, "measured": measured}[kind]


model_rows = []
for m in models:
    run, cfg = runs[m], configs[m]
    weights = "seeded random" if run["weights"] == "random_init" else "trained"
    kind = "causal" if run["causal"] else "bidirectional encoder"
    lengths = cfg["analysis"]["lengths"]
    model_rows.append(
        [
            m,
            f"{run['model_type']} ({kind})",
            weights,
            f"{run['layers']} x {run['heads']} ({run['kv_heads']} KV)",
            f"{min(lengths)}..{max(lengths)}",
            f"{run['chunks']} x {run['chunk_length']}",
            protocol_text(run),
        ]
    )
models_table = markdown_table(
    ["model", "type", "weights", "layers x heads", "L", "chunks", "protocol"], model_rows
)

verdict_rows = [[r["claim"], *[r[m] for m in models]] for r in score.iter_rows(named=True)]
scorecard_table = markdown_table(["claim", *models], verdict_rows)

summary_rows = []
for r in score.iter_rows(named=True):
    verdicts = {m: r[m] for m in models}
    holds = [m for m, v in verdicts.items() if v == "reproduced"]
    fails = [m for m, v in verdicts.items() if v == "not reproduced"]
    # a check no data could fail is kept apart from the tested ones (attnlimits.checks)
    vacuous = [m for m, v in verdicts.items() if v == "vacuous"]
    other = [
        f"{m} ({v})"
        for m, v in verdicts.items()
        if v not in ("reproduced", "not reproduced", "vacuous")
    ]
    summary_rows.append(
        [
            r["claim"],
            ", ".join(holds) or "none",
            ", ".join(fails) or "none",
            ", ".join(vacuous) or "-",
            ", ".join(other) or "-",
        ]
    )
summary_table = markdown_table(
    ["claim", "holds on", "fails on", "vacuous (cannot fail)", "cannot be decided"], summary_rows
)

measured_sections = []
for r in score.iter_rows(named=True):
    rows = [[m, r[m], r[f"{m} measured"] or ""] for m in models]
    measured_sections.append(
        f"**{r['claim']}**\n\n" + markdown_table(["model", "verdict", "measured"], rows)
    )

figures.mkdir(parents=True, exist_ok=True)
for png in inp.figures:
    shutil.copyfile(png, figures / Path(png).name)

# Fields first (claim ids hold braces, such as Corollary 3's min{1/(4T), sqrt 2}), then the blocks
# by plain replacement, so no text of the run is read as a format string.
page = re.sub(r"\[\[(.+?)\]\]", field, Path(inp.template).read_text())
blocks = {
    "command": snakemake.params.command,
    "models_table": models_table,
    "summary_table": summary_table,
    "scorecard_table": scorecard_table,
    "measured": "\n\n".join(measured_sections),
}
for name, text in blocks.items():
    page = page.replace("{" + name + "}", text)
with atomic_path(out.page) as tmp:
    Path(tmp).write_text(page)
log.info("findings page: %d models, %d claims", len(models), score.height)
