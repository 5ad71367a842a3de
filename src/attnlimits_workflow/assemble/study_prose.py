"""The normalizer study's page in words: each measure as the page shows it, the answers limit by
limit (one seed, and over the seeds), the orientation table, "which rule to use when", and the
template's fields (docs/study.md; the numbers and verdicts are attnlimits_workflow.study's)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import polars as pl

from attnlimits.intervals import p_text

from ..study_limits import (
    CEILING,
    HIGHER,
    LIMITS,
    LOWER,
    NO_DIFFERENCE,
    NOT_MEASURED,
    ONE_SEED,
    RELAXES,
    TIGHTENS,
    VERDICTS,
)
from ..study_seeds import SeedMeasure
from ..tables import markdown_table


def shown(measures: Mapping[str, Any], key: str) -> str:
    """The measure as the page shows it: '>= x' for a lower bound, 'x to y' for one known to
    its list cells, and for the critical N how many lengths were censored."""
    value = measures.get(key)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    text = f"{value:.3g}"
    upper = measures.get(f"{key}_upper")
    if f"{key}_censored" in measures:
        censored, lengths = measures[f"{key}_censored"], measures[f"{key}_lengths"]
        if not censored and upper is not None and upper > value:
            # a first pass of the list known to its cell: both ends (review 36)
            text = f"{value:.3g} to {upper:.3g}"
        text = (">= " if censored else "") + text + f"; {censored} of {lengths} L censored"
    return text


def answer_line(
    key: str,
    header: str,
    measures: Mapping[str, Mapping[str, Any]],
    found: Mapping[str, Mapping[str, str]],
    baseline: str,
) -> str:
    """One limit's answer on the page: the baseline's measure, then the other normalizers grouped
    by verdict (with the reason where no verdict is given)."""
    limit = LIMITS[key]
    parts = [f"**{header}** -- {baseline}: {shown(measures[baseline], key)}."]
    if limit.relaxes == "either":
        others = [f"{n} ({shown(m, key)})" for n, m in measures.items() if n != baseline]
        parts.append(f"No verdict, both readings defensible: {limit.reason}")
        if others:
            parts.append(f"Measured: {', '.join(others)}.")
        return " ".join(parts)
    for v in VERDICTS:
        names = [
            f"{n} ({shown(m, key)})"
            for n, m in measures.items()
            if n != baseline and found[n][key] == v
        ]
        if names:
            parts.append(f"{v[0].upper()}{v[1:]}: {', '.join(names)}.")
    return " ".join(parts)


RELAXES_WHEN = {
    "larger": "larger",
    "smaller": "smaller",
    "either": "both readings defensible: no verdict",
}


def orientation_table() -> str:
    """The orientation of every measure with the paper's sentences, as a Markdown table."""
    rows = [
        [
            limit.title,
            limit.measure,
            RELAXES_WHEN[limit.relaxes],
            " / ".join(f'"{q.text}"' for q in limit.quotes),
            "; ".join(q.section for q in limit.quotes),
        ]
        for limit in LIMITS.values()
    ]
    return markdown_table(
        ["limit", "measure", "relaxes the limit when", "the paper", "section"], rows
    )


