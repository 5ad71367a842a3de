"""docs/findings-8192.md: what changes in the paper's claims when one model's context grows, from
the Table 1 of two runs of it (e.g. SmolLM2 under the paper's protocol up to 1024 tokens in the
findings run, and up to its full 8192 positions in config/smollm2-all-rows.yaml).

The two runs come from two configurations, so the page is written by this module's command, not
by a rule of either run:

    python -m attnlimits_workflow.assemble.long_context \\
        --short tables/smollm2-135m --long tables/smollm2-135m-all-rows \\
        --short-run results/smollm2-135m/summary/run.json \\
        --long-run results/smollm2-135m-all-rows/summary/run.json \\
        --figures figures/smollm2-135m-all-rows --out docs/findings-8192.md
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
from pathlib import Path

import polars as pl

from attnlimits.protocol import first_rows_kept

from ..plotting import protocol_text
from ..robustness import DECIDED, side_of, sides_conflict, with_side
from ..tables import markdown_table
from .claims import MAXIMUM_CLAIMS
from .scorecard import interval_cell

FIGURES = ("fig2", "fig3", "fig4")


def change(
    short: str | None,
    long: str | None,
    short_side: str | None = None,
    long_side: str | None = None,
) -> str:
    """How a claim's verdict moves from the short run to the long one: "same", "flips" (decided
    both ways, or not reproduced on opposite sides of the rule: robustness.sides_conflict,
    review 40), "settled" (undecided, then decided), "unsettled" (decided, then undecided),
    "undecided in both", or "not comparable" (either side no verdict, vacuous, not testable,
    absent). ``short_side``, ``long_side``: where each run's "not reproduced" falls."""
    if short in DECIDED and long in DECIDED:
        opposite = bool(short_side and long_side and sides_conflict(short_side, long_side))
        return "same" if short == long and not opposite else "flips"
    if short == "undecided" and long in DECIDED:
        return "settled"
    if short in DECIDED and long == "undecided":
        return "unsettled"
    if short == long == "undecided":
        # neither run decided: no agreement to report (review 26)
        return "undecided in both"
    return "not comparable"


def shared(short: dict | None, long: dict | None) -> str:
    """ "same numbers" where both runs give the same verdict on the same number a claim reads,
    to the last digit: no agreement of two measurements, most likely read on data the two share (a length both analyse in full, the first rows every run keeps, one grid
    cell of the critical N), or a discrete count every head gives alike; "" else, and always
    where the verdicts differ (:func:`change` says how)."""
    if not (short and long) or short.get("value") is None:
        return ""
    if not math.isfinite(short["value"]):
        return ""  # two fits that ran off their search range are not one number
    if short.get("value") != long.get("value"):
        return ""
    if change(short.get("verdict"), long.get("verdict"), side_of(short), side_of(long)) != "same":
        return ""  # the verdicts differ on the same point: page() notes it beside the change
    if all(short.get(c) == long.get(c) for c in ("low", "high")):
        return "same numbers: identical to the last digit (shared data, or a count alike)"
    return "same numbers: the same point (shared data, or a count alike), each run's interval"


def row_verdict(row: dict | None) -> str | None:
    """A Table 1 row's verdict, "not reproduced (above)" where its side is known."""
    if row is None:
        return None
    return with_side(row["verdict"], side_of(row))


def compare_lengths(short: pl.DataFrame, long: pl.DataFrame) -> pl.DataFrame:
    """One row per claim of either Table 1 (in the long one's order, then the short one's rest):
    claim_id, claim, each run's verdict and its number with the interval (scorecard.interval_cell),
    and ``change`` (:func:`change`)."""

    def cells(table: pl.DataFrame) -> dict[str, dict]:
        return {r["claim_id"]: r for r in table.iter_rows(named=True)}

    a, b = cells(short), cells(long)
    ids = [*b, *(i for i in a if i not in b)]
    rows = []
    for claim_id in ids:
        s, lg = a.get(claim_id), b.get(claim_id)
        # the claim's words name each run's own grid (d~ plateaus ... at L = 1024 / 8192)
        texts = list(dict.fromkeys(r["claim"] for r in (s, lg) if r))
        rows.append(
            {
                "claim_id": claim_id,
                "claim": " / ".join(texts),
                "moved": disjoint(s, lg),
                "short": row_verdict(s),
                "short_verdict": s["verdict"] if s else None,
                "short_value": interval_cell(s) if s else "",
                "long": row_verdict(lg),
                "long_value": interval_cell(lg) if lg else "",
                "change": shared(s, lg)
                or change(
                    s and s["verdict"],
                    lg and lg["verdict"],
                    side_of(s) if s else None,
                    side_of(lg) if lg else None,
                ),
                # the same point under tested verdicts whose intervals differ: the intervals
                # (each run's resamples) moved the verdict, not the number
                "same_point": bool(
                    s
                    and lg
                    and s.get("value") is not None
                    and math.isfinite(s["value"])  # two fits off their range are not one point
                    and s["value"] == lg.get("value")
                    and s["verdict"] in TESTED
                    and lg["verdict"] in TESTED
                    and (s.get("low"), s.get("high")) != (lg.get("low"), lg.get("high"))
                ),
            }
        )
    return pl.DataFrame(rows)


