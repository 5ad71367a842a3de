"""Representation distance between the selected context vector and the rest (Theorem 1).

Notation (paper, Section 2.1): alpha (S, L) attention weights, x (S, L, d) token embeddings,
I_N the top-N set, s = sum_{i in I_N} alpha_i x_i the context vector and

    d~ = sum_{i not in I_N} || alpha_i x_i - s ||                                     (7)

Every function accepts either raw (alpha, x) or a :class:`Weighted` made once by :func:`weighted`,
which holds the products all of them share; the critical-N search evaluates many N on the same
samples and reuses it. Norms of differences are computed by expansion, |a - b|^2 = |a|^2 - 2 a.b +
|b|^2, which turns (S, L, d) passes into batched mat-vecs; entries where that expansion could lose
precision to cancellation are recomputed directly, so results match the plain formula to ~1e-12.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from .selection import (
    DEFAULT_ZERO_WEIGHT,
    NEGLIGIBLE_WEIGHT,
    check_zero_weight,
    random_subset_indices,
)

FloatArray = NDArray[np.floating]
# |a - b|^2 below this fraction of |a|^2 + |b|^2 is recomputed directly (float64 keeps ~16 digits;
# the expansion loses up to all of them when a ~ b).
_CANCELLATION = 1e-8


@dataclass(frozen=True)
class Weighted:
    """Per-sample products shared by the distance functions (float64)."""

    alpha: NDArray[np.float64]  # (S, L)
    scaled: NDArray[np.float64]  # (S, L, d): a_i = alpha_i x_i
    scaled_sq: NDArray[np.float64]  # (S, L): |a_i|^2
    x: NDArray[np.floating]  # (S, L, d) as given (not copied)
    x_sq: NDArray[np.float64]  # (S, L): |x_i|^2
    xbar: NDArray[np.float64]  # (S, d): sum_i a_i
    x_dot_xbar: NDArray[np.float64]  # (S, L): x_i . xbar
    order: NDArray[np.intp]  # (S, L): indices by decreasing weight, ties to the lower index
    # analysis.zero_weight: whether a top-N token of weight 0 is selected (attnlimits.selection)
    zero_weight: str = DEFAULT_ZERO_WEIGHT

    def literal_top_n(self, n: int) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
        """(indices, mask) of the top-n indices whatever their weights, from the cached order
        (same rule as top_n_indices)."""
        if not 1 <= n <= self.alpha.shape[1]:
            raise ValueError(f"N must satisfy 1 <= N <= L, got N={n}, L={self.alpha.shape[1]}")
        idx = self.order[:, :n]
        mask = np.zeros(self.alpha.shape, dtype=bool)
        np.put_along_axis(mask, idx, True, axis=1)
        return idx, mask

    def top_n(self, n: int) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
        """(indices, mask) of the selected top-n set under the zero-weight rule. Under
        "not_selected" the mask leaves out keys of weight 0 and their slots in ``indices`` repeat
        the sample's largest weight's index (always selected), so a max or a gather over the
        indices sees only selected keys; sums over ``indices`` must use the mask."""
        idx, mask = self.literal_top_n(n)
        if self.zero_weight == "literal":
            return idx, mask
        zero = np.take_along_axis(self.alpha, idx, axis=1) == 0
        if not zero.any():
            return idx, mask
        mask &= self.alpha != 0
        return np.where(zero, idx[:, :1], idx), mask

    def zero_weight_in_top_n(self, n: int) -> NDArray[np.int64]:
        """Per sample, how many of the literal top-n indices have weight exactly 0."""
        idx, _ = self.literal_top_n(n)
        return np.count_nonzero(np.take_along_axis(self.alpha, idx, axis=1) == 0, axis=1)

    def negligible_weight_in_top_n(
        self, n: int, relative: float = NEGLIGIBLE_WEIGHT
    ) -> NDArray[np.int64]:
        """Per sample, how many of the literal top-n indices have weight at most ``relative``
        times the row's largest (0 included). Such a token's distance to s, ||s - a_i x_i||,
        differs from ||s|| by at most a_i ||x_i||, below float32's rounding of s: it ties at
        the radius as a zero weight does, without being 0 (stick-breaking's far keys)."""
        idx, _ = self.literal_top_n(n)
        peak = self.alpha.max(axis=1, keepdims=True)
        top = np.take_along_axis(self.alpha, idx, axis=1)
        return np.count_nonzero(top <= relative * peak, axis=1)


def weighted(
    alpha: FloatArray, x: FloatArray, *, zero_weight: str = DEFAULT_ZERO_WEIGHT
) -> Weighted:
    """Compute the shared products once for a block of samples; ``zero_weight``: whether a
    top-N token of weight 0 is selected (attnlimits.selection.ZERO_WEIGHT_RULES).

    One float64 copy of x is made and then scaled in place (it becomes ``scaled``): every other
    product is a reduction, so a block costs one (S, L, d) allocation, not four.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    x = np.asarray(x)
    if alpha.ndim != 2 or x.ndim != 3 or x.shape[:2] != alpha.shape:
        raise ValueError(f"expected alpha (S, L) and x (S, L, d); got {alpha.shape} and {x.shape}")
    buf = x.astype(np.float64)  # always a copy: it is scaled in place below
    x_sq = np.einsum("sld,sld->sl", buf, buf)
    xbar = np.einsum("sl,sld->sd", alpha, buf)
    x_dot_xbar = _mat_vec(buf, xbar)
    buf *= alpha[:, :, None]
    return Weighted(
        alpha=alpha,
        scaled=buf,
        scaled_sq=np.einsum("sld,sld->sl", buf, buf),
        x=x,
        x_sq=x_sq,
        xbar=xbar,
        x_dot_xbar=x_dot_xbar,
        order=np.argsort(-alpha, axis=1, kind="stable"),
        zero_weight=check_zero_weight(zero_weight),
    )


def _as_weighted(alpha_or_w, x) -> Weighted:
    return alpha_or_w if isinstance(alpha_or_w, Weighted) else weighted(alpha_or_w, x)


def _mat_vec(m: NDArray[np.float64], v: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per-sample m (S, L, d) @ v (S, d) -> (S, L)."""
    return np.matmul(m, v[:, :, None])[:, :, 0]


def norms_to_point(
    p: NDArray[np.float64], q: NDArray[np.float64], p_sq: NDArray[np.float64]
) -> NDArray[np.float64]:
    """||p_i - q|| per sample and i, for p (S, L, d) and q (S, d), by expansion with repair."""
    q_sq = np.einsum("sd,sd->s", q, q)[:, None]
    d2 = p_sq - 2.0 * _mat_vec(p, q) + q_sq
    risky = d2 <= _CANCELLATION * (p_sq + q_sq)
    if risky.any():
        si, li = np.nonzero(risky)
        diff = p[si, li] - q[si]
        d2[si, li] = np.einsum("nd,nd->n", diff, diff)
    return np.sqrt(np.maximum(d2, 0.0))


def distance_to_context(alpha, x=None, *, n: int) -> NDArray[np.float64]:
    """The true distance d~ (Eq. 7) for the top-``n`` set of each sample; shape (S,).

    Only the smaller side of the split is gathered: s is the sum of the n selected a_i, or
    xbar minus the L - n others when those are fewer; and when at most _COMPLEMENT_FRACTION of
    the tokens are left out, only their distances are computed (as for the Monte-Carlo draws)
    instead of every token's. The critical-N search spends most of its evaluations near N = L.

    Plain reference: attnlimits.reference.distance.
    """
    w = _as_weighted(alpha, x)
    idx, mask = w.literal_top_n(n)
    n_samples, length = w.alpha.shape
    rows = np.arange(n_samples)[:, None]
    others = w.order[:, n:]
    if n <= length - n:
        s = w.scaled[rows, idx].sum(axis=1)
    else:
        s = w.xbar - w.scaled[rows, others].sum(axis=1)
    if length - n > _COMPLEMENT_FRACTION * length:
        literal = np.where(mask, 0.0, norms_to_point(w.scaled, s, w.scaled_sq)).sum(axis=1)
    else:
        left_out = w.scaled[rows, others] - s[:, None, :]  # (S, L - n, d)
        literal = np.sqrt(np.einsum("smd,smd->sm", left_out, left_out)).sum(axis=1)
    if w.zero_weight == "literal":
        return literal
    # A top-n token of weight 0 adds nothing to s; not selected, it sits at ||0 - s|| = ||s||.
    return literal + w.zero_weight_in_top_n(n) * np.sqrt(np.einsum("sd,sd->s", s, s))


def selected_mass(alpha, x=None, *, n: int) -> NDArray[np.float64]:
    """a_N = sum over I_N of alpha_i, the attention mass of the top-``n`` set; shape (S,)."""
    w = _as_weighted(alpha, x)
    # zero weights add nothing: the literal top-n indices give the same mass under either rule
    return np.take_along_axis(w.alpha, w.literal_top_n(n)[0], axis=1).sum(axis=1)


def fixed_set_upper_bound(alpha, x=None, *, n: int) -> NDArray[np.float64]:
    """Theorem 1.1: (1 - a_N) d1 + max_{j in I_N} ||x_j|| (a_N (L - N) - (1 - a_N)).

    a_N is the selected mass and d1 = max_{i not in I_N, j in I_N} ||x_i - x_j||.
    For N = L there is no non-selected token; d1 is taken as 0 and the bound is returned as is.

    Plain reference: attnlimits.reference.upper_bound.
    """
    w = _as_weighted(alpha, x)
    length = w.alpha.shape[1]
    idx, mask = w.top_n(n)  # under "not_selected", zero-weight slots repeat a selected index
    mass = selected_mass(w, n=n)
    max_selected_norm = np.sqrt(np.take_along_axis(w.x_sq, idx, axis=1).max(axis=1))
    d1 = _max_cross_distance(w, idx, mask)
    size = np.count_nonzero(mask, axis=1)  # the theorem holds for a set of any size |I|
    return (1.0 - mass) * d1 + max_selected_norm * (mass * (length - size) - (1.0 - mass))


def _max_cross_distance(
    w: Weighted, idx: NDArray[np.intp], mask: NDArray[np.bool_]
) -> NDArray[np.float64]:
    """max over i not selected, j selected of ||x_i - x_j||, per sample (0 if a side is empty).

    Screened in float32, decided in float64: one batched (L x d) @ (d x N) single-precision
    product per sample gives every cross pair's |x_i|^2 + |x_j|^2 - 2 x_i.x_j (twice as fast as
    double precision, and no float64 copy of x); every pair within a rounding-error bound of the
    largest value is then recomputed directly as ||x_i - x_j||^2 in float64, so the result is the
    exact maximum of the input, not of its float32 rounding. Embeddings whose squares would
    overflow float32 are screened in float64 the same way.
    """
    x = np.asarray(w.x)
    n_samples, _, width = x.shape
    scale = w.x_sq.max(axis=1)  # (S,): bounds |x_i|^2 for every i of the sample
    work = np.float32 if np.all(scale < 1e30) else np.float64
    xw = x.astype(work, copy=False)
    selected = np.take_along_axis(xw, idx[:, :, None], axis=1)  # (S, N, d)
    partial = np.matmul(xw, np.swapaxes(selected, 1, 2))  # (S, L, N): x_i . x_j
    partial *= -2.0
    partial += np.take_along_axis(w.x_sq, idx, axis=1).astype(work)[:, None, :]
    # |x_j|^2 - 2 x_i.x_j, maximised over j in place; |x_i|^2 does not depend on j
    row = partial.max(axis=2) + w.x_sq  # (S, L): approximate max_j ||x_i - x_j||^2
    row[mask] = -np.inf  # only non-selected rows i
    empty = mask.all(axis=1) | ~mask.any(axis=1)
    # |approx - exact| <= ~(2d + 10) u max|x|^2 (the dot product, the rounded squares and norms,
    # the sums; u the unit roundoff), with another 4x margin: the exact maximiser is within twice
    # that of the approximate maximum. Rows first, then the pairs of the few rows that qualify.
    tol = 8.0 * (width + 8) * (np.finfo(work).eps / 2) * scale
    threshold = row.max(axis=1) - 2.0 * tol
    si, ii = np.nonzero((row >= threshold[:, None]) & ~empty[:, None])
    pair = partial[si, ii] + w.x_sq[si, ii, None] >= threshold[si, None]  # (rows, N)
    ri, jj = np.nonzero(pair)
    si, ii = si[ri], ii[ri]
    diff = x[si, ii].astype(np.float64) - x[si, idx[si, jj]].astype(np.float64)
    out = np.zeros(n_samples)
    np.maximum.at(out, si, np.einsum("nd,nd->n", diff, diff))
    return np.sqrt(out)


def expectation_term(alpha, x=None, *, n: int) -> NDArray[np.float64]:
    """Theorem 1.2's closed-form term, exactly as printed in the paper:

        (L - N)/L * sum_i || (alpha_i + N/(L-1)) x_i - xbar ||,   xbar = sum_i alpha_i x_i.

    See docs/paper-notes.md: this term does not approach the true expectation for N << L.

    Plain reference: attnlimits.reference.expectation_term.
    """
    w = _as_weighted(alpha, x)
    length = w.alpha.shape[1]
    coef = w.alpha + n / (length - 1)
    xbar_sq = np.einsum("sd,sd->s", w.xbar, w.xbar)[:, None]
    p_sq = coef**2 * w.x_sq
    d2 = p_sq - 2.0 * coef * w.x_dot_xbar + xbar_sq
    risky = d2 <= _CANCELLATION * (p_sq + xbar_sq)
    if risky.any():
        si, li = np.nonzero(risky)
        diff = coef[si, li, None] * w.x[si, li].astype(np.float64) - w.xbar[si]
        d2[si, li] = np.einsum("nd,nd->n", diff, diff)
    return (length - n) / length * np.sqrt(np.maximum(d2, 0.0)).sum(axis=1)


def epsilon_bound(alpha, x=None, *, n: int) -> NDArray[np.float64]:
    """Theorem 1.2's bound on the residual epsilon, as printed:

        1/2 (1 - N/L) sum_i N/(L-1) * sum_{j != i} alpha_j^2 ||x_j||^2
                                   / || alpha_i x_i - N/(L-1) sum_{j != i} alpha_j x_j ||.

    A zero denominator gives +inf (the bound says nothing for that sample).

    Plain reference: attnlimits.reference.epsilon_bound.
    """
    w = _as_weighted(alpha, x)
    length = w.alpha.shape[1]
    c = n / (length - 1)
    numer = w.scaled_sq.sum(axis=1, keepdims=True) - w.scaled_sq
    # a_i - c (xbar - a_i) = (1 + c) a_i - c xbar
    p = (1.0 + c) * w.scaled
    denom = norms_to_point(p, c * w.xbar, (1.0 + c) ** 2 * w.scaled_sq)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(denom > 0, numer / denom, np.where(numer > 0, np.inf, 0.0))
    return 0.5 * (1.0 - n / length) * c * ratio.sum(axis=1)


class MonteCarloEstimate(NamedTuple):
    """Per-sample estimate of E (Eq. 8), its standard error, and the draws it took."""

    mean: NDArray[np.float64]
    stderr: NDArray[np.float64]
    draws: NDArray[np.int64]


# The strata: the m tokens with the largest ||alpha_i x_i|| (see monte_carlo_expected_distance).
MC_STRATA = 4
# Draws per stratum and round, at least: a stratum's spread is unknown from one draw.
_MIN_STRATUM_DRAWS = 2


def monte_carlo_expected_distance(
    alpha,
    x=None,
    *,
    n: int,
    draws: int,
    rng: np.random.Generator,
    strata: int = MC_STRATA,
    max_draws: int | None = None,
    target_rel_stderr: float = 0.0,
) -> MonteCarloEstimate:
    """The true E = E_{I_N ~ U}[d~] (Eq. 8), by stratified sampling of uniform top-N sets.

    d~ is heavy-tailed over I_N: a set that holds a token with a large ||a_i|| (an attention sink)
    moves s, and so every term, by about ||a_i||, but such sets are rare (N/L of them), so plain
    sampling misses them in most runs and its sample spread then understates the error (one
    MiniLM sample: 6.02 +- 0.87 from 32 draws, 15.12 +- 0.10 from 200,000). The sets are
    therefore split by which of the ``strata`` heaviest tokens (by ||a_i||) is the heaviest one
    they hold: stratum h holds the h-th heaviest and none heavier, stratum 0 none of them. The
    strata's probabilities are exact (hypergeometric), every stratum is sampled (at least
    _MIN_STRATUM_DRAWS each, else in proportion to its probability), and within a stratum the set is
    uniform, so the estimate is unbiased and its standard error
    sqrt(sum_h P_h^2 s_h^2 / k_h) sees every rare heavy set. ``draws`` is one round; samples
    whose standard error exceeds ``target_rel_stderr`` times their mean get further rounds
    until ``max_draws`` (default ``draws``: one round). The plain reference is the enumeration
    of every subset (tests/reference.py: exact_expected_distance).

    Plain reference: attnlimits.reference.exact_expected_distance (the estimate converges to it).
    """
    w = _as_weighted(alpha, x)
    if draws < 1:
        raise ValueError(f"draws must be >= 1, got {draws}")
    if strata < 0:
        raise ValueError(f"strata must be >= 0, got {strata}")
    n_samples, length = w.alpha.shape
    if not 1 <= n <= length:
        raise ValueError(f"N must satisfy 1 <= N <= L, got N={n}, L={length}")
    max_draws = draws if max_draws is None else max_draws
    if n == length:  # I_N is everything: nothing is left to sum over
        zeros = np.zeros(n_samples)
        return MonteCarloEstimate(zeros, zeros.copy(), np.zeros(n_samples, dtype=np.int64))
    m = min(strata, length - 1)
    plan = _strata_plan(length, n, m, draws)
    rank = np.argsort(-w.scaled_sq, axis=1, kind="stable")  # heaviest ||a_i|| first
    complement = length - n <= _COMPLEMENT_FRACTION * length
    n_strata = len(plan)
    count = np.zeros((n_samples, n_strata))
    shift = np.zeros((n_samples, n_strata))
    total = np.zeros((n_samples, n_strata))
    total_sq = np.zeros((n_samples, n_strata))
    prob = np.array([p for _, p, _ in plan])
    todo = np.arange(n_samples)
    round_draws = sum(k for _, _, k in plan)
    first = True
    while todo.size:
        sub = w if todo.size == n_samples else _rows(w, todo)
        for col, (h, _, k) in enumerate(plan):
            sets = _stratum_sets(rank[todo], h, m, n, k, rng, complement)
            per_draw = _mc_by_complement(sub, sets) if complement else _mc_dense(sub, sets)
            if first:
                shift[todo, col] = per_draw[:, 0]
            dev = per_draw - shift[todo, col][:, None]
            total[todo, col] += dev.sum(axis=1)
            total_sq[todo, col] += (dev * dev).sum(axis=1)
            count[todo, col] += k
        first = False
        mean, stderr = _stratified(count, shift, total, total_sq, prob)
        used = count.sum(axis=1)
        wants_more = stderr[todo] > target_rel_stderr * np.abs(mean[todo])
        todo = todo[wants_more & (used[todo] + round_draws <= max_draws)]
    return MonteCarloEstimate(mean, stderr, count.sum(axis=1).astype(np.int64))


def _strata_plan(length: int, n: int, m: int, draws: int) -> list[tuple[int, float, int]]:
    """(h, P_h, draws per round) of each stratum that has a set: h = 1..m holds the h-th
    heaviest token and none heavier (P_h = C(L-h, N-1)/C(L, N)), h = 0 none of the m
    (P_0 = C(L-m, N)/C(L, N)). Exact integer ratios: they sum to one."""
    total = math.comb(length, n)
    plan = [(h, math.comb(length - h, n - 1) / total) for h in range(1, m + 1)]
    plan.append((0, math.comb(length - m, n) / total))
    plan = [(h, p) for h, p in plan if p > 0]
    return [(h, p, max(_MIN_STRATUM_DRAWS, round(draws * p))) for h, p in plan]


def _stratum_sets(
    rank: NDArray[np.intp],
    h: int,
    m: int,
    n: int,
    draws: int,
    rng: np.random.Generator,
    complement: bool,
) -> NDArray[np.intp]:
    """Uniform sets of stratum h, (S, K, size): the selected N tokens, or with ``complement``
    the L - N left out. rank (S, L) orders each sample's tokens by decreasing ||a_i||."""
    n_samples, length = rank.shape
    if h == 0:  # none of the m heaviest selected: all of them are left out
        forced_in, forced_out, pool = rank[:, :0], rank[:, :m], rank[:, m:]
    else:  # the h-th heaviest selected, the h - 1 heavier ones left out
        forced_in, forced_out, pool = rank[:, h - 1 : h], rank[:, : h - 1], rank[:, h:]
    forced = forced_out if complement else forced_in
    size = (length - n if complement else n) - forced.shape[1]
    shape = (n_samples, draws)
    parts = [np.broadcast_to(forced[:, None, :], (*shape, forced.shape[1]))]
    if size > 0:
        pos = random_subset_indices(shape, length=pool.shape[1], n=size, rng=rng)
        parts.append(np.take_along_axis(pool[:, None, :], pos, axis=2))
    return np.concatenate(parts, axis=2)


def _stratified(count, shift, total, total_sq, prob):
    """Stratified mean sum_h P_h ybar_h and its standard error from shifted running sums."""
    mean_dev = total / count
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.maximum(total_sq - count * mean_dev**2, 0.0) / (count - 1)
    var = np.where(count > 1, var, np.inf)
    mean = ((shift + mean_dev) * prob).sum(axis=1)
    stderr = np.sqrt((prob**2 * var / count).sum(axis=1))
    return mean, stderr


def _rows(w: Weighted, rows: NDArray[np.intp]) -> Weighted:
    """The samples ``rows`` of w (copies)."""
    return Weighted(
        alpha=w.alpha[rows],
        scaled=w.scaled[rows],
        scaled_sq=w.scaled_sq[rows],
        x=w.x[rows],
        x_sq=w.x_sq[rows],
        xbar=w.xbar[rows],
        x_dot_xbar=w.x_dot_xbar[rows],
        order=w.order[rows],
        zero_weight=w.zero_weight,
    )


# Up to this fraction of non-selected tokens, a draw's distances are computed directly from the
# gathered complement (O((L - N) d) per draw) instead of against all L tokens by BLAS products
# (O(L d), ~8x cheaper per element): measured, the gather wins below about L/8 left out.
_COMPLEMENT_FRACTION = 0.1


def _mc_by_complement(w: Weighted, comp: NDArray[np.intp]) -> NDArray[np.float64]:
    """Per-draw d~ (S, K) from the left-out sets comp (S, K, L - N): s = xbar minus the sum over
    the complement, so only L - N rows are touched; distances are exact."""
    n_samples = w.alpha.shape[0]
    rows = np.arange(n_samples)[:, None, None]
    left_out = w.scaled[rows, comp]  # (S, K, m, d)
    s = w.xbar[:, None, :] - left_out.sum(axis=2)  # (S, K, d)
    left_out -= s[:, :, None, :]
    total = np.sqrt(np.einsum("skmd,skmd->skm", left_out, left_out)).sum(axis=2)
    if w.zero_weight == "literal":
        return total
    # the drawn set's zero-weight tokens are not selected: each adds ||s|| (as in d~)
    zero_total = np.count_nonzero(w.alpha == 0, axis=1)[:, None]
    zero_selected = zero_total - np.count_nonzero(w.alpha[rows, comp] == 0, axis=2)
    return total + zero_selected * np.sqrt(np.einsum("skd,skd->sk", s, s))


def _mc_dense(w: Weighted, idx: NDArray[np.intp]) -> NDArray[np.float64]:
    """Per-draw d~ (S, K) of the selected sets idx (S, K, N) against every token: the draws'
    context vectors are one (K x L) @ (L x d) product (or a gather for small N) and their dot
    products with every a_i one (L x d) @ (d x K) product, by expansion with the same repair of
    cancelling entries as :func:`norms_to_point`."""
    n_samples, length = w.alpha.shape
    draws, n = idx.shape[1], idx.shape[2]
    rows = np.arange(n_samples)[:, None, None]
    masks = None
    if n <= 32:  # gathering N rows is cheapest for small subsets...
        s = w.scaled[rows, idx].sum(axis=2)  # (S, K, d): the draws' context vectors
    else:  # ...a (K x L) mask product for large ones (a gather would be (S, K, N, d))
        masks = np.zeros((n_samples, draws, length))
        np.put_along_axis(masks, idx, 1.0, axis=2)
        s = np.matmul(masks, w.scaled)
    # (S, L, K): -2 a_i.s_k (scaling s by -2 is exact), then + |a_i|^2 + |s_k|^2 in place
    d2 = np.matmul(w.scaled, np.swapaxes(-2.0 * s, 1, 2))
    s_sq = np.einsum("skd,skd->sk", s, s)
    d2 += w.scaled_sq[:, :, None]
    d2 += s_sq[:, None, :]
    # a_i ~ s_k cancels: recompute those few entries directly. Screen against the row's largest
    # scale (one pass, no (S, L, K) temporary), then apply the exact per-entry test.
    screen = d2 <= _CANCELLATION * (w.scaled_sq + s_sq.max(axis=1, keepdims=True))[:, :, None]
    if screen.any():
        si, li, ki = np.nonzero(screen)
        risky = d2[si, li, ki] <= _CANCELLATION * (w.scaled_sq[si, li] + s_sq[si, ki])
        si, li, ki = si[risky], li[risky], ki[risky]
        diff = w.scaled[si, li] - s[si, ki]
        d2[si, li, ki] = np.einsum("nd,nd->n", diff, diff)
    np.maximum(d2, 0.0, out=d2)
    np.sqrt(d2, out=d2)
    # sum over the non-selected = sum over all - sum over the selected; under "not_selected" a
    # drawn token of weight 0 is not selected and stays in the sum
    if w.zero_weight != "literal":
        if masks is None:
            keep = np.take_along_axis(w.alpha[:, None, :], idx, axis=2) != 0
        else:
            masks *= (w.alpha != 0)[:, None, :]
    if masks is None:
        picked = d2[rows, idx, np.arange(draws)[None, :, None]]  # (S, K, N)
        if w.zero_weight != "literal":
            picked = np.where(keep, picked, 0.0)
        selected = picked.sum(axis=2)
    else:  # a contraction with the masks beats gathering (S, K, N) scattered entries
        selected = np.einsum("skl,slk->sk", masks, d2)
    return d2.sum(axis=1) - selected
