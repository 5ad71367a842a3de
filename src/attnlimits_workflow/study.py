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
  larger relaxes. N_crit is the first pass of Algorithm 3's N list, known to its cell (the N
  tried before it, N_crit], so the mean is an interval (:func:`censored_critical_n`); a length
  where no N of the list passed, up to L - 1 (censored), counts from its top N + 1 up to L,
  and the censored lengths are counted;
- separability (Theorem 2): the mean N_s / N at the largest N of the grid; larger relaxes;
- gradient at the trained temperature (Lemma 2): the median ||d weights / d logits||_2 at the
  largest L -- shown, no verdict: the paper calls both a large Jacobian (low-T instability) and
  small gradients (vanishing attention) the problem;
- gradient sensitivity (Corollary 3): the mean T ||J|| over the rows of the temperature sweep
  at T <= 0.1 (low_temperature_sensitivity: not the largest, which reaches each rule's ceiling), the constant of the 1/T growth where the paper says to avoid T; smaller relaxes;
- length generalisation (SSMax's claim): held-out perplexity at the training context over
  perplexity at the longest evaluated context, each over the last positions of its windows
  (evaluation.tail_fraction; 1 = no loss of quality at the longest context, 8x the training length by default, above 1 = better);
  larger relaxes.

Beside them, not limits of the paper: the attention sink, the mean weight a row puts on the
chunk's first token at the largest L (Xiao et al.'s sink; gated attention's paper, arXiv
2505.06708, claims its gate removes it), and the held-out perplexity, the cost. Over the seeds
both are also compared with the baseline's as paired differences (attnlimits_workflow.study_seeds.paired_differences):
the models of one seed share initial weights and batches.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import polars as pl

from attnlimits.intervals import (
    loglog_slope,
    odds,
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
    one, or a first pass known to its list cell: (low, high)) gets a verdict only when the whole interval gives it, else
    study_limits.UNDECIDED. 'no verdict: both readings defensible' for ``relaxes="either"``;
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

    Algorithm 3 walks an N list (critical_search.critical_n_list), so a first pass at N_crit
    is known to its cell: N_crit is above every N tried below it, which all failed. share_low =
    that cell's floor / L (``N_crit_low`` where the table has it; else one above the largest N
    tried below N_crit, from the ``N`` column; else N_crit itself), share_high = N_crit / L.
    N_max is the largest of the table's ``N`` column at that L where it has one (one row per N
    tried, the analysis tables' layout), else ``top_N``, else L - 1: the list ends at L - 1, so
    a censored length has tried it. A censored N_crit is above N_max, an integer: share_low =
    (N_max + 1) / L (1 after a walk up to L - 1). share_high = 1, a cap: where every key has a
    weight > 0, at N = L the top-N set and every random set hold every key, d~ equals its
    Monte-Carlo expectation and the test passes, so N_crit = L; a zero weight under
    analysis.zero_weight "not_selected" leaves d~ and E apart even there (the study gives such
    rules no verdict on this limit). A length the normalizer job marks not testable
    (``ks_testable`` false: its KS test cannot reject at its sample count) has no row."""
    if "N" in critical.columns:
        per_l = critical.group_by("L").agg(
            pl.col("N_crit").first(),
            pl.col("N_crit").n_unique().alias("values"),
            pl.col("N").max().alias("N_max"),
            # the largest N tried below the first pass: every N below it failed
            pl.col("N").filter(pl.col("N") < pl.col("N_crit")).max().alias("below"),
        )
        if (per_l["values"] > 1).any():
            raise ValueError("critical-N table: several N_crit at one L (one expectation only)")
        per_l = per_l.with_columns(N_low=pl.col("below").fill_null(0) + 1).drop("values", "below")
    else:
        if "ks_testable" in critical.columns:
            # no measurement at a length whose KS test cannot reject (review 29)
            critical = critical.filter(pl.col("ks_testable"))
        per_l = critical.select(
            "L",
            "N_crit",
            N_max=pl.col("top_N") if "top_N" in critical.columns else pl.col("L") - 1,
            # tables written before the normalizer job walked the list: an exact N_crit
            N_low=pl.col("N_crit_low") if "N_crit_low" in critical.columns else pl.col("N_crit"),
        )
    censored = pl.col("N_crit").is_null()
    return (
        per_l.sort("L")
        .with_columns(
            censored=censored,
            # censored: N_crit > N_max, an integer, so at least N_max + 1 (review 31)
            share_low=pl.when(censored).then(pl.col("N_max") + 1).otherwise(pl.col("N_low"))
            / pl.col("L"),
            share_high=pl.when(censored).then(1.0).otherwise(pl.col("N_crit") / pl.col("L")),
        )
        .drop("N_low")
    )


def untestable_lengths(critical: pl.DataFrame) -> int:
    """How many lengths of a normalizer job's critical-N table have no critical N because the
    KS test cannot reject at their sample count (``ks_testable`` false): the lengths
    :func:`censored_critical_n` leaves out, which the page counts."""
    if "ks_testable" not in critical.columns:
        return 0
    return critical.filter(~pl.col("ks_testable"))["L"].n_unique()


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
    jacobian_bounded: bool = True,
) -> dict[str, Any]:
    """One trained model's measure of each limit (module docstring; ``sweep`` the study_gradient
    table), plus what the table shows beside them: the attention sink
    (:func:`first_token_weight`), the max-weight slope in L, the critical-N lengths and how many
    were censored, and the held-out perplexities. ``distance`` is the lower
    end of the mean share (censored lengths at (N_max + 1) / L), ``distance_upper`` its upper end.
    ``sink_length``: the L the sink is read at (the training context; None: the largest L).
    ``jacobian_bounded``: whether the rule has a known bound on ||J|| (attnlimits.rules); without
    one its sweep's largest T ||J|| is no cap, and ``gradient_low_t_cap`` is NaN (review 47).
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
        "vanishing_slope": slope_over_every_length(per_l),
        "distance": float(crit["share_low"].mean()) if crit.height else None,
        "distance_upper": float(crit["share_high"].mean()) if crit.height else None,
        "distance_lengths": crit.height,
        "distance_censored": int(crit["censored"].sum()),
        "distance_untestable": untestable_lengths(critical),
        "separability": float(at_n_max["ratio"].mean()),
        "separability_zero_weight": zero_share,
        "gradient": float(at_max["jacobian_norm"].median()),
        "gradient_low_t": low_temperature_sensitivity(sweep),
        "gradient_low_t_cap": jacobian_ceiling(sweep) if jacobian_bounded else math.nan,
        "length": contexts[0]["tail_perplexity"] / contexts[-1]["tail_perplexity"],
        "perplexity": contexts[0]["perplexity"],
        "perplexity_longest": contexts[-1]["perplexity"],
        "tail_perplexity": contexts[0]["tail_perplexity"],
        "tail_perplexity_longest": contexts[-1]["tail_perplexity"],
    }


