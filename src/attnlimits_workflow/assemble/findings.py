"""docs/findings.md: what the paper's claims look like on the configured models, from this run.

Every number on the page comes from the run's own files: each model's recorded run description
and config, its Table 1 and the cross-model scorecard. The prose lives in a template
(workflow/resources/findings_template.md) whose [[kind|claim_id|model]] fields are filled from the
scorecard (kind: verdict or measured), so a rerun rewrites the numbers with the text."""

import re

import polars as pl

from ..plotting import protocol_text
from ..tables import markdown_table


class MissingCell(ValueError):
    """A template field names a (claim id, model) the scorecard lacks."""


def models_table(runs: dict[str, dict], configs: dict[str, dict]) -> str:
    """One row per model: its type, weights, layers x heads, lengths, chunks and protocol."""
    model_rows = []
    for m, run in runs.items():
        weights = "seeded random" if run["weights"] == "random_init" else "trained"
        kind = "causal" if run["causal"] else "bidirectional encoder"
        lengths = configs[m]["analysis"]["lengths"]
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
    return markdown_table(
        ["model", "type", "weights", "layers x heads", "L", "chunks", "protocol"], model_rows
    )


def summary_row(claim: str, verdicts: dict[str, str]) -> list[str]:
    """Per claim: the models it holds on, fails on, is vacuous on, and the rest with their
    verdicts."""
    holds = [m for m, v in verdicts.items() if v == "reproduced"]
    fails = [m for m, v in verdicts.items() if v == "not reproduced"]
    # a check no data could fail is kept apart from the tested ones (attnlimits.checks)
    vacuous = [m for m, v in verdicts.items() if v == "vacuous"]
    other = [
        f"{m} ({v})"
        for m, v in verdicts.items()
        if v not in ("reproduced", "not reproduced", "vacuous")
    ]
    return [
        claim,
        ", ".join(holds) or "none",
        ", ".join(fails) or "none",
        ", ".join(vacuous) or "-",
        ", ".join(other) or "-",
    ]


def fill_fields(template: str, score: pl.DataFrame, models: list[str]) -> str:
    """The template's [[verdict|claim_id|model]] and [[measured|claim_id|model]] fields, from the
    scorecard; raises MissingCell for a cell it lacks."""
    cells = {
        (r["claim_id"], m): (r[m], r[f"{m} measured"] or "")
        for r in score.iter_rows(named=True)
        for m in models
    }

    def field(match: re.Match) -> str:
        kind, rest = match.group(1).split("|", 1)
        claim_id, model = rest.rsplit("|", 1)  # claim ids may hold "|" (||J||)
        if (claim_id, model) not in cells:
            raise MissingCell(f"findings template: no scorecard cell {claim_id!r} x {model!r}")
        verdict, measured = cells[(claim_id, model)]
        return {"verdict": verdict, "measured": measured}[kind]

    return re.sub(r"\[\[(.+?)\]\]", field, template)


def findings_page(
    template: str,
    score: pl.DataFrame,
    runs: dict[str, dict],
    configs: dict[str, dict],
    command: str,
) -> str:
    """The page: the template's fields, then its {blocks} (the command, the models, the summary,
    the scorecard, and each claim's measured values per model). ``runs`` and ``configs`` per
    model, in the scorecard's column order."""
    models = list(runs)
    rows = list(score.iter_rows(named=True))
    summary_table = markdown_table(
        ["claim", "holds on", "fails on", "vacuous (cannot fail)", "cannot be decided"],
        [summary_row(r["claim"], {m: r[m] for m in models}) for r in rows],
    )
    scorecard_table = markdown_table(
        ["claim", *models], [[r["claim"], *[r[m] for m in models]] for r in rows]
    )
    measured = [
        f"**{r['claim']}**\n\n"
        + markdown_table(
            ["model", "verdict", "measured"], [[m, r[m], r[f"{m} measured"] or ""] for m in models]
        )
        for r in rows
    ]
    # Fields first (claim ids hold braces, such as Corollary 3's min{1/(4T), sqrt 2}), then the
    # blocks by plain replacement, so no text of the run is read as a format string.
    page = fill_fields(template, score, models)
    blocks = {
        "command": command,
        "models_table": models_table(runs, configs),
        "summary_table": summary_table,
        "scorecard_table": scorecard_table,
        "measured": "\n\n".join(measured),
    }
    for name, text in blocks.items():
        page = page.replace("{" + name + "}", text)
    return page
