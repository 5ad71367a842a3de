"""The paper's all-rows protocol on a sample pack: every query row of each (layer, chunk, head),
statistics averaged over rows, then over chunks, to one value per (layer, head).

Rows are recomputed from the pack's q and k (resolved to the query head, as the model scores
them) a block at a time; the L x L matrix never exists. Chunks combine by pooling their rows:
every chunk contributes the same rows, so this is the mean of the per-chunk means.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from attnlimits.arrays import DEFAULT_DEVICE, NUMPY, host, namespace, to_numpy
from attnlimits.critical import KSResult, first_passing_n_resampled, ks_test
from attnlimits.protocol import (
    CriticalSearch,
    HeadVectors,
    RowBlock,
    attention_rows,
    drawn_rows,
    first_rows_kept,
    fixed_fraction_ns,
    row_critical_statistics,
    row_critical_statistics_readings,
    sampled_mean_stderr,
    sampled_rows,
    search_in_batches,
    visible_lengths,
)
from attnlimits_workflow.streams import Stream, stream_rng

ROW_BLOCK = 256  # query rows per block: (block, L) float64 temporaries, 16 MiB at L = 8192

StatsFn = Callable[[RowBlock, NDArray[np.float64], NDArray[np.intp], int], dict[str, NDArray]]


@dataclass(frozen=True)
class RowKernel:
    """What one analysis reads of each block of a head's rows (the row engine's registration):
    ``stats(block, logits, rows, sample)`` returns name -> (R,) per-row statistics, which the
    engine averages over rows per sample (:func:`row_means_of`) and pool_chunks per head.
    ``masked``: the block's reading of a causal row's masked keys (attnlimits.protocol).
    ``vectors``: a map of each sample's x (L, d) before use (e.g. onto the sphere), named by
    ``vectors_name`` so that kernels mapping x alike share one copy. ``logits_only``: ``block``
    is None and, in a causal model, the logits stop after the block's last row.
    ``farthest_keys``: the most farthest keys per key it asks of the head (HeadVectors), found
    once per head for every kernel that shares the vectors."""

    stats: StatsFn
    masked: str = "non_selected"
    vectors: Callable[[NDArray], NDArray] | None = None
    vectors_name: str = "x"
    logits_only: bool = False
    farthest_keys: int = 0


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
    device: str = DEFAULT_DEVICE,
    row_count: int | None = None,
    row_seed: int = 0,
) -> dict[str, NDArray[np.float64]]:
    """For each sample of ``pack`` (or of ``samples``), the mean over its query rows of every
    statistic ``stats(block, logits, rows, sample)`` returns (NaN rows left out); name -> (S,)
    arrays, and each statistic's number of rows counted as "<name>__rows". ``chunks``: only the
    samples of the run's first that many chunks (the paper used one sequence per L).
    ``vectors`` maps a sample's x (L, d) before use (e.g. onto the sphere). ``logits_only``:
    ``block`` is None and, in a causal model, the logits stop after the block's last row (the
    later keys are masked in each of its rows), for statistics of the visible logits alone.
    ``zero_weight``: analysis.zero_weight, whether a top-N key of weight 0 is selected.
    ``device``: analysis.all_rows.device, where the rows and their blocks are computed (numpy,
    or torch on cpu / cuda[:i]: attnlimits.arrays); the block's arrays and the logits are of
    that namespace, and ``stats`` may return either. ``row_count``: analysis.all_rows.rows, the
    query rows analysed per sample, drawn seeded (``row_seed``) without replacement, each sample
    its own (attnlimits.protocol.drawn_rows); None, or at least L: every row. Drawn, each
    statistic's standard error of its sample mean over rows comes as "<name>__se" (the
    population of a sample's rows is L, so the error of a statistic undefined on some rows is
    approximate); 0 where every row is analysed although a count is set (L <= ``row_count``).

    One kernel of :func:`row_means_of`."""
    kernel = RowKernel(stats, masked, vectors, "mapped" if vectors else "x", logits_only)
    return row_means_of(
        pack,
        {"": kernel},
        chunks=chunks,
        progress=progress,
        zero_weight=zero_weight,
        device=device,
        row_count=row_count,
        row_seed=row_seed,
    )[""]


def row_means_of(
    pack,
    kernels: dict[str, RowKernel],
    *,
    chunks: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    zero_weight: str = "not_selected",
    device: str = DEFAULT_DEVICE,
    row_count: int | None = None,
    row_seed: int = 0,
    layers: Collection[int] | None = None,
) -> dict[str, dict[str, NDArray[np.float64]]]:
    """The row engine: :func:`row_means` for every kernel of ``kernels`` (name -> RowKernel) in
    one pass over each head's rows. Each block of rows is computed once from q and k, its
    weights once, each (vectors, reading) block once, and handed to every kernel; name -> that
    kernel's means, as row_means returns them. A kernel's values do not depend on which others
    share the pass. ``layers``: only the samples of these layers (a part of a job split by
    layer; None: every layer)."""
    xp = namespace(device)
    meta = pack.metadata
    causal = bool(meta["causal"])
    softcap = meta.get("softcap")
    length = pack.length
    chunk = np.asarray(pack.chunk)
    kept = np.unique(chunk)[: chunks if chunks else None]
    included = np.isin(chunk, kept)
    if layers is not None:
        included &= np.isin(np.asarray(pack.layer), list(layers))
    chosen = np.nonzero(included)[0]
    sums = {name: _RowSums(len(chosen), row_count, length) for name in kernels}
    only_logits = all(k.logits_only for k in kernels.values())
    for i, s in enumerate(chosen.tolist()):
        analysed = drawn_rows(stream_rng(row_seed, Stream.QUERY_ROWS, length, s), length, row_count)
        heads: dict[str, HeadVectors] = {}
        for kernel in kernels.values():
            if not kernel.logits_only and kernel.vectors_name not in heads:
                x = pack.x[s]
                heads[kernel.vectors_name] = HeadVectors(
                    kernel.vectors(x) if kernel.vectors else x,
                    xp,
                    farthest_keys=max(
                        k.farthest_keys
                        for k in kernels.values()
                        if k.vectors_name == kernel.vectors_name
                    ),
                )
        # float64 on the device once per head, not once per block
        q, k = (xp.asarray(v, dtype=xp.float64) for v in pack.rows(s))
        scale = float(pack.score_scale[s])
        for start in range(0, len(analysed), ROW_BLOCK):
            rows = analysed[start : start + ROW_BLOCK]
            visible_keys = int(rows[-1]) + 1 if causal else None
            logits, weights = attention_rows(
                q,
                k,
                scale,
                rows,
                causal=causal,
                softcap=softcap,
                keys=visible_keys if only_logits else None,
                weights=not only_logits,
                xp=xp,
            )
            blocks: dict[tuple[str, str], RowBlock] = {}
            for name, kernel in kernels.items():
                if kernel.logits_only:
                    block = None
                    seen = logits if only_logits or not causal else logits[:, :visible_keys]
                else:
                    key = (kernel.vectors_name, kernel.masked)
                    if key not in blocks:
                        blocks[key] = RowBlock.of(
                            weights,
                            heads[kernel.vectors_name],
                            visible_lengths(rows, length, causal=causal, masked=kernel.masked),
                            zero_weight=zero_weight,
                        )
                        # a block of the same weights and reading over other vectors (the
                        # sphere's) ranks its keys alike: one sort serves both
                        twin = next((b for (_, m), b in blocks.items() if m == kernel.masked), None)
                        if twin is not blocks[key]:
                            blocks[key].share_ranks(twin)
                    block, seen = blocks[key], logits
                sums[name].add(i, rows, kernel.stats(block, seen, rows, s))
        if progress:
            progress(i + 1, len(chosen))
    return {name: sums[name].means(chosen) for name in kernels}


class _RowSums:
    """One kernel's per-sample sums over its analysed rows, merged block by block."""

    def __init__(self, samples: int, row_count: int | None, length: int):
        self.samples, self.row_count, self.length = samples, row_count, length
        self.sampled = row_count is not None and row_count < length
        # Drawn rows form two strata (attnlimits.protocol.drawn_rows): rows kept (the first
        # ones and the last) and rows drawn uniformly between them. The drawn rows' statistics
        # (sum, count, and the sum of squared deviations merged block by block, Chan et al.,
        # without cancellation) are kept apart from the kept rows' sum and count.
        self.kept_first = first_rows_kept(row_count) if self.sampled else 0
        self.sums: dict[str, NDArray] = {}
        self.counts: dict[str, NDArray] = {}
        self.spread: dict[str, NDArray] = {}
        self.kept_sum: dict[str, NDArray] = {}
        self.kept_count: dict[str, NDArray] = {}

    def add(self, i: int, rows: NDArray[np.intp], stats: dict[str, Any]) -> None:
        for name, values in stats.items():
            values = to_numpy(values)
            if name not in self.sums:
                self.sums[name] = np.zeros(self.samples)
                self.counts[name] = np.zeros(self.samples, dtype=np.int64)
                self.spread[name] = np.zeros(self.samples)
                self.kept_sum[name] = np.zeros(self.samples)
                self.kept_count[name] = np.zeros(self.samples, dtype=np.int64)
            if self.sampled:
                is_kept = (rows < self.kept_first) | (rows == self.length - 1)
                sure = values[is_kept][~np.isnan(values[is_kept])]
                self.kept_sum[name][i] += sure.sum()
                self.kept_count[name][i] += sure.size
                values = values[~is_kept]
            ok = ~np.isnan(values)
            if self.sampled and ok.any():
                self.spread[name][i] = _merged_spread(
                    self.spread[name][i], self.sums[name][i], int(self.counts[name][i]), values[ok]
                )
            self.sums[name][i] += values[ok].sum()
            self.counts[name][i] += ok.sum()

    def means(self, chosen: NDArray[np.intp]) -> dict[str, NDArray]:
        out: dict[str, NDArray] = {"__samples": chosen}
        row_count, kept_first = self.row_count, self.kept_first
        for name, total in self.sums.items():
            counts = self.counts[name]
            if self.sampled:
                out |= _stratified_means(
                    name,
                    (total, counts, self.spread[name]),
                    (self.kept_sum[name], self.kept_count[name]),
                    stands_for=(self.length - 1 - kept_first) / (row_count - 1 - kept_first),
                )
                continue
            with np.errstate(invalid="ignore", divide="ignore"):
                out[name] = np.where(counts > 0, total / np.maximum(counts, 1), np.nan)
            out[f"{name}__rows"] = counts
            if row_count is not None:
                # rows drawn at longer L: here every row was analysed, the mean is exact, and
                # the tables of every L carry the same columns
                out[f"{name}__se"] = np.zeros(self.samples)
        return out


