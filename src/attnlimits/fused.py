"""Fused row kernels: the all-rows protocol's per-key sweeps in one pass each, compiled by numba.

Each function here is the fast twin of numpy code in :mod:`attnlimits.protocol`, which stays the
plain reference (tests/test_fused.py holds every kernel to it, on hand-made and hypothesis-drawn
blocks, ties, masks and near-cancelling entries included). numpy evaluates a sweep such as

    ||coef_ti x_i - s_t|| = sqrt(coef_ti^2 |x_i|^2 - 2 coef_ti x_i . s_t + |s_t|^2),

masked and summed over the keys, as eight or so passes over an (R, L) array; each pass reads and
writes memory, and at L in the thousands that traffic, not the arithmetic, is the cost. The
kernels read each entry once and keep the sums in registers. The matrix products (x_i . s_t for
a block, one GEMM) stay with BLAS, which runs them on every core; the kernels run on one thread
between them (OpenBLAS's threads spin on the cores for a while after each product, so parallel
kernels beside them measured slower: 8.4 against 3.6 ms per product and sweep of 256 x 2048 keys
on 2 cores).

Precision: every entry is computed with the same float64 operations, in the same order, as the
reference, and an entry at risk of cancellation is recomputed directly by the same rule; only
the sums over keys are taken in another order (sequentially, where numpy sums pairwise), so a
row's sum differs from the reference's by rounding (relative 1e-13 at most on the tests' blocks).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

from .expansion import CANCELLATION


@njit(cache=True)
def _sum(values: NDArray[np.float64], start: int, stop: int) -> float:
    """values[start:stop].sum() in four running sums: the adds overlap instead of waiting on
    one another (another order than numpy's pairwise sum: rounding apart, the same)."""
    a0 = a1 = a2 = a3 = 0.0
    i = start
    while i + 4 <= stop:
        a0 += values[i]
        a1 += values[i + 1]
        a2 += values[i + 2]
        a3 += values[i + 3]
        i += 4
    while i < stop:
        a0 += values[i]
        i += 1
    return (a0 + a1) + (a2 + a3)


@njit(cache=True)
def _roots(values: NDArray[np.float64], stop: int) -> None:
    """values[:stop] = sqrt(values[:stop]), in a loop the compiler vectorises."""
    for i in range(stop):
        values[i] = np.sqrt(values[i])


@njit(cache=True)
def subset_norm_sums(
    alpha: NDArray[np.float64],
    x: NDArray[np.float64],
    a_sq_x: NDArray[np.float64],
    a_sq_x_floor: NDArray[np.float64],
    s: NDArray[np.float64],
    q_sq: NDArray[np.float64],
    minus_twice_sx: NDArray[np.float64],
    ranks: NDArray[np.int32],
    n: int,
    selectable: NDArray[np.bool_],
    visible: NDArray[np.int64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """For each row t of a block, the sums of ||alpha_ti x_i - s_t|| over the keys i < W (the
    block's width) that row t does not select (rank >= n, or not selectable), split at the row's
    visible length: (keys i < visible_t, keys visible_t <= i < W). ``minus_twice_sx`` is
    (-2 s) @ x.T (R, W) from BLAS, ``a_sq_x`` alpha^2 |x_i|^2 and ``a_sq_x_floor`` (R,) the
    cancellation threshold's row term, as :func:`attnlimits.expansion.norms_by_expansion` takes them, and
    ``q_sq`` its |s_t|^2 (numpy's, so that every entry is the reference's number).

    Each row in passes the compiler vectorises (the squared distances, then their roots), with
    the few entries at risk of cancellation recomputed between them; a selected key's entry is
    0, which adds nothing."""
    rows, width = minus_twice_sx.shape
    dims = x.shape[1]
    inside = np.zeros(rows)
    beyond = np.zeros(rows)
    d2 = np.empty(width)
    for r in range(rows):
        qs = q_sq[r]
        floor = a_sq_x_floor[r] + CANCELLATION * qs
        risky = False
        for i in range(width):
            value = alpha[r, i] * minus_twice_sx[r, i]
            value += a_sq_x[r, i]
            value += qs
            d2[i] = value
            risky |= value <= floor
        for i in range(width if risky else 0):  # an entry at risk of cancellation
            if d2[i] <= floor:
                a = alpha[r, i]
                if a_sq_x[r, i] > 0.0 and qs > 0.0:
                    value = 0.0
                    for k in range(dims):
                        diff = a * x[i, k] - s[r, k]
                        value += diff * diff
                    d2[i] = value
                if d2[i] < 0.0:
                    d2[i] = 0.0
        for i in range(width):  # a select, not a branch: vectorised too
            chosen = (ranks[r, i] < n) & selectable[r, i]
            d2[i] = 0.0 if chosen else d2[i]
        _roots(d2, width)
        seen = min(visible[r], width)
        inside[r] = _sum(d2, 0, seen)
        beyond[r] = _sum(d2, seen, width)
    return inside, beyond


@njit(cache=True)
def closed_form_sums(
    alpha: NDArray[np.float64],
    x: NDArray[np.float64],
    x_sq: NDArray[np.float64],
    xbar: NDArray[np.float64],
    u_sq: NDArray[np.float64],
    u_sq_floor: NDArray[np.float64],
    twice_u_dot_x: NDArray[np.float64],
    x_sq_max: float,
    c: NDArray[np.float64],
    keys: NDArray[np.int64],
) -> NDArray[np.float64]:
    """For each row t, sum over its first keys_t keys of ||(alpha_ti + c_t) x_i - xbar_t||, by
    |u_i|^2 + c (2 u_i . x_i + c |x_i|^2) with u_i = alpha_ti x_i - xbar_t, each entry at risk of
    cancellation recomputed directly: Theorem 1.2's closed-form E before its (L - N) / L, as
    :func:`attnlimits.protocol.row_critical_statistics` computes it (in vectorised passes, as
    :func:`subset_norm_sums`)."""
    rows = u_sq.shape[0]
    dims = x.shape[1]
    out = np.zeros(rows)
    d2 = np.empty(u_sq.shape[1])
    for r in range(rows):
        cr = c[r]
        risk = u_sq_floor[r] + CANCELLATION * x_sq_max * cr * cr
        count = keys[r]
        risky = False
        for i in range(count):
            value = x_sq[i] * cr
            value += twice_u_dot_x[r, i]
            value *= cr
            value += u_sq[r, i]
            d2[i] = value
            risky |= value <= risk
        for i in range(count if risky else 0):  # an entry at risk of cancellation
            if d2[i] <= risk:
                coef = alpha[r, i] + cr
                value = 0.0
                for k in range(dims):
                    diff = coef * x[i, k] - xbar[r, k]
                    value += diff * diff
                d2[i] = value
        _roots(d2, count)
        out[r] = _sum(d2, 0, count)
    return out


@njit(cache=True)
def shifted_norm_sums(
    alpha: NDArray[np.float64],
    x: NDArray[np.float64],
    x_sq: NDArray[np.float64],
    c: NDArray[np.float64],
    point: NDArray[np.float64],
    q_sq: NDArray[np.float64],
    minus_twice_px: NDArray[np.float64],
    keys: NDArray[np.int64],
) -> NDArray[np.float64]:
    """For each row t, sum over its first keys_t keys of ||(alpha_ti + c_t) x_i - point_t||,
    each entry as :func:`attnlimits.expansion.norms_by_expansion` computes it for coef = alpha + c (its
    cancellation floor over the row's every key): :func:`attnlimits.protocol.row_statistics`'s
    expectation term before its (L - N) / L, by its own expansion (``q_sq`` and
    ``minus_twice_px``, (-2 point) @ x.T, from numpy)."""
    rows, width = minus_twice_px.shape
    dims = x.shape[1]
    out = np.zeros(rows)
    d2 = np.empty(width)
    for r in range(rows):
        cr = c[r]
        qs = q_sq[r]
        largest = 0.0
        for i in range(width):
            coef = alpha[r, i] + cr
            value = coef * coef * x_sq[i]
            largest = value if value > largest else largest
        floor = CANCELLATION * largest + CANCELLATION * qs
        count = keys[r]
        risky = False
        for i in range(count):
            coef = alpha[r, i] + cr
            value = coef * minus_twice_px[r, i]
            value += coef * coef * x_sq[i]
            value += qs
            d2[i] = value
            risky |= value <= floor
        for i in range(count if risky else 0):  # an entry at risk of cancellation
            if d2[i] <= floor:
                coef = alpha[r, i] + cr
                if coef * coef * x_sq[i] > 0.0 and qs > 0.0:
                    value = 0.0
                    for k in range(dims):
                        diff = coef * x[i, k] - point[r, k]
                        value += diff * diff
                    d2[i] = value
                if d2[i] < 0.0:
                    d2[i] = 0.0
        _roots(d2, count)
        out[r] = _sum(d2, 0, count)
    return out


@njit(cache=True)
def order_ties_by_index(keys: NDArray[np.float64], order: NDArray[np.int64]) -> None:
    """Make ``order``, each row's ascending order of ``keys`` (R, L) by an unstable sort, the
    stable sort's, in place: within each run of equal keys (NaN with NaN, which numpy sorts
    last; -0.0 with 0.0) the indices ascending. numpy's default argsort is about twice as fast
    as its stable one here, and runs of ties are short but for zero weights."""
    rows, width = order.shape
    for r in range(rows):
        i = 0
        while i < width:
            key = keys[r, order[r, i]]
            j = i + 1
            if np.isnan(key):
                j = width
            else:
                while j < width and keys[r, order[r, j]] == key:
                    j += 1
            if j - i > 1:
                order[r, i:j] = np.sort(order[r, i:j])
            i = j


@njit(cache=True)
def nested_context_vectors(
    alpha: NDArray[np.float64],
    x: NDArray[np.float64],
    ranks: NDArray[np.int32],
    ns: NDArray[np.int64],
) -> NDArray[np.float64]:
    """s_t(N) = sum over the keys i of rank_ti < N of alpha_ti x_i, for every N of the
    increasing ``ns`` at once, (len(ns), R, d): each row's keys are visited once, in rank order,
    and the sum read off at each N (a key's rank is its place in the row's order, so the sets
    are nested in N). Keys at or past x's length (the block's width) weigh 0. The plain
    reference is ``np.where(ranks < N, alpha, 0) @ x`` per N, which sums in another order."""
    rows = alpha.shape[0]
    width, dims = x.shape
    out = np.zeros((len(ns), rows, dims))
    top = ns[-1] if len(ns) else 0
    for r in range(rows):
        order = np.full(ranks.shape[1], -1, dtype=np.int64)
        for i in range(ranks.shape[1]):
            if ranks[r, i] < top:
                order[ranks[r, i]] = i
        acc = np.zeros(dims)
        j = 0
        for rank in range(top):
            while j < len(ns) and ns[j] <= rank:
                out[j, r, :] = acc
                j += 1
            i = order[rank]
            if 0 <= i < width:
                a = alpha[r, i]
                for k in range(dims):
                    acc[k] += a * x[i, k]
        while j < len(ns):
            out[j, r, :] = acc
            j += 1
    return out


@njit(cache=True)
def separation_counts(
    alpha: NDArray[np.float64],
    x: NDArray[np.float64],
    a_sq_x: NDArray[np.float64],
    a_sq_x_floor: NDArray[np.float64],
    s: NDArray[np.float64],
    q_sq: NDArray[np.float64],
    minus_twice_sx: NDArray[np.float64],
    selected: NDArray[np.bool_],
    counted: NDArray[np.bool_],
    resolvable: NDArray[np.bool_],
    visible: NDArray[np.int64],
    n: int,
    every_from: NDArray[np.float64],
    within_from: NDArray[np.float64],
) -> tuple[
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
]:
    """Eq. (10) for each row t of a block, under two readings of its keys at once: r, the
    smallest ||alpha_ti x_i - s_t|| over the counted keys the row does not select, and N_s,
    how many selected and ``resolvable`` keys lie within r; (r over every counted key, N_s by
    it, r over the keys i < visible_t, N_s by it, the selected weights in key order (R, n),
    zero-padded). Each distance is :func:`attnlimits.expansion.norms_by_expansion`'s entry, by the same
    operations (``q_sq`` is its |s_t|^2, passed in so that it is the same number), kept for
    the row while r is found. r is inf where a row has no such key. ``every_from`` and
    ``within_from`` (R,): the smallest distance of the counted keys past x's width, under each
    reading (inf: none), which the caller counted without computing (r is a minimum: the
    same number whichever keys are visited first)."""
    rows, width = minus_twice_sx.shape
    dims = x.shape[1]
    radius_every = np.full(rows, np.inf)
    radius_visible = np.full(rows, np.inf)
    inside_every = np.zeros(rows)
    inside_visible = np.zeros(rows)
    alpha_selected = np.zeros((rows, n))
    dist = np.empty(width)
    for r in range(rows):
        qs = q_sq[r]
        floor = a_sq_x_floor[r] + CANCELLATION * qs
        seen = visible[r]
        every = every_from[r]
        within = within_from[r]
        slot = 0
        for i in range(width):
            a = alpha[r, i]
            d2 = a * minus_twice_sx[r, i]
            d2 += a_sq_x[r, i]
            d2 += qs
            if d2 <= floor:
                if a_sq_x[r, i] > 0.0 and qs > 0.0:
                    d2 = 0.0
                    for k in range(dims):
                        diff = a * x[i, k] - s[r, k]
                        d2 += diff * diff
                if d2 < 0.0:
                    d2 = 0.0
            d = np.sqrt(d2)
            dist[i] = d
            if selected[r, i]:
                if slot < n:
                    alpha_selected[r, slot] = a
                slot += 1
            elif counted[r, i]:
                if d < every:
                    every = d
                if i < seen and d < within:
                    within = d
        count_every = 0
        count_visible = 0
        for i in range(width):
            if selected[r, i] and resolvable[r, i]:
                if dist[i] <= every:
                    count_every += 1
                if dist[i] <= within:
                    count_visible += 1
        radius_every[r] = every
        radius_visible[r] = within
        inside_every[r] = count_every
        inside_visible[r] = count_visible
    return radius_every, inside_every, radius_visible, inside_visible, alpha_selected


@njit(cache=True, error_model="numpy")
def epsilon_ratio_sums(
    alpha: NDArray[np.float64],
    x: NDArray[np.float64],
    x_sq: NDArray[np.float64],
    scale: NDArray[np.float64],
    point: NDArray[np.float64],
    q_sq: NDArray[np.float64],
    minus_twice_px: NDArray[np.float64],
    counted: NDArray[np.int64],
) -> NDArray[np.float64]:
    """For each row t, the sum over its first ``counted`` keys of sum_{j != i} alpha_j^2 |x_j|^2
    / ||scale_t alpha_ti x_i - point_t|| (+inf where a denominator is 0 and its numerator is
    not, 0 where both are): Theorem 1.2's epsilon bound before its factor, as
    :func:`attnlimits.protocol.row_epsilon_bound` computes it, each denominator by
    :func:`attnlimits.expansion.norms_by_expansion`'s operations (``q_sq`` its |point_t|^2 and
    ``minus_twice_px`` (-2 point) @ x.T, from the caller). ``minus_twice_px`` may stop at a
    width short of ``counted``: every key past it must weigh 0 (a causal block's future keys),
    and each adds the same term, without a product."""
    rows, width = minus_twice_px.shape
    dims = x.shape[1]
    out = np.zeros(rows)
    for r in range(rows):
        total_sq = 0.0
        largest = 0.0
        for i in range(width):
            total_sq += alpha[r, i] * alpha[r, i] * x_sq[i]
            coef = scale[r] * alpha[r, i]
            coef_sq_x = coef * coef * x_sq[i]
            if coef_sq_x > largest:
                largest = coef_sq_x
        qs = q_sq[r]
        floor = CANCELLATION * largest + CANCELLATION * qs
        total = 0.0
        for i in range(min(counted[r], width)):
            coef = scale[r] * alpha[r, i]
            coef_sq_x = coef * coef * x_sq[i]
            d2 = coef * minus_twice_px[r, i]
            d2 += coef_sq_x
            d2 += qs
            if d2 <= floor:
                if coef_sq_x > 0.0 and qs > 0.0:
                    d2 = 0.0
                    for k in range(dims):
                        diff = coef * x[i, k] - point[r, k]
                        d2 += diff * diff
                if d2 < 0.0:
                    d2 = 0.0
            denominator = np.sqrt(d2)
            numerator = total_sq - alpha[r, i] * alpha[r, i] * x_sq[i]
            if denominator > 0.0:
                total += numerator / denominator
            elif numerator > 0.0:
                total += np.inf
        # the keys past the width weigh 0: coef 0, so each term is the same, |point| apart
        tail = np.sqrt(qs)
        for _ in range(width, counted[r]):
            if tail > 0.0:
                total += total_sq / tail
            elif total_sq > 0.0:
                total += np.inf
        out[r] = total
    return out
