"""Table 1: the reproduction scorecard. One row per quantitative claim of the paper, this run's
value, and a verdict by the rule written in the row itself. The claims, the paper's values and the
thresholds are data (workflow/resources/paper_claims.yaml, ``claims`` here); each analysis module
scores its own (its ``score``, with assemble.claims), and this module runs them in the registry's
order, then scores every bound check."""

import importlib
import logging
import math
from collections.abc import Mapping

import polars as pl

from attnlimits.bootstrap import (
    clopper_pearson,
)
from attnlimits.families import FAMILIES

from .. import registry
from ..analyses.gradient_null import LESS_OFTEN, NULL_ALPHA, NULL_DECIDED
from .claims import (  # noqa: F401  (re-exported: the scoring pieces tests and scripts name here)
    MAXIMUM_CAVEAT,
    MAXIMUM_CLAIMS,
    NOT_SCORED,
    POSITIVE,
    Scorecard,
    Scoring,
    bootstrap_note,
    interval_text,
    measure,
    partitions,
    reading_text,
    readings,
    verdict,
)

LOG = logging.getLogger(__name__)

# columns that are empty for some checks (no per-row counts under last_row) read as text
VIOLATION_TYPES = {
    **{
        c: pl.Int64
        for c in ("rows", "violated_rows", "not_testable_rows", "vacuous_rows", "mask_only_rows")
    },
    "median_log10_slack": pl.Float64,
    "vacuous_reason": pl.String,
    "note": pl.String,
    "by_n": pl.String,
    "proved": pl.String,
    "proof_needs": pl.String,
    "no_verdict": pl.String,
    "heads_checked": pl.Int64,
    "heads_violated": pl.Int64,
}
# the number a verdict reads, its interval and how it was drawn (null where there is none)
NUMBER_COLUMNS = ("value", "low", "high", "level", "resamples")
TABLE1_SCHEMA = {
    **{c: pl.String for c in ("claim_id", "claim", "paper", "measured", "verdict_rule", "verdict")},
    **{c: pl.Float64 for c in ("value", "low", "high", "level")},
    "resamples": pl.Int64,
    "reads": pl.String,
    "side": pl.String,
    "summary": pl.String,
}


def bound_detail(r: dict) -> str:
    """What the counts leave out: the untestable and vacuous samples, the rows, the slack."""
    parts = [f"{r['not_testable']} not testable, {r['vacuous']} vacuous, {r['not_applicable']} n/a"]
    if r.get("violated_rows") is not None:
        # a row is checked once per L, N or T the check reads: checks, not distinct rows; the
        # share is of the checks that could fail (vacuous and not testable ones named apart)
        untestable = r.get("not_testable_rows") or 0
        could_fail = r["rows"] - (r.get("vacuous_rows") or 0) - untestable
        parts.append(
            f"row checks: {r['violated_rows']} of {could_fail} testable violate "
            f"({r['vacuous_rows'] or 0} vacuous, {untestable} not testable, {r['rows']} in all)"
        )
    if r.get("note"):
        parts.append(r["note"])
    if r.get("mask_only_rows"):
        parts.append(
            f"{r['mask_only_rows']} causal rows t + 1 <= N left out (every visible key selected: "
            "their bounds are set by the masked keys)"
        )
    if r.get("median_log10_slack") is not None and math.isfinite(r["median_log10_slack"]):
        parts.append(f"median log10 slack {r['median_log10_slack']:.2g}")
    if r.get("vacuous") and r.get("vacuous_reason"):
        parts.append(f"vacuous: {r['vacuous_reason']}")
    if r.get("by_n"):
        parts.append(f"per N: {r['by_n']}")
    return "; ".join(parts)


def fewest_units(most: float, level: float) -> int:
    """The fewest checked units with no violation whose Clopper-Pearson upper end falls below
    ``most``: (1 - level) / 2 = (1 - most)^n, so n > log((1 - level) / 2) / log(1 - most)."""
    return math.floor(math.log((1.0 - level) / 2.0) / math.log(1.0 - most)) + 1


