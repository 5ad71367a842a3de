"""Table 1: the reproduction scorecard. One row per quantitative claim of the paper, this run's
value, and a verdict by the rule written in the row itself. The claims, the paper's values and the
thresholds are data (workflow/resources/paper_claims.yaml, ``claims`` here); this module measures."""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from attnlimits.bootstrap import (
    Band,
    Interval,
    clopper_pearson,
    deciding_part,
    joint_verdict,
    percentile_interval,
)
from attnlimits.bootstrap import verdict as bootstrap_verdict
from attnlimits.critical import (
    CensoredSlope,
    censored_slope,
    largest_share,
    linear_fit,
    slope_within,
)
from attnlimits.families import FAMILIES
from attnlimits.separability import UPPER_BOUND_FLOOR

from ..plotting import protocol_text

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
    "summary": pl.String,
}
# The summary each claim of paper_claims.yaml is read from (Table 1's ``summary`` column): a
# reading of the paper's open choices reaches a claim only through it (robustness_table). A
# bound's row takes its check's summary (the violations table's ``summary`` column).
CLAIM_SUMMARIES = {
    "linear_in_length": "distance",
    "plateau_in_n": "distance",
    "critical_n": "critical_n",
    "saturation": "separability",
    "upper_bound_tracks": "separability",
    "gradient_inverse_t": "gradient",
    "gradient_drop": "gradient",
    "vanishing": "vanishing",
}
# Algorithm 3's critical N under each reading of a causal row's masked keys.
READINGS = {
    "non_selected": "masked keys non-selected: the paper's L x L rows",
    "prefix": "masked keys left out: prefix rows",
    "both": "no masked keys: both readings coincide",
}


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
    ) -> None:
        """One row; ``value``, ``low``, ``high``: the number the verdict reads and its interval
        (null where there is none), ``resamples`` the bootstrap's (null for an exact interval);
        ``reads``: that number's name where the rule reads several (null: the rule's one)."""
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
            }
        )

    def add_measured(
        self, claim_id, claim, paper, measured, rule, verdict, interval, reads=None
    ) -> None:
        """:meth:`add` with ``interval`` (the statistic the verdict reads, named ``reads`` where
        the rule reads several) in the value columns."""
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


