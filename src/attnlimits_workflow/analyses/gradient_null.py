"""Corollary 3 decided against a null of matched spread. The theorem is false
(docs/paper-notes.md section 1): rows of i.i.d. Gaussian logits violate it too, so a count of
violating rows says nothing of a model until it is compared with the same count on null rows, each
a row's Gaussian logits standardised to its own spread (attnlimits.gradient.matched_spread_null). Which
rows get a null, and the decision from the per-head counts; the gradient analysis draws the nulls
(analyses.gradient.block_draws) and its summary calls the decision."""

from __future__ import annotations

import numpy as np
import polars as pl
from numpy.typing import NDArray

from attnlimits.intervals import SIGN_FLIP_EXACT_UNITS, p_text, sign_flip_pvalue


def null_rows_of(rows: NDArray, length: int, stride: int) -> NDArray[np.intp]:
    """The positions in ``rows`` (query rows t) that get a null: every row t < stride (a
    causal head's first rows, few keys each, where near-uniform rows violate most), and every
    stride-th row counting back from the last. The model is compared with its null on these
    rows only, so both shares have one denominator."""
    t = np.asarray(rows)
    return np.flatnonzero((t < stride) | ((length - 1 - t) % stride == 0))


# The note of a check the model violates on none of its rows while its null does, significantly:
# a comparison of rates on the rows with a null (Table 1 says so where those rows were drawn)
LESS_OFTEN = "decided against a null, less often than it"
# The opening of every note of a check decided against its null (more or less often)
NULL_DECIDED = "decided against a null"

# The level of the two-sided test that decides a Corollary 3 check against its null.
NULL_ALPHA = 0.05


