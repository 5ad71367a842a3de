"""docs/findings.md: what the paper's claims look like on the configured models, from this run.

Every number on the page comes from the run's own files: each model's recorded run description
and config, its Table 1 and the cross-model scorecard. The prose lives in a template
(workflow/resources/findings_template.md) whose [[kind|claim_id|model]] fields are filled from the
scorecard (kind: verdict or measured), so a rerun rewrites the numbers with the text."""

import copy
import json
import re
from html import escape

import polars as pl

from ..plotting import protocol_text
from ..robustness import (
    DECIDED,
    FRAGILE,
    MASKED_READINGS,
    NOT_APPLICABLE,
    ROBUST,
    UNAFFECTED,
    UNRESOLVED,
    UNTESTED,
    compare,
    masked_reading_of,
    parse_side,
    robustness,
    text_side,
    with_side,
)
from ..tables import html_table, markdown_table
from .claim_lists import (
    cell_range,
    counts_against_null,
    fragile_list,
    masked_flips,
    unresolved_list,
    what_we_can_say,
)
from .claims import BOOTSTRAP_UNIT_CAVEAT, MAXIMUM_NOTE, is_maximum

# Worst first: the status of a claim over several robustness statuses (a group's texts' readings)
STATUS_ORDER = (FRAGILE, UNRESOLVED, UNTESTED, ROBUST)


class MissingCell(ValueError):
    """A template field names a (claim id, model) the scorecard lacks."""


# config sections that no Table 1 claim reads: two entries that differ only there are still one
# model on two texts (review 48: the N* section's control variants, set for one text only, split
# SmolLM2's two texts, and none of its verdicts could be called robust)
OUTSIDE_THE_CLAIMS = frozenset({"effective_set"})


def text_groups(configs: dict[str, dict]) -> dict[str, dict[str, str]]:
    """The entries that are one model on several texts (config/findings.yaml): entries whose
    configs are equal but for their corpus, their name and the sections no claim of the
    scorecard reads (:data:`OUTSIDE_THE_CLAIMS`), grouped under the first one's name, as
    {group: {corpus name: entry}}, in the configs' order. An entry alone is a group of one."""

    def without_text(cfg: dict) -> dict:
        rest = copy.deepcopy(
            {k: v for k, v in cfg.items() if k != "corpus" and k not in OUTSIDE_THE_CLAIMS}
        )
        # each entry fetches its model into a folder of its own name: the folder is not the model
        rest.get("model", {}).pop("name", None)
        rest.get("model", {}).pop("path", None)
        return rest

    groups: dict[str, dict[str, str]] = {}
    keys: list[tuple[dict, str]] = []
    for entry, cfg in configs.items():
        key = without_text(cfg)
        group = next((g for k, g in keys if k == key), None)
        text = cfg["corpus"]["name"]
        if group is None or text in groups[group]:
            keys.append((key, entry))
            groups[entry] = {text: entry}
        else:
            groups[group][text] = entry
    return groups


def across_texts(score: pl.DataFrame, groups: dict[str, dict[str, str]]) -> pl.DataFrame:
    """Per (claim, model group): robust, fragile or untested across the group's texts (the first
    text is the reference a fragile claim's ``flipped_by`` is read against), from the
    scorecard's verdict columns."""
    rows = [
        {
            "claim_id": r["claim_id"],
            "model": group,
            "text": text,
            "verdict": r[entry],
            # where a "not reproduced" falls: two texts on opposite sides disagree (review 36)
            "side": text_side(r, entry),
        }
        for r in score.iter_rows(named=True)
        for group, texts in groups.items()
        for text, entry in texts.items()
    ]
    verdicts = pl.DataFrame(
        rows,
        schema={
            "claim_id": pl.String,
            "model": pl.String,
            "text": pl.String,
            "verdict": pl.String,
            "side": pl.String,
        },
    )
    parts = []
    for group, texts in groups.items():
        mine = verdicts.filter(pl.col("model") == group)
        parts.append(
            robustness(mine, over="text", within=["claim_id", "model"], reference=next(iter(texts)))
        )
    return pl.concat(parts)


