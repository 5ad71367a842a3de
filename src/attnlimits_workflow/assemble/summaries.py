"""Small summary tables of one analysis (per L / N / T aggregates, critical N) and its
bound-violation counts; the figure and table rules read only these."""

import numpy as np
import polars as pl

from attnlimits.checks import (
    HOLDS,
    NOT_TESTABLE,
    RTOL_FLOAT64,
    VACUOUS,
    VIOLATED,
    check_bound,
    describe_tolerance,
    log10_slack,
)
from attnlimits.critical import censored_slope
from attnlimits.gradient import COROLLARY3_WIDE_ROW_KEYS
from attnlimits.separability import UPPER_BOUND_FLOOR

from .replicates import replicate_summaries


def spread(col: str) -> list[pl.Expr]:
    c = pl.col(col)
    return [
        c.median().alias(f"{col}_median"),
        c.quantile(0.25).alias(f"{col}_q25"),
        c.quantile(0.75).alias(f"{col}_q75"),
        c.min().alias(f"{col}_min"),
        c.max().alias(f"{col}_max"),
        c.mean().alias(f"{col}_mean"),
    ]


def per_group(
    frame: pl.DataFrame, by: tuple[str, ...], aggregates: list[pl.Expr], order: tuple[str, ...]
) -> pl.DataFrame:
    """One row per ``by`` group, sorted by ``order``: its sample count ("samples") and the
    ``aggregates``. A NaN value is left out of every aggregate, as the bootstrap replicates
    leave it out (assemble.replicates): polars' median would count it the largest value and its
    mean would be NaN, so a point and its resamples would disagree by construction."""
    floats = pl.col(pl.Float32, pl.Float64)
    frame = frame.with_columns(floats.fill_nan(None))
    return frame.group_by(*by).agg(pl.len().alias("samples"), *aggregates).sort(*order)


def count(
    frame: pl.DataFrame,
    column: str,
    bound: str,
    where: str,
    rtol: float = RTOL_FLOAT64,
    *,
    slack: tuple[str, str, bool] | None = None,
    vacuous_reason: str = "",
    note: str = "",
    proved: str = "",
    no_verdict: str = "",
) -> dict:
    """Outcomes of one bound check (a column of attnlimits.checks outcomes): checked counts the
    samples where the check could fail (holds or violated); vacuous those where it could not
    on any data (``vacuous_reason`` says why). ``slack`` = (value column, bound column, upper):
    the median over the applicable samples of log10(bound / value) (upper) or log10(value /
    bound), how hard the data pushed on the bound. Where the table carries per-row outcome
    counts (the all-rows protocol: "<check>_violated_rows", ...), the rows are counted too.
    ``proved``: why the bound holds on any data (Table 1 then calls it vacuous); ``no_verdict``:
    why its count decides nothing about the paper's claim (counted, never a verdict)."""
    # a column of no outcomes at all (every sample None) is read back as Null, not String
    frame = frame.with_columns(pl.col(column).cast(pl.String))
    col = frame[column]
    name = column.removesuffix("_check")
    row_counts = {
        f"{label}_rows": int(frame[f"{name}_{label}_rows"].sum())
        if f"{name}_{label}_rows" in frame.columns
        else None
        for label in ("violated", "not_testable", "vacuous")
    }
    median_slack = None
    if slack is not None:
        value, limit, upper = slack
        applicable = frame.filter(col.is_not_null())
        values = log10_slack(
            applicable[value].to_numpy(), applicable[limit].to_numpy(), upper=upper
        )
        values = values[~np.isnan(values)]
        median_slack = float(np.median(values)) if values.size else None
    return {
        "bound": bound,
        "where": where,
        "unit": "N values" if where == "each N" else "samples",
        "checked": int(col.is_in([HOLDS, VIOLATED]).sum()),
        "violations": int((col == VIOLATED).sum()),
        "not_testable": int((col == NOT_TESTABLE).sum()),
        "vacuous": int((col == VACUOUS).sum()),
        "not_applicable": int(col.is_null().sum()),
        "tolerance": describe_tolerance(rtol),
        "median_log10_slack": median_slack,
        "vacuous_reason": vacuous_reason,
        "note": note,
        "rows": int(frame[f"{name}_rows"].sum())
        if f"{name}_rows" in frame.columns
        else (int(frame["rows"].sum()) if "rows" in frame.columns else None),
        **row_counts,
        "mask_only_rows": int(frame["mask_only_rows"].sum())
        if "mask_only_rows" in frame.columns
        else None,
        "by_n": "",
        "proved": proved,
        "no_verdict": no_verdict,
        **head_counts(frame, col),
    }