def violations_by_head(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """Per (layer, head) with an applicable check ``column``, on the rows that have a null
    (samples under the last-row protocol): the model's violating rows there ("model"), its
    null's ("null") and how many such rows ("rows"), summed over the head's T samples."""
    name = column.removesuffix("_check")
    # a vacuous sample (every row's bound above what the quantity can reach: g at a large eps)
    # could not fail, for the model or its null: it is no part of the comparison's denominator
    applicable = frame.filter(
        pl.col(column).is_not_null() & (pl.col(column).cast(pl.String) != "vacuous")
    )
    if f"{name}_paired_violated_rows" in frame.columns:
        model, null = pl.col(f"{name}_paired_violated_rows"), pl.col(f"{name}_null_violated_rows")
        rows = pl.col(f"{name}_null_rows").sum()
    else:
        model = (pl.col(column) == "violated").cast(pl.Int64)
        null = (pl.col(f"{name}_null_check") == "violated").cast(pl.Int64)
        rows = pl.len()
    return (
        applicable.group_by("layer", "head")
        .agg(model.sum().alias("model"), null.sum().alias("null"), rows.alias("rows"))
        .sort("layer", "head")
    )


def total_violations(frame: pl.DataFrame, column: str) -> int:
    """The model's violating rows (samples under the last-row protocol) of check ``column``
    over every applicable sample, with a null or not: the count Table 1 reads."""
    name = column.removesuffix("_check")
    applicable = frame.filter(pl.col(column).is_not_null())
    if f"{name}_violated_rows" in frame.columns:
        return int(applicable[f"{name}_violated_rows"].sum())
    return int((applicable[column] == "violated").sum())


def null_decision(frame: pl.DataFrame, column: str) -> tuple[str, str]:
    """Corollary 3's check ``column`` decided against its null of matched spread, where the
    model violates it at all: (no_verdict, note) for assemble.summaries.count. The theorem is
    false (docs/paper-notes.md section 1), and rows of Gaussian logits with each row's own
    spread violate it on many rows whatever a head learnt. Per head, the model and its null are
    counted on the same rows (those with a null). The test is a two-sided sign-flip permutation
    test of the per-layer sums of those differences (intervals.sign_flip_pvalue), at NULL_ALPHA:
    a layer's model and null counts are exchangeable under the null, its heads' are not one by
    one, since the heads of a layer read one input (and a GQA group one set of keys), so their
    model counts move together while their nulls are drawn apart; flipping heads one by one
    rejected 10-15 % of such exchangeable models at 0.05. Its direction is the sum's, the
    pooled counts' (a majority of heads can lean the other way). More often: the count stands,
    "decided against a null", which says the model violates more often than Gaussian rows of
    its spread, not that training made it so (a random-weight GPT-2 leans above its null too:
    docs/paper-notes.md section 1). Otherwise no verdict, worded from the counts. Where the
    model violates nothing, holding is a finding only if its null violates it significantly
    more often; where neither violates, no verdict: the bound could not have failed on such rows
    at those temperatures. ("", "") where the table has no null or no row with one."""
    name = column.removesuffix("_check")
    if not {f"{name}_null_check", f"{name}_null_violated_rows"} & set(frame.columns):
        return "", ""
    heads = violations_by_head(frame, column).filter(pl.col("rows") > 0)
    if heads.height == 0:
        return "", ""
    differences = (heads["model"] - heads["null"]).to_numpy()
    by_layer = heads.group_by("layer").agg((pl.col("model") - pl.col("null")).sum().alias("d"))
    layer_sums = by_layer.sort("layer")["d"].to_numpy()
    p = sign_flip_pvalue(layer_sums)
    # an exact test over n units (layers whose sum is not 0) cannot go below 2 / 2^n: MiniLM's
    # 6 layers decide only unanimously
    units = int((layer_sums != 0).sum())
    above, below = int((differences > 0).sum()), int((differences < 0).sum())
    layers = "layer's" if by_layer.height == 1 else "layers'"
    # the sums run over every temperature (and epsilon for g): a row counts once per T (and eps)
    unit = "samples"
    if f"{name}_null_violated_rows" in frame.columns:
        keys = ["row", "T"] + (
            ["eps"] if "eps" in frame.columns and frame["eps"].n_unique() > 1 else []
        )
        unit = f"({', '.join(keys)}) checks"
    model, null, rows = (int(heads[c].sum()) for c in ("model", "null", "rows"))
    counts = (
        f"on the {rows} {unit} with a null of matched spread (Gaussian logits standardised to "
        f"each row's own spread), the model violates it on {model}, the null on {null}; the "
        f"model exceeds its null in {above} and falls below it in {below} of {heads.height} "
        f"heads, two-sided sign-flip test of the {by_layer.height} {layers} summed differences "
        f"p = {p_text(p, NULL_ALPHA)} {'<' if p < NULL_ALPHA else '>='} {NULL_ALPHA:g}, layers "
        "taken as independent (correlated layers make p too small)"
    )
    if 0 < units <= SIGN_FLIP_EXACT_UNITS:
        counts += (
            f" (the least p its {units} nonzero layer sum{'s' * (units != 1)} can give: "
            f"{2.0 ** (1 - units):.3g})"
        )
    # violating rows the comparison does not see (all-rows protocol: rows without a null); Table
    # 1 counts them, so "holding" may be said only where there are none
    elsewhere = total_violations(frame, column) - model
    if model == 0 and elsewhere > 0:
        return (
            f"the theorem is false (docs/paper-notes.md section 1); the model violates it on "
            f"{elsewhere} {unit} without a null and on none of those with one: {counts}, so its "
            "null cannot decide it",
            "",
        )
    if model == 0 and null == 0:
        # a bound that neither the model nor Gaussian rows of its spread break on these rows and
        # temperatures could not have failed here: holding is no finding about the model
        return (
            "neither the model nor its null of matched spread violates it: "
            f"{counts}; rows of that spread hold too at these temperatures, so holding is no "
            "finding about the model",
            "",
        )
    if p < NULL_ALPHA and model > null:
        # more often than Gaussian rows of the same spread, which is not "than an untrained
        # model": a random-weight GPT-2 leans above its null too (docs/paper-notes.md section 1)
        return "", (
            "decided against a null, more often than it (Gaussian logits of each row's spread, "
            f"not an untrained model): {counts}"
        )
    if p < NULL_ALPHA and model == 0:
        # held where Gaussian rows of its spread break it: the one "reproduced" the data could
        # have denied
        return "", f"{LESS_OFTEN}: {counts}"
    if p < NULL_ALPHA:
        finding = "the model violates it less often than its null"
    elif 0 < units and 2.0 ** (1 - units) >= NULL_ALPHA:
        # the layers whose sums are 0 carry no sign: too few others to reach the level
        finding = (
            f"only {units} of its {by_layer.height} layers differ from their null, too few to "
            f"reach {NULL_ALPHA:g}"
        )
    elif null:
        finding = "its null violates it too"
    else:
        finding = "its null violates it on none of those rows, and the layers cannot decide"
    if model == 0:
        # every layer's sum is <= 0 here, so p is 2 / 2^units: undecided only for too few
        # layers whose null violates it
        return (
            f"the model violates it on none of its {unit}, but the {units} "
            f"layer{'s' * (units != 1)} whose null violates it cannot reach {NULL_ALPHA:g}: "
            f"{counts}, so holding is no finding about the model",
            "",
        )
    least = 2.0 ** (1 - by_layer.height)
    if least >= NULL_ALPHA:
        # an exact two-sided test over at most 5 layers cannot reach 0.05 whatever the counts:
        # the reason for no verdict comes first, not only as the least p at the text's end
        n = by_layer.height
        return (
            f"the theorem is false (docs/paper-notes.md section 1) and no counts over {n} "
            f"layer{'s' * (n != 1)} could decide it against its null at {NULL_ALPHA:g} (the "
            f"least p a sign-flip test over {n} layer sum{'s' * (n != 1)} can give: "
            f"{least:.3g}): {counts}, so the count is no finding about the model's excess over "
            "its null",
            "",
        )
    return (
        f"the theorem is false (docs/paper-notes.md section 1) and {finding}: {counts}, so "
        "the count is no finding about the model's excess over its null",
        "",
    )
