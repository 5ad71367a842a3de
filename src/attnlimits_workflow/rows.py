"""The paper's all-rows protocol on a sample pack: every query row of each (layer, chunk, head),
statistics averaged over rows, then over chunks, to one value per (layer, head).

Rows are recomputed from the pack's q and k (resolved to the query head, as the model scores
them) a block at a time; the L x L matrix never exists. Chunks combine by pooling their rows:
every chunk contributes the same rows, so this is the mean of the per-chunk means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from attnlimits.protocol import HeadVectors, RowBlock, attention_rows, visible_lengths

ROW_BLOCK = 256  # query rows per block: (block, L) float64 temporaries, 16 MiB at L = 8192

StatsFn = Callable[[RowBlock, NDArray[np.float64], NDArray[np.intp], int], dict[str, NDArray]]


def row_means(
    pack,
    stats: StatsFn,
    *,
    masked: str,
    chunks: int | None = None,
    vectors: Callable[[NDArray], NDArray] | None = None,
    progress: Callable[[int, int], None] | None = None,
    logits_only: bool = False,
    zero_weight: str = "not_selected",
) -> dict[str, NDArray[np.float64]]:
    """For each sample of ``pack`` (or of ``samples``), the mean over its query rows of every
    statistic ``stats(block, logits, rows, sample)`` returns (NaN rows left out); name -> (S,)
    arrays, and each statistic's number of rows counted as "<name>__rows". ``chunks``: only the
    samples of the run's first that many chunks (the paper used one sequence per L).
    ``vectors`` maps a sample's x (L, d) before use (e.g. onto the sphere). ``logits_only``:
    ``block`` is None and, in a causal model, the logits stop after the block's last row (the
    later keys are masked in each of its rows), for statistics of the visible logits alone.
    ``zero_weight``: analysis.zero_weight, whether a top-N key of weight 0 is selected."""
    meta = pack.metadata
    causal = bool(meta["causal"])
    softcap = meta.get("softcap")
    length = pack.length
    chunk = np.asarray(pack.chunk)
    kept = np.unique(chunk)[: chunks if chunks else None]
    chosen = np.nonzero(np.isin(chunk, kept))[0]
    sums: dict[str, NDArray] = {}
    counts: dict[str, NDArray] = {}
    for i, s in enumerate(chosen.tolist()):
        if not logits_only:
            x = HeadVectors(vectors(pack.x[s]) if vectors else pack.x[s])
        q, k = pack.rows(s)
        scale = float(pack.score_scale[s])
        for start in range(0, length, ROW_BLOCK):
            rows = np.arange(start, min(start + ROW_BLOCK, length))
            logits, weights = attention_rows(
                q,
                k,
                scale,
                rows,
                causal=causal,
                softcap=softcap,
                keys=int(rows[-1]) + 1 if causal and logits_only else None,
                weights=not logits_only,
            )
            block = (
                None
                if logits_only
                else RowBlock.of(
                    weights,
                    x,
                    visible_lengths(rows, length, causal=causal, masked=masked),
                    zero_weight=zero_weight,
                )
            )
            for name, values in stats(block, logits, rows, s).items():
                if name not in sums:
                    sums[name] = np.zeros(len(chosen))
                    counts[name] = np.zeros(len(chosen), dtype=np.int64)
                ok = ~np.isnan(values)
                sums[name][i] += values[ok].sum()
                counts[name][i] += ok.sum()
        if progress:
            progress(i + 1, len(chosen))
    out: dict[str, NDArray] = {"__samples": chosen}
    for name in sums:
        with np.errstate(invalid="ignore", divide="ignore"):
            out[name] = np.where(counts[name] > 0, sums[name] / np.maximum(counts[name], 1), np.nan)
        out[f"{name}__rows"] = counts[name]
    return out


def pool_chunks(pack, means: dict[str, NDArray]) -> dict[str, Any]:
    """Per-sample row means -> one value per (layer, head), weighting each chunk by its rows;
    keys columns layer, head, chunks (how many were pooled) and the pooled statistics."""
    chosen = means["__samples"]
    layer = np.asarray(pack.layer)[chosen]
    head = np.asarray(pack.head)[chosen]
    keys = np.unique(np.stack([layer, head], axis=1), axis=0)
    out: dict[str, Any] = {
        "layer": keys[:, 0].astype(np.int32),
        "head": keys[:, 1].astype(np.int32),
        "chunks": np.zeros(len(keys), dtype=np.int32),
    }
    group = {tuple(k): g for g, k in enumerate(keys)}
    index = np.array([group[(a, b)] for a, b in zip(layer, head, strict=True)])
    out["chunks"] = np.bincount(index, minlength=len(keys)).astype(np.int32)
    for name, values in means.items():
        if name.endswith("__rows") or name == "__samples":
            continue
        rows = means[f"{name}__rows"]
        ok = ~np.isnan(values)
        total = np.bincount(index[ok], weights=(values * rows)[ok], minlength=len(keys))
        weight = np.bincount(index[ok], weights=rows[ok], minlength=len(keys))
        with np.errstate(invalid="ignore", divide="ignore"):
            out[name] = np.where(weight > 0, total / np.maximum(weight, 1), np.nan)
        out[f"{name}_rows"] = np.bincount(index, weights=rows, minlength=len(keys)).astype(np.int64)
    return out
