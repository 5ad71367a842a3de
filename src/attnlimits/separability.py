"""Geometric separability of the selected tokens (Theorem 2, Eqs. 10-12).

Embeddings are first projected to the sphere of radius M (Assumption 1). Then, per sample,
s = sum_{i in I_N} alpha_i x_i, r = min_{i not in I_N} ||s - alpha_i x_i|| (so every non-selected
token lies outside B_r(s)), and N_s = #{i in I_N : ||alpha_i x_i - s|| <= r} (Eq. 10).

A top-N token of weight 0 would tie at the radius (||0 - s|| = ||s||, and so is every other
zero-weight token's distance, which makes r = ||s||) and count as distinguishable whatever the
model does. Under the default zero-weight rule ("not_selected", attnlimits.selection) it is not
selected: it joins the non-selected tokens and never counts in N_s; N stays the denominator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .arrays import NUMPY
from .distance import Weighted, norms_to_point
from .selection import DEFAULT_ZERO_WEIGHT, resolvable, selected_by_rule, top_n_mask

FloatArray = NDArray[np.floating]

# Theorem 2's upper bound is a mean of exp(-(r - xi_i)^2 / (16 M^2)) with r and every xi_i in
# [0, M] (points on the sphere of radius M, weights summing to 1), so it is never below
# e^(-1/16) = 0.9394: an N_s/N at or below that cannot violate it (docs/paper-notes.md).
UPPER_BOUND_FLOOR = math.exp(-1.0 / 16.0)


def project_to_sphere(x: FloatArray, radius: float) -> NDArray[np.float64]:
    """x_i -> M x_i / ||x_i||. A zero vector has no direction and raises."""
    out = np.array(x, dtype=np.float64)  # one copy, scaled in place (no temporaries)
    norms = np.sqrt(np.einsum("...d,...d->...", out, out))[..., None]
    if np.any(norms == 0):
        raise ValueError("cannot project a zero embedding onto the sphere")
    out *= radius
    out /= norms
    return out


PAIRWISE_BLOCK = 1024  # Gram columns per block: block x L float32, 32 MiB at L = 8192


def min_pairwise_distance(x: FloatArray, *, block: int = PAIRWISE_BLOCK) -> NDArray[np.float64]:
    """delta of Assumption 2: min_{i != j} ||x_i - x_j|| per sample; x has shape (S, L, d).

    The candidates come from a float32 Gram matrix through ||x_i - x_j||^2 = |x_i|^2 + |x_j|^2 -
    2 x_i.x_j, built ``block`` columns at a time and only above the diagonal (rows i < j), so no
    L x L array exists. Every column whose smallest candidate lies within the float32 error bound
    of the overall smallest is then recomputed directly in float64, so the result is the exact
    minimum of the input, not of its float32 rounding.

    Plain reference: attnlimits.reference.min_pairwise.
    """
    x = np.asarray(x)
    n_samples, length, width = x.shape
    if length < 2:
        raise ValueError("a minimum pairwise distance needs L >= 2")
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    x64 = x.astype(np.float64, copy=False)
    x32 = x.astype(np.float32)
    sq = np.einsum("sld,sld->sl", x64, x64)
    sq32 = sq.astype(np.float32)
    # |float32 d^2 - d^2| <= ~(d + 2) u (|x_i|^2 + |x_j|^2) for unit roundoff u; 4x margin.
    tol_factor = 4.0 * (width + 2) * 2.0**-24 * 2.0
    out = np.empty(n_samples)
    column_min = np.empty(length, dtype=np.float32)
    for s in range(n_samples):
        for j0 in range(0, length, block):
            j1 = min(j0 + block, length)
            gram = x32[s, :j1] @ x32[s, j0:j1].T  # rows 0..j1-1: the pairs i < j of these columns
            gram *= -2.0
            gram += sq32[s, :j1, None]
            gram += sq32[s, None, j0:j1]
            diagonal = gram[j0:j1]
            diagonal[np.tril_indices(j1 - j0)] = np.inf  # i >= j: the pair's other copy, or i = j
            column_min[j0:j1] = gram.min(axis=0)
        threshold = column_min.min() + tol_factor * sq[s].max()
        best = np.inf
        for j in np.nonzero(column_min <= threshold)[0]:  # usually one column
            diff = x64[s, :j] - x64[s, j]
            best = min(best, np.einsum("nd,nd->n", diff, diff).min())
        out[s] = np.sqrt(best)
    return out


@dataclass(frozen=True)
class Separability:
    """Per-sample results of Theorem 2 for one N; every field has shape (S,)."""

    n_distinguishable: NDArray[np.int64]  # N_s
    ratio: NDArray[np.float64]  # N_s / N
    radius: NDArray[np.float64]  # r
    lower_bound: NDArray[np.float64]  # left side of Eq. (11); NaN where degenerate
    upper_bound: NDArray[np.float64]  # right side of Eq. (11); NaN where degenerate
    no_outside_token: NDArray[np.bool_]  # N >= L: r undefined
    zero_radius: NDArray[np.bool_]  # r == 0: the lower bound is -inf
    negative_xi_square: NDArray[np.bool_]  # Eq. (12) negative for some i: xi undefined
    zero_weight_selected: NDArray[np.int64]  # top-N tokens of weight 0 (not selected by default)
    # rows where the per-sample lower bound can fail (lower_bound_open); elsewhere it is proved
    lower_bound_open: NDArray[np.bool_] | None = None
    # rows whose N_s the not_selected reading lowers by a negligible weight (negligible_left_out)
    negligible_left_out: NDArray[np.bool_] | None = None


def lower_bound_open(alpha, literal, xp: Any = None) -> NDArray[np.bool_]:
    """Per row, whether Eq. (11)'s lower bound on its N_s/N can fail: only with a negative
    weight in its top-N set (``literal``: the rows' literal top-N masks), which the proof's
    d_i <= xi_i needs non-negative. It holds on every other row under Eq. (10)'s count
    (docs/paper-notes.md section 16: each top-N token lies within its xi_i of s, for any r), a
    top-N token of weight 0 left unselected (zero_weight not_selected) included: its xi_i >=
    ||s|| >= r pays for it; weights outside the top N enter neither xi nor the count."""
    xp = NUMPY if xp is None else xp
    # count_nonzero, not any: the torch namespace (attnlimits.arrays) has numpy's former only
    return xp.count_nonzero(literal & (alpha < 0), axis=1) > 0


def negligible_left_out(alpha, literal, zero_weight: str, xp: Any = None) -> NDArray[np.bool_]:
    """Per row, whether zero_weight "not_selected" leaves out of N_s a top-N token of weight
    above 0 and at most NEGLIGIBLE_WEIGHT times the row's peak: it stays selected, nothing
    pays for it, and the reading's N_s/N can fall below Eq. (11)'s bound (by 4e-8 in
    docs/paper-notes.md section 16's case), where Eq. (10)'s count cannot. ``literal``: the
    rows' literal top-N masks."""
    xp = NUMPY if xp is None else xp
    if zero_weight == "literal":
        return xp.zeros(literal.shape[0], dtype=bool)
    negligible = literal & (alpha > 0) & ~resolvable(alpha, zero_weight, xp)
    return xp.count_nonzero(negligible, axis=1) > 0


def xi(
    alpha_selected: FloatArray, delta: FloatArray, *, radius_m: float, xp: Any = None
) -> NDArray[np.float64]:
    """xi_i of Eq. (12) for each selected token; alpha_selected (S, N), delta (S,); arrays of
    ``xp`` (attnlimits.arrays, default numpy).

    xi_i^2 = M^2 sum_{j != i} alpha_j^2 + (M^2 - delta^2/2) sum_{j != k, j,k != i} alpha_j alpha_k,
    all indices in I_N. The pair sum is (sum_{j != i} alpha_j)^2 - sum_{j != i} alpha_j^2.
    Entries whose xi^2 is negative are returned as NaN (counted by the caller).
    """
    xp = NUMPY if xp is None else xp
    a = xp.asarray(alpha_selected, dtype=xp.float64)
    delta = xp.asarray(delta, dtype=xp.float64)
    others_sum = a.sum(axis=1, keepdims=True) - a
    others_sq = (a * a).sum(axis=1, keepdims=True) - a * a
    pairs = others_sum**2 - others_sq
    m2 = radius_m**2
    xi2 = m2 * others_sq + (m2 - delta[:, None] ** 2 / 2.0) * pairs
    with xp.errstate(invalid="ignore"):
        return xp.where(xi2 >= 0, xp.sqrt(xp.maximum(xi2, 0.0)), xp.nan)


def theorem2_row_outcomes(
    radius, n_s, alpha_selected, valid, *, n: int, delta: float, radius_m: float, xp: Any = None
) -> dict[str, Any]:
    """Per row, from r, N_s and the selected weights in key order (R, n, zero-padded): N_s/N
    and Theorem 2's lower and upper bounds, NaN where the row is not ``valid`` (bounds NaN also
    where some xi^2 < 0, the lower one where r = 0), with the counts of those rows' causes.
    Arrays of ``xp`` (attnlimits.arrays, default numpy); the plain and the fused Eq. 10 passes
    (attnlimits.protocol.row_separability, attnlimits.sweeps.separability_rows) share it."""
    xp = NUMPY if xp is None else xp
    xi_sel = xi(alpha_selected, xp.full(len(radius), float(delta)), radius_m=radius_m, xp=xp)
    with xp.errstate(divide="ignore", invalid="ignore"):
        lower = 1.0 - xi_sel.sum(axis=1) / (radius * n)
        upper = xp.exp(-((radius[:, None] - xi_sel) ** 2) / (16.0 * radius_m**2)).mean(axis=1)
    negative = xp.isnan(xi_sel).any(axis=1)
    bad = ~valid | negative
    return {
        "ratio": xp.where(valid, n_s / n, xp.nan),
        "zero_radius": xp.where(valid, xp.astype(radius == 0, xp.float64), xp.nan),
        "negative_xi_square": xp.where(valid, xp.astype(negative, xp.float64), xp.nan),
        "lower_bound": xp.where(bad | (radius == 0), xp.nan, lower),
        "upper_bound": xp.where(bad, xp.nan, upper),
    }


def distinguishable(
    alpha, x_sphere: FloatArray | None, *, n: int, zero_weight: str = DEFAULT_ZERO_WEIGHT
) -> tuple[NDArray[np.bool_], NDArray[np.bool_], NDArray[np.float64]]:
    """(selected, distinguishable, r) of Eq. (10): the selected top-``n`` mask (its tokens of
    weight 0 left out under the "not_selected" ``zero_weight`` rule), the mask of the selected
    tokens with ||alpha_i x_i - s|| <= r (N_s of them per row), and r (NaN when N >= L).

    ``alpha`` may be a :class:`attnlimits.distance.Weighted` of (alpha, x_sphere), made once
    and reused across N (``x_sphere`` then None; its own rule applies).
    """
    if isinstance(alpha, Weighted):
        length = alpha.alpha.shape[1]
        mask, scaled, scaled_sq = alpha.top_n(n)[1], alpha.scaled, alpha.scaled_sq
    else:
        # One N: only alpha_i x_i and its squared norm are needed, not all of weighted()'s
        # products, and the top-n set without sorting each row.
        alpha = np.asarray(alpha, dtype=np.float64)
        length = alpha.shape[1]
        mask = selected_by_rule(top_n_mask(alpha, n), alpha, zero_weight)
        scaled = np.multiply(x_sphere, alpha[:, :, None])
        scaled_sq = np.einsum("sld,sld->sl", scaled, scaled)
    s = np.matmul(mask[:, None, :].astype(np.float64), scaled)[:, 0, :]
    dist = norms_to_point(scaled, s, scaled_sq)
    radius = np.where(n >= length, np.nan, np.where(mask, np.inf, dist).min(axis=1))
    # a weight at float32's resolution of the row's peak ties at r as a zero weight does
    weights = alpha.alpha if isinstance(alpha, Weighted) else alpha
    rule = alpha.zero_weight if isinstance(alpha, Weighted) else zero_weight
    inside = mask & (dist <= radius[:, None]) & resolvable(weights, rule)
    return mask, inside, radius


def separability(
    alpha: FloatArray,
    x_sphere: FloatArray,
    *,
    n: int,
    delta: FloatArray,
    radius_m: float,
    zero_weight: str = DEFAULT_ZERO_WEIGHT,
) -> Separability:
    """N_s/N and the Theorem-2 bounds for the top-``n`` set; ``x_sphere`` already on S^{d-1}(M).
    The bounds' xi run over the literal top-n weights (a zero weight only adds to the mean's
    count), the same under either ``zero_weight`` rule.

    Plain reference: attnlimits.reference.separability."""
    alpha = np.asarray(alpha, dtype=np.float64)
    n_samples, length = alpha.shape
    mask, inside, radius = distinguishable(alpha, x_sphere, n=n, zero_weight=zero_weight)
    no_outside = np.full(n_samples, n >= length)
    n_s = inside.sum(axis=1).astype(np.int64)

    literal = top_n_mask(alpha, n)
    zero_selected = np.count_nonzero(literal & (alpha == 0), axis=1).astype(np.int64)
    alpha_sel = alpha[literal].reshape(n_samples, n)  # the top-n weights, in index order
    xi_sel = xi(alpha_sel, delta, radius_m=radius_m)
    negative = np.isnan(xi_sel).any(axis=1)
    zero_r = radius == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        lower = 1.0 - xi_sel.sum(axis=1) / (radius * n)
        upper = np.exp(-((radius[:, None] - xi_sel) ** 2) / (16.0 * radius_m**2)).mean(axis=1)
    bad = no_outside | negative
    lower = np.where(bad | zero_r, np.nan, lower)
    upper = np.where(bad, np.nan, upper)
    return Separability(
        n_s,
        # no token outside the top N: no r and no N_s/N (the row engine's NaN), not 0 (review 44)
        np.where(no_outside, np.nan, n_s / n),
        radius,
        lower,
        upper,
        no_outside,
        zero_r,
        negative,
        zero_selected,
        lower_bound_open(alpha, literal),
        negligible_left_out(alpha, literal, zero_weight),
    )