def reading_status(
    readings: dict[str, pl.DataFrame], entry: str, claim_id: str, masked: str = "non_selected"
) -> tuple[str, str, str]:
    """(robustness, flipped_by, unsettled_by) of ``claim_id`` across ``entry``'s readings (its
    robustness table, tables/<entry>/robustness.csv); untested where the entry has none.
    ``masked``: the entry's analysis.all_rows.masked, the reading Table 1's plain claim id is
    scored under (the other is <claim>:<other>)."""
    table = readings.get(entry)
    if table is None:
        return UNTESTED, "", "no readings"
    # the robustness table counts a causal row's masked keys among the readings: one claim id
    # for Table 1's <claim> and <claim>:<masked reading>
    base, _, suffix = claim_id.rpartition(":")
    plain = base if base and suffix in MASKED_READINGS else claim_id
    hit = table.filter(pl.col("claim_id") == plain)
    if not hit.height:
        return UNTESTED, "", "not in the robustness table"
    masks = (
        {m for m in hit["masked"].to_list() if m is not None} if "masked" in hit.columns else set()
    )
    if masks:
        # a claim scored under one reading of the masked keys (Table 1's <claim> and
        # <claim>:prefix) is compared across the other readings under that same one: the
        # other mask is another claim on the page, and a flip between the two is listed apart
        # (masked_flips)
        mask = suffix if plain != claim_id else masked
        mine = hit.filter(pl.col("masked") == mask)
        if not mine.height:
            return UNTESTED, "", f"no {mask} reading"
        reference = next(
            (r for r in mine["reading"].to_list() if r.startswith("default")),
            mine["reading"][0],
        )
        sides = (
            dict(zip(mine["reading"], mine["side"], strict=True))
            if "side" in mine.columns
            else None
        )
        # a side flip between readings of one text is a flip there (review 37)
        return compare(dict(zip(mine["reading"], mine["verdict"], strict=True)), reference, sides)
    unsettled = hit["unsettled_by"][0] if "unsettled_by" in hit.columns else ""
    return hit["robustness"][0], hit["flipped_by"][0] or "", unsettled or ""


def reading_verdicts(
    readings: dict[str, pl.DataFrame], entry: str, claim_id: str, masked: str = "non_selected"
) -> dict[str, str]:
    """``claim_id``'s verdict under each reading of ``entry`` that reaches it (its robustness
    table's rows, the same ones reading_status compares); {} where the table has none."""
    hit = _claim_rows(readings, entry, claim_id, masked)
    if hit is None:
        return {}
    return dict(zip(hit["reading"].to_list(), hit["verdict"].to_list(), strict=True))


def reading_sides(
    readings: dict[str, pl.DataFrame], entry: str, claim_id: str, masked: str = "non_selected"
) -> dict[str, str | None]:
    """The side of its rule each reading's "not reproduced" of :func:`reading_verdicts` falls
    on (the robustness table's ``side`` column; {} where the table has none)."""
    hit = _claim_rows(readings, entry, claim_id, masked)
    if hit is None or "side" not in hit.columns:
        return {}
    return dict(zip(hit["reading"].to_list(), hit["side"].to_list(), strict=True))


def _claim_rows(
    readings: dict[str, pl.DataFrame], entry: str, claim_id: str, masked: str
) -> pl.DataFrame | None:
    """``claim_id``'s rows of ``entry``'s robustness table, under the masked keys' reading its
    id names (or ``masked``); None where the entry has no such table."""
    table = readings.get(entry)
    if table is None or not {"reading", "verdict"} <= set(table.columns):
        return None
    base, _, suffix = claim_id.rpartition(":")
    plain = base if base and suffix in MASKED_READINGS else claim_id
    hit = table.filter(pl.col("claim_id") == plain)
    if "masked" in hit.columns and hit["masked"].drop_nulls().len():
        hit = hit.filter(pl.col("masked") == (suffix if plain != claim_id else masked))
    return hit


def worst(statuses) -> str:
    """The status of a claim over several (unaffected counts as robust: no reading reaches it)."""
    present = {ROBUST if s == UNAFFECTED else s for s in statuses}
    return next((s for s in STATUS_ORDER if s in present), ROBUST)


