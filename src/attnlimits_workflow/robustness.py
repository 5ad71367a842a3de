"""Whether a claim's verdict survives the paper's open choices and another text.

Over a set of alternatives (readings of the paper, texts), compared with a reference one (the
configured default reading, the first text), a claim is:
- **fragile** when two alternatives decide it differently (reproduced against not reproduced);
  ``flipped_by`` names those whose decided verdict differs from the reference's;
- **unresolved** when none conflicts but one is undecided (its interval straddles the rule's
  edge): the data cannot say whether that alternative would flip it;
- **untested** when an alternative that reaches the claim gives no verdict (vacuous, not
  testable, no verdict, not scored), or fewer than two alternatives decide it: a check no data
  could fail under one reading says nothing about whether the others agree;
- **robust** only when every alternative decides it, the same way, and there are at least two.
  A claim read on a maximum over heads (claims.MAXIMUM_CLAIMS) is never robust: where its
  alternatives agree it is untested, as the findings page says (its head bootstrap understates
  the uncertainty).
``unsettled_by`` names the undecided and undecidable alternatives.

An alternative whose verdict is "not applicable" does not exist for that model (Table 1's
prefix reading of a critical-N claim on an encoder, which has no masked keys: the same rows as
the L x L reading) and is left out, as if absent: neither undecidable nor a second decision.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from .assemble.claims import MAXIMUM_NOTE, NAMED_SIDE_TEXT, SIDE_TEXT, is_maximum

ROBUST = "robust"
FRAGILE = "fragile"
UNRESOLVED = "unresolved"
UNTESTED = "untested"
UNAFFECTED = "unaffected"
DECIDED = ("reproduced", "not reproduced")
UNDECIDED = "undecided"
# Any other outcome (no verdict, not scored, vacuous, not testable) neither confirms nor flips a
# claim: a vacuous reading of a claim says nothing about its other readings.
# An alternative that does not exist for a model: left out of the comparison.
NOT_APPLICABLE = "not applicable"


def applicable(verdicts: dict[str, str | None]) -> dict[str, str | None]:
    """``verdicts`` without the alternatives that do not exist for the model."""
    return {alt: v for alt, v in verdicts.items() if v != NOT_APPLICABLE}


def compare(
    verdicts: dict[str, str | None],
    reference: str,
    sides: dict[str, str | None] | None = None,
) -> tuple[str, str, str]:
    """(status, flipped_by, unsettled_by) of one claim over ``verdicts`` (alternative ->
    verdict), by the rules of this module's docstring. ``sides``: per alternative, the side of
    the rule a "not reproduced" falls on (above, below, or per statistic: :func:`parse_side`;
    None where unknown): two alternatives that miss a band on opposite sides decide the claim
    differently (review 36, :func:`sides_conflict`), an unknown side agrees with either."""
    verdicts = applicable(verdicts)
    sides = sides or {}
    decided = {alt: v for alt, v in verdicts.items() if v in DECIDED}
    ref = verdicts.get(reference)
    ref_decided = ref if ref in DECIDED else next(iter(decided.values()), None)
    missed = [alt for alt, v in decided.items() if v == "not reproduced" and sides.get(alt)]
    # every pair of sides, not only against the reference's: a reference missing on R^2 alone
    # shares no statistic with two readings whose slopes lie on opposite sides (review 39)
    conflicting = {
        alt
        for alt in missed
        for other in missed
        if other != alt and sides_conflict(sides[alt], sides[other])
    }

    def outcome(alt: str) -> str:
        return with_side(decided[alt], sides.get(alt) if decided[alt] == "not reproduced" else None)

    flipped = [
        (alt, outcome(alt))
        for alt, v in decided.items()
        if v != ref_decided
        # the reference is what the others are read against: never named itself
        or (alt in conflicting and alt != reference)
    ]
    unsettled = [(alt, v or "no verdict") for alt, v in verdicts.items() if v not in DECIDED]
    if flipped:
        status = FRAGILE
    elif any(v == UNDECIDED for _, v in unsettled):
        status = UNRESOLVED
    elif unsettled or len(decided) < 2:
        status = UNTESTED
    else:
        status = ROBUST
    return status, _pairs(flipped), _pairs(unsettled)


def with_side(verdict: str, side: str | None) -> str:
    """A verdict as the pages print it: "not reproduced (above)" where its side is known."""
    return f"{verdict} ({side})" if side else verdict


def parse_side(side: str) -> dict[str, str]:
    """A Table 1 side (bootstrap.missed_side) as statistic -> direction: "above" is the one
    band's ({"": "above"}), "R^2 below; slope above" names each statistic's own."""
    out = {}
    for part in side.split("; "):
        for direction in ("above and below", "above", "below"):
            if part == direction or part.endswith(f" {direction}"):
                out[part.removesuffix(direction).strip()] = direction
                break
    return out


def sides_conflict(a: str, b: str) -> bool:
    """Whether two not-reproduced outcomes miss the rule on opposite sides: some statistic named
    by both lies on different sides of its band. A slope above its band and an R^2 below its own
    are two reasons for one outcome, not a flip (review 37). "above and below" (a box missing a
    two-sided band both ways) against "above" is a flip too: the two say different things about
    where the statistic lies."""
    one, other = parse_side(a), parse_side(b)
    return any(one[name] != other[name] for name in one.keys() & other.keys())


def _pairs(pairs: list[tuple[str, str]]) -> str:
    return "; ".join(f"{alt}: {v}" for alt, v in pairs)


def robustness(
    verdicts: pl.DataFrame, *, over: str, within: Sequence[str], reference: str
) -> pl.DataFrame:
    """Per group of ``within`` columns (e.g. claim, model): ``over``'s alternatives compared.

    ``verdicts`` holds one row per (``within``..., ``over``) with a ``verdict`` column, and
    optionally ``side`` (where a "not reproduced" falls: :func:`compare`).
    ``reference``: the alternative the others are compared with (a fragile claim names what
    flips it relative to this one). Returns ``within`` + ``robustness`` (robust, fragile,
    unresolved or untested: :func:`compare`), ``verdict`` (the reference's, whatever it is, or
    where it is not applicable the first applicable alternative's),
    ``alternatives`` (how many decided it), ``flipped_by`` and ``unsettled_by`` ("reading:
    verdict; ...")."""
    missing = {over, "verdict", *within} - set(verdicts.columns)
    if missing:
        raise ValueError(f"verdict table lacks columns {sorted(missing)}")
    rows = []
    for key, group in verdicts.sort(over).group_by(list(within), maintain_order=True):
        alternatives = dict(zip(group[over].to_list(), group["verdict"].to_list(), strict=True))
        sides = (
            dict(zip(group[over].to_list(), group["side"].to_list(), strict=True))
            if "side" in group.columns
            else None
        )
        status, flipped, unsettled = compare(alternatives, reference, sides)
        present = applicable(alternatives) or alternatives
        rows.append(
            {
                **dict(zip(within, key, strict=True)),
                "robustness": status,
                "verdict": present.get(reference, next(iter(present.values()))),
                "alternatives": sum(v in DECIDED for v in alternatives.values()),
                "flipped_by": flipped,
                "unsettled_by": unsettled,
            }
        )
    schema = {c: verdicts.schema[c] for c in within} | {
        "robustness": pl.String,
        "verdict": pl.String,
        "alternatives": pl.Int64,
        "flipped_by": pl.String,
        "unsettled_by": pl.String,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


# The readings of a causal row's masked keys that Table 1 scores side by side (its claim ids
# <claim>:non_selected, <claim>:prefix; attnlimits_workflow.assemble.table1.readings).
MASKED_READINGS = ("non_selected", "prefix")
# Table 1's interval columns, carried along where a Table 1 has them.
INTERVAL_COLUMNS = ("value", "low", "high")


def masked_reading_of(claim_id: str, claim_ids: set[str]) -> tuple[str, str | None]:
    """(the claim, the reading of masked keys it is scored under, or None where Table 1 scores
    it once). Table 1 gives a claim scored under both readings one plain id and one id with the
    other reading as suffix: the plain id's reading is the one no suffixed id names."""
    base, _, suffix = claim_id.rpartition(":")
    if base and suffix in MASKED_READINGS:
        return base, suffix
    named = [m for m in MASKED_READINGS if f"{claim_id}:{m}" in claim_ids]
    if len(named) == 1:
        return claim_id, next(m for m in MASKED_READINGS if m != named[0])
    return claim_id, None


def reading_label(reading: str, masked: str | None) -> str:
    return reading if masked is None else f"{reading}, masked: {masked}"


def reading_verdicts(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per claim x reading from each reading's Table 1 (``tables``: reading name ->
    its claim_id and verdict columns, and value/low/high where it has them): claim_id without
    its masked-keys suffix, ``masked`` (that reading, or null), ``reading`` (the run's reading,
    with the masked one where the claim has two), verdict and the interval columns (null where a
    table lacks them)."""
    rows = []
    for reading, table in tables.items():
        ids = set(table["claim_id"].to_list())
        for row in table.iter_rows(named=True):
            claim, masked = masked_reading_of(row["claim_id"], ids)
            rows.append(
                {
                    "claim_id": claim,
                    "masked": masked,
                    "reading": reading_label(reading, masked),
                    "reading_name": reading,
                    "summary": row.get("summary"),
                    "verdict": row["verdict"],
                    "side": side_of(row),
                    **{c: _number(row.get(c)) for c in INTERVAL_COLUMNS},
                }
            )
    schema = {
        "claim_id": pl.String,
        "masked": pl.String,
        "reading": pl.String,
        "reading_name": pl.String,
        "summary": pl.String,
        "verdict": pl.String,
        "side": pl.String,
        **dict.fromkeys(INTERVAL_COLUMNS, pl.Float64),
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def side_of(row: dict) -> str | None:
    """The side of its rule a Table 1 row's "not reproduced" falls on: its ``side`` column, or
    for a table written before the column existed, the measured text's opening (SIDE_TEXT)."""
    if row.get("verdict") != "not reproduced":
        return None
    if row.get("side"):
        return row["side"]
    measured = row.get("measured") or ""
    # the scorecard keeps the measured text only: the side it opens with, plain or named
    named = SIDE_TEXT.match(measured) or NAMED_SIDE_TEXT.match(measured)
    return named.group(1) if named else None


def text_side(row: dict, entry: str) -> str | None:
    """The side of its rule ``entry``'s "not reproduced" of a scorecard row falls on, from its
    measured text (:func:`side_of`)."""
    return side_of({"verdict": row[entry], "measured": row.get(f"{entry} measured")})


def _number(value) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def robustness_table(
    tables: dict[str, pl.DataFrame],
    reference: str,
    masked: str,
    applies: dict[str, set[str]] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Table 1 under every reading (``tables``, reading name -> Table 1, ``reference`` the
    configured reading's name, ``masked`` its analysis.all_rows.masked): (every claim x reading
    with its verdict, interval columns and its claim's robustness and flipped_by; one row per
    claim: robust, fragile, untested or unaffected over every reading, masked keys' included).

    ``applies``: per reading other than the reference, the summaries it changes (Table 1's
    ``summary`` column names the one each claim reads). A reading that changes none of a claim's
    inputs repeats the reference's verdict by construction, so it is left out rather than
    counted as confirming it; a claim no reading reaches is "unaffected"."""
    long = reading_verdicts(tables)
    if applies is not None and long["summary"].is_not_null().any():
        reaches = pl.col("reading_name") == reference
        for reading, kinds in applies.items():
            reaches = reaches | (
                (pl.col("reading_name") == reading) & pl.col("summary").is_in(sorted(kinds))
            )
        others = set(long.filter(pl.col("reading_name") != reference)["claim_id"].to_list())
        long = long.filter(reaches)
        reached = set(long.filter(pl.col("reading_name") != reference)["claim_id"].to_list())
        unreached = others - reached
    else:
        unreached = set()
    masked_kinds = long.group_by("claim_id").agg(pl.col("masked").is_not_null().n_unique())
    mixed = sorted(masked_kinds.filter(pl.col("masked") > 1)["claim_id"].to_list())
    if mixed:
        # one claim in both partitions below would come out twice (review 30)
        raise ValueError(
            "claims read with and without the masked keys in different readings' Table 1: "
            + ", ".join(mixed)
        )
    per_claim = []
    for has_masked, ref in (
        (True, reading_label(reference, masked)),
        (False, reading_label(reference, None)),
    ):
        ids = long.filter(pl.col("masked").is_not_null() == has_masked)["claim_id"].unique()
        part = long.filter(pl.col("claim_id").is_in(ids.to_list()))
        if part.height:
            per_claim.append(robustness(part, over="reading", within=["claim_id"], reference=ref))
    order = long["claim_id"].unique(maintain_order=True).to_frame()
    claims = order.join(pl.concat(per_claim), on="claim_id", how="left", maintain_order="left")
    # untested because no reading reaches its inputs, not for want of readings: unaffected
    claims = claims.with_columns(
        robustness=pl.when(
            pl.col("claim_id").is_in(sorted(unreached)) & (pl.col("robustness") == UNTESTED)
        )
        .then(pl.lit(UNAFFECTED))
        .otherwise(pl.col("robustness"))
    )
    # a maximum over heads: agreement is no robustness (as on the findings page); a flip shows
    maxima = sorted(c for c in claims["claim_id"] if is_maximum(c))
    agreed = pl.col("claim_id").is_in(maxima) & (pl.col("robustness") == ROBUST)
    claims = claims.with_columns(
        unsettled_by=pl.when(agreed).then(pl.lit(MAXIMUM_NOTE)).otherwise(pl.col("unsettled_by")),
        robustness=pl.when(agreed).then(pl.lit(UNTESTED)).otherwise(pl.col("robustness")),
    )
    long = long.join(
        claims.select("claim_id", "robustness", "flipped_by", "unsettled_by"),
        on="claim_id",
        how="left",
        maintain_order="left",
    )
    present = [c for c in INTERVAL_COLUMNS if long[c].is_not_null().any()]
    dropped = [c for c in INTERVAL_COLUMNS if c not in present]
    return long.drop(*dropped, "reading_name", "summary", strict=False), claims
