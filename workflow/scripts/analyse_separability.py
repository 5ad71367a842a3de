"""Theorem 2 at one (L, N): N_s/N with its lower and upper bounds (Eqs. 10-12), per sample."""

import numpy as np
import polars as pl

from attnlimits.checks import RTOL_FLOAT64, check_bound
from attnlimits.selection import top_n_indices
from attnlimits.separability import min_pairwise_distance, project_to_sphere, separability
from attnlimits_workflow.jobs import (
    Timer,
    blocks,
    job_logger,
    sample_keys,
    write_table,
)
from attnlimits_workflow.packs import read_pack

log = job_logger(snakemake, "separability")
timer = Timer()
L, N = int(snakemake.wildcards.length), int(snakemake.wildcards.n)
p = snakemake.params
samples = read_pack(snakemake.input.pack)
S = samples.weights.shape[0]
keys = sample_keys(samples)

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
    from attnlimits.checks import NOT_TESTABLE, VIOLATED
    from attnlimits.protocol import RowBlock, row_separability
    from attnlimits_workflow.rows import pool_chunks, row_means

    def per_row(block: RowBlock, logits, rows, sample):
        out = row_separability(block, n=N, delta=float(delta[sample]), radius_m=p.radius)
        for name, upper, bounds in (
            ("lower", False, {"floor": 0.0}),
            ("upper", True, {"ceiling": 1.0}),
        ):
            c = check_bound(
                out["ratio"], out[f"{name}_bound"], upper=upper, rtol=RTOL_FLOAT64, **bounds
            )
            valid = ~np.isnan(out["ratio"])
            out[f"{name}_violated"] = np.where(valid, c == VIOLATED, np.nan)
            out[f"{name}_not_testable"] = np.where(valid, c == NOT_TESTABLE, np.nan)
        out["zero_radius"] = np.where(
            np.isnan(out["ratio"]),
            np.nan,
            np.isnan(out["lower_bound"]) & ~np.isnan(out["upper_bound"]),
        )
        return out

    pooled = pool_chunks(
        samples,
        row_means(
            samples,
            per_row,
            masked=p.all_rows["masked"],
            chunks=p.all_rows["chunks"],
            vectors=lambda x: project_to_sphere(x[None], p.radius)[0],
        ),
    )
    H = len(pooled["layer"])
    rows = pooled["ratio_rows"]

    def head_check(name):
        bad = np.rint(pooled[f"{name}_violated"] * rows)
        untestable = np.rint(pooled[f"{name}_not_testable"] * rows)
        return np.where(bad > 0, VIOLATED, np.where(untestable > 0, NOT_TESTABLE, "holds")).tolist()

    table = pl.DataFrame(
        {
            "layer": pooled["layer"],
            "chunk": np.full(H, -1, dtype=np.int32),
            "head": pooled["head"],
            "L": np.full(H, L, dtype=np.int32),
            "N": np.full(H, N, dtype=np.int32),
            "ratio": pooled["ratio"],
            "lower_bound": pooled["lower_bound"],
            "upper_bound": pooled["upper_bound"],
            "rows": rows,
            "chunks": pooled["chunks"],
            "zero_radius": np.rint(pooled["zero_radius"] * rows).astype(np.int64),
            "negative_xi_square": np.rint(pooled["negative_xi_square"] * rows).astype(np.int64),
            "no_outside_token": np.zeros(H, dtype=np.int64),
            "lower_bound_check": head_check("lower"),
            "upper_bound_check": head_check("upper"),
        },
        strict=False,
    )
    write_table(table, snakemake.output[0])
    log.info(
        "L=%d N=%d (all rows): median over heads of mean N_s/N %.3f; done in %s",
        L,
        N,
        np.nanmedian(pooled["ratio"]),
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
        res = separability(samples.weights[sl], x, n=N, delta=delta[sl], radius_m=p.radius)
        for k in fields:
            fields[k].append(getattr(res, k))
    cols = {k: np.concatenate(v) for k, v in fields.items()}
    table = pl.DataFrame(
        {
            **keys,
            "L": np.full(S, L, dtype=np.int32),
            "N": np.full(S, N, dtype=np.int32),
            "delta": delta,
            **cols,
            # N_s/N lies in [0, 1]: a lower bound <= 0 or an upper bound >= 1 cannot fail.
            "lower_bound_check": check_bound(
                cols["ratio"], cols["lower_bound"], upper=False, rtol=RTOL_FLOAT64, floor=0.0
            ).tolist(),
            "upper_bound_check": check_bound(
                cols["ratio"], cols["upper_bound"], upper=True, rtol=RTOL_FLOAT64, ceiling=1.0
            ).tolist(),
        },
        strict=False,
    )
    write_table(table, snakemake.output[0])
    log.info(
        "L=%d N=%d: median N_s/N %.3f; degenerate: r=0 %d, xi^2<0 %d; done in %s",
        L,
        N,
        np.median(cols["ratio"]),
        cols["zero_radius"].sum(),
        cols["negative_xi_square"].sum(),
        timer,
    )
