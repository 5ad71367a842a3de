"""The cross-model scorecard: one row per claim of Table 1, one verdict per model.

Rows join on Table 1's claim_id (the claim texts name each run's own grid values); a claim a
model's table lacks reads "not scored"."""

import math

import polars as pl

from ..plotting import protocol_text

NOT_SCORED = "not scored"


def interval_cell(row: dict) -> str:
    """``value [low, high]`` of a Table 1 row (its bootstrap or exact interval), the value
    alone where it has no interval, "" where it has no number (or a table before intervals)."""

    def f(v) -> str:
        return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3g}"

    value = row.get("value")
    if value is None:
        return ""
    # a rule that reads several numbers names the one its verdict rests on
    name = f"{row['reads']} " if row.get("reads") else ""
    if row.get("low") is None and row.get("high") is None:
        return name + f(value)
    return f"{name}{f(value)} [{f(row.get('low'))}, {f(row.get('high'))}]"


def scorecard(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """claim_id, claim, then per model (``tables``: its Table 1, in column order) its verdict,
    "<model> interval" (the number the verdict reads and its interval: :func:`interval_cell`)
    and "<model> measured"; claims in order of first appearance."""
    ids: list[str] = []
    text: dict[str, str] = {}
    for t in tables.values():
        for r in t.iter_rows(named=True):
            if r["claim_id"] not in text:
                ids.append(r["claim_id"])
                text[r["claim_id"]] = r["claim"]
    cells = {
        m: {
            r["claim_id"]: (r["verdict"], interval_cell(r), r["measured"])
            for r in t.iter_rows(named=True)
        }
        for m, t in tables.items()
    }
    rows = []
    for claim_id in ids:
        row = {"claim_id": claim_id, "claim": text[claim_id]}
        for m in tables:
            verdict, interval, measured = cells[m].get(claim_id, missing(claim_id, cells[m]))
            row[m] = verdict
            row[f"{m} interval"] = interval
            row[f"{m} measured"] = measured
        rows.append(row)
    return pl.DataFrame(rows)


def missing(claim_id: str, cells: dict[str, tuple]) -> tuple[str, str, str]:
    """The cell of a claim a model's Table 1 lacks: "not applicable" for the other reading of
    a causal row's masked keys (<claim>:prefix, <claim>:non_selected) where the model scores the
    claim once (an encoder, or the last-row protocol: no masked keys), else "not scored"."""
    base, _, suffix = claim_id.rpartition(":")
    if base in cells and suffix in ("prefix", "non_selected"):
        return "not applicable", "", "one reading only: no masked keys in the rows analysed"
    return NOT_SCORED, "", ""


# the outcomes of a tested row: a rule read against data that could have failed it
TESTED = ("reproduced", "not reproduced", "undecided")
BOUND_PREFIX = "bound:"


def verdict_counts(verdicts: list[str]) -> str:
    """``2 reproduced, 1 not reproduced, 0 undecided of 3 tested (4 vacuous, 1 not scored)``:
    the tested outcomes over the tested rows, and the untested rows by outcome apart, so that
    a vacuous check or an unscored claim never counts for or against a model."""
    tested = [v for v in verdicts if v in TESTED]
    untested: dict[str, int] = {}
    for v in verdicts:
        if v not in TESTED:
            untested[v] = untested.get(v, 0) + 1
    text = ", ".join(f"{tested.count(v)} {v}" for v in TESTED) + f" of {len(tested)} tested"
    if untested:
        text += " (" + ", ".join(f"{n} {v}" for v, n in untested.items()) + ")"
    return text


def scorecard_header(table: pl.DataFrame, runs: dict[str, dict]) -> str:
    """One line per model (``runs``: its run description): what it is, and its verdicts counted
    apart for the paper's claims and for the bound checks (``bound:`` rows), each over the rows
    a test could have failed (:func:`verdict_counts`)."""
    lines = []
    is_bound = [c.startswith(BOUND_PREFIX) for c in table["claim_id"].to_list()]
    for m, run in runs.items():
        weights = "seeded random weights" if run["weights"] == "random_init" else "trained weights"
        verdicts = table[m].to_list()
        claims = [v for v, b in zip(verdicts, is_bound, strict=True) if not b]
        bounds = [v for v, b in zip(verdicts, is_bound, strict=True) if b]
        counts = f"claims: {verdict_counts(claims)}"
        if bounds:
            counts += f"; bound checks: {verdict_counts(bounds)}"
        lines.append(
            f"- {m}: {run['model_type']}, {weights}, {run['layers']} layers x {run['heads']} "
            f"heads; {protocol_text(run)}; {counts}"
        )
    return (
        "Reproduction scorecard, models side by side (verdicts by Table 1's rules). A row counts "
        "as tested when its rule could have failed on the data; vacuous, not testable, not "
        "applicable, not scored and no-verdict rows are counted apart. The counts are of rows, "
        "not of independent tests: one measurement can decide several rows (a claim under both "
        "readings of the masked keys, the critical N's two bands under each comparator, the "
        "Corollary 3 checks on ||J|| and on g):\n\n" + "\n".join(lines)
    )