def claim_status(
    score: pl.DataFrame,
    groups: dict[str, dict[str, str]],
    readings: dict[str, pl.DataFrame],
    masked: dict[str, str] | None = None,
) -> pl.DataFrame:
    """Per (claim, model group): the verdict per text (``verdicts``; ``alike`` when every text
    gives the same); its status across the texts and across each text's readings (robust,
    fragile, unresolved, untested: robustness.compare), with what flips and what unsettles it;
    ``robust`` only when both are robust and the verdict decided."""
    texts = across_texts(score, groups)
    by_key = {(r["claim_id"], r["model"]): r for r in texts.iter_rows(named=True)}
    ids = set(score["claim_id"].to_list())
    rows = []
    for r in score.iter_rows(named=True):
        # the reading of the masked keys a plain id is scored under: the one its suffixed twin
        # does not name (the critical N's plain ids are non_selected whatever is configured,
        # review 31), else the entry's analysis.all_rows.masked
        _, named_mask = masked_reading_of(r["claim_id"], ids)

        def mask_of(e: str, named_mask=named_mask) -> str:
            return named_mask or (masked or {}).get(e, "non_selected")

        for group, members in groups.items():
            t = by_key[(r["claim_id"], group)]
            per_reading = {
                e: reading_status(readings, e, r["claim_id"], mask_of(e)) for e in members.values()
            }
            reading = worst(status for status, _, _ in per_reading.values())
            texts, texts_flipped_by = t["robustness"], t["flipped_by"]
            # every (text, reading) pair against every other: a flip between one text under one
            # reading and another text under another is a flip too (review 13), which the two
            # comparisons above (texts under the default, readings within a text) do not see
            pooled, pooled_sides = {}, {}
            for text, e in members.items():
                own = reading_verdicts(readings, e, r["claim_id"], mask_of(e))
                own_sides = (
                    reading_sides(readings, e, r["claim_id"], mask_of(e))
                    if own
                    else {"default": text_side(r, e)}
                )
                for name, v in (own or {"default": r[e]}).items():
                    pooled[f"{text}, {name}"] = v
                    pooled_sides[f"{text}, {name}"] = own_sides.get(name)
            reference = next(iter(pooled))
            status, flipped, _ = compare(pooled, reference, pooled_sides)
            across = status == FRAGILE and FRAGILE not in (texts, reading)
            if across:
                # both sides of the flip: the reference pair and the pairs that decide otherwise
                # (compare reads the first decided pair where the reference is not decided)
                ref = next(k for k in (reference, *pooled) if pooled[k] in DECIDED)
                texts, texts_flipped_by = FRAGILE, f"{ref}: {pooled[ref]} against {flipped}"
            maximum = is_maximum(r["claim_id"])

            def for_maximum(found: str, maximum: bool = maximum) -> str:
                # a maximum over heads: agreement is no robustness (its head bootstrap
                # understates the uncertainty), but a flip or an undecided text still shows
                return UNTESTED if maximum and found == ROBUST else found

            def named(column: int, per_reading=per_reading, members=members) -> str:
                return "; ".join(
                    f"{text}: {per_reading[e][column]}"
                    for text, e in members.items()
                    if per_reading[e][column]
                )

            rows.append(
                {
                    "claim_id": r["claim_id"],
                    "claim": r["claim"],
                    "model": group,
                    # each text's verdict with the side of a "not reproduced" (review 40)
                    "verdicts": "; ".join(
                        f"{text}: {verdict_with_side(r, e)}" for text, e in members.items()
                    ),
                    "alike": len({verdict_with_side(r, e) for e in members.values()}) == 1,
                    # one text: nothing to compare across texts (the models table says so)
                    "texts_compared": len(members) > 1,
                    # a maximum over heads: its head bootstrap understates the uncertainty, so
                    # agreement across texts and readings is no robustness (review 13)
                    "texts": for_maximum(texts),
                    "texts_flipped_by": texts_flipped_by,
                    # the flip is between one text under one reading and another under another
                    "flipped_across": across,
                    "readings": for_maximum(reading),
                    "readings_flipped_by": named(1),
                    # the maximum's note only where it replaced robust (not beside a flip)
                    "readings_unsettled_by": MAXIMUM_NOTE
                    if maximum and reading == ROBUST
                    else named(2),
                    "robust": not maximum
                    and texts == ROBUST
                    and reading == ROBUST
                    and t["verdict"] in DECIDED,
                    # decided the same way on every text and reading, whether or not that may be
                    # called robust (a maximum's may not): what_we_can_say names those apart
                    "decided_alike": texts == ROBUST
                    and reading == ROBUST
                    and t["verdict"] in DECIDED,
                    "verdict": t["verdict"],
                }
            )
    return pl.DataFrame(rows)


