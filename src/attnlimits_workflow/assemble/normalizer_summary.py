"""The what-if normalizers' diagnostics summarised per (normalizer, L) and per (normalizer, L, N):
Table 2 and Fig. 5 read them (rule summarise_normalizers)."""

from __future__ import annotations

import polars as pl


def summarise_normalizers(
    samples: pl.DataFrame,
    critical_n: pl.DataFrame,
    separability: pl.DataFrame,
    kinds: dict[str, str],
) -> dict[str, pl.DataFrame]:
    """The normalizer diagnostics per (normalizer, L) ("by_length", with each normalizer's
    ``kinds`` entry and its critical N / L) and N_s/N per (normalizer, L, N) ("separability")."""
    critical = critical_n
    by_length = (
        samples.group_by("normalizer", "L")
        .agg(
            pl.len().alias("samples"),
            pl.col("max_weight").median().alias("max_weight_median"),
            pl.col("max_weight").quantile(0.25).alias("max_weight_q25"),
            pl.col("max_weight").quantile(0.75).alias("max_weight_q75"),
            pl.col("jacobian_norm").median().alias("jacobian_norm_median"),
            pl.col("jacobian_norm").quantile(0.25).alias("jacobian_norm_q25"),
            pl.col("jacobian_norm").quantile(0.75).alias("jacobian_norm_q75"),
            pl.col("jacobian_norm").max().alias("jacobian_norm_max"),
            pl.col("entropy").median().alias("entropy_median"),
            (pl.col("support") / pl.col("L")).median().alias("support_fraction_median"),
            pl.col("row_sum").mean().alias("row_sum_mean"),
            pl.col("row_sum").min().alias("row_sum_min"),
            pl.col("N").first().alias("N"),
            (pl.col("distance") / pl.col("mc_expectation")).median().alias("distance_ratio_median"),
        )
        .join(
            # a walk of the list with no pass up to N = L - 1 (N_crit null) is censored, not
            # missing: its N_crit is L (review 28; at least L, review 31); a length whose KS test
            # cannot reject at its sample count has no N_crit and is neither (review 29). A first
            # pass is known to its cell [N_crit_low, N_crit] of the list (review 36; a table
            # written before the column existed came from a bisection to adjacent integers).
            critical.select(
                "normalizer",
                "L",
                "N_crit",
                (
                    pl.col("N_crit_low") if "N_crit_low" in critical.columns else pl.col("N_crit")
                ).alias("N_crit_low"),
                # a table written before the column existed searched every length
                (
                    pl.col("ks_testable")
                    if "ks_testable" in critical.columns
                    else pl.lit(True, pl.Boolean)
                ).alias("N_crit_testable"),
            ).with_columns(
                (pl.col("N_crit").is_null() & pl.col("N_crit_testable")).alias("N_crit_censored")
            ),
            on=["normalizer", "L"],
            how="left",
        )
        .with_columns(
            (pl.col("N_crit") / pl.col("L")).alias("N_crit_over_L"),
            # the cell's open low end, the list's N before the first pass, over L; N_crit / L
            # where the cell holds N_crit alone (N - 1 failed: N_crit is that integer)
            pl.when(pl.col("N_crit_low") < pl.col("N_crit"))
            .then((pl.col("N_crit_low") - 1) / pl.col("L"))
            .otherwise(pl.col("N_crit") / pl.col("L"))
            .alias("N_crit_below_over_L"),
            pl.col("normalizer").replace_strict(kinds, return_dtype=pl.String).alias("kind"),
        )
        .sort("normalizer", "L")
    )
    by_n = (
        separability.group_by("normalizer", "L", "N")
        .agg(
            pl.col("ratio").mean().alias("ratio_mean"),
            pl.col("ratio").quantile(0.25).alias("ratio_q25"),
            pl.col("ratio").quantile(0.75).alias("ratio_q75"),
            pl.col("zero_weight_selected").mean().alias("zero_weight_selected_mean"),
            pl.col("ratio_of_selected").mean().alias("ratio_of_selected_mean"),
        )
        .sort("normalizer", "N")
    )
    return {"by_length": by_length, "separability": by_n}