def every_peak_has_a_log(per_l: pl.DataFrame) -> bool:
    """Whether every median peak weight of ``per_l`` is > 0: a 0, NaN or missing one has no
    logarithm, and a log-log fit would leave its L out (polars' all() skips nulls and reads NaN
    as > 0, so both are tested apart)."""
    peaks = per_l["max_weight"].cast(pl.Float64).fill_nan(None)
    return not peaks.null_count() and bool((peaks > 0).all())


def slope_over_every_length(per_l: pl.DataFrame) -> float:
    """The log-log slope of the median peak weight over every analysed L; NaN where a median is
    0, NaN or missing at some L (the fit would leave that L out and still read "over every L",
    review 27)."""
    if not every_peak_has_a_log(per_l):
        return math.nan
    return loglog_slope(per_l["L"].to_numpy(), per_l["max_weight"].to_numpy())


def vanishing_decay(per_l: pl.DataFrame, trained_length: int | None) -> dict[str, Any]:
    """Lemma 1's rate, not a level: the log-log slope b of the median largest weight over the
    analysed L up to ``trained_length`` (the largest L within the training context; every L
    where None), as the factor (L_hi / L_lo)^b it implies over that range ("vanishing": 1 no
    decay, L_lo / L_hi Lemma 1's 1/L; positive, so rules compare by its ratio: (L_hi /
    L_lo)^(b1 - b2)), with the slope itself and the range it spans. Not measured (None) where
    fewer than two analysed L lie within the training context (a fit beyond it would read
    extrapolation, not Lemma 1), and where one of them has a median peak of 0 (no logarithm:
    the slope would span other lengths than the other rules')."""
    within = per_l.filter(pl.col("L") <= trained_length) if trained_length else per_l
    # Every rule's factor spans the same analysed lengths, so that factors compare as slopes do.
    # A median peak without a logarithm would leave its length out of the slope, which would
    # span other lengths than the other rules', so the measure is withheld (review 24)
    if within.height and not every_peak_has_a_log(within):
        return {
            "vanishing": None,
            "vanishing_fit_slope": math.nan,
            "vanishing_fit_lengths": (None, None),
        }
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
    each rule with a known Jacobian bound reaches at a tie (softmax 1/2, sparsemax 1, 1.5-entmax
    1/sqrt 2), read off the data rather than a loose bound (the entmaxes' 1/T). No cap of a rule
    without a known bound (limit_measures' jacobian_bounded): raw Self-Adjust's grows with the
    scores. NaN without rows."""
    if sweep is None:
        return math.nan
    low = sweep.filter(pl.col("T") <= LOW_TEMPERATURE)
    c = (low["T"] * low["jacobian_norm"]).drop_nulls().drop_nans()
    return float(c.max()) if c.len() else math.nan


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