def _stratified_means(
    name: str,
    drawn: tuple[NDArray, NDArray, NDArray],
    kept: tuple[NDArray, NDArray],
    stands_for: float,
) -> dict[str, NDArray]:
    """The estimate of each sample's mean over every row (its defined rows) from the analysed
    ones: a kept row counts once, a drawn row for the ``stands_for`` rows of its stratum it
    stands for; the weighted mean over the rows where the statistic is defined (a stratified
    estimate; for a statistic undefined on some rows, a ratio estimate of their mean).
    ``drawn``: the drawn rows' (sum, count, sum of squared deviations); ``kept``: the kept
    rows' (sum, count). "<name>__weight": the rows the estimate stands for, which pool_chunks
    weighs chunks by; "<name>__se": its standard error, the drawn rows' share of the weight
    times their mean's error (kept rows add none); NaN with fewer than 2 drawn rows defined,
    whose spread is then unknown. "<name>__plain": the plain mean over the analysed rows, which
    a per-row indicator (a check's outcome) times the analysed rows counts them by;
    "<name>__weighted_sq": sum_i w_i^2 x_i / (sum_i w_i)^2, the variance of the weighted mean
    where x_i is each row's own variance (a Monte-Carlo E's)."""
    total, count, spread = drawn
    kept_total, kept_count = kept
    weight = stands_for * count + kept_count
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (stands_for * total + kept_total) / weight
        rest = sampled_mean_stderr(spread / (count - 1), count, stands_for * count)
        share = stands_for * count / weight
        plain = (total + kept_total) / (count + kept_count)
        weighted_sq = (stands_for**2 * total + kept_total) / weight**2
    return {
        name: np.where(weight > 0, mean, np.nan),
        f"{name}__rows": count + kept_count,
        f"{name}__weight": weight,
        f"{name}__se": np.where(count >= 2, share * rest, np.nan),
        f"{name}__plain": np.where(weight > 0, plain, np.nan),
        f"{name}__weighted_sq": np.where(weight > 0, weighted_sq, np.nan),
    }


