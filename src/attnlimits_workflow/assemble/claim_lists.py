"""The findings page's lists of claims (docs/findings.md): the robust results with the number
each verdict reads, the fragile claims and what flips them, the claims the two readings of a
causal row's masked keys decide differently, and the unresolved ones. Each is a function of the
claims' robustness status (findings.claim_status) and the scorecard."""

import re
from collections.abc import Hashable, Mapping

import polars as pl

from ..robustness import (
    FRAGILE,
    MASKED_READINGS,
    NOT_APPLICABLE,
    UNRESOLVED,
    compare,
    text_side,
    with_side,
)
from .claims import MAXIMUM_CLAIMS, NAMED_SIDE_TEXT, SIDE_TEXT

# Claims that one bound ties to another claim: where both are robust, the tied claim's bullet
# says so, so the list does not read one fact as two (docs/paper-notes.md section 19). The tie
# holds where one is reproduced and the other not (the bound makes the first imply the second);
# where both are reproduced the bound forbids them on the same rows, and the bullet says they
# are in tension instead (review 26); where both are not reproduced neither implies the other:
# no note (review 31).
TIED_CLAIMS = {
    "linear_in_length": (
        "vanishing",
        "one question with Lemma 1's bullet, not a second finding: on rows whose peak decays "
        "like c / L, d~ <= (N c + 1) max ||x||, so a top-N set that keeps its mass is what both "
        "read (the section on Lemma 1 below)",
        "in tension with Lemma 1's bullet: on rows whose peak decays like c / L, d~ <= (N c + 1) "
        "max ||x|| cannot grow linearly, so both cannot hold on the same rows; Lemma 1 reads the "
        "analysed rows only, and the other rows must keep their peak (the section on Lemma 1 "
        "below)",
    ),
}


# Claims that read the same rows under either protocol (Lemma 1 reads the analysed rows, the
# pack's, whatever analysis.protocol): two entries of one model's weights on these give one
# measurement, named together. Any other claim's equal text is two measurements (review 31).
SAME_ROWS_CLAIMS = {"vanishing"}


