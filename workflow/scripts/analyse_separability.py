"""Theorem 2 at one (L, N): N_s/N with its lower and upper bounds (Eqs. 10-12), per sample.

Checks: N_s/N lies in [0, 1], so a lower bound <= 0 or an upper bound >= 1 is vacuous, and the
upper bound is never below e^(-1/16) (attnlimits.separability.UPPER_BOUND_FLOOR): a ratio at or
below it cannot violate it, and that row's check is vacuous too."""

import numpy as np
import polars as pl

from attnlimits.checks import RTOL_FLOAT64, check_bound, head_outcomes, row_outcome_columns
from attnlimits.selection import top_n_indices
from attnlimits.separability import (
    UPPER_BOUND_FLOOR,
    min_pairwise_distance,
    project_to_sphere,
    separability,
)
from attnlimits_workflow.jobs import Timer, blocks, job_logger, sample_keys, write_table
from attnlimits_workflow.packs import read_pack

log = job_logger(snakemake, "separability")
timer = Timer()
L, N = int(snakemake.wildcards.length), int(snakemake.wildcards.n)
p = snakemake.params
samples = read_pack(snakemake.input.pack)
S = samples.weights.shape[0]
keys = sample_keys(samples)


def checks(ratio, lower, upper):
    """The two Theorem 2 checks, per sample or row."""
    return {
        # N_s/N = 1 (every N = 1 row, where the bound is 1 - 0 = 1) passes any lower bound
        "lower_bound": check_bound(
            ratio, lower, upper=False, rtol=RTOL_FLOAT64, floor=0.0, bound_ceiling=1.0
        ),
        "upper_bound": check_bound(
            ratio, upper, upper=True, rtol=RTOL_FLOAT64, ceiling=1.0, bound_floor=UPPER_BOUND_FLOOR
        ),
    }


if p.delta_over == "context":
    sep = pl.read_parquet(snakemake.input.separation)
    for k, v in keys.items():  # same reader, same order; refuse a stale or reordered table
        if not np.array_equal(sep[k].to_numpy(), v):
            raise SystemExit(
                f"{snakemake.input.separation}: sample order differs from the dumps; rerun pairwise_separation"
            )
    delta = sep["delta"].to_numpy()
else:
    delta = np.empty(S)