def distance_claims(
    card: Scorecard,
    dist: pl.DataFrame,
    analysis: dict,
    readings,
    replicates: list[pl.DataFrame] | None = None,
) -> None:
    """Theorem 1's d~: linear in L at fixed N, a plateau in N at fixed L (each refitted on every
    bootstrap replicate of the per-(L, N) medians)."""
    n_fixed, l_fixed = analysis["distance"]["n_fixed"], analysis["distance"]["length_fixed"]
    c = card.claims["linear_in_length"]
    f = dist.filter(pl.col("N") == n_fixed).sort("L")
    if f.height >= c["min_lengths"]:
        for reading, suffix in readings:
            claim_id, claim, paper, rule = card.texts(
                "linear_in_length", variant=reading if suffix else None, n=n_fixed
            )

            def fit(frame: pl.DataFrame, suffix=suffix) -> tuple[float, float, float]:
                g = frame.filter(pl.col("N") == n_fixed).sort("L")
                length = g["L"].to_numpy().astype(np.float64)
                d = g[f"distance{suffix}_median"].to_numpy().astype(np.float64)
                _, slope, r2 = linear_fit(length, d)
                # the exponent p of d~ ~ L^p; undefined where a median is not positive
                exponent = linear_fit(np.log(length), np.log(d))[1] if np.all(d > 0) else math.nan
                return r2, slope, exponent

            r2, slope, exponent = measure(fit, f, replicates, card.level)
            measured = (
                f"R^2 = {interval_text(r2, '.3f')}, slope = {interval_text(slope)}, "
                f"log-log slope = {interval_text(exponent, '.3f')}"
            )
            # Under the L x L reading each of row t's L - t - 1 masked keys adds ||s_t|| to d~,
            # which dominates it; that sum is linear in L only while the rows' ||s_t|| hold up
            # (uniform causal rows give an exponent near 0.3), so both readings test that
            # ||s|| holds up as L grows, and both are scored. Otherwise, by the triangle
            # inequality d~ = (L - N) ||s|| within (1 - a_N) max ||x||.
            note = (
                "; dominated by the masked keys' sum_t (L - t - 1) ||s_t||: tests that ||s_t|| "
                "holds up in L"
                if reading == "non_selected"
                else "; d~ ~ (L - N) ||s||, so this tests that ||s|| holds up in L"
            )
            parts = (r2, slope, exponent)
            bands = (Band(low=c["min_r2"]), POSITIVE, Band(c["min_exponent"], c["max_exponent"]))
            # the row's number: the part the verdict rests on (an R^2 of 0.999 does not say
            # why a fit with a log-log slope straddling 0.8 is undecided)
            verdict_now = joint_verdict(parts, bands)
            # all in their bands: the log-log slope, the part that tells L from sqrt(L)
            k = 2 if verdict_now == "reproduced" else deciding_part(parts, bands)
            card.add_measured(
                claim_id,
                claim + reading_text(reading),
                paper,
                measured + note,
                rule,
                verdict_now,
                parts[k],
                reads=("R^2", "slope", "log-log slope")[k],
            )
    else:
        card.cannot_score(
            "linear_in_length",
            f"fewer than {c['min_lengths']} lengths",
            f"needs >= {c['min_lengths']} lengths",
            n=n_fixed,
        )

    c = card.claims["plateau_in_n"]
    f = dist.filter(pl.col("L") == l_fixed).sort("N")
    big = f.filter(pl.col("N") >= c["from_n"])
    if big.height >= 2:
        for reading, suffix in readings:
            claim_id, claim, paper, rule = card.texts(
                "plateau_in_n", variant=reading if suffix else None, length=l_fixed
            )

            def change(frame: pl.DataFrame, suffix=suffix) -> tuple[float]:
                g = frame.filter((pl.col("L") == l_fixed) & (pl.col("N") >= c["from_n"])).sort("N")
                first, last = g[f"distance{suffix}_median"][0], g[f"distance{suffix}_median"][-1]
                return (100 * abs(last - first) / first,)

            (pct,) = measure(change, f, replicates, card.level)
            card.add_measured(
                claim_id,
                claim + reading_text(reading),
                paper,
                f"median d~ changes {interval_text(pct, '.1f')} % from N = {big['N'][0]} to "
                f"{big['N'][-1]}",
                rule,
                joint_verdict((pct,), (Band(0.0, 100 * c["max_relative_change"]),)),
                pct,
            )
    else:
        card.cannot_score(
            "plateau_in_n",
            f"grid has < 2 values of N >= {c['from_n']}",
            f"needs N >= {c['from_n']} values",
            length=l_fixed,
        )


# What a critical-N rule reads from the curve (paper_claims.yaml, critical_n.rules.<r>.statistic):
# the slope through the origin, or the largest N_crit / L over the lengths; each known only from
# below where a length is censored. Name, function.
CRITICAL_STATISTICS = {
    "slope": ("slope", censored_slope),
    "largest_share": ("largest N_crit / L", largest_share),
}


def slope_interval(
    point: CensoredSlope, replicates: pl.DataFrame | None, level: float, fit=censored_slope
) -> Interval | None:
    """The N_crit ~ c L slope's interval over the searches rerun on bootstrap resamples (one
    curve of the replicate table): from the low percentile of each resample's lower bound
    (``at_least``) to the high percentile of its upper end (+inf where a resample's search was
    censored at some L, and wherever the point search itself was), so censoring widens the
    interval instead of being dropped. None without replicates."""
    if replicates is None or replicates.height == 0:
        return None
    lows, highs = [], []
    for g in replicates.sort("replicate", "L").partition_by("replicate", maintain_order=True):
        s = fit(
            g["L"].to_numpy(),
            g["N_crit"].cast(pl.Float64).to_numpy(),
            g["censored"].to_numpy(),
            g["top_N"].to_numpy(),
        )
        lows.append(s.at_least)
        highs.append(s.upper)
    low, _, undefined = percentile_interval(lows, level)
    _, high, _ = percentile_interval(highs, level)
    # the point search censored at some L is open above whatever the resamples did: an interval
    # closed by resamples that all passed would call a censored slope "reproduced"
    high = max(high, point.upper)
    return Interval(point.at_least, low, high, level, len(lows), undefined)