def head_counts(frame: pl.DataFrame, outcomes: pl.Series) -> dict[str, int | None]:
    """The distinct (layer, head) among the samples where the check could fail, and among those
    that violate it; None where the table has no head columns."""
    if not {"layer", "head"} <= set(frame.columns):
        return {"heads_checked": None, "heads_violated": None}
    heads = frame.select("layer", "head")
    checked = heads.filter(outcomes.is_in([HOLDS, VIOLATED]))
    return {
        "heads_checked": checked.unique().height,
        "heads_violated": heads.filter(outcomes == VIOLATED).unique().height,
    }


def by_n(frame: pl.DataFrame, column: str) -> str:
    """Per N, the violating units ("rows" where counted, else samples) against the units where
    the check could fail: "N=2: 3 of 40 rows; ...", N = 1 included (set apart by the caller)."""
    name = column.removesuffix("_check")
    parts = []
    for (n,), g in sorted(frame.group_by("N"), key=lambda kv: kv[0][0]):
        if f"{name}_violated_rows" in g.columns:
            bad = int(g[f"{name}_violated_rows"].sum())
            vac = int(g[f"{name}_vacuous_rows"].sum())
            total = int(g[f"{name}_rows"].sum() if f"{name}_rows" in g.columns else g["rows"].sum())
            parts.append(f"N={n}: {bad} of {total} rows ({vac} vacuous)")
        else:
            c = g[column]
            parts.append(
                f"N={n}: {int((c == VIOLATED).sum())} of {g.height} samples "
                f"({int((c == VACUOUS).sum())} vacuous)"
            )
    return "; ".join(parts)


def violation_table(rows: list[dict]) -> pl.DataFrame:
    """One row per bound check (rows of :func:`count`), with the violated share of the checked."""
    return pl.DataFrame(rows).with_columns(
        (pl.col("violations") / pl.col("checked")).alias("violation_fraction")
    )


def critical_n_summary(crit: pl.DataFrame) -> pl.DataFrame:
    """One row per (L, reading of masked keys, expectation): Algorithm 3's first passing N (null
    and censored when no N up to top_N passed), the KS distance D at each fixed fraction of L
    (columns D_at_<f>L), and per (reading, expectation) two slopes through the origin:
    fitted_slope through the lengths where N_crit was found (NaN if none), and
    slope_lower_bound with each censored length at its top_N (its N_crit is larger, so the slope
    through every length is at least this; equal to fitted_slope when none is censored)."""
    keys = ("L", "masked", "expectation")
    search = crit.filter(pl.col("step") == "search")
    summary = (
        search.group_by(*keys)
        .agg(
            pl.col("N_crit").first(),
            pl.col("censored").first(),
            pl.col("top_N").first(),
            pl.col("evaluations").first(),
            pl.col("p_value").max().alias("max_p_value"),
            pl.col("ks_samples").first(),
            pl.col("ks_min_pvalue").first(),
        )
        .sort("masked", "expectation", "L")
    )
    fixed = crit.filter(pl.col("step") == "fixed_fraction")
    for f in sorted(fixed["fraction"].unique().to_list()):
        at = fixed.filter(pl.col("fraction") == f).select(
            *keys, pl.col("ks_statistic").alias(f"D_at_{f:g}L")
        )
        summary = summary.join(at, on=keys, how="left")
    summary = summary.with_columns((pl.col("N_crit") / pl.col("L")).alias("N_crit_over_L"))
    slopes = []
    for (masked, kind), g in summary.group_by("masked", "expectation"):
        slope = censored_slope(
            g["L"].to_numpy(),
            g["N_crit"].cast(pl.Float64).to_numpy(),
            g["censored"].to_numpy(),
            g["top_N"].to_numpy(),
        )
        slopes.append(
            {
                "masked": masked,
                "expectation": kind,
                "fitted_slope": slope.found,
                "slope_lower_bound": slope.at_least,
                "censored_lengths": slope.censored,
            }
        )
    return summary.join(pl.DataFrame(slopes), on=["masked", "expectation"], how="left").sort(
        "masked", "expectation", "L"
    )


