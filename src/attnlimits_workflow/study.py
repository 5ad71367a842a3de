"""The normaliser study's verdicts: one measure per limit of the paper, computed on a trained
model's own attention (its normalizer job), compared with the baseline model's.

Which way each measure "relaxes" its limit is data, stated once in :data:`LIMITS` with the
paper's own sentence and section; the verdicts (:func:`verdict`) and the page
(docs/study.md, :func:`orientation_rows`) both read it from there.

- vanishing attention (Lemma 1): the median largest weight of a row at the largest L; larger
  relaxes;
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
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl

from attnlimits.rules import jacobian_bound as jacobian_bound  # the rules' bounds (table's)

from .tables import markdown_table

RELAXES, TIGHTENS, NO_CHANGE = "relaxes", "tightens", "no change"
NOT_MEASURED = "not measured"
UNDECIDED = "undecided (censored)"
NO_VERDICT = "no verdict: both readings defensible"
# A sparse rule's rows with fewer nonzero weights than N: its top-N weight-0 tokens are never
# distinguishable, so N_s/N <= support / N measures the support, not separability.
SUPPORT_LIMITED = "no verdict: support < N"
# A rule whose rows hold exact zero weights: the critical N then depends on how a zero-weight
# token counts (analysis.zero_weight). Under "not_selected" a random set that draws one adds
# ||s|| to the expectation, a top-N set at N < support never does, so N_crit moves with the
# reading, not the model (sa_softmax: 2 evaluations to "censored" at every L; "literal": the
# baseline's N_crit). The share of rows with a zero weight above which no verdict is given.
ZERO_WEIGHT_ROWS_SHARE = 0.05
ZERO_WEIGHT_DISTANCE = (
    "no verdict: weights <= 0 or negligible (the zero-weight reading decides N_crit)"
)
# A fixed temperature T0 is a rescaling of W_q that training absorbs: the low-temperature
# sensitivity taken with respect to the raw scores then reports T0, not the rule.
FIXED_TEMPERATURE = "no verdict: a fixed temperature (training absorbs it into W_q)"
# Each rule's T ||J|| has its own ceiling at a tie (softmax 1/2, sparsemax and the entmaxes 1):
# a low-T verdict in the direction the ceilings differ could come from the ceiling alone.
CEILING = "no verdict: its T ||J|| ceiling differs from the baseline's"
VERDICTS = (
    RELAXES,
    TIGHTENS,
    NO_CHANGE,
    UNDECIDED,
    NO_VERDICT,
    SUPPORT_LIMITED,
    ZERO_WEIGHT_DISTANCE,
    FIXED_TEMPERATURE,
    CEILING,
    NOT_MEASURED,
)
# The share of a row's top-N slots that may have weight 0 before N_s/N counts the support.
SUPPORT_LIMITED_SHARE = 0.05

# Section 5 of the paper: "it's better to avoid using the T <= 0.1"; Section 3.3: below 0.1 the
# curves follow the 1/T law. The sweep's temperatures at or below it are the low-T region.
LOW_TEMPERATURE = 0.1


@dataclass(frozen=True)
class Quote:
    """A sentence of the paper, verbatim (tests check it against the text), and its section."""

    text: str
    section: str


@dataclass(frozen=True)
class Limit:
    """One limit of the paper, the study's measure of it, and which way the measure relaxes it:
    "larger", "smaller", or "either" (both readings defensible: shown, no verdict, ``reason``);
    ``when``: the use that needs it relaxed (:func:`which_rule_when`)."""

    title: str
    header: str  # the table column: format fields l_max, n_max, c_max, t_low
    measure: str
    relaxes: Literal["larger", "smaller", "either"]
    quotes: tuple[Quote, ...]
    reason: str = ""
    # the "which rule to use when" summary's lead: the use that needs this limit relaxed
    when: str = ""
    # measured on the attention weights (False: on the model's predictions, the length limit)
    of_weights: bool = True
    # a share in [0, 1]: compared on the odds x / (1 - x), so that a baseline above 1 / ratio
    # still leaves room to relax it (on the shares, 0.7 could only "relax" to 1.05)
    share: bool = False


LIMITS: dict[str, Limit] = {
    "vanishing": Limit(
        "Vanishing attention (Lemma 1)",
        "Vanishing attention (Lemma 1): median max weight at L = {l_max}",
        "median largest weight of a row at the largest L",
        "larger",
        (
            Quote(
                "This lemma implies that for any normalization of function independent of "
                "token count, the attention weights inevitably become uniformly small (on the "
                "order of $1/L$) as the context size grows.",
                "2 (Lemma 1)",
            ),
        ),
        when="a few tokens must keep large weights at long contexts",
    ),
    "distance": Limit(
        "Distance collapse (Theorem 1, critical N)",
        "Distance collapse (Thm 1): mean N_crit / L",
        "mean over L of N_crit / L; a censored L counts as the largest N tried (mean >= x)",
        "larger",
        (
            Quote(
                "The critical- N curve grows sub-linearly ($\\approx 0.06L$), confirming that "
                "only a small subset of tokens can be separated before attention behaves as if "
                "weights were uniform.",
                "3.1",
            ),
        ),
        when="the selected tokens must stay distinguishable over a larger share of the context",
        share=True,
    ),
    "separability": Limit(
        "Separability (Theorem 2)",
        "Separability (Thm 2): mean N_s/N at N = {n_max}",
        "mean N_s / N at the largest N of the separability grid",
        "larger",
        (
            Quote(
                "Thus—even with idealised spherical embeddings—softmax attention cannot cleanly "
                "separate more than about four-fifths of the tokens it selects; adding further "
                "tokens mainly dilutes the representation without improving geometric "
                "resolution.",
                "3.2",
            ),
        ),
        when="many selected tokens must stay geometrically separable",
        share=True,
    ),
    "gradient": Limit(
        "Gradient at the trained temperature (Lemma 2)",
        "Gradient at trained T (Lemma 2): median ||J|| at L = {l_max}",
        "median ||d weights / d logits||_2 at the largest L, the model as trained",
        "either",
        (
            Quote(
                "Its limitations, however, are now well established: it produces dense "
                "distributions, its peak value drops as the context grows (*vanishing-attention* "
                "effect), and its Jacobian explodes when the temperature is driven low, yielding "
                "unstable gradients.",
                "4",
            ),
            Quote(
                "The resulting gradients are too small for effective learning, especially in "
                "long-context settings [4, 19].",
                "1",
            ),
            Quote(
                "*Gradient-controlled variants* (e.g. Self-Adjusted Softmax) re-weight logits "
                "according to the layer-wise dynamic range, keeping the Jacobian spectrum in a "
                "healthy band [20].",
                "4",
            ),
        ),
        reason=(
            "a larger ||J|| is nearer the low-temperature instability (Section 4), a smaller one "
            "nearer the too-small gradients of vanishing attention (Section 1); the paper asks "
            "for a healthy band, and one norm at one temperature cannot say which side of it a "
            "rule is on. The low-temperature sensitivity has its own column."
        ),
        when="gradients must stay in a healthy band at the trained temperature",
    ),
    "gradient_low_t": Limit(
        "Gradient sensitivity at low temperature (Corollary 3)",
        "Gradient sensitivity (Cor. 3): mean T ||J|| over T <= {t_low:g}",
        f"mean T x ||d rule(z / T) / d z||_2 over the sweep's rows at T <= {LOW_TEMPERATURE:g}"
        " (led by the largest such T: rows with a clear top turn one-hot and their T ||J|| falls;"
        " the largest reaches each rule's own ceiling, the median vanishes with the one-hot rows)",
        "smaller",
        (
            Quote(
                "A smaller temperature T sharpens the softmax but simultaneously inflates the "
                "Jacobian norm (scaling as $1/T$), making the attention distribution highly "
                "sensitive to even tiny logit perturbations and thus harder to train stably.",
                "2.3 (Corollary 3)",
            ),
            Quote(
                "The teoretical and practical analysis shows that it’s better to avoid using "
                "the $T \\leq 0.1$.",
                "5",
            ),
        ),
        when="attention must be sharp (a low temperature) and still train stably",
    ),
    "length": Limit(
        "Length generalisation (Scalable-Softmax's claim)",
        "Length generalisation: ppl(C) / ppl({c_max}), last positions",
        "held-out perplexity at the training context over that at the longest context, last "
        "positions of each window",
        "larger",
        (
            Quote(
                "Our GPT-2 experiment (Fig. 2, middle) confirms the predicted plateau and "
                "justifies why sparse or length-aware rules can improve long-context "
                "performance.",
                "4",
            ),
        ),
        when="the model must read contexts longer than it was trained on",
        of_weights=False,
    ),
}

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


def odds(x: float) -> float:
    """x / (1 - x) of a share, clipped to [0, 1] first (a t-interval's end may leave it); 1 is
    +inf."""
    x = min(max(x, 0.0), 1.0)
    return math.inf if x == 1.0 else x / (1.0 - x)


def _at_least_ratio_above(high_side: float, low_side: float, ratio: float) -> bool:
    """high_side >= ratio x low_side, where 0 is never ratio x above 0 (both 0: no change)."""
    return high_side > 0 and high_side >= ratio * low_side


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
    if v_hi == b_hi == 0:
        return NO_CHANGE
    if v_lo * ratio > b_hi and v_hi < ratio * b_lo:
        return NO_CHANGE
    return UNDECIDED


def loglog_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of log y on log x over the points with y > 0 (NaN if under two)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = (x > 0) & (y > 0)
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)[0])


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
        "vanishing": float(at_max["max_weight"].median()),
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


def measure_of(measures: Mapping[str, Any], key: str) -> Measure:
    """A limit's measure for :func:`verdict`: the number, or (low, high) where censoring leaves
    an interval (``<key>_upper`` above ``<key>``)."""
    value, upper = measures.get(key), measures.get(f"{key}_upper")
    if value is None or upper is None or upper == value:
        return value
    return (value, upper)


def shown(measures: Mapping[str, Any], key: str) -> str:
    """The measure as the page shows it: '>= x' for a lower bound, and for the critical N how
    many lengths were censored."""
    value = measures.get(key)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    text = f"{value:.3g}"
    if f"{key}_censored" in measures:
        censored, lengths = measures[f"{key}_censored"], measures[f"{key}_lengths"]
        text = (">= " if censored else "") + text + f"; {censored} of {lengths} L censored"
    return text


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
    """Per normaliser, per limit: its verdict against the baseline ('baseline' for itself).
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


def answer_line(
    key: str,
    header: str,
    measures: Mapping[str, Mapping[str, Any]],
    found: Mapping[str, Mapping[str, str]],
    baseline: str,
) -> str:
    """One limit's answer on the page: the baseline's measure, then the other normalisers grouped
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


# ------------------------------------------------------------------------------ over the seeds
NO_DIFFERENCE = "no difference shown"
ONE_SEED = "no interval (one seed)"
HIGHER, LOWER = "higher", "lower"
# The measures shown beside the limits, with no orientation of the paper's: the cost and the sink.
BESIDE = ("perplexity", "sink")


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


def t_interval(values, level: float) -> tuple[float, float, float]:
    """(mean, low, high): mean +- t_{(1 + level)/2, n - 1} sd / sqrt(n), Student's t with n - 1
    degrees of freedom over n seeds. Chosen over the bootstrap: with 3 seeds a percentile
    bootstrap of the mean can only return about the seeds' range (which covers the median with
    probability 1 - 2 / 2^3 = 75%, whatever level it is labelled), while the t-interval has its
    level when the seeds' values spread normally. NaN ends with fewer than two values."""
    from scipy import stats

    x = np.asarray(values, dtype=np.float64)
    mean = float(x.mean()) if x.size else math.nan
    if x.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf((1.0 + level) / 2.0, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return mean, mean - half, mean + half


def log_t_interval(values, level: float) -> tuple[float, float, float]:
    """(geometric mean, low, high): t_interval of log(values), mapped back. For positive
    measures compared by a ratio: the interval is one of ratios, never reaches below 0, and a
    seed 100x off moves it by a factor, not by its raw size (sigmoid's length ratio: 0.0015,
    0.10 and 0.21 over three seeds)."""
    mean, low, high = t_interval(np.log(np.asarray(values, dtype=np.float64)), level)
    return math.exp(mean), math.exp(low), math.exp(high)


def paired_ratio(
    values: tuple[float, ...], base: tuple[float, ...], level: float, share: bool = False
) -> tuple[float, float, float]:
    """(ratio, low, high): seed by seed value / baseline value (odds / odds for a ``share``),
    their geometric mean and its t-interval on the log scale. The models of one seed share
    initial weights and batches, so the pairs remove the spread the seeds have in common; two
    unpaired intervals of three seeds each would need the seeds' whole spread on both sides.
    NaN where under two pairs or any value is not positive (a share not inside (0, 1))."""
    v, b = np.asarray(values, dtype=np.float64), np.asarray(base, dtype=np.float64)
    if v.size < 2 or v.size != b.size:
        return math.nan, math.nan, math.nan
    if share:
        if not (((v > 0) & (v < 1)).all() and ((b > 0) & (b < 1)).all()):
            return math.nan, math.nan, math.nan
        v, b = v / (1 - v), b / (1 - b)
    if not ((v > 0).all() and (b > 0).all()):
        return math.nan, math.nan, math.nan
    mean, low, high = t_interval(np.log(v / b), level)
    return math.exp(mean), math.exp(low), math.exp(high)


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
    """Per normaliser, per limit (and the held-out perplexity, its cost): the mean over its seeds'
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
            return math.nan, math.nan, math.nan, len(ms), False, False, ()
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
        return mean, low, high, len(ms), censored, logs, tuple(float(v) for v in lows)

    keys = [*LIMITS, *BESIDE]
    stats = {n: {k: summary(ms, k) for k in keys} for n, ms in per_seed.items()}
    withheld_of = dict(withheld_by or {})
    out: dict[str, dict[str, SeedMeasure]] = {}
    for name, ms in per_seed.items():
        out[name] = {}
        for key in keys:
            mean, low, high, n, censored, logs, values = stats[name][key]
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
                out[name][key] = SeedMeasure(
                    mean, low, high, n, found, censored, logs, values, r, r_low, r_high
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
            out[name][key] = SeedMeasure(mean, low, high, n, found, censored, logs, values)
    for key, label in (("perplexity", "perplexity_cost"), ("sink", "sink_change")):
        for name, change in paired_differences(per_seed, baseline, key, level).items():
            out[name][label] = change
    return out


def paired_differences(
    per_seed: Mapping[str, list[Mapping[str, Any]]], baseline: str, key: str, level: float
) -> dict[str, SeedMeasure]:
    """Per normaliser, ``key``'s difference to the baseline's, seed by seed (the i-th entries of
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


def shown_difference(m: SeedMeasure) -> str:
    """A paired difference as '+x [+low, +high]', or '+x' where there is no interval."""
    if math.isnan(m.mean):
        return "n/a"
    if math.isnan(m.low):
        return f"{m.mean:+.3g}"
    return f"{m.mean:+.3g} [{m.low:+.3g}, {m.high:+.3g}]"


def shown_over_seeds(m: SeedMeasure) -> str:
    """'mean [low, high]', or the mean alone where there is no interval; '>= mean' where the
    mean is of lower ends (a censored seed)."""
    if math.isnan(m.mean):
        return "n/a"
    mean = (">= " if m.lower_bound else "") + f"{m.mean:.3g}"
    if math.isnan(m.low):
        return mean
    paired = (
        ""
        if math.isnan(m.ratio_low)
        else f"; paired ratio x{m.ratio:.3g} [{m.ratio_low:.3g}, {m.ratio_high:.3g}]"
    )
    return f"{mean} [{m.low:.3g}, {m.high:.3g}]{paired}"


def seed_order(m: SeedMeasure, base: SeedMeasure, baseline: str) -> str:
    """'every seed below <baseline>'s (permutation p = 1/10)' where all of a rule's seeds lie on
    one side of all the baseline's, else ''. The t-intervals can miss it when the seeds spread by
    orders of magnitude; the order alone has the exact p of all n rule values falling on one
    side or the other of m baseline values by chance, 2 / C(n + m, n) (the side is read off the
    data, so both count)."""
    if len(m.values) < 2 or len(base.values) < 2:
        return ""
    if max(m.values) < min(base.values):
        side = "below"
    elif min(m.values) > max(base.values):
        side = "above"
    else:
        return ""
    p = 2 / math.comb(len(m.values) + len(base.values), len(m.values))
    return f"every seed {side} {baseline}'s, permutation p = {p:.2g}"


def answer_line_over_seeds(
    key: str, header: str, over: Mapping[str, Mapping[str, SeedMeasure]], baseline: str
) -> str:
    """One limit's answer on the page from the verdicts over the seeds: the baseline's mean and
    interval, then the other normalisers grouped by verdict."""
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
            return f"{n} ({shown_over_seeds(m)}{'; ' + order if order else ''})"

        names = [named(n, m) for n, m in others.items() if m.verdict == v]
        parts.append(f"{v[0].upper()}{v[1:]}: {', '.join(names)}.")
    return " ".join(parts)


# ------------------------------------------------------------------ which rule to use when
RATIO_WORD = "the configured ratio"


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
    table: pl.DataFrame, baseline: str, notes: Mapping[str, str] | None = None
) -> str:
    """The "which rule to use when" summary, generated from the table over the seeds (the seeds
    CSV: ``normalizer``, ``seeds``, each limit's ``<key>_verdict``, and the paired differences
    ``perplexity_cost_*`` and ``sink_change_*``). One Markdown item per limit: the rules whose
    interval is apart from the baseline's in the paper's direction ('relaxes'), cheapest first
    with their perplexity cost, and those that tighten it; 'no difference shown' where none
    relaxes it; no verdict for the orientation-free limit. Then the sink and the perplexity."""
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
        tighten = [r["normalizer"] for r in rows if r.get(f"{key}_verdict") == TIGHTENS]
        compared = [r for r in rows if r.get(f"{key}_verdict") in (NO_DIFFERENCE, TIGHTENS)]
        apart = sorted(
            {f"{r['normalizer']}: {r.get(f'{key}_verdict')}" for r in rows}
            - {f"{r['normalizer']}: {r.get(f'{key}_verdict')}" for r in compared}
        )
        if relax:
            text = f"{lead} {_named(relax, notes)}."
        elif rows and all(r.get(f"{key}_verdict") == ONE_SEED for r in rows):
            text = f"{lead} one seed: no interval, so no difference from {baseline} is shown."
        else:
            # no shown difference is not a shown equivalence: say how many rules were compared
            text = (
                f"{lead} no rule is shown to relax it: of {len(compared)} rules compared with "
                f"{baseline}, none has a paired ratio {RATIO_WORD} beyond it in the paper's "
                "direction."
            )
            if apart:
                text += f" Not compared: {'; '.join(apart)}."
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
        text = (
            f"{lead} {baseline}'s models show no sink to remove: their first token's weight is "
            f"{base.get('sink_mean', math.nan):.3g} [{base_low:.3g}, "
            f"{base.get('sink_high', math.nan):.3g}] times a uniform row's, not shown above it, "
            "so no rule is named for removing one."
        )
    elif sink:
        text = f"{lead} lower than {baseline}'s: {_named(sink, notes)}."
    else:
        text = f"{lead} no rule's first-token weight is shown lower than {baseline}'s."
    if more:
        text += f" Higher than {baseline}'s: {', '.join(more)}."
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
    lines.append(text)
    return "\n".join(lines)