def first_n_passed(curve: pl.DataFrame) -> np.ndarray:
    """Per length of a critical-N curve (summary/critical_n.csv rows): whether its search passed
    at the first N it tried (one evaluation, found) above N = 1, so that N_crit is only known to
    be at most that N: the grid's floor, not a measurement."""
    if "evaluations" not in curve.columns:
        return np.zeros(curve.height, dtype=bool)
    return (
        ((~curve["censored"]) & (curve["evaluations"] == 1) & (curve["N_crit"] > 1))
        .fill_null(False)
        .to_numpy()
    )


def floor_outcome(
    outcome: str, floor_slope: CensoredSlope, slope: CensoredSlope, low: float, high: float
) -> str:
    """``outcome`` if it holds over every statistic the passes at the first N tried allow, from
    ``floor_slope`` (their N_crit at 1) up to ``slope``'s upper end, else undecided: reproduced
    needs the whole range inside [low, high], not reproduced the whole range on one side of it.
    (The other lengths' N_crit are bracketed by their grid steps too, by at most one step: the
    grid's resolution, docs/paper-notes.md section 17, is not widened here.)"""
    lowest, highest = floor_slope.at_least, slope.upper
    if outcome == "reproduced" and not (low <= lowest and highest <= high):
        return "undecided"
    if outcome == "not reproduced" and not (lowest > high or highest < low):
        return "undecided"
    return outcome


def critical_n_claims(
    card: Scorecard, crit: pl.DataFrame, alpha: float, replicates: pl.DataFrame | None = None
) -> None:
    """Algorithm 3's critical N, scored by each of the paper's two wordings (critical_n.rules)
    under each reading of a causal row's masked keys; the slope through the origin is known only
    from below where a length's search ended without a pass (attnlimits.critical.CensoredSlope).
    ``alpha``: the KS test's level (analysis.critical_n.ks_alpha); ``replicates``: the searches
    rerun on bootstrap resamples of the heads or rows (summaries.critical_n_replicates), whose
    slopes give the interval (:func:`slope_interval`)."""
    crit_readings = set(crit["masked"].unique().to_list())
    for reading in ("non_selected", "prefix"):
        source = "both" if "both" in crit_readings else reading
        for kind, label in (("monte_carlo", "Monte-Carlo E"), ("closed_form", "Thm 1.2 term")):
            f = crit.filter((pl.col("masked") == source) & (pl.col("expectation") == kind))
            f = f.sort("L")
            reps = (
                None
                if replicates is None
                else replicates.filter(
                    (pl.col("masked") == source) & (pl.col("expectation") == kind)
                )
            )
            blind = f.filter(pl.col("ks_min_pvalue") >= alpha)
            censored = f.filter(pl.col("censored"))
            d_cols = [col for col in f.columns if col.startswith("D_at_")]
            spread = "; ".join(
                f"D at {col[5:-1]} L {f[col].min():.2f}-{f[col].max():.2f}" for col in d_cols[:2]
            )
            for rule_name, c in card.claims["critical_n"]["rules"].items():
                claim_id = f"critical_n:{kind}:{rule_name}" + (
                    ":prefix" if reading == "prefix" else ""
                )
                values = {**c, "expectation": label, "reading": READINGS[source]}
                claim, paper, rule = (
                    c[part].format(**values) for part in ("claim", "paper", "rule")
                )
                row = (claim_id, claim, paper)
                low, high = c.get("low", -math.inf), c.get("high", c["value"])
                if reading == "prefix" and source == "both":
                    measured = "the same rows as the L x L reading above"
                    card.add(*row, measured, rule, "not applicable")
                    continue
                if f.height == 0:
                    card.add(*row, "no critical-N rows", rule, verdict(None))
                    continue
                if blind.height:
                    # The KS test cannot reject at alpha with so few samples: every N "passes".
                    measured = (
                        f"KS over {blind['ks_samples'].min()} values per side cannot reject at "
                        f"alpha = {alpha} (smallest attainable p "
                        f"{blind['ks_min_pvalue'].max():.3g}) at {blind.height}/{f.height} lengths"
                    )
                    card.add(*row, measured, rule, "not testable")
                    continue
                counted = f"KS over {f['ks_samples'].max()} values per side"
                name, fit = CRITICAL_STATISTICS[c.get("statistic", "slope")]
                slope = fit(
                    f["L"].to_numpy(),
                    f["N_crit"].cast(pl.Float64).to_numpy(),
                    f["censored"].to_numpy(),
                    f["top_N"].to_numpy(),
                )
                if slope.censored:
                    # a censored length's N_crit is >= its top N: the slope is bounded below only
                    top = (
                        "L - 1"
                        if (censored["top_N"] == censored["L"] - 1).all()
                        else "its top N tried"
                    )
                    measured = (
                        f"{name} >= {slope.at_least:.3f}: {slope.censored}/{f.height} lengths "
                        f"censored (no pass up to N = {top}, counted as N_crit >= {top})"
                    )
                    if slope.censored < f.height:
                        measured += f"; through the found lengths only {slope.found:.3f}"
                else:
                    measured = f"{name} {slope.found:.3f} ({f.height}/{f.height} lengths found)"
                # where the first N tried already passed, N_crit is only known to be <= it
                at_floor = first_n_passed(f)
                floor_slope = None
                if at_floor.any():
                    floor_slope = fit(
                        f["L"].to_numpy(),
                        np.where(at_floor, 1.0, f["N_crit"].cast(pl.Float64).to_numpy()),
                        f["censored"].to_numpy(),
                        f["top_N"].to_numpy(),
                    )
                    measured += (
                        f"; at {int(at_floor.sum())}/{f.height} lengths the first N tried "
                        f"already passed (N_crit <= it): the {name} could be as low as "
                        f"{floor_slope.at_least:.3f}"
                    )
                interval = slope_interval(slope, reps, card.level, fit)
                if interval is not None:
                    measured += (
                        f"; {100 * card.level:g} % bootstrap interval of the {name} "
                        f"[{interval.low:.3f}, {interval.high:.3f}] over {interval.resamples} "
                        "searches rerun on resampled units"
                    )
                measured += f"; {counted}" + (f"; {spread}" if spread else "")
                inside = slope_within(slope, low, high)
                if interval is not None:
                    # a censored resample's slope is open above: its interval reaches +inf
                    outcome = bootstrap_verdict(interval, Band(low, high))
                elif inside is None:
                    # censored: the slope's lower bound is inside the rule and its top is open,
                    # so the data cannot tell (not "not testable": the KS test could decide)
                    outcome = "undecided"
                else:
                    outcome = verdict(inside)
                if floor_slope is not None:
                    outcome = floor_outcome(outcome, floor_slope, slope, low, high)
                card.add(
                    *row,
                    measured,
                    rule,
                    outcome,
                    value=slope.at_least,
                    low=None if interval is None else interval.low,
                    high=None if interval is None else interval.high,
                    resamples=None if interval is None else interval.resamples,
                )