if p.protocol == "all_rows":
    # Algorithm 4: every row t of each head, N_s/N by direct counting and Theorem 2's bounds on
    # the sphere-projected x, delta of the head's whole context; averaged over rows and chunks.
    # A causal row's masked keys are read both ways in the same pass (ratio_other_masked).
    from attnlimits.protocol import RowBlock, row_separability
    from attnlimits_workflow.rows import pool_chunks, row_means

    causal = bool(samples.metadata["causal"])
    other_masked = "prefix" if p.all_rows["masked"] == "non_selected" else "non_selected"

    # Under non_selected a causal row t with t + 1 <= N selects every visible key; its
    # non-selected tokens are masked keys only, which fix r = ||s|| and the zero slots' xi = M,
    # so its bounds are made by the mask (row 0: lower bound = N_s/N = 1/N exactly). Such rows
    # keep their N_s/N but are not counted in the bound checks ("mask_only_rows").
    mask_only_reading = causal and p.all_rows["masked"] == "non_selected"

    def per_row(block: RowBlock, logits, rows, sample):
        out = row_separability(block, n=N, delta=float(delta[sample]), radius_m=p.radius)
        mask_only = (rows + 1 <= N) if mask_only_reading else np.zeros(len(rows), dtype=bool)
        out["mask_only"] = np.where(np.isnan(out["ratio"]), np.nan, mask_only)
        for name, outcome in checks(out["ratio"], out["lower_bound"], out["upper_bound"]).items():
            outcome[mask_only] = None
            out |= row_outcome_columns(name, outcome)
        out["zero_radius"] = np.where(
            np.isnan(out["ratio"]),
            np.nan,
            np.isnan(out["lower_bound"]) & ~np.isnan(out["upper_bound"]),
        )
        if causal:
            got = row_separability(
                block.read_as(other_masked, rows, L),
                n=N,
                delta=float(delta[sample]),
                radius_m=p.radius,
            )
            out["ratio_other_masked"] = got["ratio"]
        else:  # an encoder's rows read the same either way
            out["ratio_other_masked"] = out["ratio"]
        return out

    pooled = pool_chunks(
        samples,
        row_means(
            samples,
            per_row,
            masked=p.all_rows["masked"],
            chunks=p.all_rows["chunks"],
            vectors=lambda x: project_to_sphere(x[None], p.radius)[0],
            zero_weight=p.zero_weight,
        ),
    )
    H = len(pooled["layer"])
    rows = pooled["ratio_rows"]
    table = pl.DataFrame(
        {
            "layer": pooled["layer"],
            "chunk": np.full(H, -1, dtype=np.int32),
            "head": pooled["head"],
            "L": np.full(H, L, dtype=np.int32),
            "N": np.full(H, N, dtype=np.int32),
            "ratio": pooled["ratio"],
            "ratio_other_masked": pooled["ratio_other_masked"],
            "lower_bound": pooled["lower_bound"],
            "upper_bound": pooled["upper_bound"],
            "zero_weight_selected": pooled["zero_weight_selected"],
            "rows": rows,
            "mask_only_rows": np.rint(pooled["mask_only"] * rows).astype(np.int64),
            "chunks": pooled["chunks"],
            "zero_radius": np.rint(pooled["zero_radius"] * rows).astype(np.int64),
            "negative_xi_square": np.rint(pooled["negative_xi_square"] * rows).astype(np.int64),
            "no_outside_token": np.zeros(H, dtype=np.int64),
            **head_outcomes(pooled, "lower_bound"),
            **head_outcomes(pooled, "upper_bound"),
        },
        strict=False,
    )
    write_table(table, snakemake.output[0])
    log.info(
        "L=%d N=%d (all rows): median over heads of mean N_s/N %.3f (%s reading), %.3f (%s); "
        "mean zero-weight top-N keys per row %.3g; done in %s",
        L,
        N,
        np.nanmedian(pooled["ratio"]),
        p.all_rows["masked"],
        np.nanmedian(pooled["ratio_other_masked"]),
        other_masked,
        np.nanmean(pooled["zero_weight_selected"]),
        timer,
    )
else:
    fields = {
        k: []
        for k in (
            "n_distinguishable",
            "ratio",
            "radius",
            "lower_bound",
            "upper_bound",
            "no_outside_token",
            "zero_radius",
            "negative_xi_square",
            "zero_weight_selected",
        )
    }
    for sl in blocks(S, L, samples.x.shape[2]):
        x = project_to_sphere(samples.x[sl], p.radius)
        if p.delta_over == "selected":
            idx = top_n_indices(samples.weights[sl], N)
            delta[sl] = (
                min_pairwise_distance(np.take_along_axis(x, idx[:, :, None], axis=1))
                if N > 1
                else np.nan
            )
        res = separability(
            samples.weights[sl],
            x,
            n=N,
            delta=delta[sl],
            radius_m=p.radius,
            zero_weight=p.zero_weight,
        )
        for k in fields:
            fields[k].append(getattr(res, k))
    cols = {k: np.concatenate(v) for k, v in fields.items()}
    outcomes = checks(cols["ratio"], cols["lower_bound"], cols["upper_bound"])
    table = pl.DataFrame(
        {
            **keys,
            "L": np.full(S, L, dtype=np.int32),
            "N": np.full(S, N, dtype=np.int32),
            "delta": delta,
            **cols,
            "rows": np.ones(S, dtype=np.int64),
            "lower_bound_check": outcomes["lower_bound"].tolist(),
            "upper_bound_check": outcomes["upper_bound"].tolist(),
        },
        strict=False,
    )
    write_table(table, snakemake.output[0])
    log.info(
        "L=%d N=%d: median N_s/N %.3f; degenerate: r=0 %d, xi^2<0 %d; "
        "zero-weight top-N keys %d; done in %s",
        L,
        N,
        np.median(cols["ratio"]),
        cols["zero_radius"].sum(),
        cols["negative_xi_square"].sum(),
        cols["zero_weight_selected"].sum(),
        timer,
    )
