"""Bootstrap replicates of the summary tables: the per-(L, N, T) medians, means and maxima that
Table 1's claims read, recomputed on resamples of the units (attnlimits.bootstrap).

The units are the heads ((layer, head) pairs) and, where a table has two or more chunks
(chunk >= 0: the last-row protocol, Lemma 1's analysed rows), the chunks, each axis resampled on
its own. One set of draws serves every group of a table, so a resample is the same heads (and
chunks) at every L, N and T, and a slope across L refits on the same heads. The draws depend only
on the seed and the axis sizes, so tables of one model with the same heads and chunks share them.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl
from numpy.typing import NDArray

from attnlimits.bootstrap import cluster_indices, percentile_interval, resample_indices

# aggregation name -> its NaN-aware reduction over axis 1 (the resampled units); NaN marks a
# unit missing from a group, never a value (polars' median, mean and max skip nulls likewise)
REDUCTIONS = {
    "median": np.nanmedian,
    "mean": np.nanmean,
    "max": np.nanmax,
}
# cells (resamples x units) per batch of resamples: bounds the memory of one group's gather
BATCH_CELLS = 1 << 24


def unit_axes(table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The resampled axes of a per-sample table: its (layer, head) pairs, and its chunks when it
    has two or more non-negative ones (chunk = -1: one value per head, averaged over rows),
    sorted so that the draws map to the same units whatever the row order."""
    heads = table.select("layer", "head").unique().sort("layer", "head")
    chunks = table.select("chunk").unique().sort("chunk")
    if chunks.height < 2 or chunks["chunk"].min() < 0:
        return heads, None
    return heads, chunks


def unit_draws(
    heads: pl.DataFrame, chunks: pl.DataFrame | None, resamples: int, seed: int, unit: str
) -> list[NDArray[np.int64]]:
    """The resamples' indices into ``heads`` (and ``chunks``): heads one by one, or under
    ``unit`` "layer" whole layers (attnlimits.bootstrap.cluster_indices), then the chunks one
    by one, all from one generator of ``seed``."""
    rng = np.random.default_rng(seed)
    if unit == "head":
        sizes = [heads.height] + ([] if chunks is None else [chunks.height])
        return resample_indices(sizes, resamples, rng)
    if unit != "layer":
        raise ValueError(f"analysis.bootstrap.unit must be head or layer, got {unit!r}")
    draws = [cluster_indices(heads["layer"].to_numpy(), resamples, rng)]
    if chunks is not None:
        draws += resample_indices([chunks.height], resamples, rng)
    return draws


def replicate_summaries(
    table: pl.DataFrame,
    by: Sequence[str],
    statistics: Mapping[str, tuple[str, str]],
    *,
    resamples: int,
    seed: int,
    unit: str = "head",
) -> pl.DataFrame:
    """One row per (group of ``by``, resample): column ``replicate`` (0..resamples-1), the
    ``by`` values, and each of ``statistics`` (output name -> (column, "median" | "mean" |
    "max")) recomputed over the resampled units of the group.

    A unit drawn k times counts k times. Units absent from a group (or with a NaN value) are
    left out of its statistic; a group whose resample holds none of its units gives NaN.
    ``unit``: "head" draws heads one by one; "layer" draws layers with replacement and takes
    every head of a drawn layer (:func:`unit_draws`)."""
    heads, chunks = unit_axes(table)
    draws = unit_draws(heads, chunks, resamples, seed, unit)
    chunk_index = (
        pl.lit(0, dtype=pl.UInt32)
        if chunks is None
        else pl.col("chunk").replace_strict(
            chunks["chunk"], pl.int_range(chunks.height, eager=True), return_dtype=pl.UInt32
        )
    )
    indexed = table.join(heads.with_row_index("_head"), on=["layer", "head"]).with_columns(
        chunk_index.alias("_chunk")
    )
    n_chunks = 1 if chunks is None else chunks.height
    parts = []
    for key, group in sorted(indexed.group_by(*by, maintain_order=True), key=lambda kv: kv[0]):
        h, c = group["_head"].to_numpy(), group["_chunk"].to_numpy()
        if len(set(zip(h.tolist(), c.tolist(), strict=True))) != group.height:
            raise ValueError(f"group {dict(zip(by, key, strict=True))}: more than one row per unit")
        out = {"replicate": np.arange(resamples)} | {
            name: np.full(resamples, value) for name, value in zip(by, key, strict=True)
        }
        for name, (column, how) in statistics.items():
            grid = np.full((heads.height, n_chunks), np.nan)
            grid[h, c] = group[column].cast(pl.Float64).fill_null(np.nan).to_numpy()
            out[name] = resampled_statistic(grid, draws, REDUCTIONS[how])
        parts.append(pl.DataFrame(out))
    return (
        pl.concat(parts)
        .select("replicate", *by, *statistics)
        .cast({column: table.schema[column] for column in by})
    )


