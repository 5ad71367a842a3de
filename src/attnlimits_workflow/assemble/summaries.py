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
    describe_tolerance,
    log10_slack,
)
from attnlimits.critical import censored_slope

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
    proof_needs: str = "sum_to_one",
    no_verdict: str = "",
) -> dict:
    """Outcomes of one bound check (a column of attnlimits.checks outcomes): checked counts the
    samples where the check could fail (holds or violated); vacuous those where it could not
    on any data (``vacuous_reason`` says why). ``slack`` = (value column, bound column, upper):
    the median over the applicable samples of log10(bound / value) (upper) or log10(value /
    bound), how hard the data pushed on the bound. Where the table carries per-row outcome
    counts (the all-rows protocol: "<check>_violated_rows", ...), the rows are counted too.
    ``proved``: why the bound holds on any data (Table 1 then calls it vacuous), and
    ``proof_needs`` what of the weights the proof assumes: "sum_to_one" (a softmax over the keys
    alone: not a model with an attention sink), "any" (recomputed from the logits, or only
    non-negative weights) or "literal_zero_weight" (any weights, with a zero-weight top-N key
    counted as selected: analysis.zero_weight literal); ``no_verdict``:
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
        "proof_needs": proof_needs if proved else "",
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
            untestable = (
                int(g[f"{name}_not_testable_rows"].sum())
                if f"{name}_not_testable_rows" in g.columns
                else 0
            )
            total = int(g[f"{name}_rows"].sum() if f"{name}_rows" in g.columns else g["rows"].sum())
            # the rows that could fail, as bound_detail counts them; the others named
            parts.append(
                f"N={n}: {bad} of {total - vac - untestable} testable rows ({vac} vacuous, "
                f"{untestable} not testable)"
            )
        else:
            # an all-None column reads back as Null: compare as strings (as count() does)
            c = g[column].cast(pl.String)
            # the samples that could fail (holds or violated), as count() counts them checked;
            # the others are named
            checked = int(c.is_in([HOLDS, VIOLATED]).sum())
            parts.append(
                f"N={n}: {int((c == VIOLATED).sum())} of {checked} samples "
                f"({int((c == VACUOUS).sum())} vacuous, {int((c == NOT_TESTABLE).sum())} not "
                "testable)"
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
    slope_lower_bound with each censored length at its top_N + 1 (its N_crit is larger, so the slope
    through every length is at least this; equal to fitted_slope when none is censored)."""
    keys = ("L", "masked", "expectation")
    search = crit.filter(pl.col("step") == "search")
    summary = (
        search.group_by(*keys)
        .agg(
            pl.col("N_crit").first(),
            *([pl.col("N_crit_low").first()] if "N_crit_low" in search.columns else []),
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
    summary = summary.join(ks_outcomes_around_the_pass(crit, summary), on=keys, how="left")
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


def ks_outcomes_around_the_pass(crit: pl.DataFrame, summary: pl.DataFrame) -> pl.DataFrame:
    """Per (L, masked, expectation), the evaluated KS p-values (the search's and the fixed
    fractions') on either side of the first pass, which a monotone outcome in N would keep on
    their side of the level: least_p_above and N_least_p_above, the smallest p at an N above
    N_crit; most_p_below and N_most_p_below, the largest p at an N below the pass's grid cell
    (below N_crit_low; any N up to top_N where the search found no pass). Null where no N was
    evaluated there. Table 1 holds them against the level (critical_cells.non_monotone_text)."""
    keys = ("L", "masked", "expectation")
    bounds = summary.select(
        *keys,
        pl.col("N_crit").alias("_pass"),
        (pl.col("N_crit_low") if "N_crit_low" in summary.columns else pl.col("N_crit")).alias(
            "_low"
        ),
        pl.col("top_N").alias("_top"),
    )
    tried = crit.filter(pl.col("step").is_in(["search", "fixed_fraction"])).select(
        *keys, "N", "p_value"
    )
    tried = tried.join(bounds, on=keys, how="inner")
    above = tried.filter(pl.col("_pass").is_not_null() & (pl.col("N") > pl.col("_pass")))
    below = tried.filter(
        pl.when(pl.col("_pass").is_null())
        .then(pl.col("N") <= pl.col("_top"))
        .otherwise(pl.col("N") < pl.col("_low"))
    )

    def extreme(frame: pl.DataFrame, name: str, descending: bool) -> pl.DataFrame:
        return (
            frame.sort(*keys, "p_value", "N", descending=[False] * 3 + [descending, False])
            .group_by(*keys, maintain_order=True)
            .first()
            .select(*keys, pl.col("p_value").alias(name), pl.col("N").alias(f"N_{name}"))
        )

    return (
        bounds.select(keys)
        .join(extreme(above, "least_p_above", False), on=keys, how="left")
        .join(extreme(below, "most_p_below", True), on=keys, how="left")
    )


def critical_n_replicates(crit: pl.DataFrame) -> pl.DataFrame:
    """The critical-N searches rerun on bootstrap resamples of their units (the analysis's rows
    of step "replicate"): replicate, L, masked, expectation, N_crit (null: censored), censored,
    top_N; empty when the analysis ran none."""
    columns = ("replicate", "L", "masked", "expectation", "N_crit", "censored", "top_N")
    # the least N_crit each resample's grid cell allows, where the analysis recorded it
    columns += ("N_crit_low",) * ("N_crit_low" in crit.columns)
    if "replicate" not in crit.columns:
        return pl.DataFrame(schema={c: crit.schema.get(c, pl.Int64) for c in columns})
    return (
        crit.filter(pl.col("step") == "replicate")
        .select(*columns)
        .sort("masked", "expectation", "L", "replicate")
    )


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
        table,
        by,
        present,
        resamples=bootstrap["resamples"],
        seed=bootstrap["seed"],
        unit=bootstrap.get("unit", "head"),
    )
