"""Table 2: normalizer x diagnostic at the largest L (and N_s/N at beyond.n), from the summaries
of the what-if normalizers (normalizer_summary.summarise_normalizers)."""

import polars as pl


def table2(
    by_length: pl.DataFrame, separability: pl.DataFrame, n: int, order: list[str]
) -> pl.DataFrame:
    """One row per normalizer, in ``order``: its medians at the largest L, the change of its
    largest weight from the smallest L, and its N_s/N at N = ``n``."""
    if "N_crit_below_over_L" not in by_length.columns:
        # a summary written before the normalizer job walked the list: N_crit was exact
        by_length = by_length.with_columns(N_crit_below_over_L=pl.col("N_crit_over_L"))
    at_l = by_length.filter(pl.col("L") == by_length["L"].max())
    ns = separability.filter(pl.col("N") == n).select(
        "normalizer",
        pl.col("ratio_mean").alias("ns_ratio"),
        pl.col("zero_weight_selected_mean").alias("ns_zero_weight"),
        pl.col("ratio_of_selected_mean").alias("ns_of_selected"),
    )
    growth = by_length.group_by("normalizer").agg(
        (
            pl.col("max_weight_median").sort_by("L").last()
            / pl.col("max_weight_median").sort_by("L").first()
        ).alias("max_weight_change")
    )
    table = (
        at_l.join(ns, on="normalizer", how="left")
        .join(growth, on="normalizer", how="left")
        .select(
            "normalizer",
            "kind",
            pl.col("max_weight_median").alias("max_weight"),
            "max_weight_change",
            pl.col("support_fraction_median").alias("support_fraction"),
            pl.col("row_sum_mean").alias("row_sum"),
            pl.col("entropy_median").alias("entropy"),
            pl.col("jacobian_norm_median").alias("jacobian_norm"),
            pl.col("jacobian_norm_max").alias("jacobian_norm_max"),
            # a censored search as the lower bound it is, never "n/a" (review 28); no N_crit
            # where the KS test cannot reject at the sample count (review 29)
            pl.when(~pl.col("N_crit_testable").fill_null(True))
            .then(pl.lit("not testable"))
            .when(pl.col("N_crit_censored").fill_null(False))
            # searched up to L - 1 with no pass: N_crit >= L (= L where every key weighs > 0: at
            # N = L d~ equals its Monte-Carlo E), so its share is at least 1 (review 31)
            # (review 31; it was printed as >= (L - 1) / L)
            .then(pl.lit(">= 1 (censored: no N of the list passed)"))
            # a first pass of the list is known to its cell (review 36)
            .when(pl.col("N_crit_below_over_L") < pl.col("N_crit_over_L"))
            .then(
                pl.format(
                    "({}, {}]",
                    pl.col("N_crit_below_over_L").round(4),
                    pl.col("N_crit_over_L").round(4),
                )
            )
            .otherwise(pl.col("N_crit_over_L").round(4).cast(pl.String))
            .alias("N_crit_over_L"),
            "ns_ratio",
            "ns_zero_weight",
            "ns_of_selected",
        )
    )
    return table.sort(pl.col("normalizer").replace_strict(order, list(range(len(order)))))


def table2_header(run: dict, by_length: pl.DataFrame, separability: pl.DataFrame, n: int) -> str:
    L, lmin = by_length["L"].max(), by_length["L"].min()
    return (
        f"Normalizers on {run['model']}'s logits ({run['weights']}), {run['corpus']}, last-row protocol "
        f"(the analysed row of each (layer, chunk, head), whatever analysis.protocol): medians at L = {L}; "
        f"max_weight_change = median max weight at L = {L} over that at L = {lmin}; ns_ratio = mean N_s/N at N = {n} "
        f"(L = {separability['L'][0]}); ns_zero_weight = mean number of those top-{n} tokens with weight 0, "
        "which under analysis.zero_weight not_selected (the default) are never selected nor "
        "distinguishable, and under literal are selected (N stays the denominator, so under "
        "not_selected "
        "a sparse rule's ns_ratio is capped by its support / N); ns_of_selected = N_s over the tokens "
        "actually selected. N_crit_over_L = the critical N at that L over L: Algorithm 3's first N "
        "of Table 1's N list (analysis.all_rows.critical_n_fractions) whose KS test "
        "(analysis.critical_n.ks_alpha) does not reject the last rows' d~ against the Monte-Carlo "
        "E (not the paper's printed term), walked in order, printed as its cell (the list's N "
        "before it, N_crit] over L; '>= 1 (censored: no N of the list passed)' where no N of the "
        "list up to L - 1 passed (N_crit >= L; = L where every key has a weight > 0, as at N = L "
        "d~ then equals E); 'not testable' where the "
        "KS test cannot reject at alpha over the samples per side (beyond.max_samples). "
        "A what-if re-normalization of logits learned under softmax, not a retrained model; "
        "Self-Adjust Softmax rows do not sum to 1 (row_sum), its entropy is of the renormalized row."
    )
