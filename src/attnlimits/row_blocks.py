"""A head's rows, block by block, as the paper's protocol (attnlimits.protocol) reads them: the
attention rows recomputed from q and k (:func:`attention_rows`), the head's shared token vectors
(:class:`HeadVectors`) and a block of rows against them (:class:`RowBlock`), with the rankings
every top-N set is read from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .arrays import NUMPY, NumpyNamespace, TorchNamespace
from .expansion import CANCELLATION as _CANCELLATION
from .expansion import norms_by_expansion as _norms
from .expansion import visible_lengths
from .selection import DEFAULT_ZERO_WEIGHT, check_zero_weight

FloatArray = NDArray[np.floating]
Namespace = NumpyNamespace | TorchNamespace


def attention_rows(
    q: FloatArray,
    k: FloatArray,
    scaling: float,
    rows: NDArray[np.intp],
    *,
    causal: bool,
    softcap: float | None = None,
    keys: int | None = None,
    weights: bool = True,
    xp: Namespace = NUMPY,
) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]:
    """(logits, weights) of query positions ``rows`` over keys 0..L-1 (or the first ``keys``),
    float64, (R, L) each, arrays of ``xp`` (attnlimits.arrays); weights None when not asked for.

    q and k are one head's (L, head_dim) vectors as the model scores them (a caller of many
    blocks converts them once: ``xp.asarray(q, dtype=xp.float64)``); causal rows give the keys
    after t logit -inf and weight 0.
    """
    rows = xp.asarray(rows)
    q64 = xp.asarray(q, dtype=xp.float64)[rows]
    k64 = xp.asarray(k[:keys], dtype=xp.float64)
    logits = (q64 @ k64.T) * scaling
    if softcap is not None:
        logits = softcap * xp.tanh(logits / softcap)
    if causal:
        logits[xp.arange(k64.shape[0])[None, :] > rows[:, None]] = -xp.inf
    if not weights:
        return logits, None
    top = xp.amax(logits, axis=1, keepdims=True)
    alpha = xp.exp(logits - top)
    alpha /= alpha.sum(axis=1, keepdims=True)
    return logits, alpha


class HeadVectors:
    """One head's token vectors x (L, d) in float64, arrays of ``xp`` (attnlimits.arrays), with
    what every block of its rows shares: |x_i|^2, and per key its farthest keys (computed once,
    on first use). ``farthest_keys``: the most farthest keys any caller will ask for, so that the
    first call finds them all (each later call with a larger k would search the L x L distances
    again: a distance kernel per N asks for N + 1)."""

    FARTHEST_BLOCK = 256  # keys per block of the farthest-key search: (block, L) temporaries

    def __init__(self, x: FloatArray, xp: Namespace = NUMPY, farthest_keys: int = 0):
        self.xp = xp
        self.farthest_keys = farthest_keys
        self.x = xp.asarray(x, dtype=xp.float64)
        self.x_sq = xp.einsum("ld,ld->l", self.x, self.x)
        self._farthest: tuple[int, NDArray[np.intp], NDArray[np.float64]] | None = None

    def farthest(self, k: int) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
        """Per key j, its k farthest keys (indices (L, k)) and their squared distances, farthest
        first; a call with a larger k than before (and than ``farthest_keys``) recomputes. The
        distances come from the expansion |x_i|^2 + |x_j|^2 - 2 x_i.x_j, recomputed directly
        where it could have lost digits (a square small beside |x_i|^2 + |x_j|^2) before the
        farthest are chosen. Keys at equal distance may come in either order (the partition's): a
        caller reads distances, which do not depend on it, nor on how many were searched."""
        xp = self.xp
        asked = k
        if self._farthest is None or self._farthest[0] < k:
            length = len(self.x)
            # more keys than asked: every distance is repaired before the search, so the
            # first k of the K farthest are the k farthest, whatever K
            k = min(max(k, self.farthest_keys), length)
            index = xp.empty((length, k), dtype=xp.intp)
            dist2 = xp.empty((length, k))
            for j0 in range(0, length, self.FARTHEST_BLOCK):
                j1 = min(j0 + self.FARTHEST_BLOCK, length)
                d2 = self.x_sq[j0:j1, None] + self.x_sq[None, :] - 2.0 * (self.x[j0:j1] @ self.x.T)
                # near-duplicate keys: an expansion that lost its digits could rank a key among
                # the farthest (or out of them) wrongly, so it is recomputed before the search
                ri, ci = xp.nonzero(
                    d2 <= _CANCELLATION * (self.x_sq[j0:j1, None] + self.x_sq[None, :])
                )
                if len(ri):
                    diff = self.x[ci] - self.x[ri + j0]
                    d2[ri, ci] = xp.einsum("nd,nd->n", diff, diff)
                xp.clip_below(d2, 0.0)
                part = xp.smallest_k(-d2, k)
                index[j0:j1] = part
                dist2[j0:j1] = xp.take_along_axis(d2, part, axis=1)
            order = xp.argsort_rows(-dist2, stable=True)
            index = xp.take_along_axis(index, order, axis=1)
            self._farthest = (k, index, xp.take_along_axis(dist2, order, axis=1))
        _, index, dist2 = self._farthest
        return index[:, :asked], dist2[:, :asked]


@dataclass(frozen=True)
class RowBlock:
    """Products of a block of rows (R, L) against the head's shared vectors x (L, d), float64;
    every array is of the head's namespace ``xp`` (attnlimits.arrays)."""

    alpha: NDArray[np.float64]  # (R, L); 0 on keys a row does not count
    x: NDArray[np.float64]  # (L, d)
    x_sq: NDArray[np.float64]  # (L,)
    counted: NDArray[np.bool_]  # (R, L): keys i < visible length of the row
    length: NDArray[np.int64]  # (R,): visible length per row
    head: HeadVectors
    # (R, L): keys a set may select: the counted keys, less those of weight 0 unless the
    # zero-weight rule is "literal" (attnlimits.selection.ZERO_WEIGHT_RULES)
    selectable: NDArray[np.bool_]
    zero_weight: str = DEFAULT_ZERO_WEIGHT
    # literal_top_n by n: each statistic at N asks for the set twice (top_n, and the zero-weight
    # count beside it), and its partition is most of a separability or distance job's time
    _literal_top_n: dict[int, NDArray[np.bool_]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # top_ranks, once per block: every N's set of the block then comes from one sort (the row
    # engine asks for many N of one block)
    _top_ranks: list[NDArray[np.int32]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )
    # sweeps, once per block: what every N's fused sweep reads (numpy blocks)
    _sweeps: list[Any] = field(default_factory=list, init=False, repr=False, compare=False)

    @property
    def xp(self) -> Namespace:
        return self.head.xp

    @classmethod
    def of(
        cls,
        alpha: FloatArray,
        x: FloatArray | HeadVectors,
        length: NDArray,
        *,
        zero_weight: str = DEFAULT_ZERO_WEIGHT,
    ) -> RowBlock:
        """The block of weights ``alpha`` (R, L) over a head's vectors x (or its HeadVectors,
        whose namespace the block takes), each row counting its first ``length`` keys."""
        head = x if isinstance(x, HeadVectors) else HeadVectors(x)
        xp = head.xp
        alpha = xp.asarray(alpha, dtype=xp.float64)
        length = xp.asarray(length, dtype=xp.int64)
        counted = xp.arange(alpha.shape[1])[None, :] < length[:, None]
        alpha = xp.where(counted, alpha, 0.0)
        literal = check_zero_weight(zero_weight) == "literal"
        return cls(
            alpha=alpha,
            x=head.x,
            x_sq=head.x_sq,
            counted=counted,
            length=length,
            head=head,
            selectable=counted if literal else counted & (alpha != 0),
            zero_weight=zero_weight,
        )

    def read_as(self, masked: str, rows: NDArray[np.intp], length: int) -> RowBlock:
        """These causal ``rows`` of a length-``length`` head under the other reading of their
        masked keys (``masked``, one of MASKED_MODES), from the same weights and vectors."""
        return RowBlock.of(
            self.alpha,
            self.head,
            visible_lengths(self.xp.to_numpy(rows), length, causal=True, masked=masked),
            zero_weight=self.zero_weight,
        )

    def take(self, rows: NDArray[np.intp]) -> RowBlock:
        """The block of some of these rows."""
        rows = self.xp.asarray(rows)
        return RowBlock.of(
            self.alpha[rows], self.head, self.length[rows], zero_weight=self.zero_weight
        )

    def top_n(self, n: int) -> NDArray[np.bool_]:
        """Mask of each row's top-n counted keys, ties to the lower index (the stable order of
        attnlimits.selection); rows with length < n get all of theirs. Under the "not_selected"
        zero-weight rule, keys of weight 0 among them are left out (:attr:`selectable`).

        A partition finds the n-th largest weight v in O(L); the keys above v are in, and of the
        keys equal to v the lowest-indexed fill the rest. No row is sorted.
        """
        return self.literal_top_n(n) & self.selectable

    def literal_top_n(self, n: int) -> NDArray[np.bool_]:
        """Mask of each row's top-n counted keys whatever their weights (the paper's literal
        I_N); :meth:`top_n` is this set under the zero-weight rule. Computed once per n and
        block (callers must not write into it)."""
        if n not in self._literal_top_n:
            # one N of a block: a partition; from the second on, one sort serves them all
            self._literal_top_n[n] = (
                (self.top_ranks() < n) & self.counted
                if self._top_ranks or len(self._literal_top_n) >= 1
                else self._partitioned_top_n(n)
            )
        return self._literal_top_n[n]

    def _partitioned_top_n(self, n: int) -> NDArray[np.bool_]:
        """:meth:`literal_top_n` by a partition of every row."""
        xp = self.xp
        rows, width = self.alpha.shape
        if n >= width:
            return xp.copy(self.counted)
        key = xp.where(self.counted, self.alpha, -1.0)  # uncounted keys rank last
        kth = xp.kth_smallest(key, width - n)
        above = key > kth
        tied = key == kth
        need = n - above.sum(axis=1, keepdims=True)
        # Only rows with more tied keys than places left choose among them (lowest index first).
        split = xp.nonzero(tied.sum(axis=1) > need[:, 0])[0]
        if len(split):
            tied[split] &= xp.cumsum(tied[split], axis=1) <= need[split]
        return (above | tied) & self.counted

    def zero_weight_in_top_n(self, n: int) -> NDArray[np.float64]:
        """Per row, how many of its literal top-n keys have weight exactly 0 (under the
        "not_selected" rule, the keys :meth:`top_n` leaves out); NaN for rows with length <= n."""
        xp = self.xp
        zero = xp.count_nonzero(self.literal_top_n(n) & (self.alpha == 0), axis=1)
        return xp.where(self.length > n, xp.astype(zero, xp.float64), xp.nan)

    def norms_to(self, coef: NDArray[np.float64], point: NDArray[np.float64]) -> NDArray:
        """||coef_ti x_i - point_t|| for every row t and key i, (R, L), by expansion with repair."""
        return _norms(coef, point, self.x, coef**2 * self.x_sq[None, :], xp=self.xp)

    def ranks(self, order: NDArray[np.intp]) -> NDArray[np.int32]:
        """Rank of each key in a per-row order (R, L): rank < N marks the order's first N keys."""
        return _ranks(order, self.xp)

    def top_ranks(self) -> NDArray[np.int32]:
        """Each key's rank by weight, largest first, ties to the lower index, uncounted keys last:
        ``ranks < n`` (and counted) is :meth:`top_n`'s mask for every n at once. Computed once
        per block (callers must not write into it)."""
        if not self._top_ranks:
            key = self.xp.where(self.counted, -self.alpha, 1.0)
            self._top_ranks.append(_sorted_ranks(key, self.alpha, self.xp))
        return self._top_ranks[0]

    def share_ranks(self, twin: RowBlock) -> None:
        """Take ``twin``'s ranking caches (top_ranks, literal_top_n), computed or not: a block of
        the same weights, counted keys and zero-weight rule over other vectors ranks its keys
        alike, so one sort serves both."""
        if not (
            twin.zero_weight == self.zero_weight
            and twin.alpha.shape == self.alpha.shape
            and bool((twin.length == self.length).all())
            # NaN weights (from NaN scores) rank alike too
            and bool(
                (
                    (twin.alpha == self.alpha)
                    | ((twin.alpha != twin.alpha) & (self.alpha != self.alpha))
                ).all()
            )
        ):
            raise ValueError("only a block of the same weights and lengths shares its ranks")
        object.__setattr__(self, "_top_ranks", twin._top_ranks)
        object.__setattr__(self, "_literal_top_n", twin._literal_top_n)

    def sweeps(self) -> Any:
        """The block's attnlimits.sweeps.BlockSweeps, prepared once (numpy blocks only)."""
        if not self._sweeps:
            from .sweeps import BlockSweeps

            if self.xp is not NUMPY:
                raise ValueError("the fused sweeps read numpy blocks")
            self._sweeps.append(BlockSweeps(self))
        return self._sweeps[0]

    def random_ranks(
        self, rng: np.random.Generator, rows: NDArray[np.intp] | None = None
    ) -> NDArray[np.int32]:
        """Each row's (or each of ``rows``') counted keys in a uniformly random order, as ranks:
        for every n at once, the keys of rank < n are a uniform n-subset of the row's counted
        keys (nested in n). Drawn in numpy from ``rng`` whatever the namespace, so every
        namespace draws the same subsets."""
        counted = self.xp.to_numpy(
            self.counted if rows is None else self.counted[self.xp.asarray(rows)]
        )
        if counted.all():  # a random permutation is its own uniformly random ranking
            ranks = rng.permuted(
                np.broadcast_to(np.arange(counted.shape[1], dtype=np.int32), counted.shape),
                axis=1,
            )
        else:
            key = rng.random(counted.shape)
            key[~counted] = 2.0
            ranks = _ranks(np.argsort(key, axis=1), NUMPY)
        return self.xp.asarray(ranks)


def _sorted_ranks(key, alpha, xp: Namespace):
    """Each entry's rank in its row's stable ascending sort of ``key`` (R, L), int32. A causal
    block's keys past its last weighted one (its tail, often half the row) share one sort key
    that no earlier key exceeds: a stable sort puts them last, in index order, so each ranks at
    its own index, and only the keys before the tail are sorted (numpy; the same ranks)."""
    weighted = xp.nonzero(xp.any(alpha != 0, axis=0))[0] if xp is NUMPY else None
    width = int(weighted[-1]) + 1 if weighted is not None and len(weighted) else 0
    full = key.shape[1]
    if xp is NUMPY and 0 < width < full:
        tail = key[:, width:]
        common = tail[0, 0]
        # NaN compares false: a NaN key (NaN weights) takes the full sort
        if (tail == common).all() and (key[:, :width] <= common).all():
            out = np.empty(key.shape, dtype=np.int32)
            out[:, :width] = _ranks(_stable_order(key[:, :width]), xp)
            out[:, width:] = np.arange(width, full, dtype=np.int32)[None, :]
            return out
    if xp is NUMPY:
        return _ranks(_stable_order(key), xp)
    return _ranks(xp.argsort_rows(key, stable=True), xp)


def _stable_order(key: NDArray[np.float64]) -> NDArray[np.int64]:
    """np.argsort(key, axis=1, kind="stable"), by the faster unstable sort and its ties put
    in index order (attnlimits.fused.order_ties_by_index)."""
    from . import fused

    key = np.ascontiguousarray(key)
    order = np.argsort(key, axis=1).astype(np.int64, copy=False)
    fused.order_ties_by_index(key, order)
    return order


def _ranks(order, xp: Namespace):
    """Rank of each key in a per-row order (R, L), int32."""
    width = order.shape[1]
    return xp.scatter_rows(
        xp.empty(order.shape, dtype=xp.int32),
        order,
        xp.broadcast_to(xp.arange(width, dtype=xp.int32), order.shape),
    )