def bound_claims(
    card: Scorecard,
    violations: pl.DataFrame,
    sums_to_one: bool = True,
    sampled: bool = False,
    literal_zero_weight: bool = True,
) -> None:
    """One row per bound check of the summaries (claim id "bound:<name>"). ``sums_to_one``:
    whether the run's weights are a softmax over the keys alone (no attention sink), the
    assumption under which a proof that needs it (the violations' ``proof_needs``: "sum_to_one",
    or missing) cannot fail; a proof of "any" weights holds either way. ``sampled``: the rows were drawn
    (analysis.all_rows.rows), so no violation among them is not testable, not reproduced.
    ``literal_zero_weight``: analysis.zero_weight counts a zero-weight top-N key as selected,
    the reading under which a proof that needs it ("literal_zero_weight") holds."""
    most = card.claims.get("bounds", {}).get("max_violation_share", 0.05)
    fewest = fewest_units(most, card.level)
    for r in violations.iter_rows(named=True):
        # A check counts where it could fail; samples whose bound lies within the check's
        # tolerance of the quantity's range are "not testable", those where no data could fail
        # it "vacuous", never "holds" (attnlimits.checks).
        rule = (
            f"0 violations; tolerance {r['tolerance']} (a universal bound: one violation refutes "
            f"it; none is reproduced once at least {fewest} units are checked, heads where the "
            f"table has them: the count at which an exact binomial upper end would fall below "
            f"{most:g} if the units were independent; a layer's heads share its input, so this "
            "is a threshold on the count, not a confidence level)"
        )
        note = r.get("note") or ""
        if note.startswith(NULL_DECIDED):
            # Corollary 3's checks are decided against a null of matched spread, not by the
            # count alone (review 41): the rule says so
            rule = (
                f"decided against a null of matched spread (Gaussian logits with each row's own "
                "standard deviation, not its shape: a sink row's outlier sets it; through the "
                f"same check; tolerance {r['tolerance']}): not reproduced "
                "where the model violates more often than its null (two-sided sign-flip test of "
                f"the per-layer sums, p < {NULL_ALPHA:g}), reproduced only where no row violates, "
                f"its null does significantly more often and at least {fewest} units are "
                "checked (fewer: not testable), else no verdict"
                + (
                    "; with sampled rows (analysis.all_rows.rows) no violation among them is "
                    "not testable"
                    if sampled
                    else ""
                )
            )
        elif r.get("no_verdict"):
            rule = f"counted, no verdict: {r['no_verdict']}"
        row = (f"bound:{r['bound']}", f"bound holds: {r['bound']}", "holds")
        # a proof that needs weights summing to one says nothing of a sink's rows
        needs_sum = (r.get("proof_needs") or "sum_to_one") == "sum_to_one"
        proved = (r.get("proved") or "") if sums_to_one or not needs_sum else ""
        # ... and one that needs the literal count of N_s says nothing under analysis.zero_weight
        # not_selected, where the bound can fail: then it is checked like any other (review 42)
        if r.get("proof_needs") == "literal_zero_weight" and not literal_zero_weight:
            proved = ""
        if r["checked"] == 0:
            # vacuous only where no sample could fail it: a not testable one could, with a
            # tolerance finer than its bound (review 30)
            outcome = (
                "not testable" if r["not_testable"] else ("vacuous" if r["vacuous"] else NOT_SCORED)
            )
            measured = f"0 checked ({bound_detail(r)})"
            if r["not_testable"] and r["vacuous"]:
                measured += (
                    f"; {r['vacuous']} vacuous and {r['not_testable']} not testable: neither holds"
                )
            card.add(*row, measured, rule, outcome)
            continue
        # The units are the heads where the table has them: a head's samples at several L, N or
        # T are one head's attention, not independent trials. The violated share gets its exact
        # binomial interval, but the verdict needs no bootstrap: a bound is a universal
        # statement, so one violation refutes it, and none among the checked says only as much
        # as their number allows.
        if r.get("heads_checked"):
            units, bad, unit = r["heads_checked"], r["heads_violated"], "heads"
        else:
            units, bad, unit = r["checked"], r["violations"], r["unit"]
        share, (low, high) = bad / units, clopper_pearson(bad, units, card.level)
        measured = (
            f"{bad} of {units} {unit} violate (share {share:.3g}, {100 * card.level:g} % "
            f"Clopper-Pearson [{low:.3g}, {high:.3g}]; {r['violations']} of {r['checked']} "
            f"{r['unit']}; {bound_detail(r)})"
        )
        if r.get("no_verdict"):
            # counted, but the count says nothing about the paper's claim
            outcome = "no verdict"
            measured += f"; no verdict: {r['no_verdict']}"
        elif bad and proved:
            # a bound no data can break, broken: a defect of the code or of an assumption, which
            # says nothing against the paper (review 45)
            outcome = "no verdict"
            measured += "; a proved bound violated: the code or an assumption is wrong"
            LOG.error(
                "bound:%s: %d of %d %s violate a bound that holds by proof (%s): a defect of the "
                "code or of an assumption, reported as no verdict",
                r["bound"],
                bad,
                units,
                unit,
                proved,
            )
        elif bad:
            outcome = "not reproduced"
        elif proved:
            # a theorem that holds for every input: no model could have failed it
            outcome = "vacuous"
            measured += f"; holds by proof, a check of the code: {proved}"
        elif sampled:
            # a universal statement is not confirmed by the rows drawn (analysis.all_rows.rows):
            # a violation among them refutes it, none among them cannot say it holds
            outcome = "not testable"
            measured += "; no violation among the sampled rows, which cannot show it holds on all"
            if (r.get("note") or "").startswith(LESS_OFTEN):
                # a null's "less often" (Corollary 3) compares rates on the rows drawn; it is
                # not the universal statement the verdict reads
                measured += " (the comparison with its null speaks of the sampled rows only)"
        elif high < most:
            outcome = "reproduced"
            total = r["checked"] + r["not_testable"] + r["vacuous"]
            if 2 * r["checked"] < total:
                # the count decides, but on a small part of the data (review 30)
                measured += (
                    f"; only {r['checked']} of {total} {r['unit']} could fail it (the rest not "
                    "testable or vacuous)"
                )
            if units < 2 * fewest:
                # 0 of 72 puts the upper end at 0.0499: one unit fewer and the count could not
                # decide, so such a verdict rests on the sample count as much as on the data
                measured += (
                    f"; at the edge of the sample count: 0 violations among {units} {unit}, "
                    f"{fewest} being the fewest that can decide"
                )
        else:
            # 0 of too few cannot bring the upper end below the threshold: the count alone, not
            # the data, would decide, so the check cannot decide
            outcome = "not testable"
            measured += f"; {units} {unit} cannot decide: at least {fewest} are needed"
        card.add(*row, measured, rule, outcome, value=share, low=low, high=high)