def models_table(runs: dict[str, dict], configs: dict[str, dict], texts: dict[str, str]) -> str:
    """One row per model entry: its text, type, weights, layers x heads, lengths, chunks and
    protocol."""
    model_rows = []
    for m, run in runs.items():
        weights = "seeded random" if run["weights"] == "random_init" else "trained"
        kind = "causal" if run["causal"] else "bidirectional encoder"
        lengths = configs[m]["analysis"]["lengths"]
        model_rows.append(
            [
                m,
                texts[m],
                f"{run['model_type']} ({kind})",
                weights,
                f"{run['layers']} x {run['heads']} ({run['kv_heads']} KV)",
                f"{min(lengths)}..{max(lengths)}",
                f"{run['chunks']} x {run['chunk_length']}",
                protocol_text(run),
            ]
        )
    return markdown_table(
        ["model", "text", "type", "weights", "layers x heads", "L", "chunks", "protocol"],
        model_rows,
    )


def group_cell(status: dict) -> str:
    """One claim on one model group: its verdict where every text gives the same, else each
    text's; then "(robust)", or what keeps it from being robust: "(<status>: text)" for its
    status across the texts and "(<status>: reading)" for its status across the readings, each
    where it is fragile, unresolved or untested (one parenthesis per status: "(untested: text,
    reading)"); "(one text)" where the group reads one text."""
    cell = (status["verdict"] or "-") if status["alike"] else status["verdicts"]
    if status["alike"] and status["verdict"] == NOT_APPLICABLE:
        return cell  # the claim does not exist for the model: nothing to be robust about
    if status["robust"]:
        return cell + " (robust)"
    marks: dict[str, list[str]] = {}
    if not status.get("texts_compared", True):
        # nothing to compare across texts: said, so that the verdict does not look settled
        cell += " (one text)"
    for what in ("text", "reading"):
        if what == "text" and not status.get("texts_compared", True):
            continue
        if status[f"{what}s"] in (FRAGILE, UNRESOLVED, UNTESTED):
            marks.setdefault(status[f"{what}s"], []).append(what)
    return cell + "".join(f" ({s}: {', '.join(whats)})" for s, whats in marks.items())


# At a glance: a verdict as one mark, then whether it holds across the texts and readings.
VERDICT_MARKS = {
    "reproduced": "✓",
    "not reproduced": "✗",
    "undecided": "?",
    "vacuous": "∅",
    "not testable": "≈",
    "no verdict": "—",
    NOT_APPLICABLE: "·",
    "not scored": "n/s",
}
STATUS_MARKS = {ROBUST: "★", FRAGILE: "†", UNRESOLVED: "~"}
SIDE_MARKS = {"above": "↑", "below": "↓", "above and below": "↕"}
GLANCE_LEGEND = (
    "✓ reproduced, ✗ not reproduced (↑ above the rule's band, ↓ below it, ↕ both; where the rule "
    "reads several statistics, each that missed its band is named with its arrow), ? undecided, ∅ vacuous (could not have failed: on any data, or at these values of the bound, docs/findings.md says which), ≈ not "
    "testable, — no verdict, · not applicable, n/s not scored; ★ robust (decided alike on every "
    "text and reading), † fragile (a text or reading flips it), ~ unresolved (one leaves it "
    "undecided), no mark: untested (fewer than two texts or readings decide it, or a maximum "
    "over heads, whose agreement is no robustness); each text's "
    "mark comes with the number its verdict reads (a bound check: its violating units; >=: a "
    "censored critical N, a lower bound). Intervals: each model's Table 1 header says what they "
    "resample; with the default (analysis.bootstrap.unit: head) the " + BOOTSTRAP_UNIT_CAVEAT + "."
)


