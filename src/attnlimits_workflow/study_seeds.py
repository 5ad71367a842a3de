"""The normalizer study over its seeds: each limit's measure as a mean and interval over the
seeds, its verdict against the baseline's (paired by seed where it can be: the models of one
seed share initial weights and batches), the tests behind each verdict with Benjamini-Hochberg
over the table, the paired differences of the cost and the sink, and the same comparison on
untrained weights. The per-model measures and the one-seed verdicts are
attnlimits_workflow.study's; the interval and test arithmetic is attnlimits.intervals'."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from attnlimits.intervals import (
    benjamini_hochberg,
    beyond_ratio_pvalue,
    beyond_ratio_sign_pvalue,
    beyond_ratio_unpaired_pvalue,
    holm,
    log_t_interval,
    odds,
    paired_log_ratios,
    paired_ratio,
    t_interval,
)

from .study import measure_of, verdict, verdicts, withheld
from .study_limits import (
    BESIDE,
    CEILING,
    HIGHER,
    LIMITS,
    LOWER,
    NO_DIFFERENCE,
    NO_P_VALUE,
    NO_VERDICT,
    NOT_MEASURED,
    ONE_SEED,
    RELAXES,
    TIGHTENS,
)


@dataclass(frozen=True)
class SeedMeasure:
    """A limit's measure over the seeds: the mean of the per-seed values (of their lower ends,
    for a censored measure) and a t-interval, (low, high) at ``level``, the upper end from the
    upper ends; ``seeds`` values; low and high NaN with fewer than two seeds or any missing."""

    mean: float
    low: float
    high: float
    seeds: int
    verdict: str
    # the mean is of lower ends: some seed's measure is censored (known only from below)
    lower_bound: bool = False
    # the geometric mean, its interval on the log scale (log_t_interval)
    log_scale: bool = False
    # every seed's value (of its lower end), in seed order
    values: tuple[float, ...] = ()
    # the paired ratio to the baseline (odds ratio for a share): geometric mean over the seeds
    # of value / baseline's of the same seed, with its t-interval on the log scale; NaN where
    # not paired (one seed, a censored or non-positive value)
    ratio: float = math.nan
    ratio_low: float = math.nan
    ratio_high: float = math.nan
    # the ratio beyond relax_ratio on either side: its two-sided p-value (paired: the t-test
    # of intervals.beyond_ratio_pvalue; unpaired, a censored seed: Welch's on the intervals'
    # ends), the two-sided exact sign test of the paired ratios (NaN unpaired), and the verdict
    # Benjamini-Hochberg over every such comparison of the table did not keep ("" where kept)
    p_value: float = math.nan
    sign_p: float = math.nan
    dropped: str = ""
    # a low-temperature cell with caps on both sides (ceiling_withheld): the p of its
    # cap-divided comparison, and the shown ratio's own p; p_value is the larger (NaN elsewhere)
    p_cap: float = math.nan
    p_own: float = math.nan
    # a measure known to an interval in some seed though none is censored (the critical N's
    # list cells, review 36): the mean of the upper ends beside ``mean`` (NaN otherwise)
    upper_mean: float = math.nan
    # every seed's upper end, in seed order (its value where known exactly; () unrecorded)
    uppers: tuple[float, ...] = ()


def ratio_verdict(low: float, high: float, ratio: float, relaxes: str) -> str:
    """A paired ratio interval against ``ratio``: wholly at or beyond ``ratio`` on the side
    that relaxes the limit, "relaxes"; at or beyond it on the other side, "tightens"."""
    above, below = low >= ratio, high <= 1.0 / ratio
    if relaxes == "smaller":
        above, below = below, above
    return RELAXES if above else TIGHTENS if below else NO_DIFFERENCE


def _non_negative(interval: tuple[float, float]) -> tuple[float, float]:
    # every measure is >= 0: a t-interval reaching below 0 is cut at 0
    return max(interval[0], 0.0), max(interval[1], 0.0)


def seed_measures(
    per_seed: Mapping[str, list[Mapping[str, Any]]],
    baseline: str,
    ratio: float,
    level: float,
    withheld_by: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, dict[str, SeedMeasure]]:
    """Per normalizer, per limit (and the held-out perplexity, its cost): the mean over its seeds'
    measures (limit_measures of each seed's model) with a t-interval, and the verdict against the
    baseline's interval: 'relaxes' / 'tightens' only when the two intervals are ``ratio`` apart on
    that side (study.verdict on the two intervals), else 'no difference shown'; 'no interval (one
    seed)' with one seed; 'baseline', 'no verdict' for the orientation-free limit, the
    support cap and the zero-weight reading (:func:`withheld`), and for what ``withheld_by``
    (name -> limit -> reason) names. A positive measure that is not a share is summarised on
    the log scale (:func:`log_t_interval`; its ratio verdict then compares ratios). Plus,
    under ``perplexity_cost`` and ``sink_change``, the paired differences to the baseline
    (:func:`paired_differences`)."""

    def summary(ms: list[Mapping[str, Any]], key: str) -> tuple:
        lows = [m.get(key) for m in ms]
        if any(v is None or not math.isfinite(v) for v in lows):
            return math.nan, math.nan, math.nan, len(ms), False, False, (), (), math.nan, False
        highs = [m.get(f"{key}_upper", m[key]) for m in ms]
        highs = [h if h is not None else lo for h, lo in zip(highs, lows, strict=True)]
        censored = any(h > lo for h, lo in zip(highs, lows, strict=True))
        limit = LIMITS.get(key)
        # a ratio verdict reads positive measures on the log scale; shares stay on theirs (odds);
        # the sink (a positive multiple of uniform) too, so its interval never reaches below 0
        positive = (limit is not None and not limit.share) or key == "sink"
        logs = positive and not censored and min(lows) > 0
        interval = log_t_interval if logs else t_interval
        mean, low, _ = interval(lows, level)
        _, _, high = interval(highs, level)
        if limit is not None and limit.share:
            # a share lies in [0, 1]: the t-interval's ends clipped there (review 38)
            low, high = max(low, 0.0), min(high, 1.0)
        ends = tuple(float(v) for v in highs)
        # known to an interval (a list cell) in some seed, censored in none: both ends shown
        cells = censored and all(m.get(f"{key}_censored", 1) == 0 for m in ms)
        upper_mean = sum(highs) / len(highs) if cells else math.nan
        return (
            *(mean, low, high, len(ms), censored and not cells, logs),
            *(tuple(float(v) for v in lows), ends, upper_mean, censored),
        )

    keys = [*LIMITS, *BESIDE]
    stats = {n: {k: summary(ms, k) for k in keys} for n, ms in per_seed.items()}
    withheld_of = dict(withheld_by or {})
    out: dict[str, dict[str, SeedMeasure]] = {}
    for name, ms in per_seed.items():
        out[name] = {}
        for key in keys:
            mean, low, high, n, censored, logs, values, highs, upper_mean, ranged = stats[name][key]
            b_mean, b_low, b_high = stats[baseline][key][:3]
            limit = LIMITS.get(key)
            reason = withheld(key, ms) or withheld_of.get(name, {}).get(key)
            base_ranged, base_values = stats[baseline][key][9], stats[baseline][key][6]
            # a paired ratio needs every seed's value: none of an interval (censored or a cell)
            paired = (
                paired_ratio(values, base_values, level, limit.share)
                if limit is not None and not ranged and not base_ranged
                else (math.nan, math.nan, math.nan)
            )
            if limit is None:
                found = ""  # the cost and the sink: no verdict (paired_differences compares)
            elif name == baseline:
                found = "baseline"
            elif limit.relaxes == "either":
                found = NO_VERDICT
            elif reason:
                found = reason
            elif math.isnan(mean) or math.isnan(b_mean):
                found = NOT_MEASURED
            elif n < 2:
                found = ONE_SEED
            elif not math.isnan(paired[0]):
                # the seeds pair the models: the ratio to the baseline of the same seed
                r, r_low, r_high = paired
                found = ratio_verdict(r_low, r_high, ratio, limit.relaxes)
                log_ratios = paired_log_ratios(values, base_values, limit.share)
                out[name][key] = SeedMeasure(
                    *(mean, low, high, n, found, censored, logs, values, r, r_low, r_high),
                    p_value=beyond_ratio_pvalue(log_ratios, ratio),
                    sign_p=beyond_ratio_sign_pvalue(log_ratios, ratio),
                    uppers=highs,
                )
                continue
            else:
                v = verdict(
                    _non_negative((low, high)),
                    _non_negative((b_low, b_high)),
                    ratio,
                    limit.relaxes,
                    limit.share,
                )
                found = v if v in (RELAXES, TIGHTENS) else NO_DIFFERENCE
                # unpaired (a censored seed): Welch's test on the intervals' ends, so that the
                # verdict joins Benjamini-Hochberg's family like a paired one
                convert = odds if limit.share else float
                p_value = beyond_ratio_unpaired_pvalue(
                    *(
                        tuple(convert(x) for x in xs)
                        for xs in (values, highs, base_values, stats[baseline][key][7])
                    ),
                    ratio,
                )
                if math.isnan(p_value) and found in (RELAXES, TIGHTENS):
                    # no p-value, so no place in the family: withheld, not left uncorrected
                    found = NO_P_VALUE
                out[name][key] = SeedMeasure(
                    *(mean, low, high, n, found, censored, logs, values),
                    p_value=p_value,
                    upper_mean=upper_mean,
                    uppers=highs,
                )
                continue
            out[name][key] = SeedMeasure(
                *(mean, low, high, n, found, censored, logs, values),
                upper_mean=upper_mean,
                uppers=highs,
            )
    # the caps first: a low-T cell they withhold is no finding, and no member of the family
    ceiling_withheld(out, per_seed, baseline, ratio, level)
    out = false_discovery_control(out, 1.0 - level)
    for key, label in (("perplexity", "perplexity_cost"), ("sink", "sink_change")):
        for name, change in paired_differences(per_seed, baseline, key, level).items():
            out[name][label] = change
    return out


def family(measures: Mapping[str, Mapping[str, SeedMeasure]]) -> list[tuple[str, str]]:
    """The (rule, limit) cells Benjamini-Hochberg corrects over: every tested cell, those the
    caps withhold too (with their cap-divided p), a family fixed by rules set in advance, not by
    the comparisons' outcomes (review 42: leaving out only the withheld cells, all of them
    decided, made the family depend on the outcomes)."""
    return [
        (name, key)
        for name, row in measures.items()
        for key, m in row.items()
        if key in LIMITS and not math.isnan(m.p_value)
    ]


def family_text(measures: Mapping[str, Mapping[str, SeedMeasure]], q: float, shown: int = 3) -> str:
    """What the correction did on this table, in numbers: the family's size, what
    Benjamini-Hochberg and Holm's step-down keep at ``q``, the ``shown`` smallest p-values
    against BH's cuts k q / m, and, where the smallest is not kept, the largest family that
    would keep it (review 47: the two procedures share their first cut, q / m)."""
    cells = family(measures)
    if not cells:
        return "No cell has a p-value, so no correction applies."
    m = len(cells)
    ps = [measures[n][k].p_value for n, k in cells]
    bh, fw = benjamini_hochberg(ps, q), holm(ps, q)
    capped = sum(measures[n][k].verdict == CEILING for n, k in cells)
    text = (
        f"On this table the family holds {m} cells ({capped} of them withheld by the caps). "
        f"Benjamini-Hochberg keeps {sum(bh)}, Holm's step-down {sum(fw)}"
        + (" (the same cells)" if bh == fw else "")
        + f". The smallest p-values against Benjamini-Hochberg's cuts k x {q:g} / {m}: "
    )
    ranked = sorted(zip(ps, cells, bh, strict=True), key=lambda c: c[0])[:shown]
    text += "; ".join(
        f"{name}, {LIMITS[key].title}: p = {p:.3g} against {k * q / m:.3g} (rank {k}"
        + (", kept)" if kept else ")")
        for k, (p, (name, key), kept) in enumerate(ranked, start=1)
    )
    least, _, least_kept = ranked[0]
    if not least_kept and least > 0:
        largest = math.floor(q / least)
        text += f". The smallest would be kept in a family of at most {largest} cells" + (
            f": it turns on the {capped} cells the caps withhold, which stay in the family"
            if capped and largest >= m - capped
            else ""
        )
    return text + "."


def false_discovery_control(
    measures: dict[str, dict[str, SeedMeasure]], q: float
) -> dict[str, dict[str, SeedMeasure]]:
    """Benjamini-Hochberg at false-discovery rate ``q`` over every paired rule x limit
    comparison of the table (each one's p_value): a 'relaxes' or 'tightens' it does not keep
    becomes 'no difference shown', its verdict kept in ``dropped``. Chosen over Holm's family-wise
    control: the table is read as a list of findings, of which a share q may be false, not as
    one claim that fails if any cell does. Both cut the smallest p at q / m; BH keeps more only
    where several p-values are small together (:func:`family_text` says what each keeps)."""
    cells = family(measures)
    kept = benjamini_hochberg([measures[n][k].p_value for n, k in cells], q) if cells else []
    out = {name: dict(row) for name, row in measures.items()}
    for (name, key), keep in zip(cells, kept, strict=True):
        m = out[name][key]
        if m.verdict in (RELAXES, TIGHTENS) and not keep:
            out[name][key] = replace(m, verdict=NO_DIFFERENCE, dropped=m.verdict)
    return out


def paired_differences(
    per_seed: Mapping[str, list[Mapping[str, Any]]], baseline: str, key: str, level: float
) -> dict[str, SeedMeasure]:
    """Per normalizer, ``key``'s difference to the baseline's, seed by seed (the i-th entries of
    the lists are one seed's models, which share initial weights and batches), its mean and
    t-interval: 'higher' / 'lower' when the interval lies above / below 0, else 'no difference
    shown'; 'no interval (one seed)', 'not measured' where a value is missing, 'baseline'."""
    base = per_seed[baseline]
    out = {}
    for name, ms in per_seed.items():
        if len(ms) != len(base):
            raise ValueError(f"{name} has {len(ms)} seeds' measures, {baseline} {len(base)}")
        values = [m.get(key) for m in ms] + [b.get(key) for b in base]
        if any(v is None or not math.isfinite(v) for v in values):
            out[name] = SeedMeasure(math.nan, math.nan, math.nan, len(ms), NOT_MEASURED)
            continue
        diffs = [m[key] - b[key] for m, b in zip(ms, base, strict=True)]
        mean, low, high = t_interval(diffs, level)
        if name == baseline:
            found = "baseline"
        elif len(ms) < 2:
            found = ONE_SEED
        elif low > 0:
            found = HIGHER
        elif high < 0:
            found = LOWER
        else:
            found = NO_DIFFERENCE
        out[name] = SeedMeasure(mean, low, high, len(ms), found)
    return out


@dataclass(frozen=True)
class Untrained:
    """A limit's comparison on untrained weights (study.untrained_seeds): the rule's measure over
    the baseline's, both at their seed's initial weights (odds over odds for a share; NaN where
    either is missing, censored or not positive), and the verdict the trained comparison would
    give on these two numbers (:func:`verdict`, with the same withheld reasons)."""

    ratio: float
    verdict: str


def untrained_comparison(
    measures: Mapping[str, Mapping[str, Any]],
    baseline: str,
    ratio: float,
    withheld_by: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, dict[str, Untrained]]:
    """Per rule and limit, the comparison with the baseline on untrained weights: what the rule
    gives before any training, beside the trained verdict, on the trained verdict's scale. The
    low-temperature sensitivity is read as ceiling_withheld reads a trained cell: the ratio of
    the T ||J|| themselves, and a relaxes/tightens that does not survive dividing each by its
    rule's own cap is withheld (:data:`CEILING`), so a rule's cap alone gives no verdict here
    either."""
    found = capped_verdicts(measures, baseline, ratio, withheld_by)
    out: dict[str, dict[str, Untrained]] = {}
    for name, m in measures.items():
        out[name] = {}
        for limit_key, limit in LIMITS.items():
            v, b = measure_of(m, limit_key), measure_of(measures[baseline], limit_key)
            r = math.nan
            if isinstance(v, float | int) and isinstance(b, float | int) and v > 0 and b > 0:
                if limit.share:
                    r = odds(v) / odds(b) if 0 < v < 1 and 0 < b < 1 else math.nan
                else:
                    r = float(v) / float(b)
            out[name][limit_key] = Untrained(r, found[name][limit_key])
    return out


def capped_verdicts(
    measures: Mapping[str, Mapping[str, Any]],
    baseline: str,
    ratio: float,
    withheld_by: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, dict[str, str]]:
    """study.verdicts of one measure per rule (one seed, or untrained weights), with the
    low-temperature verdict read as ceiling_withheld reads the seeds': a relaxes/tightens that
    does not survive dividing each rule's T ||J|| by its own cap becomes :data:`CEILING`."""
    key, cap = "gradient_low_t", "gradient_low_t_cap"

    def has_cap(m: Mapping[str, Any]) -> bool:
        value, top = m.get(key), m.get(cap)
        return value is not None and top is not None and top > 0 and math.isfinite(value)

    found = verdicts(measures, baseline, ratio, withheld_by)
    if not has_cap(measures.get(baseline, {})):
        # no cap to divide the baseline by: nothing is divided, as ceiling_withheld does
        return found
    scaled = {name: dict(m) for name, m in measures.items()}
    for m in scaled.values():
        if has_cap(m):
            m[key] = m[key] / m[cap]
    found_scaled = verdicts(scaled, baseline, ratio, withheld_by)
    for name, cells in found.items():
        if not has_cap(measures[name]):
            continue  # one side only divided would compare two scales
        if cells[key] in (RELAXES, TIGHTENS) and found_scaled[name][key] != cells[key]:
            cells[key] = CEILING
    return found


def ceiling_withheld(
    over: dict[str, dict[str, SeedMeasure]],
    per_seed: Mapping[str, list[Mapping[str, Any]]],
    baseline: str,
    ratio: float,
    level: float,
) -> None:
    """In place: a low-temperature verdict (``gradient_low_t``) that does not survive dividing
    each seed's T ||J|| by that seed's own cap (``gradient_low_t_cap``, :func:`jacobian_ceiling`)
    becomes :data:`CEILING`: the rules' caps, not their sharpness, gave it (sparsemax's cap is
    twice softmax's). A verdict that survives (sigmoid's, under a lower cap) stands; so does
    one without caps to divide by. Every cell with caps on both sides, decided or not, carries
    the p of its cap-divided comparison into the Benjamini-Hochberg family (review 42): which
    cells enter the family, and with which test, is fixed before any outcome is seen."""

    key, cap = "gradient_low_t", "gradient_low_t_cap"

    def scaled(ms: list[Mapping[str, Any]]) -> tuple[float, ...] | None:
        pairs = [(m.get(key), m.get(cap)) for m in ms]
        if any(v is None or c is None or not c > 0 or math.isnan(v) for v, c in pairs):
            return None
        return tuple(v / c for v, c in pairs)

    base = scaled(per_seed.get(baseline, []))
    for name, measures in over.items():
        m = measures.get(key)
        if m is None or name == baseline or base is None or math.isnan(m.p_value):
            continue
        mine = scaled(per_seed[name])
        if mine is None:
            continue
        _, low, high = paired_ratio(mine, base, level)
        logs = paired_log_ratios(mine, base)
        p_scaled = beyond_ratio_pvalue(logs, ratio) if logs is not None else math.nan
        if not math.isnan(p_scaled):  # the family takes the larger p
            m = replace(m, p_value=max(m.p_value, p_scaled), p_cap=p_scaled, p_own=m.p_value)
        if m.verdict in (RELAXES, TIGHTENS) and (
            math.isnan(low) or ratio_verdict(low, high, ratio, LIMITS[key].relaxes) != m.verdict
        ):
            m = replace(m, verdict=CEILING)
        measures[key] = m