TESTED = (*DECIDED, "undecided")
# Table 1's words for a critical N known only to its grid cell (older tables: whose first N
# tried already passed): its number is the cell's upper end
FLOOR = ("read on grid cells", "first N tried already passed")


def disjoint(short: dict | None, long: dict | None) -> bool:
    """Whether the two runs' intervals of the number a claim reads do not overlap: the value
    moved with the context, whatever the verdicts say. Only where both are tested (a not
    testable number is no measurement) and neither sits on a search's floor (an upper bound)."""
    if not (short and long) or short["verdict"] not in TESTED or long["verdict"] not in TESTED:
        return False
    if str(short.get("claim_id") or "").split(":", 1)[0] in MAXIMUM_CLAIMS:
        # a maximum over heads: its bootstrap interval understates the uncertainty, so two
        # that do not overlap are no evidence that the number moved
        return False
    if any(f in (short.get("measured") or "") + (long.get("measured") or "") for f in FLOOR):
        return False
    ends = [(r.get("low"), r.get("high")) for r in (short, long) if r]
    if len(ends) < 2 or any(lo is None or hi is None for lo, hi in ends):
        return False
    (a_lo, a_hi), (b_lo, b_hi) = ends
    return a_hi < b_lo or b_hi < a_lo


def lengths(run: dict) -> str:
    return f"{run['chunk_length']} tokens" if "chunk_length" in run else "?"


def runs_text(short_run: dict, long_run: dict) -> tuple[str, str]:
    """What the two runs read, from their descriptions (run.json): the texts, and the rows both
    keep where the long run draws rows (protocol.first_rows_kept of analysis.all_rows.rows)."""
    short_text, long_text = short_run.get("corpus", "?"), long_run.get("corpus", "?")
    where = (
        f"on the same text ({short_text})"
        if short_text == long_text
        else f"on another text ({long_text}; the short run reads {short_text})"
    )
    texts = (
        f"The short run is the findings run's entry on {short_text} under its default reading; "
        f"the long one reaches the model's full positions {where}, one reading only (the "
        "findings run's other readings and its second text are not repeated here)."
    )
    drawn = long_run.get("all_rows_rows")
    shared = "a length both analyse in full"
    if isinstance(drawn, int):
        shared += f", the first {first_rows_kept(drawn)} rows both keep"
    return texts, shared