def _merged_spread(spread: float, total: float, count: int, values: NDArray) -> float:
    """The sum of squared deviations from the mean of ``count`` values (sum ``total``, spread
    ``spread``) and ``values`` together, from the two parts' own (Chan, Golub and LeVeque)."""
    mean = values.mean()
    own = float(((values - mean) ** 2).sum())
    if count == 0:
        return own
    delta = mean - total / count
    return spread + own + delta * delta * count * len(values) / (count + len(values))


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
        if name.endswith(_PER_SAMPLE_PARTS) or name == "__samples":
            continue
        rows = means[f"{name}__rows"]
        # drawn rows (analysis.all_rows.rows): each chunk weighs the rows its estimate stands for
        stands_for = means.get(f"{name}__weight", rows)
        ok = ~np.isnan(values)
        total = np.bincount(index[ok], weights=(values * stands_for)[ok], minlength=len(keys))
        weight = np.bincount(index[ok], weights=stands_for[ok], minlength=len(keys))
        with np.errstate(invalid="ignore", divide="ignore"):
            out[name] = np.where(weight > 0, total / np.maximum(weight, 1), np.nan)
        out[f"{name}_rows"] = np.bincount(index, weights=rows, minlength=len(keys)).astype(np.int64)
        # each chunk's share of its head's pooled mean (drawn rows: the rows it stands for)
        share = np.where(ok, stands_for, 0) / np.maximum(weight[index], 1)

        def summed(terms: NDArray, ok=ok, weight=weight) -> NDArray:
            """Per head, the sum of ``terms`` over its chunks where the statistic is defined."""
            total = np.bincount(index, weights=np.where(ok, terms, 0.0), minlength=len(keys))
            return np.where(weight > 0, total, np.nan)

        if f"{name}__plain" in means:
            # the analysed rows' own mean, pooled by their counts: indicators count rows by it
            plain = means[f"{name}__plain"]
            plain_total = np.bincount(index[ok], weights=(plain * rows)[ok], minlength=len(keys))
            analysed = np.bincount(index[ok], weights=rows[ok], minlength=len(keys))
            with np.errstate(invalid="ignore", divide="ignore"):
                out[f"{name}_analysed"] = np.where(analysed > 0, plain_total / analysed, np.nan)
                out[f"{name}_weighted_sq"] = summed(share**2 * means[f"{name}__weighted_sq"])
        if f"{name}__se" in means:
            # each chunk's rows drawn apart: Var(sum_c r_c m_c / R) = sum_c (r_c / R)^2 se_c^2
            with np.errstate(invalid="ignore"):
                out[f"{name}_se"] = np.sqrt(summed((share * means[f"{name}__se"]) ** 2))
    return out