def separability_claims(
    card: Scorecard, sep: pl.DataFrame, readings, replicates: list[pl.DataFrame] | None = None
) -> None:
    """Theorem 2: N_s/N saturates in the paper's band, and the upper bound tracks it."""
    c = card.claims["saturation"]
    tail = sep.filter(pl.col("N") >= c["from_n"])
    if tail.height:
        zero = tail["zero_weight_selected_mean"].max()
        for reading, suffix in readings:
            claim_id, claim, paper, rule = card.texts(
                "saturation", variant=reading if suffix else None
            )

            def extremes(frame: pl.DataFrame, suffix=suffix) -> tuple[float, float]:
                medians = frame.filter(pl.col("N") >= c["from_n"])[f"ratio{suffix}_median"]
                return medians.min(), medians.max()

            # two-sided: the box of (smallest median, largest median) must lie in the band
            lo, hi = measure(extremes, sep, replicates, card.level)
            band = Band(c["low"], c["high"])
            # the zero-weight count is the configured reading's (under prefix a causal row has
            # none)
            zero_text = (
                f"; zero-weight top-N tokens (never counted in N_s, N the denominator): mean <= "
                f"{zero:.3g} per row"
                if not suffix
                else ""
            )
            k = deciding_part((lo, hi), (band, band))
            card.add_measured(
                claim_id,
                claim + reading_text(reading),
                paper,
                f"median N_s/N from {interval_text(lo, '.2f')} to {interval_text(hi, '.2f')} for N >= "
                f"{c['from_n']}{zero_text}",
                rule,
                joint_verdict((lo, hi), (band, band)),
                (lo, hi)[k],
                reads=("smallest", "largest")[k] + f" median N_s/N over N >= {c['from_n']}",
            )
    else:
        card.cannot_score(
            "saturation", f"no N >= {c['from_n']} in the grid", f"needs N >= {c['from_n']}"
        )
    # The bound never falls below e^(-1/16) = 0.939 and N_s/N <= 1, so at an N whose largest
    # N_s/N is >= 1 - max_gap the gap cannot exceed max_gap: only the other N can decide it.
    max_gap = card.claims["upper_bound_tracks"]["max_gap"]

    def gaps_of(frame: pl.DataFrame) -> pl.DataFrame:
        return (
            frame.select("N", "ratio_max", gap=(pl.col("upper_bound_mean") - pl.col("ratio_max")))
            .fill_nan(None)
            .drop_nulls("gap")
        )

    def largest_gap(frame: pl.DataFrame) -> tuple[float]:
        # a resample where no N decides cannot fail the claim: its largest deciding gap is 0
        deciding = gaps_of(frame).filter(pl.col("ratio_max") < 1.0 - max_gap)
        return (float(deciding["gap"].abs().max()) if deciding.height else 0.0,)

    per_n = gaps_of(sep)
    deciding = per_n.filter(pl.col("ratio_max") < 1.0 - max_gap)
    claim_id, claim, paper, rule = card.texts("upper_bound_tracks")
    gaps = ", ".join(f"N={n}: {g:+.2f}" for n, g in zip(per_n["N"], per_n["gap"], strict=True))
    bound_span = sep.filter(pl.col("N") > 1)["upper_bound_mean"].drop_nulls()
    (gap,) = measure(largest_gap, sep, replicates, card.level)
    measured = (
        f"bound - max N_s/N per N: {gaps}; the bound cannot fall below e^(-1/16) = "
        f"{UPPER_BOUND_FLOOR:.3f} (here {bound_span.min():.3f}-{bound_span.max():.3f} over N >= "
        f"2), so the claim reduces to max N_s/N >= bound - {max_gap:.2f}, and N with max N_s/N "
        f">= {1 - max_gap:.2f} cannot fail ({per_n.height - deciding.height} of {per_n.height})"
        if bound_span.len()
        else f"bound - max N_s/N per N: {gaps}"
    ) + f"; largest |gap| where it can fail {interval_text(gap, '.2f')}; {MAXIMUM_CAVEAT}"
    card.add_measured(
        claim_id,
        claim,
        paper,
        measured,
        rule,
        "vacuous" if not deciding.height else joint_verdict((gap,), (Band(0.0, max_gap),)),
        gap,
    )