def summarise_distance(distance: pl.DataFrame, critical_n: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per (L, N) spreads of the distance samples, the critical-N summary and the counts of
    Theorem 1's bound checks."""
    d = distance
    cols = (
        "distance",
        "upper_bound",
        "expectation_term",
        "mc_expectation",
        "epsilon_bound",
        "selected_mass",
        # all_rows only: the other choice of analysis.all_rows.masked (Fig. 2a)
        "distance_other_masked",
        "expectation_term_other_masked",
    )
    cols = tuple(c for c in cols if c in d.columns)
    summary = per_group(d, ("L", "N"), [e for c in cols for e in spread(c)], ("L", "N"))
    critical = critical_n_summary(critical_n)
    return {
        "distance": summary,
        "critical_n": critical,
        "critical_n_replicates": critical_n_replicates(critical_n),
        "violations": distance_violations(d),
    }


def critical_n_replicates(crit: pl.DataFrame) -> pl.DataFrame:
    """The critical-N searches rerun on bootstrap resamples of their units (the analysis's rows
    of step "replicate"): replicate, L, masked, expectation, N_crit (null: censored), censored,
    top_N; empty when the analysis ran none."""
    columns = ("replicate", "L", "masked", "expectation", "N_crit", "censored", "top_N")
    if "replicate" not in crit.columns:
        return pl.DataFrame(schema={c: crit.schema.get(c, pl.Int64) for c in columns})
    return (
        crit.filter(pl.col("step") == "replicate")
        .select(*columns)
        .sort("masked", "expectation", "L", "replicate")
    )


def distance_violations(d: pl.DataFrame) -> pl.DataFrame:
    """The counts of Theorem 1's two bound checks over the distance samples (or heads)."""
    # all_rows: E is drawn on analysis.all_rows.mc_rows rows, and the check holds it against
    # the term and bound of those same rows
    all_rows = "expectation_term_mc_rows" in d.columns
    matched = "_mc_rows" if all_rows else ""
    d = d.with_columns(
        (pl.col("mc_expectation") - pl.col(f"expectation_term{matched}")).alias("epsilon_residual"),
        pl.col(f"epsilon_bound{matched}").alias("epsilon_bound_compared"),
    )
    return violation_table(
        [
            count(
                d,
                "upper_bound_check",
                "Theorem 1.1 fixed-set upper bound on d~",
                "every (L, N) sample",
                slack=("distance", "upper_bound", True),
                proved="Theorem 1.1 holds for any x and any weights that sum to one, with I the "
                "top-N set (a search found no case above rounding: docs/paper-notes.md section 16)",
            ),
            count(
                d,
                "epsilon_bound_check",
                "Theorem 1.2 epsilon bound (Monte-Carlo E, 3 s.e. slack)",
                "every (L, N) sample",
                slack=("epsilon_residual", "epsilon_bound_compared", True),
                vacuous_reason="one-sided: E - term - 3 s.e. <= 0, where the printed term lies "
                "above E, passes whatever the bound (>= 0) says",
                note=EPSILON_HEAD_MEAN if all_rows else "",
            ),
        ]
    )


# all_rows: one check per head, of means over the rows E is drawn on (a per-row check would need
# many draws per row to know each row's E)
EPSILON_HEAD_MEAN = (
    "per head, on means over the rows E is drawn on: a violated head has a violating row, but a "
    "head that holds may still hide one"
)


def summarise_separability(separability: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per (L, N) spreads of N_s/N and Theorem 2's bounds, and the counts of its checks: per
    sample (N = 1 apart) and on the mean per N."""
    s = separability
    summary = per_group(
        s,
        ("L", "N"),
        [
            *spread("ratio"),
            *(spread("ratio_other_masked") if "ratio_other_masked" in s.columns else []),
            *spread("lower_bound"),
            *spread("upper_bound"),
            pl.col("zero_weight_selected").mean().alias("zero_weight_selected_mean"),
            *[
                pl.col(c).sum().alias(c)
                for c in ("zero_radius", "negative_xi_square", "no_outside_token", "mask_only_rows")
                if c in s.columns
            ],
        ],
        ("N",),
    )

    # Theorem 2 bounds E[N_s]/N; per-sample ratios are counted too, but the mean is what it bounds.
    # N = 1 is left out: N_s/N = 1 there on every row, which meets the lower bound 1 - 0 = 1 as
    # an identity and exceeds the upper bound exp(-r^2/16M^2) < 1 on any data with r > 0.
    beyond_one = summary.filter(pl.col("N") > 1)

    def mean_check(bound: str, **kind) -> list:
        # N_s/N lies in [0, 1]: a lower bound <= 0 or an upper bound >= 1 cannot fail
        return check_bound(
            beyond_one["ratio_mean"].to_numpy(),
            beyond_one[bound].to_numpy(),
            rtol=RTOL_FLOAT64,
            **kind,
        ).tolist()

    means = beyond_one.with_columns(
        pl.Series(
            "mean_lower_check",
            mean_check("lower_bound_mean", upper=False, floor=0.0, bound_ceiling=1.0),
            dtype=pl.String,
        ),
        pl.Series(
            "mean_upper_check",
            mean_check("upper_bound_mean", upper=True, ceiling=1.0, bound_floor=UPPER_BOUND_FLOOR),
            dtype=pl.String,
        ),
    )
    floor_reason = (
        f"the bound is never below e^(-1/16) = {UPPER_BOUND_FLOOR:.3f}: an N_s/N at or below it "
        "cannot violate it"
    )
    # N = 1: N_s/N is 1 on every row (the one selected token is s itself): the lower bound is
    # then 1 as well (vacuous), and the upper bound < 1 is violated on any data with r > 0, so
    # its violations say nothing about the model or about larger N: counted apart.
    first, rest = s.filter(pl.col("N") == 1), s.filter(pl.col("N") > 1)
    rows = []
    lower_reasons = {
        "N >= 2": "a lower bound <= 0 cannot fail (N_s/N >= 0), and N_s/N = 1 meets any bound",
        "N = 1": "N_s/N = 1 at N = 1, which meets the bound 1 - 0 = 1 identically",
    }
    # Per sample, the lower bound holds on any data (docs/paper-notes.md section 16): with delta
    # the smallest distance over the context and M the largest norm, x_j . x_k <= M^2 -
    # delta^2 / 2, so ||s - alpha_i x_i|| <= xi_i for every token, and the tokens farther than r
    # number at most sum_i xi_i / r. The mean check is not proved: its samples with degenerate
    # bounds are left out of the bound's mean but not of N_s/N's.
    lower_proved = (
        "Eq. (11)'s lower bound holds on every row of non-negative weights: each token's distance "
        "from s is at most its xi_i (delta the smallest distance over the context)"
    )
    # Eq. (11) bounds E[N_s]/N: one row's N_s/N above it contradicts nothing, and a head with
    # many rows has some row with N_s = N at small N whatever it learnt (the bound is >= 0.939):
    # counted, never a verdict. The rows on mean N_s/N are the theorem's own quantity.
    upper_no_verdict = {
        "N >= 2": "Eq. (11) bounds E[N_s]/N, not one sample's N_s/N, and with the bound >= 0.939 "
        "a sample with N_s = N exceeds it at N < 16, so a head with many rows has one whatever it "
        "learnt; the rows on mean N_s/N test the theorem",
        "N = 1": "N_s/N = 1 at N = 1 on every row: above the bound on any data with r > 0, a "
        "counterexample to the theorem (docs/paper-notes.md section 10), not a finding about "
        "the model",
    }
    upper_notes = {
        "N >= 2": "",
        "N = 1": "at N = 1, N_s/N = 1 exceeds the bound exp(-r^2/16M^2) < 1 on any data with "
        "r > 0: a violation of the theorem, not a property of the model",
    }
    for part, label in ((rest, "N >= 2"), (first, "N = 1")):
        if not part.height:
            continue
        rows += [
            count(
                part,
                "lower_bound_check",
                f"Theorem 2 lower bound, per-sample N_s/N ({label})",
                "every (N) sample",
                slack=("ratio", "lower_bound", False),
                vacuous_reason=lower_reasons[label],
                proved=lower_proved,
            )
            | {"by_n": by_n(part, "lower_bound_check")},
            count(
                part,
                "upper_bound_check",
                f"Theorem 2 upper bound, per-sample N_s/N ({label})",
                "every (N) sample",
                slack=("ratio", "upper_bound", True),
                vacuous_reason=floor_reason,
                note=upper_notes[label],
                no_verdict=upper_no_verdict[label],
            )
            | {"by_n": by_n(part, "upper_bound_check")},
        ]
    rows += [
        count(
            means,
            "mean_lower_check",
            "Theorem 2 lower bound on mean N_s/N",
            "each N",
            slack=("ratio_mean", "lower_bound_mean", False),
        ),
        count(
            means,
            "mean_upper_check",
            "Theorem 2 upper bound on mean N_s/N",
            "each N",
            slack=("ratio_mean", "upper_bound_mean", True),
            vacuous_reason=floor_reason,
        ),
    ]
    return {"separability": summary, "violations": violation_table(rows)}


def few_key_rows_decide(once: pl.DataFrame) -> str:
    """Why Corollary 3's check over every row gives no verdict, where it does not: when more
    (T) samples violate it than violate it on the rows with at least COROLLARY3_WIDE_ROW_KEYS
    visible keys, the rows with 2-4 keys (a causal head's first rows) decide it, and those
    violate it whatever the head learnt once T makes them near-uniform: with 2 keys ||J|| =
    2 a_1 a_2 / T > 1/(4T) whenever a_1 a_2 > 1/8. The wide rows' check is the verdict then."""
    if "jacobian_paper_wide_check" not in once.columns:
        return ""
    full = (once["jacobian_paper_check"] == "violated").sum()
    wide = (once["jacobian_paper_wide_check"] == "violated").sum()
    if full <= wide:
        return ""
    return (
        f"{full - wide} of its violating samples violate it only on rows with fewer than "
        f"{COROLLARY3_WIDE_ROW_KEYS} visible keys, which exceed 1/(4T) on any near-uniform row "
        "(2 keys: ||J|| = 2 a_1 a_2 / T > 1/(4T) when a_1 a_2 > 1/8), whatever the head learnt: "
        f"the check on rows with >= {COROLLARY3_WIDE_ROW_KEYS} visible keys is the verdict"
    )


def summarise_gradient(gradient: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per (T, eps) the largest and median sensitivity and ||J||, and the counts of Corollary
    3's checks (and of the Gershgorin bound)."""
    g = gradient
    summary = per_group(
        g,
        ("T", "eps"),
        [
            pl.col("g_max").max().alias("g_max_over_heads"),
            pl.col("g_max").median().alias("g_max_median"),
            pl.col("jacobian_norm").max().alias("jacobian_norm_max"),
            pl.col("jacobian_norm").median().alias("jacobian_norm_median"),
            pl.col("paper_bound").first(),
            pl.col("gershgorin_bound").first(),
        ],
        ("eps", "T"),
    )
    once = g.filter(pl.col("eps") == g["eps"].min())  # the Jacobian does not depend on eps
    wide = (
        [
            count(
                once,
                "jacobian_paper_wide_check",
                f"Corollary 3 min{{1/(4T), sqrt 2}} on exact ||J||, rows with >= {COROLLARY3_WIDE_ROW_KEYS} "
                "visible keys",
                "every (T) sample",
                slack=("jacobian_norm", "paper_bound", True),
            )
        ]
        if "jacobian_paper_wide_check" in once.columns
        else []
    )
    violations = violation_table(
        wide
        + [
            count(
                once,
                "jacobian_paper_check",
                "Corollary 3 min{1/(4T), sqrt 2} on exact ||J||",
                "every (T) sample",
                slack=("jacobian_norm", "paper_bound", True),
                no_verdict=few_key_rows_decide(once),
            ),
            count(
                g,
                "g_paper_check",
                "Corollary 3 min{1/(4T), sqrt 2} on finite-difference g",
                "every (T, eps) sample",
                slack=("g_max", "paper_bound", True),
                vacuous_reason="g <= sqrt 2 / eps for any logits: at large eps the bound lies "
                "above every value g can take",
            ),
            count(
                once,
                "jacobian_gershgorin_check",
                "1/(2T) (Gershgorin, this project) on exact ||J||",
                "every (T) sample",
                slack=("jacobian_norm", "gershgorin_bound", True),
                vacuous_reason="||J|| <= 1/(2T) for every logit vector: the bound is the "
                "quantity's own ceiling (checks the code, not the model)",
            ),
        ]
    )
    return {"gradient": summary, "violations": violations}


# summarise.py's params.kind -> its function; each takes the rule's inputs by name (one frame
# each) and returns its outputs by name.
SUMMARIES = {
    "distance": summarise_distance,
    "separability": summarise_separability,
    "gradient": summarise_gradient,
}


# summarise.py's params.kind -> (its input table, the groups, the summary columns Table 1's claims
# read: name -> (per-sample column, aggregation)), recomputed on each bootstrap resample. A
# column absent from a run's tables (the other reading of masked keys) is left out.
REPLICATED = {
    "distance": (
        "distance",
        ("L", "N"),
        {
            "distance_median": ("distance", "median"),
            "distance_other_masked_median": ("distance_other_masked", "median"),
        },
    ),
    "separability": (
        "separability",
        ("L", "N"),
        {
            "ratio_median": ("ratio", "median"),
            "ratio_other_masked_median": ("ratio_other_masked", "median"),
            "ratio_max": ("ratio", "max"),
            "upper_bound_mean": ("upper_bound", "mean"),
        },
    ),
    "gradient": ("gradient", ("T", "eps"), {"g_max_over_heads": ("g_max", "max")}),
}


def replicates_of(
    table: pl.DataFrame,
    by: tuple[str, ...],
    statistics: dict[str, tuple[str, str]],
    bootstrap: dict,
) -> pl.DataFrame:
    """:func:`replicate_summaries` of the statistics whose column ``table`` has, under the
    analysis.bootstrap settings."""
    present = {name: spec for name, spec in statistics.items() if spec[0] in table.columns}
    return replicate_summaries(
        table, by, present, resamples=bootstrap["resamples"], seed=bootstrap["seed"]
    )