CRITICAL_KINDS = ("closed_form", "monte_carlo")
# row_means' per-sample companions of a statistic, which pool_chunks combines with it
_PER_SAMPLE_PARTS = ("__rows", "__se", "__weight", "__plain", "__weighted_sq")


def monte_carlo_rows(length: int, mc_rows: int, row_count: int | None) -> NDArray[np.intp] | None:
    """The rows a Monte-Carlo E is drawn on: ``mc_rows`` evenly spaced rows when every row is
    analysed; None (every analysed row) when analysis.all_rows.rows draws them, as the drawn
    rows are a random sample already and evenly spaced rows would seldom be among them."""
    if row_count is not None and row_count < length:
        return None
    return sampled_rows(length, mc_rows)


def monte_carlo_drawn(rows: NDArray[np.intp], mc_rows: NDArray[np.intp] | None) -> NDArray:
    """The positions within a block of ``rows`` of those a Monte-Carlo E is drawn on."""
    if mc_rows is None:
        return np.arange(len(rows))
    return np.nonzero(np.isin(rows, mc_rows))[0]


def critical_n_all_rows(
    pack,
    *,
    grid: list[int],
    fractions,
    alpha: float,
    keep: NDArray[np.intp] | None,
    seed: int,
    default_masked: str,
    chunks: int | None,
    mc_rows: int,
    mc_draws: int,
    batch: int,
    zero_weight: str = "not_selected",
    log: Callable[..., None] = lambda *a: None,
    draws: NDArray[np.integer] | None = None,
    device: str = DEFAULT_DEVICE,
    row_count: int | None = None,
    fused: bool = True,
) -> dict[
    tuple[str, str],
    tuple[CriticalSearch, dict[float, tuple[int, KSResult]], list[tuple[int | None, int | None]]],
]:
    """Algorithm 3 on ``pack`` under the all-rows protocol, per (reading, expectation): the search
    over ``grid`` (KS between the per-head means of d~ and of the closed-form or Monte-Carlo E,
    the heads ``keep``), and the KS test at N = round(f L) for each of ``fractions``.

    A causal model's rows are read both ways (reading "non_selected": the paper's L x L rows,
    each masked key a non-selected token adding ||s|| to d~; "prefix": row t a context of its
    t + 1 keys): the two answer different questions, and on near-uniform causal attention the
    first differs from the second mostly by the masked keys. A bidirectional encoder's rows have
    no masked key, so the readings coincide and are computed once (reading "both", under
    ``default_masked``). ``device``: where the rows are computed, ``row_count`` how many
    (row_means, seeded by ``seed``). ``fused``: numpy blocks take the fused kernels (False: the
    plain reference, each reading's own row_critical_statistics, as a torch block does; for
    benchmarks/row_engine.py and the tests)."""
    kernel = critical_n_kernel(
        pack,
        grid=grid,
        fractions=fractions,
        seed=seed,
        default_masked=default_masked,
        mc_rows=mc_rows,
        mc_draws=mc_draws,
        row_count=row_count,
        fused=fused,
    )
    means = row_means_of(
        pack,
        {"": kernel},
        chunks=chunks,
        zero_weight=zero_weight,
        device=device,
        row_count=row_count,
        row_seed=seed,
    )[""]
    return critical_n_searches(
        pack,
        pool_chunks(pack, means),
        grid=grid,
        fractions=fractions,
        alpha=alpha,
        keep=keep,
        default_masked=default_masked,
        batch=batch,
        log=log,
        draws=draws,
    )