# A resample's maximum over heads can never exceed the measured one (the percentile bootstrap of
# an extreme is biased towards the inside), so these intervals understate the uncertainty.
MAXIMUM_CAVEAT = "read on a maximum over heads: its interval understates the uncertainty"
# The claims whose statistic is such a maximum (the findings page keeps them out of its results)
MAXIMUM_CLAIMS = ("gradient_inverse_t", "gradient_drop", "upper_bound_tracks")


# analysis.all_rows.rows: the per-head means of g and ||J|| from sampled rows miss the few
# near-tie rows that carry them at small T, and so do their standard errors (docs/performance.md:
# sampled rows; at T <= 0.01 on SmolLM2's layer 0 at 8192, 63-74 % of the exact values within
# 1.96 stated errors, median relative error 0.28-0.44)
SAMPLED_GRADIENT = (
    "not testable on sampled rows (analysis.all_rows.rows): at T <= 0.01 a few near-tie rows "
    "carry a head's mean g, which the drawn rows and their standard error miss (docs/"
    "performance.md: sampled rows)"
)


def gradient_claims(
    card: Scorecard,
    grad: pl.DataFrame,
    replicates: list[pl.DataFrame] | None = None,
    sampled: bool = False,
) -> None:
    """Corollary 3: the sensitivity grows like 1/T at small T and drops by decades (the largest
    head's g per T, refitted on each bootstrap replicate). ``sampled``: the rows were drawn
    (analysis.all_rows.rows), and both claims, which read g at T <= 0.01, are not testable."""
    eps = grad["eps"].min()
    small_eps = grad.filter(pl.col("eps") == eps)
    c = card.claims["gradient_inverse_t"]
    claim_id, claim, paper, rule = card.texts("gradient_inverse_t")
    low = small_eps.filter(pl.col("T") < c["below_t"])
    if low.height >= 2:

        def slope(frame: pl.DataFrame) -> tuple[float]:
            g = frame.filter((pl.col("eps") == eps) & (pl.col("T") < c["below_t"])).sort("T")
            _, s, _ = linear_fit(
                np.log10(g["T"].to_numpy()), np.log10(g["g_max_over_heads"].to_numpy())
            )
            return (s,)

        (s,) = measure(slope, grad, replicates, card.level)
        card.add_measured(
            claim_id,
            claim,
            paper,
            f"log-log slope {interval_text(s, '.2f')} (eps = {eps:g}); {MAXIMUM_CAVEAT}"
            + (f"; {SAMPLED_GRADIENT}" if sampled else ""),
            rule,
            "not testable" if sampled else joint_verdict((s,), (Band(c["low"], c["high"]),)),
            s,
        )
    else:
        card.cannot_score(
            "gradient_inverse_t",
            f"fewer than 2 temperatures below {c['below_t']}",
            f"needs 2 T < {c['below_t']}",
        )
    c = card.claims["gradient_drop"]
    claim_id, claim, paper, rule = card.texts("gradient_drop")

    def at_t(frame: pl.DataFrame, t: float) -> pl.DataFrame:
        return frame.filter((pl.col("eps") == eps) & ((pl.col("T") - t).abs() <= 1e-9 * t))

    if at_t(grad, c["high_t"]).height and at_t(grad, c["low_point_t"]).height:

        def decades(frame: pl.DataFrame) -> tuple[float]:
            lo_g = at_t(frame, c["low_point_t"])["g_max_over_heads"][0]
            hi_g = at_t(frame, c["high_t"])["g_max_over_heads"][0]
            return (math.log10(lo_g / hi_g),)

        (drop,) = measure(decades, grad, replicates, card.level)
        card.add_measured(
            claim_id,
            claim,
            paper,
            f"{interval_text(drop, '.2f')} decades (largest head's g at T = {c['low_point_t']:g} vs "
            f"T = {c['high_t']:g}); {MAXIMUM_CAVEAT}"
            + (f"; {SAMPLED_GRADIENT}" if sampled else ""),
            rule,
            "not testable" if sampled else joint_verdict((drop,), (Band(low=c["min_decades"]),)),
            drop,
        )
    else:
        card.cannot_score(
            "gradient_drop",
            f"T grid lacks T = {c['low_point_t']:g} or T = {c['high_t']:g}",
            "needs both",
        )