def verdict_with_side(row: dict, entry: str) -> str:
    """``entry``'s verdict of a scorecard row, "not reproduced (above)" where its side is known:
    two texts on opposite sides of a band read differently (review 40)."""
    return with_side(row[entry], text_side(row, entry))


def side_mark(side: str | None) -> str:
    """A glance cell's mark for the side a "not reproduced" falls on: the one band's arrow, or,
    for a joint claim, each statistic that missed named with its own arrow ("(slope↑, R^2↓)"),
    so no arrow stands for another statistic than its name (review 39)."""
    if not side:
        return ""
    parsed = parse_side(side)
    if set(parsed) == {""}:
        return SIDE_MARKS[parsed[""]]
    return " (" + ", ".join(f"{name}{SIDE_MARKS[d]}" for name, d in parsed.items()) + ")"


def deciding_number(interval: str | None) -> str:
    """The number a verdict reads, from a scorecard interval cell ("slope 0.93 [0.9, 1]" ->
    "slope 0.93"); "" where it has none."""
    return (interval or "").split(" [", 1)[0].strip()


def glance_number(interval: str | None, measured: str | None) -> str:
    """A cell's number: a bound check's count of violating units ("1/72 heads"), or where it is
    decided against its null the two counts and p ("18 vs null 0 (p 0.031)"), a censored
    critical N as the lower bound it is (">= 0.9"), else deciding_number (see evidence)."""
    measured = measured or ""
    count = re.match(r"(\d+) of (\d+) (\w+) violate", measured)
    against_null = counts_against_null(measured)
    if count and against_null:
        # Corollary 3: the verdict rests on the model's count against its null's, not on the
        # heads with a violating row (which any rows of that spread give)
        model, null, p, _ = against_null
        return f"{model} vs null {null} (p {p})"
    if count:
        return f"{count.group(1)}/{count.group(2)} {count.group(3)}"
    cells = cell_range(measured)
    if cells:
        # a critical N read on grid cells: the range they allow, not their top, and the
        # bootstrap interval the verdict reads beside it (review 48: a cell range inside the
        # rule read "undecided" with no number saying why)
        _, low, high, censored = cells
        shown = f">= {low}" if censored else f"in [{low}, {high}]"
        bootstrap = re.search(r"\[([^,\]]+), ([^\]]+)\]", interval or "")
        if bootstrap:
            shown += f", bootstrap [{bootstrap.group(1)}, {bootstrap.group(2)}]"
        return shown
    number = deciding_number(interval)
    if number and re.search(r"\d+/\d+ lengths censored", measured):
        return f">= {number}"
    return number


def glance_cell(
    status: dict, score_row: dict, members: dict[str, str], readings_compared: bool = True
) -> str:
    """One claim on one model group: each text's verdict mark and number, in the group's text
    order (the column header names it), then the group's robustness mark; without readings
    compared (``readings_compared`` false), the mark reads the texts alone."""
    verdicts = [score_row[e] for e in members.values()]
    if all(v == NOT_APPLICABLE for v in verdicts):
        return VERDICT_MARKS[NOT_APPLICABLE]
    parts = [
        " ".join(
            part
            for part in (
                VERDICT_MARKS.get(score_row[e], score_row[e])
                # a "not reproduced" with the side of the rule it falls on (review 36)
                + side_mark(text_side(score_row, e)),
                glance_number(score_row.get(f"{e} interval"), score_row.get(f"{e} measured")),
            )
            if part
        )
        for e in members.values()
    ]
    # a maximum over heads is never robust: claim_status already reads its texts as untested
    texts_robust = (
        status.get("texts_compared") and status["texts"] == ROBUST and status["verdict"] in DECIDED
    )
    if status["robust"] or (not readings_compared and texts_robust):
        tail = STATUS_MARKS[ROBUST]
    elif not readings_compared:
        found = {status["texts"]} if status.get("texts_compared") else set()
        tail = next((STATUS_MARKS[s] for s in (FRAGILE, UNRESOLVED) if s in found), "")
    else:
        found = {status["readings"]}
        if status.get("texts_compared"):
            found.add(status["texts"])
        tail = next((STATUS_MARKS[s] for s in (FRAGILE, UNRESOLVED) if s in found), "")
    return " / ".join(parts) + (f" {tail}" if tail else "")