def what_we_can_say(
    status: pl.DataFrame,
    score: pl.DataFrame,
    groups: dict[str, dict[str, str]],
    weights_of: Mapping[str, Hashable] | None = None,
) -> str:
    """One bullet per claim with a robust result: the models whose verdict is decided, the same
    on every text and under every reading, each with the value its verdict reads and that
    value's interval per text (the scorecard's interval column). Claims read on
    a maximum over heads (table1.MAXIMUM_CLAIMS) are named apart: a resample's maximum cannot
    exceed the measured one, so their intervals are too narrow to call a result robust.
    ``weights_of``: per model group, what identifies its weights and texts (findings.
    rows_identity); two groups are named together as "the same rows" only on a claim of
    SAME_ROWS_CLAIMS, with the same identity and the same values (none without it)."""
    # the statistic the verdict reads with its interval, compact; the measure in words where the
    # scorecard has no interval column (the full measures are the page's last section)
    measured = {
        (r["claim_id"], m): evidence(r.get(f"{m} interval") or "", r[f"{m} measured"] or "")
        for r in score.iter_rows(named=True)
        for m in groups_entries(groups)
    }
    score_text = {
        (r["claim_id"], m): r[f"{m} measured"] or ""
        for r in score.iter_rows(named=True)
        for m in groups_entries(groups)
    }
    # the side a "not reproduced" falls on, where Table 1 names it ("above the rule's ...: "),
    # the same on every text of the group (a robust verdict is decided alike on each)
    sides = {}
    for r in status.filter(pl.col("robust")).iter_rows(named=True):
        found = set()
        for entry in groups[r["model"]].values():
            text = score_text.get((r["claim_id"], entry), "")
            plain, named = SIDE_TEXT.match(text), NAMED_SIDE_TEXT.match(text)
            # the one band's side with the band, or a joint claim's statistics' own (review 38)
            found.add(
                f"{plain.group(1)} the rule's {plain.group(2)}"
                if plain
                else f"{named.group(1)} its band"
                if named
                else None
            )
        if len(found) == 1 and (side := found.pop()) is not None:
            sides[(r["claim_id"], r["model"])] = f", {side}"
    lines, maxima = [], []
    alike = status.filter(
        pl.col("decided_alike" if "decided_alike" in status.columns else "robust")
    )
    for (claim_id, claim), g in alike.group_by("claim_id", "claim", maintain_order=True):
        if claim_id.split(":", 1)[0] in MAXIMUM_CLAIMS:
            maxima.append(f"{claim} ({', '.join(g['model'])})")
    robust = status.filter(pl.col("robust"))
    robust_models: dict[str, set[str]] = {}
    robust_verdicts: dict[tuple[str, str], set[str]] = {}
    for r in robust.iter_rows(named=True):
        robust_models.setdefault(r["claim_id"].split(":", 1)[0], set()).add(r["model"])
        robust_verdicts.setdefault((r["claim_id"].split(":", 1)[0], r["model"]), set()).add(
            r["verdict"]
        )
    for (claim_id, claim), g in robust.group_by("claim_id", "claim", maintain_order=True):
        if claim_id.split(":", 1)[0] in MAXIMUM_CLAIMS:
            continue  # never robust (findings.claim_status): kept as a guard
        # (verdict, values, models): one per entry, or per measurement where entries read the
        # same rows (SAME_ROWS_CLAIMS, the same weights and text): named together, counted once
        merges = weights_of is not None and claim_id.split(":", 1)[0] in SAME_ROWS_CLAIMS
        found: list[tuple[str, str, list[str]]] = []
        for r in g.iter_rows(named=True):
            values = "; ".join(
                f"{text}: {measured[(claim_id, e)]}" for text, e in groups[r["model"]].items()
            )
            twin = next(
                (
                    models
                    for v, vals, models in found
                    if merges
                    and (v, vals) == (r["verdict"], values)
                    and weights_of.get(models[0]) == weights_of.get(r["model"])
                ),
                None,
            )
            if twin is not None:
                twin.append(r["model"])
            else:
                found.append((r["verdict"], values, [r["model"]]))
        parts = [
            f"{' and '.join(models)}{' (the same rows)' if len(models) > 1 else ''} "
            f"**{v}**{sides.get((claim_id, models[0]), '')} ({values})"
            for v, values, models in found
        ]
        tie = TIED_CLAIMS.get(claim_id.split(":", 1)[0])
        # the models of this bullet on which the tied claim is robust too, by whether the two
        # verdicts agree with the bound that ties them (both reproduced: in tension)
        tied = ""
        if tie:
            own = dict(zip(g["model"], g["verdict"], strict=True))
            notes: dict[str, list[str]] = {}
            for m in g["model"]:
                if m not in robust_models.get(tie[0], set()):
                    continue
                other = robust_verdicts.get((tie[0], m), set())
                clash = own[m] == "reproduced" and other == {"reproduced"}
                # the bound ties a reproduced claim to the other's failure; two failures are
                # two findings, neither implying the other (review 31)
                tied_pair = len(other) == 1 and {own[m]} | other == {"reproduced", "not reproduced"}
                if clash or tied_pair:
                    notes.setdefault(tie[2] if clash else tie[1], []).append(m)
            for text, models in notes.items():
                on = (
                    ""
                    if len(models) == g.height and len(notes) == 1
                    else f"on {', '.join(models)}: "
                )
                tied += f" ({on}{text})"
        lines.append(f"- **{claim}**: " + "; ".join(parts) + f"{tied}.")
    if not lines:
        lines.append("- Nothing: no claim is decided the same way on every text and reading.")
    if maxima:
        lines.append(
            "\nDecided alike everywhere but read on a maximum over heads, whose bootstrap interval "
            "understates the uncertainty, so not listed as results: " + "; ".join(maxima) + "."
        )
    return "\n".join(lines)


def counts_against_null(measured: str) -> tuple[str, str, str, str] | None:
    """(model's violating checks, the null's, the sign-flip p, the unit counted: "(row, T)
    checks", "samples", ...) from a Corollary 3 row's measured text
    (analyses.gradient_null.null_decision), or None for any other row, and for one whose
    violations all lie on rows without a null: its comparison counts none of them, so the
    heads with a violating row are the number to show."""
    if "without a null and on none of those with one" in measured:
        return None
    found = re.search(
        r"on the \d+ (.+?) with a null of matched spread.*?the model violates it on (\d+), the "
        r"null on (\d+);.*?summed differences p = ([^ ]+)",
        measured,
    )
    if found is None:
        return None
    unit, model, null, p = found.groups()
    return model, null, p, unit


def cell_range(measured: str) -> tuple[str, str, str, bool] | None:
    """(statistic, low, high, censored) of a critical N read on grid cells, from its measured
    text (analyses.critical_n: "the <statistic> lies in [low, high]", "+" after it where a length
    was censored): the range its first passes allow, of which Table 1's value is the top; None
    where each first pass is known exactly."""
    found = re.search(r"the ([^:;()]+?) lies in \[([^,\]]+), ([^\]]+)\](\+?)", measured)
    if found is None:
        return None
    name, low, high, plus = found.groups()
    return name, low, high, bool(plus)