# The vanishing analysis reads each sample's last row under either protocol
# (attnlimits_workflow.analyses.vanishing): said where the run's protocol is the paper's.
LAST_ROWS_ONLY = (
    "; read on the last rows (the analysed row of each (layer, chunk, head)) whatever "
    "analysis.protocol: the vanishing analysis has no all-rows form"
)


def vanishing_claims(
    card: Scorecard,
    van: pl.DataFrame,
    replicates: list[pl.DataFrame] | None = None,
    protocol: str = "last_row",
) -> None:
    """Lemma 1: the largest weight falls with L (no row where fewer than two lengths), always
    on the last rows: under the paper's protocol (``protocol`` all_rows) the row says so."""
    if van.height >= 2:

        def slope(frame: pl.DataFrame) -> tuple[float]:
            g = frame.sort("L")
            _, s, _ = linear_fit(
                np.log10(g["L"].to_numpy()), np.log10(g["max_weight_median"].to_numpy())
            )
            return (s,)

        (s,) = measure(slope, van, replicates, card.level)
        claim_id, claim, paper, rule = card.texts("vanishing")
        card.add_measured(
            claim_id,
            claim,
            paper,
            f"log-log slope of median max weight {interval_text(s, '.2f')}"
            + (LAST_ROWS_ONLY if protocol == "all_rows" else ""),
            rule,
            joint_verdict(
                (s,),
                (
                    Band(
                        low=card.claims["vanishing"].get("min_slope", -np.inf),
                        high=card.claims["vanishing"]["max_slope"],
                    ),
                ),
            ),
            s,
        )