def page(
    compared: pl.DataFrame,
    short_run: dict,
    long_run: dict,
    measured: dict[str, str],
    figures: list[str],
    command: str,
) -> str:
    """The markdown page: the two runs, the verdicts side by side, what changes, the long run's
    figures. ``measured``: the long Table 1's measured text per claim id (its detail)."""

    def describe(run: dict, name: str) -> str:
        return f"- **{name}** ({run['model']}, up to {lengths(run)}): {protocol_text(run)}."

    table = markdown_table(
        ["claim", f"up to {lengths(short_run)}", f"up to {lengths(long_run)}", "change"],
        [
            [
                r["claim"],
                f"{r['short'] or '-'} ({r['short_value']})"
                if r["short_value"]
                else r["short"] or "-",
                f"{r['long'] or '-'} ({r['long_value']})" if r["long_value"] else r["long"] or "-",
                r["change"]
                + (
                    " (the same point: only the intervals differ)"
                    if r["same_point"] and not r["change"].startswith("same numbers")
                    else ""
                ),
            ]
            for r in compared.iter_rows(named=True)
        ],
    )
    short_l, long_l = lengths(short_run), lengths(long_run)

    def bullets(rows: pl.DataFrame, line, empty: str = "- None.") -> str:
        return "\n".join(line(r) for r in rows.iter_rows(named=True)) or empty

    moves = bullets(
        compared.filter(pl.col("change").is_in(["flips", "settled", "unsettled"])),
        lambda r: (
            f"- **{r['claim']}**: {r['short']} up to {short_l}, {r['long']} up to "
            f"{long_l} ({measured.get(r['claim_id'], '')})."
        ),
        "- No decided verdict changes.",
    )
    shifted = bullets(
        compared.filter(pl.col("moved")),
        lambda r: (
            f"- {r['claim']}: {r['short_value']} up to {short_l}, {r['long_value']} up to "
            f"{long_l} ({r['short']}, then {r['long']})."
        ),
    )
    lost = bullets(
        compared.filter(
            (pl.col("change") == "not comparable") & pl.col("short_verdict").is_in(list(DECIDED))
        ),
        lambda r: (
            f"- {r['claim']}: {r['short']} up to {short_l}; {r['long'] or 'absent'} up to "
            f"{long_l} ({measured.get(r['claim_id'], '')})."
        ),
    )
    pictures = "\n\n".join(f"![{f}]({f})" for f in figures)
    texts, shared = runs_text(short_run, long_run)
    return f"""# What changes at the full context: {long_run["model"]}

This page is generated from two runs' Table 1 (docs/findings.md explains the verdicts, the
intervals and the rules; each run's Table 1 is under tables/). Rebuild it with:

```bash
{command}
```

{describe(short_run, "short")}
{describe(long_run, "long")}

{texts}
Where the long run draws rows (analysis.all_rows.rows), its numbers are estimates with the
standard errors and limits of docs/protocols.md ("Sampled rows"): the gradient claims that read
T <= 0.01 and the bound checks with no violation among the drawn rows are "not testable" there,
d~ at N = 1 and the gradient's figure at small T carry errors that miss (docs/performance.md),
and the critical N leans low. The two runs differ in more than L: their L grids (the slopes fit
over different lengths), their chunks, the rows analysed, and the plateau, the saturation and
the gradient are read at each run's own longest L. Lemma 1's row reads the last rows under
either protocol (every chunk's: {short_run.get("chunks", "?")} in the short run, {long_run.get("chunks", "?")} in the long). A verdict or a number that
moves is therefore what this pair of runs shows, not the context's effect alone: on the
findings page the second text moves some of the same numbers as much. "same numbers" marks rows
whose verdict and number are the same to the last digit: most likely read on data both runs share
({shared}, one grid cell of the critical N) or
a count every head gives alike: not two measurements that agree.

## Verdicts side by side

{table}

## What changes between the two

{moves}

## Numbers that moved (the two intervals do not overlap)

Claims read on a maximum over heads are left out: their intervals understate the uncertainty.

{shifted}

## Decided on the short run, not on the long one

{lost}

## The long run's figures

{pictures}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", required=True, help="the short run's tables/<model> folder")
    parser.add_argument("--long", required=True, help="the long run's tables/<model> folder")
    parser.add_argument("--short-run", required=True, help="its results/<model>/summary/run.json")
    parser.add_argument("--long-run", required=True, help="its results/<model>/summary/run.json")
    parser.add_argument("--figures", required=True, help="the long run's figures/<model> folder")
    parser.add_argument("--out", required=True, help="the page, e.g. docs/findings-8192.md")
    args = parser.parse_args(argv)
    short = pl.read_csv(Path(args.short) / "table1.csv", infer_schema_length=None)
    long = pl.read_csv(Path(args.long) / "table1.csv", infer_schema_length=None)
    out = Path(args.out)
    folder = out.with_suffix("")
    folder.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in FIGURES:
        source = Path(args.figures) / f"{name}.png"
        if source.exists():
            shutil.copyfile(source, folder / source.name)
            copied.append(f"{folder.name}/{source.name}")
    command = (
        "python -m attnlimits_workflow.assemble.long_context "
        f"--short {args.short} --long {args.long} --short-run {args.short_run} "
        f"--long-run {args.long_run} --figures {args.figures} --out {args.out}"
    )
    text = page(
        compare_lengths(short, long),
        json.loads(Path(args.short_run).read_text()),
        json.loads(Path(args.long_run).read_text()),
        dict(zip(long["claim_id"], long["measured"], strict=True)),
        copied,
        command,
    )
    out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
