"""Scoring one claim of Table 1: the scorecard its rows are added to, the statistic measured on
a summary and on each bootstrap replicate of it, and the texts of a row. Each analysis module's
``score`` (its claims, attnlimits_workflow.registry) uses these; assemble.table1 runs them all,
then the bound checks."""

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from attnlimits.bootstrap import Band, Interval, percentile_interval

# The opening of a measured text that names the side a "not reproduced" falls on
# ("above the rule's [0.03, 0.12]: ...", "below the rule's band: ...")
SIDE_TEXT = re.compile(r"(above and below|above|below) the rule's ([^:]+):")
# ... or, for a joint claim of several statistics, each one's own ("slope above; R^2 below its
# band: ..."), bootstrap.missed_side with names
NAMED_SIDE_TEXT = re.compile(
    r"((?:[^:;]+ (?:above and below|above|below))(?:; [^:;]+ (?:above and below|above|below))*)"
    r" its band:"
)
# the sides of a statistic against its one band (bootstrap.missed_side without names)
PLAIN_SIDES = ("above", "below", "above and below")

# A claim this run cannot score (its grid lacks what the rule reads, no rows, 0 checked): kept
# apart from "not applicable", an alternative that does not exist for the model (the prefix
# reading of an encoder), which robustness leaves out; a claim not scored is untested there.
NOT_SCORED = "not scored"


def verdict(ok: bool | None) -> str:
    return NOT_SCORED if ok is None else ("reproduced" if ok else "not reproduced")


# A claim's statistic: computed from a summary frame (the per-(L, N, T) medians, means, maxima),
# so the same code gives the value (on the summary) and each resample's value (on a replicate
# summary, assemble.replicates); several numbers where the rule reads several at once.
Statistic = Callable[[pl.DataFrame], tuple[float, ...]]


def measure(
    statistic: Statistic, summary: pl.DataFrame, replicates: list[pl.DataFrame] | None, level: float
) -> tuple[Interval, ...]:
    """Each number of ``statistic``: its value on ``summary`` and its percentile interval over
    ``replicates`` (one frame per resample). Without replicates the interval is the value itself
    (resamples 0): the point decides, as before intervals (hand-made tables in tests)."""
    values = statistic(summary)
    if not replicates:
        return tuple(Interval(v, v, v, level, 0) for v in values)
    stats = np.array([statistic(r) for r in replicates], dtype=np.float64)
    out = []
    for j, v in enumerate(values):
        low, high, undefined = percentile_interval(stats[:, j], level)
        out.append(Interval(v, low, high, level, len(replicates), undefined))
    return tuple(out)


def interval_text(interval: Interval, fmt: str = ".3g") -> str:
    """``0.74 [0.72, 0.77]`` (each number by ``fmt``), or the value alone when no resample gave
    an interval; an undefined end prints as n/a."""

    def f(v: float) -> str:
        return "n/a" if math.isnan(v) else format(v, fmt)

    if interval.resamples == 0:
        return f(interval.value)
    return f"{f(interval.value)} [{f(interval.low)}, {f(interval.high)}]"


def partitions(replicates: pl.DataFrame | None) -> list[pl.DataFrame] | None:
    """A replicate table (column ``replicate``) as one frame per resample, in resample order."""
    if replicates is None or replicates.height == 0:
        return None
    return replicates.sort("replicate").partition_by("replicate", maintain_order=True)


@dataclass
class Scorecard:
    """Table 1's rows as they are added, and the claims they are filled from; ``level``: the
    intervals' coverage (analysis.bootstrap.level)."""

    claims: dict
    level: float = 0.95
    rows: list[dict] = field(default_factory=list)

    def texts(self, key: str, variant: str | None = None, **names) -> tuple[str, str, str, str]:
        """The claim's stable id (its key in paper_claims.yaml, ":variant" where one claim gives
        several rows), which the cross-model scorecard joins on (the claim texts name each run's
        own grid values), then the claim, the paper's value and the rule, filled from its entry
        and ``names``."""
        claim_id = key if variant is None else f"{key}:{variant}"
        values = {**self.claims[key], **names}
        claim, paper, rule = (
            self.claims[key][part].format(**values) for part in ("claim", "paper", "rule")
        )
        return claim_id, claim, paper, rule

    def cannot_score(self, key: str, measured: str, needs: str, **names) -> None:
        """A claim this run's grid cannot score: ``measured`` says what is missing, ``needs``
        what the rule needs."""
        claim_id, claim, paper, _ = self.texts(key, **names)
        self.add(claim_id, claim, paper, measured, needs, verdict(None))

    def add(
        self,
        claim_id,
        claim,
        paper,
        measured,
        rule,
        verdict,
        *,
        value: float | None = None,
        low: float | None = None,
        high: float | None = None,
        resamples: int | None = None,
        reads: str | None = None,
        side: str | None = None,
    ) -> None:
        """One row; ``value``, ``low``, ``high``: the number the verdict reads and its interval
        (null where there is none), ``resamples`` the bootstrap's (null for an exact interval);
        ``reads``: that number's name where the rule reads several (null: the rule's one);
        ``side``: where a "not reproduced" falls against the rule (bootstrap.missed_side:
        above, below, above and below), which the measured text then opens with (SIDE_TEXT)
        unless it names it already, and robustness compares (opposite sides disagree)."""
        named = SIDE_TEXT.match(measured) or NAMED_SIDE_TEXT.match(measured)
        if side and verdict == "not reproduced" and not named:
            # a plain side is the rule's band's; a named one, its statistics' own (review 37)
            where = f"{side} the rule's band" if side in PLAIN_SIDES else f"{side} its band"
            measured = f"{where}: {measured}"
        self.rows.append(
            {
                "claim_id": claim_id,
                "claim": claim,
                "paper": paper,
                "measured": measured,
                "verdict_rule": rule,
                "verdict": verdict,
                "value": value,
                "low": low,
                "high": high,
                "level": None if low is None else self.level,
                "resamples": resamples,
                "reads": reads,
                "side": side if verdict == "not reproduced" else None,
            }
        )

    def add_measured(
        self, claim_id, claim, paper, measured, rule, verdict, interval, reads=None, side=None
    ) -> None:
        """:meth:`add` with ``interval`` (the statistic the verdict reads, named ``reads`` where
        the rule reads several) in the value columns, and ``side`` as there."""
        self.add(
            claim_id,
            claim,
            paper,
            measured,
            rule,
            verdict,
            value=interval.value,
            low=interval.low if interval.resamples else None,
            high=interval.high if interval.resamples else None,
            resamples=interval.resamples or None,
            reads=reads,
            side=side,
        )


