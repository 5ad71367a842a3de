"""The normalizer study's verdicts: one measure per limit of the paper, computed on a trained
model's own attention (its normalizer job), compared with the baseline model's.

Which way each measure "relaxes" its limit is data, stated once in
attnlimits_workflow.study_limits.LIMITS with the paper's own sentence and section; the verdicts
here (:func:`verdict`) and the page (docs/study.md, attnlimits_workflow.assemble.study_prose)
both read it from there. The intervals over the seeds are attnlimits.intervals'.

- vanishing attention (Lemma 1): the rate, not a level: the log-log slope of the median largest
  weight of a row over the analysed L within the training context, as the factor
  (L_hi / L_lo)^slope it implies (:func:`vanishing_decay`); larger relaxes;
- distance collapse (Theorem 1, Algorithm 3): the mean over L of N_crit / L, the largest share
  of the context whose weighted distance the KS test still tells apart from random tokens;
  larger relaxes. A length whose search never stopped rejecting (censored) counts as the largest
  N the search tried, so the mean is then a lower bound, and the censored lengths are counted;
- separability (Theorem 2): the mean N_s / N at the largest N of the grid; larger relaxes;
- gradient at the trained temperature (Lemma 2): the median ||d weights / d logits||_2 at the
  largest L -- shown, no verdict: the paper calls both a large Jacobian (low-T instability) and
  small gradients (vanishing attention) the problem;
- gradient sensitivity (Corollary 3): the largest T ||J|| over the rows of the temperature sweep
  at T <= 0.1, the constant of the 1/T growth where the paper says to avoid T; smaller relaxes;
- length generalisation (SSMax's claim): held-out perplexity at the training context over
  perplexity at the longest evaluated context, each over the last positions of its windows
  (evaluation.tail_fraction; 1 = no loss of quality at the longest context, 8x the training length by default, above 1 = better);
  larger relaxes.

Beside them, not limits of the paper: the attention sink, the mean weight a row puts on the
chunk's first token at the largest L (Xiao et al.'s sink; gated attention's paper, arXiv
2505.06708, claims its gate removes it), and the held-out perplexity, the cost. Over the seeds
both are also compared with the baseline's as paired differences (:func:`paired_differences`):
the models of one seed share initial weights and batches.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import polars as pl

from attnlimits.intervals import (
    benjamini_hochberg,
    beyond_ratio_pvalue,
    beyond_ratio_sign_pvalue,
    beyond_ratio_unpaired_pvalue,
    log_t_interval,
    loglog_slope,
    odds,
    paired_log_ratios,
    paired_ratio,
    t_interval,
)
from attnlimits.rules import jacobian_bound as jacobian_bound  # the rules' bounds (table's)

# the limits and the verdict words, defined in study_limits; here too, as this module's verdicts
from .study_limits import (
    BESIDE as BESIDE,
)
from .study_limits import (
    CEILING as CEILING,
)
from .study_limits import (
    FIXED_TEMPERATURE as FIXED_TEMPERATURE,
)
from .study_limits import (
    HIGHER as HIGHER,
)
from .study_limits import (
    LIMITS as LIMITS,
)
from .study_limits import (
    LOW_TEMPERATURE as LOW_TEMPERATURE,
)
from .study_limits import (
    LOWER as LOWER,
)
from .study_limits import (
    NO_CHANGE as NO_CHANGE,
)
from .study_limits import (
    NO_DIFFERENCE as NO_DIFFERENCE,
)
from .study_limits import (
    NO_P_VALUE as NO_P_VALUE,
)
from .study_limits import (
    NO_VERDICT as NO_VERDICT,
)
from .study_limits import (
    NOT_MEASURED as NOT_MEASURED,
)
from .study_limits import (
    ONE_SEED as ONE_SEED,
)
from .study_limits import (
    RELAXES as RELAXES,
)
from .study_limits import (
    SUPPORT_LIMITED as SUPPORT_LIMITED,
)
from .study_limits import (
    SUPPORT_LIMITED_SHARE as SUPPORT_LIMITED_SHARE,
)
from .study_limits import (
    TIGHTENS as TIGHTENS,
)
from .study_limits import (
    UNDECIDED as UNDECIDED,
)
from .study_limits import (
    VERDICTS as VERDICTS,
)
from .study_limits import (
    ZERO_WEIGHT_DISTANCE as ZERO_WEIGHT_DISTANCE,
)
from .study_limits import (
    ZERO_WEIGHT_ROWS_SHARE as ZERO_WEIGHT_ROWS_SHARE,
)
from .study_limits import (
    Limit as Limit,
)
from .study_limits import (
    Quote as Quote,
)

Measure = float | tuple[float, float] | None


def _interval(x: Measure) -> tuple[float, float] | None:
    """(low, high) of a measure: a number is its own interval, a lower bound is (x, high);
    None where missing, not finite or negative (every measure is >= 0; 0 is a value: a rule
    whose low-temperature sensitivity is 0 is the most "smaller" one can be)."""
    if x is None:
        return None
    lo, hi = (x, x) if not isinstance(x, tuple) else x
    if lo is None or not math.isfinite(lo) or lo < 0 or math.isnan(hi) or hi < lo:
        return None
    return float(lo), float(hi)


def _at_least_ratio_above(high_side: float, low_side: float, ratio: float) -> bool:
    """high_side >= ratio x low_side, where 0 is never ratio x above 0 (both 0: no change) and
    nothing is ratio x above an infinite side (a share of 1's odds: both infinite, no change)."""
    return high_side > 0 and not math.isinf(low_side) and high_side >= ratio * low_side


def verdict(
    value: Measure,
    baseline: Measure,
    ratio: float,
    relaxes: Literal["larger", "smaller", "either"] = "larger",
    share: bool = False,
) -> str:
    """A measure against the baseline's, oriented by ``relaxes``. With ``relaxes="larger"``:
    'relaxes' when value >= ratio x baseline, 'tightens' when <= baseline / ratio, else
    'no change' ("smaller" swaps the two). A measure known only within an interval (a censored
    one: (lower bound, upper bound)) gets a verdict only when the whole interval gives it, else
    'undecided (censored)'. 'no verdict: both readings defensible' for ``relaxes="either"``;
    'not measured' when either is missing or negative. 0 is never ``ratio`` x above 0: two
    zeros are 'no change'. ``share``: both are shares in [0, 1], compared on their odds
    (:func:`odds`)."""
    if relaxes == "either":
        return NO_VERDICT
    v, b = _interval(value), _interval(baseline)
    if v is None or b is None:
        return NOT_MEASURED
    if share:
        v, b = (odds(v[0]), odds(v[1])), (odds(b[0]), odds(b[1]))
    (v_lo, v_hi), (b_lo, b_hi) = v, b
    larger, smaller = (RELAXES, TIGHTENS) if relaxes == "larger" else (TIGHTENS, RELAXES)
    if _at_least_ratio_above(v_lo, b_hi, ratio):
        return larger
    if _at_least_ratio_above(b_lo, v_hi, ratio):
        return smaller
    if v_hi == b_hi == 0 or v_lo == b_lo == math.inf:
        return NO_CHANGE
    if v_lo * ratio > b_hi and v_hi < ratio * b_lo:
        return NO_CHANGE
    return UNDECIDED


def censored_critical_n(critical: pl.DataFrame) -> pl.DataFrame:
    """One row per L: N_crit, the largest N the search tried (N_max), whether N_crit is
    censored (null: still distinguishable at N_max), and the share N_crit / L as an interval.

    N_max is the largest of the table's ``N`` column at that L where it has one (one row per N
    tried, the analysis tables' layout), else L - 1: the normalizer job searches [1, L - 1] and
    tries L - 1 before it calls a length censored (attnlimits.critical.critical_n_search).
    A censored N_crit is above N_max and at most L (at N = L nothing is left unselected, d~ and
    its expectation are both 0): share_low = N_max / L, share_high = 1."""
    if "N" in critical.columns:
        per_l = critical.group_by("L").agg(
            pl.col("N_crit").first(),
            pl.col("N_crit").n_unique().alias("values"),
            pl.col("N").max().alias("N_max"),
        )
        if (per_l["values"] > 1).any():
            raise ValueError("critical-N table: several N_crit at one L (one expectation only)")
        per_l = per_l.drop("values")
    else:
        per_l = critical.select("L", "N_crit", N_max=pl.col("L") - 1)
    censored = pl.col("N_crit").is_null()
    return per_l.sort("L").with_columns(
        censored=censored,
        share_low=pl.when(censored).then(pl.col("N_max")).otherwise(pl.col("N_crit")) / pl.col("L"),
        share_high=pl.when(censored).then(1.0).otherwise(pl.col("N_crit") / pl.col("L")),
    )


def low_temperature_sensitivity(sweep: pl.DataFrame | None) -> float | None:
    """The mean T ||J|| over the temperature sweep's rows at T <= LOW_TEMPERATURE (None when
    the sweep has none): the expected constant c of ||J|| ~ c / T over the rows. Not the
    largest: a maximum over many rows reaches each rule's own ceiling (1/2 for softmax at any
    two-way tie, 1 for sparsemax on any row with two nonzero weights), whatever the model
    learnt. Not the median either: at low T most rows are one-hot and their T ||J|| vanishes
    (softmax's median was 3.6e-08 on the default study), so the median compares rounding
    noise; the mean weighs the near-tie rows where the 1/T growth happens."""
    if sweep is None:
        return None
    low = sweep.filter(pl.col("T") <= LOW_TEMPERATURE).select(
        (pl.col("T") * pl.col("jacobian_norm")).alias("c")
    )["c"]
    low = low.drop_nulls().drop_nans()
    return float(low.mean()) if low.len() else None


def first_token_weight(samples: pl.DataFrame, length: int | None = None) -> float | None:
    """The attention sink: the mean weight on the first key (the chunk's first token) over the
    analysed rows at L = ``length`` (None: the largest L; a length not analysed: the largest
    analysed L below it), times that L: 1 is a uniform row's share, far above 1 a sink (a head
    parking its mass on the first token), below 1 less than uniform. Each row's weight is read
    as a share of the row's own mass (``row_sum`` where the table has it; rows of no positive
    mass left out): softpick's rows miss up to half their mass, which is no smaller share on the
    first token. None for samples without ``first_weight``. The mean, not the median: a sink is
    a share of the rows' mass. Read at the training context by the study: beyond it key 0 sits
    at distances no model saw."""
    if "first_weight" not in samples.columns:
        return None
    lengths = sorted(samples["L"].unique().to_list())
    below = [L for L in lengths if length is None or L <= length]
    at = below[-1] if below else lengths[0]
    rows = samples.filter(pl.col("L") == at)
    if "row_sum" in rows.columns:
        rows = rows.filter(pl.col("row_sum") > 0).with_columns(
            first_weight=pl.col("first_weight") / pl.col("row_sum")
        )
    return float(rows["first_weight"].mean()) * at if rows.height else None


def zero_weight_row_share(samples: pl.DataFrame) -> float:
    """The share of the analysed rows (every L) holding a weight of 0 or below on a key they see:
    ``support`` (the weights > 0) below L (the normalizer job reads each row's last query, which
    sees every key). A negative weight (raw Self-Adjust) leaves Theorem 1's simplex as well."""
    if "support" not in samples.columns:
        return 0.0
    # exact zeros only: d~ is continuous in the weights, so a weight of 1e-12 moves it by 1e-12
    # under either reading; only a 0 meets the zero-weight rule's jump. (Separability differs:
    # there a negligible weight ties at the radius, a comparison, not a sum.)
    return float((samples["support"] < samples["L"]).mean())


def limit_measures(
    samples: pl.DataFrame,
    critical: pl.DataFrame,
    separability: pl.DataFrame,
    evaluation: dict[str, Any],
    sweep: pl.DataFrame | None = None,
    sink_length: int | None = None,
) -> dict[str, Any]:
    """One trained model's measure of each limit (module docstring; ``sweep`` the study_gradient
    table), plus what the table shows beside them: the attention sink
    (:func:`first_token_weight`), the max-weight slope in L, the critical-N lengths and how many
    were censored, and the held-out perplexities. ``distance`` is the lower
    end of the mean share (censored lengths at N_max / L), ``distance_upper`` its upper end.
    ``sink_length``: the L the sink is read at (the training context; None: the largest L).
    ``separability_zero_weight``: the share of the top-N slots at the largest N whose weight is
    0 or below float32's resolution of the row's peak (``negligible_weight_selected`` where the
    table has it): such a token's distance to s differs from ||s|| by less than s's rounding,
    a tie at the radius (stick-breaking's far keys underflow to 1e-12 and below, never to 0)."""
    l_max = samples["L"].max()
    at_max = samples.filter(pl.col("L") == l_max)
    per_l = samples.group_by("L").agg(pl.col("max_weight").median()).sort("L")
    crit = censored_critical_n(critical)
    n_max = separability["N"].max()
    at_n_max = separability.filter(pl.col("N") == n_max)
    tie_column = next(
        (
            c
            for c in ("negligible_weight_selected", "zero_weight_selected")
            if c in at_n_max.columns
        ),
        None,
    )
    zero_share = float(at_n_max[tie_column].mean()) / n_max if tie_column else 0.0
    contexts = sorted(evaluation["contexts"], key=lambda c: c["context"])
    return {
        "sink": first_token_weight(samples, sink_length),
        "zero_weight_rows": zero_weight_row_share(samples),
        **vanishing_decay(per_l, sink_length),
        "vanishing_level": float(at_max["max_weight"].median()),
        "vanishing_slope": loglog_slope(per_l["L"].to_numpy(), per_l["max_weight"].to_numpy()),
        "distance": float(crit["share_low"].mean()) if crit.height else None,
        "distance_upper": float(crit["share_high"].mean()) if crit.height else None,
        "distance_lengths": crit.height,
        "distance_censored": int(crit["censored"].sum()),
        "separability": float(at_n_max["ratio"].mean()),
        "separability_zero_weight": zero_share,
        "gradient": float(at_max["jacobian_norm"].median()),
        "gradient_low_t": low_temperature_sensitivity(sweep),
        "gradient_low_t_cap": jacobian_ceiling(sweep),
        "length": contexts[0]["tail_perplexity"] / contexts[-1]["tail_perplexity"],
        "perplexity": contexts[0]["perplexity"],
        "perplexity_longest": contexts[-1]["perplexity"],
        "tail_perplexity": contexts[0]["tail_perplexity"],
        "tail_perplexity_longest": contexts[-1]["tail_perplexity"],
    }


def vanishing_decay(per_l: pl.DataFrame, trained_length: int | None) -> dict[str, Any]:
    """Lemma 1's rate, not a level: the log-log slope b of the median largest weight over the
    analysed L up to ``trained_length`` (the largest L within the training context; every L
    where None), as the factor (L_hi / L_lo)^b it implies over that range ("vanishing": 1 no
    decay, L_lo / L_hi Lemma 1's 1/L; positive, so rules compare by its ratio: (L_hi /
    L_lo)^(b1 - b2)), with the slope itself and the range it spans. Not measured (None) where
    fewer than two analysed L lie within the training context: a fit beyond it would read
    extrapolation, not Lemma 1."""
    within = per_l.filter(pl.col("L") <= trained_length) if trained_length else per_l
    if within.height < 2:
        return {
            "vanishing": None,
            "vanishing_fit_slope": math.nan,
            "vanishing_fit_lengths": (
                None,
                None,
            ),
        }
    lengths, peaks = within["L"].to_numpy(), within["max_weight"].to_numpy()
    slope = loglog_slope(lengths, peaks)
    lo, hi = (int(lengths.min()), int(lengths.max())) if len(lengths) else (None, None)
    decay = (hi / lo) ** slope if lo and hi and math.isfinite(slope) else None
    return {
        "vanishing": decay,
        "vanishing_fit_slope": slope,
        "vanishing_fit_lengths": (lo, hi),
    }


def measure_of(measures: Mapping[str, Any], key: str) -> Measure:
    """A limit's measure for :func:`verdict`: the number, or (low, high) where censoring leaves
    an interval (``<key>_upper`` above ``<key>``)."""
    value, upper = measures.get(key), measures.get(f"{key}_upper")
    if value is None or upper is None or upper == value:
        return value
    return (value, upper)


def same_weights_as_baseline(entries: Mapping[str, Mapping[str, Any]], baseline: str) -> set[str]:
    """The study's names (``entries``: study.normalizers) whose rule forms the baseline's weights
    by construction: a rule with an output gate (attnlimits.rules.Rule.output_gate, which acts
    after the weights) whose weights function and settings are the baseline's."""
    from attnlimits import rules

    base = entries[baseline]
    base_settings = {k: v for k, v in base.items() if k != "kind"}
    return {
        name
        for name, entry in entries.items()
        if name != baseline
        and rules.get(entry["kind"]).output_gate
        and rules.get(entry["kind"]).weights is rules.get(base["kind"]).weights
        and {k: v for k, v in entry.items() if k != "kind"} == base_settings
    }


def fixed_temperature_rules(entries: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The study's names (``entries``: study.normalizers) trained with a fixed temperature other
    than 1 (softmax_T0.1, softmax_T10): their low-temperature sensitivity gets no verdict."""
    return {n for n, e in entries.items() if float(e.get("temperature", 1.0)) != 1.0}


def jacobian_ceiling(sweep: pl.DataFrame | None) -> float:
    """The largest T ||J|| over a study_gradient sweep's rows at T <= LOW_TEMPERATURE: the cap
    each rule's rows reach at a tie (softmax 1/2, sparsemax 1, 1.5-entmax 1/sqrt 2,
    stick-breaking about 0.35), read off the data rather than a loose bound (the entmaxes' 1/T);
    unbounded for a rule whose weights grow with the scores (raw Self-Adjust). NaN without rows."""
    if sweep is None:
        return math.nan
    low = sweep.filter(pl.col("T") <= LOW_TEMPERATURE)
    c = (low["T"] * low["jacobian_norm"]).drop_nulls().drop_nans()
    return float(c.max()) if c.len() else math.nan


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
    one without caps to divide by."""
    from dataclasses import replace

    key, cap = "gradient_low_t", "gradient_low_t_cap"

    def scaled(ms: list[Mapping[str, Any]]) -> tuple[float, ...] | None:
        pairs = [(m.get(key), m.get(cap)) for m in ms]
        if any(v is None or c is None or not c > 0 or math.isnan(v) for v, c in pairs):
            return None
        return tuple(v / c for v, c in pairs)

    base = scaled(per_seed.get(baseline, []))
    for name, measures in over.items():
        m = measures.get(key)
        if m is None or name == baseline or m.verdict not in (RELAXES, TIGHTENS) or base is None:
            continue
        mine = scaled(per_seed[name])
        if mine is None:
            continue
        _, low, high = paired_ratio(mine, base, level)
        if math.isnan(low) or ratio_verdict(low, high, ratio, LIMITS[key].relaxes) != m.verdict:
            measures[key] = replace(m, verdict=CEILING)


def withheld(key: str, measures: list[Mapping[str, Any]]) -> str | None:
    """Why a limit gets no verdict from these measures (one per seed), or None: the support cap
    of separability, and the zero-weight reading of the critical N."""
    if key == "separability" and any(
        m.get("separability_zero_weight", 0.0) > SUPPORT_LIMITED_SHARE for m in measures
    ):
        return SUPPORT_LIMITED
    # exact zeros meet the not_selected rule's jump; a top-N share of negligible weights (the
    # separability test's) means a reading that counts them as zeros could move N_crit as much
    if key == "distance" and any(
        m.get("zero_weight_rows", 0.0) > ZERO_WEIGHT_ROWS_SHARE
        or m.get("separability_zero_weight", 0.0) > SUPPORT_LIMITED_SHARE
        for m in measures
    ):
        return ZERO_WEIGHT_DISTANCE
    return None


def verdicts(
    measures: Mapping[str, Mapping[str, Any]],
    baseline: str,
    ratio: float,
    withheld_by: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, dict[str, str]]:
    """Per normalizer, per limit: its verdict against the baseline ('baseline' for itself).
    A rule whose weights function is the baseline's (gated attention) gets verdicts like any
    other: its weights come from the logits its model learnt, which the gate may change (its
    paper's claim is that the sink goes), so a difference is a finding about those logits."""
    return {
        name: {
            key: "baseline"
            if name == baseline
            else withheld(key, [m])
            or (withheld_by or {}).get(name, {}).get(key)
            or verdict(
                measure_of(m, key),
                measure_of(measures[baseline], key),
                ratio,
                limit.relaxes,
                limit.share,
            )
            for key, limit in LIMITS.items()
        }
        for name, m in measures.items()
    }


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
            return math.nan, math.nan, math.nan, len(ms), False, False, (), ()
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
        ends = tuple(float(v) for v in highs)
        return mean, low, high, len(ms), censored, logs, tuple(float(v) for v in lows), ends

    keys = [*LIMITS, *BESIDE]
    stats = {n: {k: summary(ms, k) for k in keys} for n, ms in per_seed.items()}
    withheld_of = dict(withheld_by or {})
    out: dict[str, dict[str, SeedMeasure]] = {}
    for name, ms in per_seed.items():
        out[name] = {}
        for key in keys:
            mean, low, high, n, censored, logs, values, highs = stats[name][key]
            b_mean, b_low, b_high = stats[baseline][key][:3]
            limit = LIMITS.get(key)
            reason = withheld(key, ms) or withheld_of.get(name, {}).get(key)
            base_censored, base_values = stats[baseline][key][4], stats[baseline][key][6]
            paired = (
                paired_ratio(values, base_values, level, limit.share)
                if limit is not None and not censored and not base_censored
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
                    mean, low, high, n, found, censored, logs, values, p_value=p_value
                )
                continue
            out[name][key] = SeedMeasure(mean, low, high, n, found, censored, logs, values)
    out = false_discovery_control(out, 1.0 - level)
    for key, label in (("perplexity", "perplexity_cost"), ("sink", "sink_change")):
        for name, change in paired_differences(per_seed, baseline, key, level).items():
            out[name][label] = change
    return out


def false_discovery_control(
    measures: dict[str, dict[str, SeedMeasure]], q: float
) -> dict[str, dict[str, SeedMeasure]]:
    """Benjamini-Hochberg at false-discovery rate ``q`` over every paired rule x limit
    comparison of the table (each one's p_value): a 'relaxes' or 'tightens' it does not keep
    becomes 'no difference shown', its verdict kept in ``dropped``. Chosen over Holm's family-wise
    control: the table is read as a list of findings, of which a share q may be false, not as
    one claim that fails if any cell does; with ~50 cells Holm would need p < 0.001 for the
    first, which 3 seeds rarely give."""
    cells = [
        (name, key)
        for name, row in measures.items()
        for key, m in row.items()
        if key in LIMITS and not math.isnan(m.p_value)
    ]
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
    gives before any training, beside the trained verdict. The low-temperature sensitivity is
    compared as ceiling_withheld compares it, each measure over its own T ||J|| cap, so that a
    rule's cap alone gives no verdict here either."""
    scaled = {name: dict(m) for name, m in measures.items()}
    for m in scaled.values():
        value, cap = m.get("gradient_low_t"), m.get("gradient_low_t_cap")
        if value is not None and cap is not None and cap > 0 and math.isfinite(value):
            m["gradient_low_t"] = value / cap
    found = verdicts(scaled, baseline, ratio, withheld_by)
    out: dict[str, dict[str, Untrained]] = {}
    for name, m in scaled.items():
        out[name] = {}
        for key, limit in LIMITS.items():
            v, b = measure_of(m, key), measure_of(scaled[baseline], key)
            r = math.nan
            if isinstance(v, float | int) and isinstance(b, float | int) and v > 0 and b > 0:
                if limit.share:
                    r = odds(v) / odds(b) if 0 < v < 1 and 0 < b < 1 else math.nan
                else:
                    r = float(v) / float(b)
            out[name][key] = Untrained(r, found[name][key])
    return out
