"""Table 2: normalizer x diagnostic at the largest L (and N_s/N at beyond.n)."""

import json

import polars as pl

from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.tables import write_csv, write_latex, write_markdown

log = job_logger(snakemake, "table2")
inp, out, n = snakemake.input, snakemake.output, snakemake.params.n
by_length = pl.read_csv(inp.by_length)
sep = pl.read_csv(inp.separability)
L = by_length["L"].max()
at_l = by_length.filter(pl.col("L") == L)
ns = sep.filter(pl.col("N") == n).select(
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
        "N_crit_over_L",
        "ns_ratio",
        "ns_zero_weight",
        "ns_of_selected",
    )
)
order = list(snakemake.params.normalizers)
table = table.sort(pl.col("normalizer").replace_strict(order, list(range(len(order)))))
run = json.load(open(inp.run))
lmin = by_length["L"].min()
header = (
    f"Normalizers on {run['model']}'s logits ({run['weights']}), {run['corpus']}, last-row protocol "
    f"(the analysed row of each (layer, chunk, head), whatever analysis.protocol): medians at L = {L}; "
    f"max_weight_change = median max weight at L = {L} over that at L = {lmin}; ns_ratio = mean N_s/N at N = {n} "
    f"(L = {sep['L'][0]}); ns_zero_weight = mean number of those top-{n} tokens with weight 0, "
    "which are never selected nor distinguishable (analysis.zero_weight; N stays the denominator, so "
    "a sparse rule's ns_ratio is capped by its support / N); ns_of_selected = N_s over the tokens "
    "actually selected. "
    "A what-if re-normalisation of logits learned under softmax, not a retrained model; "
    "Self-Adjust Softmax rows do not sum to 1 (row_sum), its entropy is of the renormalised row."
)
write_csv(table, out.csv)
write_markdown(table, out.md, header)
write_latex(table, out.tex, header, "ll" + "r" * (table.width - 2))
log.info("table2: %d normalizers", table.height)