def readings(run: dict, analysis: dict) -> list[tuple[str | None, str]]:
    """(reading, column suffix) pairs: a causal model under the paper's protocol reads each row's
    masked keys two ways, both measured in the same jobs: "non_selected" (the paper's L x L
    matrices) and "prefix"; otherwise one reading."""
    masked = analysis["all_rows"]["masked"]
    other_masked = "prefix" if masked == "non_selected" else "non_selected"
    if run["causal"] and analysis["protocol"] == "all_rows":
        return [(masked, ""), (other_masked, "_other_masked")]
    return [(None, "")]


def reading_text(reading: str | None) -> str:
    if reading is None:
        return ""
    paper = " (the paper's L x L reading)" if reading == "non_selected" else ""
    return f" [masked keys: {reading}{paper}]"


# slope > 0: the band's lower end is the smallest positive float (a band is closed)
POSITIVE = Band(low=np.nextafter(0.0, 1.0))


# A resample's maximum over heads can never exceed the measured one (the percentile bootstrap of
# an extreme is biased towards the inside), so these intervals understate the uncertainty.
MAXIMUM_CAVEAT = "read on a maximum over heads: its interval understates the uncertainty"
# What every percentile interval resamples, and what that leaves out (docs/paper-notes.md 15): a
# reviewer's simulation of 12 layers x 12 heads with a layer effect covered the model-level value
# in 96 % of tables at no correlation within a layer, 71 % at 0.3 and 59 % at 0.6.
BOOTSTRAP_UNIT_CAVEAT = (
    "intervals resample heads (and chunks) as independent units; heads of one layer move "
    "together, and then these intervals are too narrow (docs/paper-notes.md 15)"
)
# analysis.bootstrap.unit: layer (a cluster bootstrap): what its intervals resample instead
LAYER_BOOTSTRAP_NOTE = (
    "intervals resample whole layers (every head of a drawn layer together) and the chunks; "
    "with few layers a percentile interval still covers less than its level "
    "(docs/paper-notes.md 15)"
)


def bootstrap_note(unit: str) -> str:
    """What the intervals resample under analysis.bootstrap.unit, in a page's words."""
    return LAYER_BOOTSTRAP_NOTE if unit == "layer" else BOOTSTRAP_UNIT_CAVEAT


# The claims whose statistic is such a maximum (the findings page keeps them out of its results)
MAXIMUM_CLAIMS = ("gradient_inverse_t", "gradient_drop", "upper_bound_tracks")
# why such a claim gets no robustness status where its alternatives agree
MAXIMUM_NOTE = "a maximum over heads: its head bootstrap understates the uncertainty"


def is_maximum(claim_id: str) -> bool:
    """Whether the claim (any variant of it: "<claim>:<variant>") reads a maximum over heads."""
    return claim_id.split(":", 1)[0] in MAXIMUM_CLAIMS


@dataclass(frozen=True)
class Scoring:
    """What every analysis's claims may read besides its summary: the run description, the
    model's ``analysis`` settings and the readings of a causal row's masked keys
    (:func:`readings`)."""

    run: dict
    analysis: dict
    readings: list[tuple[str | None, str]]

    @property
    def sampled(self) -> bool:
        """The all-rows protocol on drawn rows (analysis.all_rows.rows), not every row."""
        run = self.run
        return run.get("protocol") == "all_rows" and run.get("all_rows_rows") not in (None, "all")

    @property
    def protocol(self) -> str:
        return self.run.get("protocol", "last_row")
