"""One preparation per block of rows for every fused sweep over its keys (numpy blocks).

The critical N, the distance analysis and their Monte-Carlo subsets all evaluate d~ (Eq. 7) and
Theorem 1.2's closed-form E on the same block of rows, at many N. What does not depend on N is
prepared here once per block (:class:`BlockSweeps`, kept by the block: RowBlock.sweeps) and read
by every such evaluation: alpha_i^2 |x_i|^2 and its cancellation floor, the block's width (a
causal block's later keys carry no weight and enter d~ as ||s|| each, counted rather than
computed), and for the closed form u_i = alpha_i x_i - xbar. The sweeps themselves are the
numba kernels of :mod:`attnlimits.fused`; their plain references are
:func:`attnlimits.protocol.row_statistics` and :func:`attnlimits.protocol.row_monte_carlo`
(tests/test_sweeps.py holds them together).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import fused
from .expansion import CANCELLATION, norms_by_expansion, visible_lengths


class BlockSweeps:
    """A numpy RowBlock's arrays that every N's sweep reads (module docstring)."""

    def __init__(self, block: Any):
        alpha, x, x_sq = block.alpha, block.x, block.x_sq
        # the arrays, not the block: the block keeps this object, and a cycle would keep every
        # block of a pass alive until the garbage collector's next full run
        self.alpha, self.x, self.x_sq = alpha, x, x_sq
        self.zero_weight = block.zero_weight
        self.full = int(alpha.shape[1])
        self._closed_form: tuple | None = None

    @cached_property
    def width(self) -> int:
        """Keys up to the last one any row weights (a causal block's later keys weigh 0)."""
        weighted = np.nonzero(self.alpha.any(axis=0))[0]
        return int(weighted[-1]) + 1 if len(weighted) else 1

    @cached_property
    def x_head(self) -> NDArray[np.float64]:
        return np.ascontiguousarray(self.x[: self.width])

    @cached_property
    def a(self) -> NDArray[np.float64]:
        return np.ascontiguousarray(self.alpha[:, : self.width])

    @cached_property
    def a_sq_x(self) -> NDArray[np.float64]:
        return self.a**2 * self.x_sq[None, : self.width]

    @cached_property
    def a_sq_x_floor(self) -> NDArray[np.float64]:
        return CANCELLATION * np.amax(self.a_sq_x, axis=1)

    @cached_property
    def separation_terms(self) -> tuple[NDArray, NDArray, NDArray]:
        """What Eq. 10's pass reads at every N, over every key: alpha^2 |x_i|^2, its
        cancellation floor, and the weights that may count in N_s (selection.resolvable)."""
        from .selection import resolvable

        a_sq_x = self.alpha**2 * self.x_sq[None, :]
        floor = CANCELLATION * np.amax(a_sq_x, axis=1, initial=0.0)
        return a_sq_x, floor, resolvable(self.alpha, self.zero_weight)

    def context_vectors(
        self, ranks: NDArray[np.int32], ns: Sequence[int], at: NDArray | None = None
    ) -> NDArray[np.float64]:
        """s(N) = sum over the keys of rank < N of alpha_i x_i for every N of the increasing
        ``ns``, (len(ns), R', d), for the rows ``at`` (None: all); keys that are not selectable
        weigh 0 in s, as their alpha does under the "not_selected" rule."""
        a = self.a if at is None else self.a[at]
        return fused.nested_context_vectors(a, self.x_head, ranks, np.asarray(ns, dtype=np.int64))

    def sweep(
        self,
        s: NDArray[np.float64],
        ranks: NDArray[np.int32],
        n: int,
        at: NDArray | None,
        selectable_at: NDArray[np.bool_],
        visible_at: NDArray[np.int64],
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """d~'s sums of the rows ``at`` (None: all) for the keys of rank < n that are
        ``selectable_at`` (``s`` their context vectors): (visible keys, every key), the latter
        with the keys past the block's width, each adding ||s||."""
        pick = slice(None) if at is None else at
        width = self.width
        q_sq = np.einsum("rd,rd->r", s, s)
        inside, beyond = fused.subset_norm_sums(
            self.a[pick],
            self.x_head,
            self.a_sq_x[pick],
            self.a_sq_x_floor[pick],
            s,
            q_sq,
            (-2.0 * s) @ self.x_head.T,
            ranks,
            n,
            selectable_at,
            visible_at,
        )
        norm_s = np.sqrt(q_sq)
        if not selectable_at[:, width:].any():
            # no key past the width may be selected (the usual case: they weigh 0, and the
            # zero-weight rule leaves them out): each adds ||s||, counted without their ranks
            tail = self.full - width
            unselected_count = np.full(len(q_sq), tail)
            rest_visible = np.clip(visible_at - width, 0, tail)
        else:
            keys = np.arange(width, self.full)[None, :]
            unselected = ~((ranks[:, width:] < n) & selectable_at[:, width:])
            rest_visible = (unselected & (keys < visible_at[:, None])).sum(axis=1)
            unselected_count = unselected.sum(axis=1)
        every = inside + beyond + norm_s * unselected_count
        return inside + norm_s * rest_visible, every

    @cached_property
    def mean_point(self) -> tuple[NDArray, NDArray, NDArray]:
        """xbar = alpha @ x per row, |xbar|^2 and (-2 xbar) @ x.T: every N's expectation term
        is a distance to xbar."""
        xbar = self.alpha @ self.x
        return xbar, np.einsum("rd,rd->r", xbar, xbar), (-2.0 * xbar) @ self.x.T

    def expectation_term(self, n: int, visible: NDArray[np.int64]) -> NDArray[np.float64]:
        """Theorem 1.2's closed-form E term per row over each row's first ``visible`` keys,
        (len - N) / len * sum_i ||(alpha_i + c) x_i - xbar||, c = N / (len - 1), as
        :func:`attnlimits.protocol.row_statistics` computes it, entry for entry
        (:func:`attnlimits.fused.shifted_norm_sums`); :meth:`closed_form` is the same term by
        another expansion, the critical N's."""
        xbar, xbar_sq, minus_twice = self.mean_point
        lengths = visible.astype(np.float64)
        c = n / np.maximum(lengths - 1.0, 1.0)
        total = fused.shifted_norm_sums(
            self.alpha, self.x, self.x_sq, c, xbar, xbar_sq, minus_twice, visible
        )
        return (lengths - n) / lengths * total

    def closed_form(self, n: int, visible: NDArray[np.int64]) -> NDArray[np.float64]:
        """Theorem 1.2's closed-form E term per row over each row's first ``visible`` keys:
        (len - N) / len * sum_i ||(alpha_i + c) x_i - xbar||, c = N / (len - 1), by
        |u_i|^2 + c (2 u_i . x_i + c |x_i|^2) (:func:`attnlimits.fused.closed_form_sums`)."""
        alpha, x, x_sq = self.alpha, self.x, self.x_sq
        if self._closed_form is None:
            xbar = alpha @ x
            u_sq = norms_by_expansion(alpha, xbar, x, alpha**2 * x_sq[None, :])  # RowBlock.norms_to
            u_sq *= u_sq
            self._closed_form = (
                xbar,
                u_sq,
                CANCELLATION * np.amax(u_sq, axis=1),
                2.0 * (alpha * x_sq[None, :] - xbar @ x.T),
                float(np.amax(x_sq, initial=0.0)),
            )
        xbar, u_sq, u_sq_floor, twice_u_dot_x, x_sq_max = self._closed_form
        lengths = visible.astype(np.float64)
        c = n / np.maximum(lengths - 1.0, 1.0)
        total = fused.closed_form_sums(
            alpha,
            x,
            x_sq,
            xbar,
            u_sq,
            u_sq_floor,
            twice_u_dot_x,
            x_sq_max,
            c,
            visible,
        )
        return (lengths - n) / lengths * total


def monte_carlo_ranks(
    counted: NDArray[np.bool_], n: int, draws: int, rng: np.random.Generator
) -> list[NDArray[np.int32]]:
    """The uniform n-subsets of :func:`attnlimits.protocol.row_monte_carlo`, drawn from ``rng``
    by the same calls, as ranks for the sweeps: the subset's keys ranked 0..n-1, every other
    key n."""
    rows, width = counted.shape
    out = []
    for _ in range(draws):
        key = rng.random((rows, width))
        key[~counted] = np.inf
        ranks = np.full((rows, width), n, dtype=np.int32)
        picked = np.argpartition(key, n - 1, axis=1)[:, :n]
        np.put_along_axis(ranks, picked, np.arange(n, dtype=np.int32)[None, :], axis=1)
        out.append(ranks)
    return out


def distance_rows(
    block: Any,
    n: int,
    *,
    positions: NDArray[np.intp],
    causal: bool,
    mc_ranks: Sequence[NDArray[np.int32]] = (),
    mc_rows: NDArray[np.intp] | None = None,
) -> dict[str, NDArray[np.float64]]:
    """Per row of a numpy block that counts every key (reading "non_selected", or an encoder's
    "both"), 1 <= n < L: d~ of the top-n set and the closed-form E term under that reading
    ("distance", "expectation_term") and under the "prefix" reading of a causal block's masked
    keys ("distance_prefix", "expectation_term_prefix"; the same values in an encoder), NaN
    where the reading's length <= n; and, given ``mc_ranks`` (:func:`monte_carlo_ranks` for the
    rows ``mc_rows``), d~ of each Monte-Carlo subset under the block's reading ("monte_carlo",
    (draws, len(mc_rows))). One sweep per set serves both readings: a visible key's rank is the
    same under both, and the masked keys, of weight 0, add ||s|| each under "non_selected".

    Plain reference: :func:`attnlimits.protocol.row_statistics` on each reading's block, and
    :func:`attnlimits.protocol.row_monte_carlo`."""
    if not bool(block.counted.all()):
        raise ValueError("the block must count every key (reading non_selected or both)")
    sweeps = block.sweeps()
    length = sweeps.full
    if not 1 <= n < length:
        raise ValueError(f"n must be within 1..L-1 = {length - 1}, got {n}")
    rows = len(block.length)
    every = np.full(rows, length, dtype=np.int64)
    prefix = visible_lengths(positions, length, causal=causal, masked="prefix").astype(np.int64)
    top = block.top_ranks()
    s = sweeps.context_vectors(top, [n])[0]
    on_visible, on_every = sweeps.sweep(s, top, n, None, block.selectable, prefix)
    out = {
        "distance": np.where(every > n, on_every, np.nan),
        "expectation_term": np.where(every > n, sweeps.expectation_term(n, every), np.nan),
        "distance_prefix": np.where(prefix > n, on_visible, np.nan),
        "expectation_term_prefix": np.where(prefix > n, sweeps.expectation_term(n, prefix), np.nan),
    }
    if len(mc_ranks):
        drawn = np.arange(rows) if mc_rows is None else np.asarray(mc_rows)
        selectable = block.selectable[drawn]
        visible = every[drawn]
        values = np.empty((len(mc_ranks), len(drawn)))
        for d, ranks in enumerate(mc_ranks):
            s_drawn = sweeps.context_vectors(ranks, [n], drawn)[0]
            values[d] = sweeps.sweep(s_drawn, ranks, n, drawn, selectable, visible)[1]
        values[:, visible <= n] = np.nan
        out["monte_carlo"] = values
    return out


def separability_rows(
    block: Any,
    n: int,
    *,
    delta: float,
    radius_m: float,
    positions: NDArray[np.intp],
    causal: bool,
) -> dict[str, NDArray[np.float64]]:
    """:func:`attnlimits.protocol.row_separability` of a numpy block that counts every key, by
    one fused pass (:func:`attnlimits.fused.separation_counts`) that also gives N_s/N under the
    "prefix" reading of a causal block's masked keys ("ratio_prefix"; the same as "ratio" in an
    encoder): the top-N set, s and every distance are the same under both readings on a row
    the prefix reading keeps (t + 1 > N); only the keys r runs over differ. Every distance is
    the reference's number, but for an entry recomputed for cancellation, whose sum over the
    d coordinates runs in another order: N_s can then differ from the reference's at an exact
    tie between two such entries, a tie the rounding decides either way.

    Plain reference: row_separability on each reading's block."""
    from .separability import theorem2_row_outcomes

    if not bool(block.counted.all()):
        raise ValueError("the block must count every key (reading non_selected or both)")
    alpha, x = block.alpha, block.x
    length = int(alpha.shape[1])
    if not 1 <= n < length:
        raise ValueError(f"n must be within 1..L-1 = {length - 1}, got {n}")
    mask = block.top_n(n)
    s = np.where(mask, alpha, 0.0) @ x
    sweeps = block.sweeps()
    a_sq_x, floor, resolvable = sweeps.separation_terms
    prefix = visible_lengths(positions, length, causal=causal, masked="prefix").astype(np.int64)
    q_sq = np.einsum("rd,rd->r", s, s)
    width = sweeps.width
    if mask[:, width:].any():
        width = length  # a key of weight 0 past the width is selected: every key in the pass
    # every key past the width weighs 0, is counted (every key is) and not selected: each lies
    # ||s|| from s (the kernel's own number: sqrt of its |s|^2), which enters r and no count
    tail = np.sqrt(q_sq) if width < length else np.full(len(q_sq), np.inf)
    radius, n_s, radius_prefix, n_s_prefix, alpha_sel = fused.separation_counts(
        alpha,
        x,
        a_sq_x,
        floor,
        s,
        q_sq,
        (-2.0 * s) @ x[:width].T,
        mask,
        block.counted,
        resolvable,
        prefix,
        n,
        tail,
        np.where(prefix > width, tail, np.inf),
    )
    valid = block.length > n
    out = theorem2_row_outcomes(radius, n_s, alpha_sel, valid, n=n, delta=delta, radius_m=radius_m)
    return out | {
        "ratio_prefix": np.where(prefix > n, n_s_prefix / n, np.nan),
        "zero_weight_selected": block.zero_weight_in_top_n(n),
    }


def epsilon_bound_rows(block: Any, n: int) -> NDArray[np.float64]:
    """:func:`attnlimits.protocol.row_epsilon_bound` of a numpy block in one fused pass
    (:func:`attnlimits.fused.epsilon_ratio_sums`); its sums over keys run in another order.

    Plain reference: row_epsilon_bound."""
    sweeps = block.sweeps()
    length = block.length.astype(np.float64)
    c = n / np.maximum(length - 1.0, 1.0)
    point = c[:, None] * sweeps.mean_point[0]  # alpha @ x, once per block
    total = fused.epsilon_ratio_sums(
        block.alpha,
        sweeps.x_head,
        block.x_sq,
        1.0 + c,
        point,
        np.einsum("rd,rd->r", point, point),
        # the keys past the block's width weigh 0: the kernel counts them without products
        (-2.0 * point) @ sweeps.x_head.T,
        block.length.astype(np.int64),
    )
    return np.where(block.length > n, 0.5 * (1.0 - n / length) * c * total, np.nan)