def critical_n_kernel(
    pack,
    *,
    grid: list[int],
    fractions,
    seed: int,
    default_masked: str,
    mc_rows: int,
    mc_draws: int,
    row_count: int | None = None,
    fused: bool = True,
) -> RowKernel:
    """The row engine's kernel of Algorithm 3: every N of ``grid`` and the fixed ``fractions``,
    both expectations, every reading, in one pass over the rows (:func:`_critical_rows`).

    One pass evaluates everything: a pass costs the rows, one sort per row and the evaluations,
    so a search walking the list batch by batch, each reading apart, and bootstrap resamples
    passing later than the point estimate, would pay the rows and sorts again for each. The
    searches and resamples (:func:`critical_n_searches`) read these means (the same values: a
    row's statistics at N do not depend on which other N share its pass)."""
    length = pack.length
    causal = bool(pack.metadata["causal"])
    readings = ("non_selected", "prefix") if causal else ("both",)
    ns = sorted(set(grid) | set(fixed_fraction_ns(length, fractions).values()))
    mc_rows_at = monte_carlo_rows(length, mc_rows, row_count)
    return RowKernel(
        _critical_rows(ns, readings, seed, length, mc_rows_at, mc_draws, fused),
        # every key counts in the pass's blocks; the prefix reading is read from them
        masked="non_selected" if causal else default_masked,
    )