def glance_rows(
    score: pl.DataFrame,
    status: pl.DataFrame,
    groups: dict[str, dict[str, str]],
    readings_compared: bool = True,
) -> tuple[str, list[str], list[list[str]]]:
    """The verdicts at a glance as (legend, header, rows): one row per claim a model could
    decide, one column per model (its texts in one cell, in the order the header names), each
    cell glance_cell; the checks no model could decide (vacuous, not testable, no verdict, not
    scored or not applicable everywhere) counted in one last row."""
    cells = {(r["claim_id"], r["model"]): r for r in status.iter_rows(named=True)}
    rows, apart = [], 0
    for r in score.iter_rows(named=True):
        scored = {r[e] for members in groups.values() for e in members.values()}
        if not scored & {*DECIDED, "undecided"}:
            apart += 1
            continue
        rows.append(
            [r["claim"]]
            + [
                glance_cell(cells[(r["claim_id"], g)], r, groups[g], readings_compared)
                for g in groups
            ]
        )
    if apart:
        rows.append(
            [
                f"{apart} checks no model here could decide (vacuous, not testable, no verdict, "
                "not scored or not applicable everywhere)"
            ]
            + ["in the full tables"] * len(groups)
        )
    header = [
        "claim",
        *(g if len(texts) == 1 else f"{g} ({' / '.join(texts)})" for g, texts in groups.items()),
    ]
    legend = GLANCE_LEGEND
    if not readings_compared:
        legend += (
            " This table compares no readings (analysis.readings): its marks read the texts "
            "alone, ★ decided alike on every text (no readings compared here); docs/findings.md "
            "compares both."
        )
    return legend, header, rows


def at_a_glance(
    score: pl.DataFrame,
    status: pl.DataFrame,
    groups: dict[str, dict[str, str]],
    readings_compared: bool = True,
) -> str:
    """:func:`glance_rows` as Markdown (:func:`glance_markdown`)."""
    return glance_markdown(*glance_rows(score, status, groups, readings_compared))


def glance_markdown(legend: str, header: list[str], rows) -> str:
    """The at-a-glance table as Markdown: the legend line, then the table."""
    return legend + "\n\n" + markdown_table(header, rows)


GLANCE_TITLE = "The paper's claims at a glance"


def glance_report_text(description: str, legend: str, header: list[str], rows) -> str:
    """The HTML report's opening text (reStructuredText, which Snakemake renders through Jinja):
    the verdicts at a glance, as a raw HTML table with its legend, then the workflow's own
    description under its own heading (two sections, so that docutils promotes neither to the
    page's title). The table is kept out of Jinja's reach and indented under ``.. raw:: html``."""
    html_lines = [f"<p>{escape(legend)}</p>", *html_table(header, rows).splitlines()]
    raw = "\n".join(f"   {line}" for line in html_lines)
    about = "About this report"
    return (
        f"{GLANCE_TITLE}\n{'=' * len(GLANCE_TITLE)}\n\n"
        f"{{% raw %}}\n.. raw:: html\n\n{raw}\n\n{{% endraw %}}\n"
        f"{about}\n{'=' * len(about)}\n\n{description.rstrip()}\n"
    )


def glance_of_run(
    score: pl.DataFrame, configs: dict[str, dict], readings: dict[str, pl.DataFrame] | None = None
) -> str:
    """:func:`at_a_glance` of a run's scorecard (its entries' configs group one model's texts)."""
    return at_a_glance(*glance_inputs(score, configs, readings))