def fill_template(template: str, fields: Mapping[str, str]) -> str:
    """Every [[name]] of the template replaced by its field; an unknown name is an error."""

    def fill(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in fields:
            raise KeyError(f"study template: unknown field [[{key}]]")
        return fields[key]

    return re.sub(r"\[\[([a-z_]+)\]\]", fill, template)


def shown_difference(m: SeedMeasure) -> str:
    """A paired difference as '+x [+low, +high]', or '+x' where there is no interval."""
    if math.isnan(m.mean):
        return "n/a"
    if math.isnan(m.low):
        return f"{m.mean:+.3g}"
    return f"{m.mean:+.3g} [{m.low:+.3g}, {m.high:+.3g}]"


def shown_over_seeds(m: SeedMeasure) -> str:
    """'mean [low, high]', or the mean alone where there is no interval; '>= mean' where the
    mean is of lower ends (a censored seed); 'low to high' where some seed's measure is known
    to an interval (a list cell) and none is censored: the means of the ends, the interval
    from the low ends' low to the high ends' high."""
    if math.isnan(m.mean):
        return "n/a"
    mean = (">= " if m.lower_bound else "") + f"{m.mean:.3g}"
    if math.isfinite(m.upper_mean) and m.upper_mean > m.mean:
        # known to its list cells in some seed (none censored): the means of both ends
        mean = f"{m.mean:.3g} to {m.upper_mean:.3g}"
    if math.isnan(m.low):
        return mean
    paired = (
        ""
        if math.isnan(m.ratio_low)
        else f"; paired ratio x{m.ratio:.3g} [{m.ratio_low:.3g}, {m.ratio_high:.3g}]"
    )
    return f"{mean} [{m.low:.3g}, {m.high:.3g}]{paired}"


def significance_text(m: SeedMeasure, alpha: float = 0.05) -> str:
    """The tests behind a verdict: '; p = x, sign test p = y' (both two-sided, beyond
    relax_ratio; the sign test where the seeds pair) for a kept verdict, and for one
    Benjamini-Hochberg did not keep, what it was and at which p; '' where no test ran."""
    if math.isnan(m.p_value):
        return ""
    both = (
        ""
        if math.isnan(m.p_cap)
        else f"{p_text(m.p_own, alpha)} on the ratio shown, {p_text(m.p_cap, alpha)} on "
        "T ||J|| / cap"
    )
    if m.verdict == CEILING:
        # a member of the corrected family with the larger of its two p (review 42), no finding
        if not both:
            return f"; p = {p_text(m.p_value, alpha)}, in the corrected family"
        return f"; p = {both}, the corrected family reading the larger"
    # p_text keeps a printed p on its side of alpha (1 - the interval level, Benjamini-
    # Hochberg's q): 0.0496 is not "0.05"
    # with caps, where the family reads the cap-divided p, both: the shown ratio's is the
    # smaller (review 47)
    raised = bool(both) and m.p_cap > m.p_own
    p = f"{both}; the family reads the larger" if raised else p_text(m.p_value, alpha)
    if m.dropped:
        sign = "" if math.isnan(m.sign_p) else f" (sign test p = {m.sign_p:.3g})"
        return (
            f"; {m.dropped} at p = {p}{sign} on its own, not kept by "
            "Benjamini-Hochberg over the table"
        )
    text = f"; p = {p}"
    if not math.isnan(m.sign_p):
        text += f", sign test p = {m.sign_p:.3g}"
    return text


def seed_order(m: SeedMeasure, base: SeedMeasure, baseline: str) -> str:
    """'every seed below <baseline>'s, paired p = 0.25' where all of a rule's seeds lie on one
    side of all the baseline's, else ''. The t-intervals can miss it when the seeds spread by
    orders of magnitude. Seed i of each rule shares its initial weights and data order with the
    baseline's seed i, so under the null only the two values of a pair are exchangeable: with
    every pair on one side, the randomisation p is 2 / 2^n (the side is read off the data), the
    paired sign test's floor, not the unpaired 2 / C(2n, n)."""
    if len(m.values) < 2 or len(m.values) != len(base.values):
        return ""
    # a censored measure's values are its lower ends: below them it is not known, above it is;
    # one known to its list cell lies anywhere up to its upper end (review 37)
    m_high, base_high = m.uppers or m.values, base.uppers or base.values
    if max(m_high) < min(base.values) and not m.lower_bound:
        side = "below"
    elif min(m.values) > max(base_high) and not base.lower_bound:
        side = "above"
    else:
        return ""
    p = 2.0 ** (1 - len(m.values))
    return f"every seed {side} {baseline}'s, paired p = {p:.2g}"


def answer_line_over_seeds(
    key: str, header: str, over: Mapping[str, Mapping[str, SeedMeasure]], baseline: str
) -> str:
    """One limit's answer on the page from the verdicts over the seeds: the baseline's mean and
    interval, then the other normalizers grouped by verdict."""
    limit = LIMITS[key]
    parts = [f"**{header}** -- {baseline}: {shown_over_seeds(over[baseline][key])}."]
    others = {n: m[key] for n, m in over.items() if n != baseline}
    if limit.relaxes == "either":
        parts.append(f"No verdict, both readings defensible: {limit.reason}")
        shown_ = [f"{n} ({shown_over_seeds(m)})" for n, m in others.items()]
        if shown_:
            parts.append(f"Measured: {', '.join(shown_)}.")
        return " ".join(parts)
    for v in dict.fromkeys(m.verdict for m in others.values()):

        def named(n: str, m: SeedMeasure, v=v) -> str:
            order = seed_order(m, over[baseline][key], baseline) if v == NO_DIFFERENCE else ""
            # beyond the ratio on its own, dropped by the correction: said, beside its interval
            dropped = (
                f"; {m.dropped} on its own, not kept by Benjamini-Hochberg" if m.dropped else ""
            )
            return f"{n} ({shown_over_seeds(m)}{'; ' + order if order else ''}{dropped})"

        names = [named(n, m) for n, m in others.items() if m.verdict == v]
        parts.append(f"{v[0].upper()}{v[1:]}: {', '.join(names)}.")
    return " ".join(parts)


RATIO_WORD = "the configured ratio"
# beside the sink and perplexity differences: outside the Benjamini-Hochberg family of the limits
UNCORRECTED = (
    " Each is one rule's t-interval over the seeds, not corrected for the number of rules compared."
)
# beside a rule whose untrained weights already give its trained verdict (study_report's
# untrained comparison): a property of the rule, not of what it learnt
UNTRAINED_ALREADY = "the untrained weights already give it"


def _difference(row: Mapping[str, Any], label: str) -> SeedMeasure:
    """A paired difference (``<label>_mean`` / ``_low`` / ``_high`` / ``_verdict``) of a row of
    the seeds table; a missing or null number is NaN."""

    def number(key: str) -> float:
        value = row.get(f"{label}_{key}")
        return math.nan if value is None else float(value)

    verdict_ = row.get(f"{label}_verdict") or NOT_MEASURED
    return SeedMeasure(number("mean"), number("low"), number("high"), row.get("seeds", 0), verdict_)


def _cost_text(row: Mapping[str, Any]) -> str:
    """A rule's held-out perplexity cost (its paired difference to the baseline's), in words."""
    m = _difference(row, "perplexity_cost")
    if m.verdict == HIGHER:
        return f"costs {shown_difference(m)} held-out perplexity"
    if m.verdict == LOWER:
        return f"and lowers held-out perplexity, {shown_difference(m)}"
    if m.verdict == NO_DIFFERENCE:
        return f"perplexity cost unresolved, {shown_difference(m)}"
    if m.verdict == ONE_SEED:
        return f"perplexity {shown_difference(m)}, one seed: no interval"
    return "perplexity cost not measured"


def _named(rows: list[Mapping[str, Any]], notes: Mapping[str, str] | None = None) -> str:
    """'a (its cost); b (its cost)', the cheapest first (an unmeasured cost last); ``notes``:
    a caveat to print beside a rule's name."""

    def cost(row):
        c = _difference(row, "perplexity_cost").mean
        return math.inf if math.isnan(c) else c

    def name(row):
        note = (notes or {}).get(row["normalizer"])
        return row["normalizer"] + (f", {note}" if note else "")

    return "; ".join(f"{name(r)} ({_cost_text(r)})" for r in sorted(rows, key=cost))


def which_rule_when(
    table: pl.DataFrame,
    baseline: str,
    notes: Mapping[str, str] | None = None,
    ratio: float | None = None,
) -> str:
    """The "which rule to use when" summary, generated from the table over the seeds (the seeds
    CSV: ``normalizer``, ``seeds``, each limit's ``<key>_verdict``, and the paired differences
    ``perplexity_cost_*`` and ``sink_change_*``). One Markdown item per limit: the rules whose
    interval is apart from the baseline's in the paper's direction ('relaxes'), cheapest first
    with their perplexity cost, and those that tighten it, each marked where its untrained
    weights already give the verdict (``<key>_untrained_verdict``); 'no difference shown' where none
    relaxes it; no verdict for the orientation-free limit. Then the sink and the perplexity."""
    # the study's relax_ratio where the caller gives it (review 38), else its name
    ratio_word = f"{ratio:g}x" if ratio is not None else RATIO_WORD
    rows = [r for r in table.to_dicts() if r["normalizer"] != baseline]
    lines = []
    for key, limit in LIMITS.items():
        lead = f"- **When {limit.when}** ({limit.title}):"
        if limit.relaxes == "either":
            lines.append(
                f"{lead} no verdict, both readings defensible; the table shows each measure."
            )
            continue
        relax = [r for r in rows if r.get(f"{key}_verdict") == RELAXES]
        # a verdict its rule's untrained weights already give is the rule's, not training's
        already = {
            r["normalizer"]
            for r in rows
            if r.get(f"{key}_verdict") in (RELAXES, TIGHTENS)
            and r.get(f"{key}_untrained_verdict") == r.get(f"{key}_verdict")
        }
        limit_notes = {
            n: ", ".join(
                note
                for note in ((notes or {}).get(n), UNTRAINED_ALREADY if n in already else None)
                if note
            )
            for n in {r["normalizer"] for r in rows}
        }
        tighten = [
            r["normalizer"] + (f" ({UNTRAINED_ALREADY})" if r["normalizer"] in already else "")
            for r in rows
            if r.get(f"{key}_verdict") == TIGHTENS
        ]
        # beyond the ratio on its own but not kept by Benjamini-Hochberg, and cells without a
        # paired ratio (censored or unmeasured seeds): neither is a rule "compared" and found
        # not beyond it
        dropped = [r for r in rows if r.get(f"{key}_dropped_by_fdr") == RELAXES]
        unpaired = [
            r
            for r in rows
            if r.get(f"{key}_verdict") == NO_DIFFERENCE
            and r.get(f"{key}_dropped_by_fdr") != RELAXES
            and f"{key}_ratio" in r
            and not (r[f"{key}_ratio"] is not None and math.isfinite(r[f"{key}_ratio"]))
        ]
        set_apart = {r["normalizer"] for r in dropped + unpaired}
        compared = [
            r
            for r in rows
            if r.get(f"{key}_verdict") in (NO_DIFFERENCE, TIGHTENS)
            and r["normalizer"] not in set_apart
        ]
        apart = sorted(
            {f"{r['normalizer']}: {r.get(f'{key}_verdict')}" for r in rows}
            - {f"{r['normalizer']}: {r.get(f'{key}_verdict')}" for r in compared}
            - {f"{r['normalizer']}: {r.get(f'{key}_verdict')}" for r in dropped + unpaired}
        )
        if relax:
            text = f"{lead} {_named(relax, limit_notes)}."
        elif not compared:
            # nothing compared: no "of 0 rules compared", and each other reason named
            text = (
                f"{lead} one seed: no interval, so no difference from {baseline} is shown."
                if any(r.get(f"{key}_verdict") == ONE_SEED for r in rows)
                # unpaired comparisons only (their note below), or none at all
                else f"{lead} no rule is shown to relax it: of {len(unpaired)} rules compared "
                f"with {baseline} unpaired (on their intervals' ends), none lies {ratio_word} "
                "beyond it in the paper's direction."
                if unpaired
                else f"{lead} no rule could be compared with {baseline}."
            )
            withheld = [a for a in apart if not a.endswith(f": {ONE_SEED}")]
            if withheld:
                text += f" Not compared: {'; '.join(withheld)}."
        else:
            # no shown difference is not a shown equivalence: say how many rules were compared
            text = (
                f"{lead} no rule is shown to relax it: of {len(compared)} rules compared with "
                f"{baseline}, none has a paired-ratio interval wholly {ratio_word} beyond it in "
                "the paper's direction (a point ratio beyond it is no shown difference)."
            )
            if apart:
                text += f" Not compared: {'; '.join(apart)}."
        if dropped:
            text += (
                " Beyond it on its own, not kept by Benjamini-Hochberg across the table: "
                + ", ".join(r["normalizer"] for r in dropped)
                + "."
            )
        if unpaired:
            text += (
                " No paired ratio (a seed censored or known to its list cell only, unmeasured "
                "or non-positive; compared unpaired, on the interval ends): "
                + ", ".join(r["normalizer"] for r in unpaired)
                + "."
            )
        if tighten:
            text += f" Tightens it: {', '.join(tighten)}."
        lines.append(text)
    sink = [r for r in rows if r.get("sink_change_verdict") == LOWER]
    more = [r["normalizer"] for r in rows if r.get("sink_change_verdict") == HIGHER]
    lead = "- **When the attention sink must go** (first-token weight x L, 1: uniform):"
    base = next((r for r in table.to_dicts() if r["normalizer"] == baseline), {})
    base_low = base.get("sink_low")
    if base_low is not None and math.isfinite(base_low) and base_low <= 1.0:
        # nothing shown to remove: "lower" than a baseline not shown above uniform cures no sink
        # not shown above uniform is no shown absence (review 39): the rules shown lower are
        # still named, as lower than a sink that is itself not shown
        text = (
            f"{lead} {baseline}'s models are not shown to have a sink: their first token's "
            f"weight is {base.get('sink_mean', math.nan):.3g} [{base_low:.3g}, "
            f"{base.get('sink_high', math.nan):.3g}] times a uniform row's, not shown above it, "
            "so no rule is named for removing one."
            + (
                f" Shown lower than {baseline}'s all the same: {_named(sink, notes)}."
                if sink
                else ""
            )
        )
    elif sink:
        text = f"{lead} lower than {baseline}'s: {_named(sink, notes)}."
    else:
        text = f"{lead} no rule's first-token weight is shown lower than {baseline}'s."
    if more:
        text += f" Higher than {baseline}'s: {', '.join(more)}."
    if sink or more:
        text += UNCORRECTED
    lines.append(text)
    cheaper = [r for r in rows if r.get("perplexity_cost_verdict") == LOWER]
    costly = [r["normalizer"] for r in rows if r.get("perplexity_cost_verdict") == HIGHER]
    lead = "- **When held-out perplexity comes first**:"
    if cheaper:
        text = f"{lead} lower than {baseline}'s: {_named(cheaper, notes)}."
    else:
        text = f"{lead} no rule's held-out perplexity is shown lower than {baseline}'s."
    if costly:
        text += f" Higher: {', '.join(costly)}."
    if cheaper or costly:
        text += UNCORRECTED
    lines.append(text)
    return "\n".join(lines)