def critical_n_searches(
    pack,
    pooled: dict[str, Any],
    *,
    grid: list[int],
    fractions,
    alpha: float,
    keep: NDArray[np.intp] | None,
    default_masked: str,
    batch: int,
    log: Callable[..., None] = lambda *a: None,
    draws: NDArray[np.integer] | None = None,
) -> dict:
    """Algorithm 3's searches, fixed-fraction tests and bootstrap resamples, per (reading,
    expectation), on the per-head means of :func:`critical_n_kernel`'s pass (``pooled``), as
    :func:`critical_n_all_rows` returns them."""
    length = pack.length
    at_fraction = fixed_fraction_ns(length, fractions)
    readings = ("non_selected", "prefix") if pack.metadata["causal"] else ("both",)
    log(
        "  evaluated N=%s under %s, one pass (%s)",
        sorted(set(grid) | set(at_fraction.values())),
        readings,
    )
    out = {}
    chosen = slice(None) if keep is None else keep
    for reading in readings:

        def evaluate(at: list[int], pending: list[str], reading=reading) -> dict:
            return {
                name: np.stack([pooled[f"{reading}|{name}@{n}"] for n in at])
                for name in ("distance", *pending)
            }

        fixed_ns = sorted(set(at_fraction.values()))
        fixed_means = evaluate(fixed_ns, list(CRITICAL_KINDS))
        searches = search_in_batches(
            grid, evaluate, CRITICAL_KINDS, alpha=alpha, batch=batch, keep=keep
        )

        def values_at(n: int, kind: str, evaluate=evaluate) -> tuple:
            means = evaluate([n], [kind])
            return means["distance"][0][chosen], means[kind][0][chosen]

        masked = default_masked if reading == "both" else reading
        for kind, search in searches.items():
            started = time.perf_counter()
            resampled = (
                []
                if draws is None
                # Algorithm 3 as first_passing_n runs it (the first N of the list that passes),
                # on every resample at once
                else first_passing_n_resampled(
                    lambda n, kind=kind: values_at(n, kind), grid, alpha, draws
                )
            )
            if draws is not None:
                log(
                    "  masked %s, %s: %d bootstrap searches in %.2fs (%s)",
                    masked,
                    kind,
                    len(draws),
                    time.perf_counter() - started,
                )
            fixed = {
                f: (
                    n,
                    ks_test(
                        fixed_means["distance"][fixed_ns.index(n)][chosen],
                        fixed_means[kind][fixed_ns.index(n)][chosen],
                    ),
                )
                for f, n in at_fraction.items()
            }
            out[(reading, kind)] = (search, fixed, resampled)
    return out


def _critical_rows(ns, readings, seed, length, mc_rows, mc_draws, fused=True) -> StatsFn:
    """The per-row statistics of Algorithm 3 at ``ns`` under each of ``readings``, as
    ``row_means`` takes them: "<reading>|<name>@<N>" -> (R,), name distance, closed_form and
    monte_carlo (NaN on rows the Monte-Carlo E is not drawn on). A numpy block takes the fused
    kernels (attnlimits.protocol.row_critical_statistics_readings: one sort and one sweep per N
    for every reading); a torch block each reading's own pass (row_critical_statistics)."""

    def per_row(block, logits, rows, sample):
        drawn = monte_carlo_drawn(rows, mc_rows)  # analysis.all_rows.mc_rows
        blocks = {
            r: block.read_as("prefix", rows, length) if r == "prefix" else block for r in readings
        }
        ranks = {}
        for reading, own in blocks.items():
            # Monte-Carlo subsets drawn per (sample, block of rows), never per N, each reading
            # from the same stream over its own counted keys
            rng = stream_rng(seed, Stream.CRITICAL_N_MONTE_CARLO, length, sample, rows[0])
            ranks[reading] = (
                [own.random_ranks(rng, drawn) for _ in range(mc_draws)] if drawn.size else []
            )
        if fused and block.xp is NUMPY:
            got = row_critical_statistics_readings(
                block, ns, readings, positions=rows, random_ranks=ranks, random_rows=drawn
            )
        else:
            got = {
                reading: host(
                    row_critical_statistics(own, ns, random_ranks=ranks[reading], random_rows=drawn)
                )
                for reading, own in blocks.items()
            }
        out = {}
        for reading, stats in got.items():
            if "monte_carlo" not in stats:
                stats["monte_carlo"] = np.full_like(stats["distance"], np.nan)
            for name, values in stats.items():
                for j, n in enumerate(ns):
                    out[f"{reading}|{name}@{n}"] = values[j]
        return out

    return per_row