def glance_inputs(
    score: pl.DataFrame, configs: dict[str, dict], readings: dict[str, pl.DataFrame] | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, dict[str, str]], bool]:
    """The arguments of :func:`glance_rows` (or :func:`at_a_glance`) for a run's scorecard: its
    entries' configs group one model's texts."""
    groups = text_groups(configs)
    masked = {m: configs[m]["analysis"]["all_rows"]["masked"] for m in configs}
    status = claim_status(score, groups, readings or {}, masked)
    return score, status, groups, readings is not None


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


# what must agree for two model groups' entries to read the same rows of one text: the weights
# and the text's chunks, whatever analysis.protocol (claim_lists.SAME_ROWS_CLAIMS)
ROWS_FIELDS = ("model_type", "weights", "layers", "heads", "chunk_length", "chunks", "corpus")


def rows_identity(
    runs: dict[str, dict], configs: dict[str, dict], groups: dict[str, dict[str, str]]
) -> dict[str, str]:
    """Per model group, its entries' ROWS_FIELDS and where their weights and text come from
    (the config's model and corpus sections but their names, and the seed), text by text:
    equal for two groups that differ only in their protocol."""

    def source(e: str) -> dict:
        c = configs.get(e, {})
        return {
            "run": [runs[e].get(k) for k in ROWS_FIELDS],
            "model": {k: v for k, v in c.get("model", {}).items() if k != "name"},
            "corpus": {k: v for k, v in c.get("corpus", {}).items() if k != "name"},
            "seed": c.get("seed"),
        }

    return {
        g: json.dumps([[text, source(e)] for text, e in texts.items()], sort_keys=True, default=str)
        for g, texts in groups.items()
    }


def findings_page(
    template: str,
    score: pl.DataFrame,
    runs: dict[str, dict],
    configs: dict[str, dict],
    command: str,
    readings: dict[str, pl.DataFrame] | None = None,
    functional: str = "",
) -> str:
    """The page: the template's fields, then its {blocks} (the command, the models, what we can
    say, the fragile claims, the verdicts per model and text, the untestable checks apart, and
    each claim's measured values per model and text). ``runs`` and ``configs`` per model entry,
    in the scorecard's column order; ``readings``: each entry's robustness table, where it has
    one (tables/<entry>/robustness.csv); ``functional``: the N* section's generated part
    (findings_functional.functional_section)."""
    models = list(runs)
    groups = text_groups(configs)
    masked = {m: configs[m]["analysis"]["all_rows"]["masked"] for m in models}
    status = claim_status(score, groups, readings or {}, masked)
    cells = {(r["claim_id"], r["model"]): r for r in status.iter_rows(named=True)}
    tested, apart = [], []
    for r in score.iter_rows(named=True):
        row = [r["claim"], *[group_cell(cells[(r["claim_id"], g)]) for g in groups]]
        scored = {r[m] for m in models}
        (tested if scored & {*DECIDED, "undecided"} else apart).append(row)
    header = ["claim", *groups]
    text_of = {m: configs[m]["corpus"]["name"] for m in models}
    measured = [
        f"**{r['claim']}**\n\n"
        + markdown_table(
            ["model", "text", "verdict", "measured"],
            [
                [g, t, r[e], r[f"{e} measured"] or ""]
                for g, ts in groups.items()
                for t, e in ts.items()
            ],
        )
        for r in score.iter_rows(named=True)
    ]
    # Fields first (claim ids hold braces, such as Corollary 3's min{1/(4T), sqrt 2}), then the
    # blocks by plain replacement, so no text of the run is read as a format string.
    page = fill_fields(template, score, models)
    blocks = {
        "at_a_glance": at_a_glance(score, status, groups),
        "command": command,
        "models_table": models_table(runs, configs, text_of),
        "what_we_can_say": what_we_can_say(
            status, score, groups, rows_identity(runs, configs, groups)
        ),
        "fragile": fragile_list(status),
        "masked_flips": masked_flips(score, groups),
        "unresolved": unresolved_list(status),
        "summary_table": markdown_table(header, tested),
        "apart_table": markdown_table(header, apart),
        "measured": "\n\n".join(measured),
        "functional": functional,
    }
    for name, text in blocks.items():
        page = page.replace("{" + name + "}", text)
    return page