def bound_detail(r: dict) -> str:
    """What the counts leave out: the untestable and vacuous samples, the rows, the slack."""
    parts = [f"{r['not_testable']} not testable, {r['vacuous']} vacuous, {r['not_applicable']} n/a"]
    if r.get("violated_rows") is not None:
        parts.append(
            f"rows: {r['violated_rows']} of {r['rows']} violate, {r['vacuous_rows']} vacuous"
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
    card: Scorecard, violations: pl.DataFrame, sums_to_one: bool = True, sampled: bool = False
) -> None:
    """One row per bound check of the summaries (claim id "bound:<name>"). ``sums_to_one``:
    whether the run's weights are a softmax over the keys alone (no sink, no difference of two),
    the assumption under which a proved bound cannot fail. ``sampled``: the rows were drawn
    (analysis.all_rows.rows), so no violation among them is not testable, not reproduced."""
    most = card.claims.get("bounds", {}).get("max_violation_share", 0.05)
    fewest = fewest_units(most, card.level)
    for r in violations.iter_rows(named=True):
        # A check counts where it could fail; samples whose bound lies within the check's
        # tolerance of the quantity's range are "not testable", those where no data could fail
        # it "vacuous", never "holds" (attnlimits.checks).
        rule = (
            f"0 violations; tolerance {r['tolerance']} (a universal bound: one violation refutes "
            f"it; none is reproduced once the violated share's upper end is below {most:g}, "
            f"which needs at least {fewest} independent units)"
        )
        row = (f"bound:{r['bound']}", f"bound holds: {r['bound']}", "holds")
        proved = (r.get("proved") or "") if sums_to_one else ""
        if r["checked"] == 0:
            outcome = (
                "vacuous" if r["vacuous"] else ("not testable" if r["not_testable"] else NOT_SCORED)
            )
            card.add(*row, f"0 checked ({bound_detail(r)})", rule, outcome)
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
        elif bad:
            outcome = "not reproduced"
            if proved:
                measured += "; a proved bound violated: the code or an assumption is wrong"
        elif proved:
            # a theorem that holds for every input: no model could have failed it
            outcome = "vacuous"
            measured += f"; holds by proof, a check of the code: {proved}"
        elif sampled:
            # a universal statement is not confirmed by the rows drawn (analysis.all_rows.rows):
            # a violation among them refutes it, none among them cannot say it holds
            outcome = "not testable"
            measured += "; no violation among the sampled rows, which cannot show it holds on all"
        elif high < most:
            outcome = "reproduced"
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
    distance: pl.DataFrame,
    critical_n: pl.DataFrame,
    separability: pl.DataFrame,
    gradient: pl.DataFrame,
    vanishing: pl.DataFrame,
    violations: pl.DataFrame,
    claims: dict,
    run: dict,
    analysis: dict,
    replicates: dict[str, pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """Table 1 from one model's summary tables, its run description and its ``analysis``
    settings: claim_id, claim, paper, measured, verdict_rule, verdict, and the number the
    verdict reads with its interval (value, low, high, level, resamples). ``replicates``: per
    summary name (distance, separability, gradient, vanishing: assemble.replicates;
    critical_n: summaries.critical_n_replicates) its bootstrap replicates; a summary without
    them is scored on its point values."""
    replicates = replicates or {}
    card = Scorecard(claims, level=analysis["bootstrap"]["level"])
    both = readings(run, analysis)
    distance_claims(card, distance, analysis, both, partitions(replicates.get("distance")))
    critical_n_claims(
        card, critical_n, analysis["critical_n"]["ks_alpha"], replicates.get("critical_n")
    )
    separability_claims(
        card, separability.sort("N"), both, partitions(replicates.get("separability"))
    )
    sampled = run.get("protocol") == "all_rows" and run.get("all_rows_rows") not in (None, "all")
    gradient_claims(
        card, gradient.sort("eps", "T"), partitions(replicates.get("gradient")), sampled
    )
    vanishing_claims(
        card,
        vanishing.sort("L"),
        partitions(replicates.get("vanishing")),
        run.get("protocol", "last_row"),
    )
    family = FAMILIES.get(run.get("model_type", ""))
    sums_to_one = family is None or not (family.attention_sinks or family.differential)
    bound_claims(card, violations, sums_to_one, sampled)
    bound_summary = (
        dict(zip(violations["bound"], violations["summary"], strict=True))
        if "summary" in violations.columns
        else {}
    )
    for row in card.rows:
        key = row["claim_id"].split(":", 1)[0]
        bound = row["claim_id"].removeprefix("bound:")
        row["summary"] = bound_summary.get(bound) if key == "bound" else CLAIM_SUMMARIES.get(key)
    return pl.DataFrame(card.rows, schema=TABLE1_SCHEMA)


def table1_header(run: dict) -> str:
    return (
        f"Reproduction scorecard: {run['model']} ({run['weights']}), corpus {run['corpus']}, "
        f"{run['chunks']} chunks; {protocol_text(run)}."
    )