def table1(
    *,
    summaries: Mapping[str, pl.DataFrame],
    violations: pl.DataFrame,
    claims: dict,
    run: dict,
    analysis: dict,
    replicates: Mapping[str, pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """Table 1 from one model's summary tables (``summaries``: each scored analysis's of the
    registry, attnlimits_workflow.registry.SCORED, by name), its run description and its
    ``analysis`` settings: claim_id, claim, paper, measured, verdict_rule, verdict, and the
    number the verdict reads with its interval (value, low, high, level, resamples). Each
    analysis's module scores its own claims (its ``score``), in the registry's order, then the
    bound checks follow. ``claims``: the paper's claim card (paper_claims.yaml), to which a
    module may add claims of its own (its ``CLAIMS``). ``replicates``: per summary name its
    bootstrap replicates (assemble.replicates; critical_n: summaries.critical_n_replicates); a
    summary without them is scored on its point values."""
    replicates = replicates or {}
    modules = {
        name: importlib.import_module(f"attnlimits_workflow.analyses.{name}")
        for name in registry.SCORED
    }
    card_claims = {k: v for m in modules.values() for k, v in getattr(m, "CLAIMS", {}).items()}
    card = Scorecard({**card_claims, **claims}, level=analysis["bootstrap"]["level"])
    scoring = Scoring(run, analysis, readings(run, analysis))
    for name, module in modules.items():
        module.score(card, summaries[name], replicates.get(name), scoring)
    bound_claims(
        card,
        violations,
        weights_sum_to_one(run),
        scoring.sampled,
        literal_zero_weight=analysis.get("zero_weight", "not_selected") != "not_selected",
    )
    bound_summary = (
        dict(zip(violations["bound"], violations["summary"], strict=True))
        if "summary" in violations.columns
        else {}
    )
    for row in card.rows:
        key = row["claim_id"].split(":", 1)[0]
        bound = row["claim_id"].removeprefix("bound:")
        row["summary"] = (
            bound_summary.get(bound) if key == "bound" else registry.CLAIM_SUMMARIES.get(key)
        )
    return pl.DataFrame(card.rows, schema=TABLE1_SCHEMA)


def weights_sum_to_one(run: dict) -> bool:
    """Whether the rows the analyses read sum to one: not under an attention sink, which takes a
    share of every row (docs/paper-notes.md 12); differential attention's analyses read its
    per-head softmax rows, each a distribution (section 13)."""
    family = FAMILIES.get(run.get("model_type", ""))
    return family is None or not family.attention_sinks


def table1_header(run: dict, unit: str = "head") -> str:
    """The scorecard's caption: the run, its protocol and what its intervals resample
    (``unit``: analysis.bootstrap.unit)."""
    from ..plotting import protocol_text  # matplotlib: not for the analysis jobs that score

    return (
        f"Reproduction scorecard: {run['model']} ({run['weights']}), corpus {run['corpus']}, "
        f"{run['chunks']} chunks; {protocol_text(run)}. {bootstrap_note(unit).capitalize()}."
    )