def evidence(interval: str, measured: str) -> str:
    """What a robust result's bullet prints for one entry: a bound check's count of units with
    a violation and its Clopper-Pearson interval (a universal statement: the count, not a
    rate), or where it was decided against its null (Corollary 3) the model's and the null's
    counts and the test's p, which the verdict rests on; a censored critical N as the lower bound
    it is, with its censored lengths; else the number the verdict reads with its interval."""
    count = re.match(r"(\d+) of (\d+) (\w+) violate \(share [^,]+, ([^\]]+\])", measured)
    against_null = counts_against_null(measured)
    if count and against_null:
        model, null, p, unit = against_null
        return (
            f"on the {unit} with a null, the model violates it on {model}, its null of matched "
            f"spread on {null} (sign-flip p = {p})"
        )
    if count:
        bad, units, unit, interval_text = count.groups()
        return f"{bad}/{units} {unit} violate, {interval_text}"
    cells = cell_range(measured)
    if cells:
        # the cells' range, not their top (issue 46 point 7), then the bootstrap's
        name, low, high, censored = cells
        text = f"{name} >= {low}" if censored else f"{name} in [{low}, {high}]"
        bootstrap = interval.split(" [", 1)[1] if " [" in (interval or "") else ""
        return f"{text} (grid cells)" + (f", bootstrap [{bootstrap}" if bootstrap else "")
    censored = re.search(r"(\d+/\d+) lengths censored", measured)
    if censored and interval:
        return f">= {interval} ({censored.group(1)} lengths censored: no N up to L - 1 passed)"
    return interval or measured


def fragile_list(status: pl.DataFrame) -> str:
    """One bullet per (claim, model) whose verdict moves with the text or the reading (decided
    one way on one, the other way on another), naming what moves it."""
    lines = []
    for r in status.filter(
        ((pl.col("texts") == FRAGILE) | (pl.col("readings") == FRAGILE))
        & (pl.col("verdict") != NOT_APPLICABLE)
    ).iter_rows(named=True):
        why = []
        if r["texts"] == FRAGILE and r.get("flipped_across"):
            # one text under one reading against another under another (findings.claim_status)
            why.append(f"the text and the reading together ({r['texts_flipped_by']})")
        elif r["texts"] == FRAGILE:
            why.append(f"the text ({r['verdicts']})")
        if r["readings"] == FRAGILE:
            why.append(f"the reading ({r['readings_flipped_by']})")
        lines.append(f"- {r['claim']} on {r['model']}: flipped by " + " and by ".join(why) + ".")
    return "\n".join(lines) or "- None."


def masked_flips(score: pl.DataFrame, groups: dict[str, dict[str, str]]) -> str:
    """One bullet per (claim, model, text) that the two readings of a causal row's masked keys
    decide differently (Table 1's <claim> and <claim>:<other reading>, two claims on this page):
    the open choice of how masked keys count flips it."""
    ids = set(score["claim_id"].to_list())
    rows = {r["claim_id"]: r for r in score.iter_rows(named=True)}
    lines = []
    for claim_id in score["claim_id"].to_list():
        base, _, suffix = claim_id.rpartition(":")
        if not base or suffix not in MASKED_READINGS or base not in ids:
            continue
        for group, texts in groups.items():
            for text, e in texts.items():
                pair = (rows[base][e], rows[claim_id][e])
                sides = (text_side(rows[base], e), text_side(rows[claim_id], e))
                # decided both ways, or not reproduced on opposite sides (review 38)
                flipped = compare(
                    {"a": pair[0], "b": pair[1]}, "a", {"a": sides[0], "b": sides[1]}
                )[0]
                if flipped == FRAGILE:
                    said = [with_side(v, s) for v, s in zip(pair, sides, strict=True)]
                    lines.append(
                        f"- {rows[base]['claim']} on {group} ({text}): {said[0]}; read with "
                        f"the masked keys the other way ({rows[claim_id]['claim']}): {said[1]}."
                    )
    return "\n".join(lines) or "- None."


def unresolved_list(status: pl.DataFrame) -> str:
    """One bullet per (claim, model), not fragile, that is undecided on a text or under a reading
    while decided elsewhere or everywhere undecided: where the data cannot say."""
    lines = []
    for r in status.filter(
        ((pl.col("texts") == UNRESOLVED) | (pl.col("readings") == UNRESOLVED))
        & (pl.col("texts") != FRAGILE)
        & (pl.col("readings") != FRAGILE)
        & (pl.col("verdict") != NOT_APPLICABLE)
    ).iter_rows(named=True):
        where = []
        if r["texts"] == UNRESOLVED:
            where.append(f"texts: {r['verdicts']}")
        if r["readings"] == UNRESOLVED:
            where.append(f"readings: {r['readings_unsettled_by']}")
        lines.append(f"- {r['claim']} on {r['model']} ({'; '.join(where)}).")
    return "\n".join(lines) or "- None."


def groups_entries(groups: dict[str, dict[str, str]]) -> list[str]:
    return [e for members in groups.values() for e in members.values()]
