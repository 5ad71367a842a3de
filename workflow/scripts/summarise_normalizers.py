"""Per (normalizer, L) aggregates of the normalizer diagnostics, and N_s/N per (normalizer, N)."""

import polars as pl

from attnlimits_workflow.jobs import job_logger, write_table

log = job_logger(snakemake, "summarise_normalizers")
inp, out = snakemake.input, snakemake.output
kinds = {name: entry["kind"] for name, entry in snakemake.params.normalizers.items()}
samples = pl.concat([pl.read_parquet(p) for p in inp.samples])
critical = pl.concat([pl.read_parquet(p) for p in inp.critical_n])
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
    .join(critical.select("normalizer", "L", "N_crit"), on=["normalizer", "L"], how="left")
    .with_columns(
        (pl.col("N_crit") / pl.col("L")).alias("N_crit_over_L"),
        pl.col("normalizer").replace_strict(kinds, return_dtype=pl.String).alias("kind"),
    )
    .sort("normalizer", "L")
)
separability = (
    pl.concat([pl.read_parquet(p) for p in inp.separability])
    .group_by("normalizer", "L", "N")
    .agg(
        pl.col("ratio").mean().alias("ratio_mean"),
        pl.col("ratio").quantile(0.25).alias("ratio_q25"),
        pl.col("ratio").quantile(0.75).alias("ratio_q75"),
        pl.col("zero_weight_selected").mean().alias("zero_weight_selected_mean"),
        pl.col("ratio_of_selected").mean().alias("ratio_of_selected_mean"),
    )
    .sort("normalizer", "N")
)
write_table(by_length, out.by_length)
write_table(separability, out.separability)
log.info("%d normalizers x %d lengths summarised", len(kinds), by_length["L"].n_unique())