def resampled_statistic(
    grid: NDArray[np.float64], draws: Sequence[NDArray[np.int64]], reduce
) -> NDArray[np.float64]:
    """``reduce`` of each resample's cells of a (heads, chunks) grid: the cells of its drawn
    heads x its drawn chunks (a single column when chunks are not resampled), vectorised over
    resamples in batches."""
    head_draws = draws[0]
    chunk_draws = draws[1] if len(draws) > 1 else np.zeros((len(head_draws), 1), dtype=np.int64)
    resamples = len(head_draws)
    cells = head_draws.shape[1] * chunk_draws.shape[1]
    step = max(1, BATCH_CELLS // max(cells, 1))
    stats = np.empty(resamples)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        # an all-NaN slice (a resample holding none of a group's units) warns: its NaN is the
        # answer, counted as undefined by the interval
        warnings.simplefilter("ignore", RuntimeWarning)
        for start in range(0, resamples, step):
            rows = slice(start, start + step)
            picked = grid[head_draws[rows][:, :, None], chunk_draws[rows][:, None, :]]
            stats[rows] = reduce(picked.reshape(picked.shape[0], -1), axis=1)
    return stats


def percentile_band(
    replicates: pl.DataFrame, by: Sequence[str], column: str, level: float
) -> pl.DataFrame:
    """Per group of ``by``, the central ``level`` percentile interval of ``column`` over the
    replicates (attnlimits.bootstrap.percentile_interval: order statistics, +inf kept, NaN
    left out): columns ``by``, low, high; sorted by ``by``. For a figure's bands."""
    rows = []
    for key, group in replicates.group_by(*by, maintain_order=True):
        low, high, _ = percentile_interval(group[column].cast(pl.Float64).to_numpy(), level)
        rows.append({**dict(zip(by, key, strict=True)), "low": low, "high": high})
    return pl.DataFrame(rows).sort(*by)


def critical_n_band(replicates: pl.DataFrame, level: float) -> pl.DataFrame:
    """:func:`percentile_band` of the critical-N searches rerun on resamples, per L, over the
    resamples' list cells: the low end from each cell's least N (``N_crit_low``), the high end
    from its top (review 41: tops alone gave a zero-width band where every resample passes first
    in one cell, quantisation read as precision). A censored resample's N_crit lies above its top
    N, so it counts as +inf at both ends (a band reaching it is open)."""
    tops = pl.when(pl.col("censored")).then(float("inf")).otherwise(pl.col("N_crit"))
    least = (
        pl.when(pl.col("censored")).then(float("inf")).otherwise(pl.col("N_crit_low"))
        if "N_crit_low" in replicates.columns
        else tops
    )
    low = percentile_band(replicates.with_columns(least.alias("N_crit")), ("L",), "N_crit", level)
    high = percentile_band(replicates.with_columns(tops.alias("N_crit")), ("L",), "N_crit", level)
    return low.select("L", "low").join(high.select("L", "high"), on="L").sort("L")
