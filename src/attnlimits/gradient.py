"""Gradient sensitivity of softmax attention to its logits (Lemma 2, Corollary 3, Fig. 4)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from .arrays import NUMPY

FloatArray = NDArray[np.floating]


def softmax(
    logits: FloatArray, temperature: float = 1.0, *, xp: Any = NUMPY
) -> NDArray[np.float64]:
    """softmax(l / T) along the last axis, shifted by the row maximum for stability; arrays of
    ``xp`` (attnlimits.arrays, default numpy)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    z = xp.asarray(logits, dtype=xp.float64) / temperature
    z = z - xp.amax(z, axis=-1, keepdims=True)
    # Weights below exp(-708) ~ 3e-308 are subnormal: they change no result, but arithmetic on
    # them is ~10x slower and at small T most entries are there. They are set to exactly 0.
    e = xp.exp_above(z, -708.0)
    return e / e.sum(axis=-1, keepdims=True)


def random_unit_directions(
    n_directions: int, length: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """``n_directions`` directions uniform on the unit sphere of R^L (normalized Gaussians)."""
    u = rng.standard_normal((n_directions, length))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


# Finite differences share the exponentials of the perturbation across samples while
# max |eps u_i / T| is at most _SHARED_EXP_LIMIT, and use expm1 instead of exp while it is at
# most _EXPM1_LIMIT (see finite_difference_sensitivity).
_SHARED_EXP_LIMIT = 30.0
_EXPM1_LIMIT = 1.0


def finite_difference_sensitivity(
    logits: FloatArray, *, temperature: float, eps: float, directions: FloatArray
) -> NDArray[np.float64]:
    """g(T, eps) = ||softmax((l + eps u)/T) - softmax(l/T)|| / eps for each sample and direction.

    logits (S, L), directions (K, L) with unit norm; returns (S, K).

    With z = l/T, d = eps u/T and a = exp(z - max z) (row sum A), softmax(z + d) is a e^d / c
    with c = sum_j a_j e^{d_j}, so the difference from softmax(z) is, exactly,

        a_i (A G_i - sum_j a_j G_j) / (c A),    G = e^d - b,  c = b A + sum_j a_j G_j,

    for either b = 0 (G = exp(d)) or b = 1 (G = expm1(d), which keeps small eps free of the
    cancellation in e^{d_i} - 1; used while max |d| <= _EXPM1_LIMIT). G is shared by every sample
    (K exponentials of length L instead of S K), and the sums are one matrix product. The
    largest weight's term would cancel its own a_i G_i when it holds most of the mass, so it
    is computed as R G_i - sum_{j != i} a_j G_j with R = A - a_i, from the other weights only.
    Weights below exp(-708) are 0 in a, as in :func:`softmax`, and e^d could lift such a
    weight into view, so when max |d| exceeds _SHARED_EXP_LIMIT (large eps at small T) every
    perturbed softmax is evaluated directly instead, the largest weight's change again from
    the others (minus their sum). Evaluating softmax(z + d) - softmax(z) directly everywhere
    would lose that change on near one-hot rows (29% error in g at T = 0.001 on the random GPT-2).
    """
    if eps <= 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    logit = np.asarray(logits, dtype=np.float64)
    directions = np.asarray(directions, dtype=np.float64)
    shift = eps * directions / temperature  # (K, L): d for each direction
    largest = float(np.abs(shift).max()) if shift.size else 0.0
    out = np.empty((logit.shape[0], len(directions)))
    # Blocks of rows keep every temporary in cache (and out of fresh pages) for long rows.
    block = max(1, (1 << 17) // max(1, logit.shape[1]))
    if largest > _SHARED_EXP_LIMIT:
        for start in range(0, logit.shape[0], block):
            rows = slice(start, start + block)
            base = softmax(logit[rows], temperature)
            r = np.arange(len(base))
            top = np.argmax(base, axis=1)
            for k, u in enumerate(directions):
                moved = softmax(logit[rows] + eps * u[None, :], temperature)
                moved -= base
                # Both rows sum to 1, so the largest weight's change is minus the others' sum,
                # which keeps it when it is below that weight's rounding (a near one-hot row).
                moved[r, top] = 0.0
                moved[r, top] = -moved.sum(axis=1)
                out[rows, k] = np.linalg.norm(moved, axis=1) / eps
        return out
    use_expm1 = largest <= _EXPM1_LIMIT
    grow = np.expm1(shift) if use_expm1 else np.exp(shift)  # G, (K, L)
    for start in range(0, logit.shape[0], block):
        rows = slice(start, start + block)
        z = logit[rows] / temperature
        z -= z.max(axis=1, keepdims=True)
        a = np.exp(z, where=z >= -708.0, out=np.zeros_like(z))
        r = np.arange(len(a))
        top = np.argmax(a, axis=1)  # a[r, top] is exp(0) = 1
        a[r, top] = 0.0
        rest = a.sum(axis=1)  # R
        rest_sum = a @ grow.T  # sum_{j != top} a_j G_j, (rows, K)
        a[r, top] = 1.0
        total = 1.0 + rest  # A
        grow_top = grow[:, top].T  # (rows, K)
        full_sum = grow_top + rest_sum
        c = full_sum + total[:, None] if use_expm1 else full_sum
        for k in range(len(directions)):
            diff = np.multiply(grow[k], total[:, None])
            diff -= full_sum[:, k, None]
            diff[r, top] = rest * grow_top[:, k] - rest_sum[:, k]
            diff *= a
            out[rows, k] = np.linalg.norm(diff, axis=1) / (c[:, k] * total * eps)
    return out


def largest_eigenvalue_diag_minus_rank_one(
    diagonal: FloatArray,
    v: FloatArray,
    *,
    diagonal_minus_v_squared: FloatArray | None = None,
    iterations: int = 200,
    xp: Any = NUMPY,
) -> NDArray[np.float64]:
    """Largest eigenvalue of diag(d) - v v^T per row, without forming the matrix.

    Takes d and v (S, L; only |v_i| matters), and optionally c = d - v**2 computed by the caller without
    cancellation (for the softmax Jacobian, c_i = a_i (1 - a_i) with 1 - a_i the sum of the
    other weights). Entries with v_i = 0 drop out (e_i is an eigenvector with eigenvalue d_i).
    For the others the eigenvalues interlace d, so the largest, lam, lies in [d_(2), d_(1)]
    (d_(1) at index i1, both over the v_i != 0 entries) and is the root there of the secular
    equation 1 = sum_i v_i^2 / (d_i - lam). Its i1 term is moved to the left and the equation
    multiplied by d_(1) - lam > 0:

        g(lam) = (c_i1 - lam) - (d_(1) - lam) psi(lam) = 0,  psi(lam) = sum_{i != i1} v_i^2 / (d_i - lam).

    Written so, no term cancels when lam << d_(1): a near one-hot softmax row has lam ~ 1e-24
    beside d_(1) ~ 1, which the shifted form lam = d_(1) - tau cannot resolve (it returned 0 or
    values 100 orders of magnitude too small). psi < 0 on the interval, so the root also exceeds
    c_i1, and g is decreasing and convex there (psi increasing and concave): Newton steps from any
    point left of the root rise monotonically onto it. The iteration keeps a bracket [lo, hi],
    starts at lo = max(d_(2), c_i1), and takes a bisection step (geometric while hi > 2 lo, so a
    root many decades below d_(1) is reached in a few steps) whenever Newton would leave the
    bracket or the point lies right of the root. The plain reference is the dense eigvalsh of
    diag(d) - v v^T (tests/test_gradient.py), checked at high precision with mpmath.
    A tie of the two largest d gives lam = d_(1); a single non-zero v_i gives c_i.
    Arrays of ``xp`` (attnlimits.arrays, default numpy).
    """
    d = xp.asarray(diagonal, dtype=xp.float64)
    # |v|, not v^2: a weight of 1e-193 squares to 0 in float64 but v_i / (d_i - lam) is O(1).
    v = abs(xp.asarray(v, dtype=xp.float64))
    c = (
        d - v * v
        if diagonal_minus_v_squared is None
        else xp.asarray(diagonal_minus_v_squared, dtype=xp.float64)
    )
    if d.ndim == 1:
        d, v, c = d[None, :], v[None, :], c[None, :]
    rows = xp.arange(len(d))
    active = v > 0
    # The free eigenvalues: d_i where v_i = 0 (the answer when one of them is the largest).
    free_max = xp.amax(xp.where(active, -xp.inf, d), axis=1)
    d_act = xp.where(active, d, -xp.inf)
    i1 = xp.argmax(d_act, axis=1)
    d1 = d_act[rows, i1]
    c1 = c[rows, i1]
    others = xp.copy(active)
    others[rows, i1] = False
    d2 = xp.amax(xp.where(others, d, -xp.inf), axis=1)  # -inf: a single non-zero v_i
    w = xp.where(others, v, 0.0)
    # Inactive entries get d = -inf so they add 0 to psi and psi' without masking each step.
    d_others = xp.where(others, d, -xp.inf)

    # Gershgorin: lam <= max_i (c_i + |v_i| sum_{j != i} |v_j|) (2 max a_i (1 - a_i) for softmax).
    gershgorin = xp.amax(xp.where(active, c + v * sum_of_others(v, xp=xp), -xp.inf), axis=1)
    lo = xp.where(xp.isfinite(d2), xp.maximum(d2, c1), c1)
    hi = xp.minimum(d1, xp.maximum(gershgorin, lo))
    live = xp.isfinite(d2) & (d2 < d1) & (lo < hi)
    # Start at c_i1 unless it is at the pole d_(2), where Newton would crawl away from it.
    lam = xp.where(lo > d2 * (1.0 + 2.0**-10), lo, _middle(lo, hi, xp))
    for _ in range(iterations):
        todo = xp.nonzero(live)[0]
        if not len(todo):
            break
        x = lam[todo]
        every = len(todo) == len(live)  # no gather while every row is live
        w_t = w if every else w[todo]
        with xp.errstate(divide="ignore", invalid="ignore", over="ignore"):
            ratio = (d_others if every else d_others[todo]) - x[:, None]
            xp.divide(w_t, ratio, out=ratio)  # v_i / (d_i - lam) <= 0
            psi = (w_t * ratio).sum(axis=1)
            dpsi = (ratio * ratio).sum(axis=1)
            gap = d1[todo] - x
            g = (c1[todo] - x) - gap * psi
            slope = -1.0 + psi - gap * dpsi  # < 0
            # x is left of the root, or on the pole d_(2) itself (g -> +inf from the right)
            left = (g > 0) | (x <= d2[todo])
            step = xp.where(xp.isfinite(g) & (g != 0), -g / slope, xp.nan)
        lo_t = xp.where(left, x, lo[todo])
        hi_t = xp.where(left | (g == 0), hi[todo], x)
        # g is convex, so a Newton step from either side lands left of the root: from the left
        # it stays left, from the right (where rounding near the root puts a step) it comes back
        # to it at once instead of halving the bracket. A step below the resolution is taken as
        # one resolution, so every step moves and the bracket closes.
        with xp.errstate(invalid="ignore"):
            from_left = x + xp.maximum(step, 4e-16 * x)
            from_right = x + xp.minimum(step, -4e-16 * x)
            new = xp.where(
                left & (from_left < hi_t),
                from_left,
                xp.where(~left & (from_right > lo_t), from_right, _middle(lo_t, hi_t, xp)),
            )
        done = (g == 0) | (hi_t - lo_t <= 8e-16 * hi_t)
        new = xp.where(g == 0, x, xp.where(done, 0.5 * (lo_t + hi_t), new))
        lo[todo], hi[todo], lam[todo] = lo_t, hi_t, new
        live[todo[done]] = False
    lam = xp.where(d2 == d1, d1, lam)  # a tie of the two largest: lam = d_(1)
    lam = xp.where(xp.isfinite(d1), lam, -xp.inf)  # no non-zero v_i at all
    return xp.maximum(lam, free_max)


def largest_singular_value(jv, jtu, shape, iterations: int, rtol: float):
    """Per row, the largest singular value of J (given as v -> J v and u -> J^T u, row-wise) by
    power iteration on J^T J; stops when every estimate changes by less than ``rtol`` relative."""
    n_rows, n = shape
    # A fixed start with every component non-zero (deterministic, not orthogonal to the answer
    # except on a measure-zero set).
    v = 1.0 + np.arange(n, dtype=np.float64)[None, :].repeat(n_rows, axis=0) / n
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    sigma = np.zeros(n_rows)
    for _ in range(iterations):
        u = jv(v)
        new_sigma = np.linalg.norm(u, axis=1)
        v = jtu(u)
        norm = np.linalg.norm(v, axis=1, keepdims=True)
        v = np.where(norm > 0, v / np.where(norm > 0, norm, 1.0), v)
        done = np.abs(new_sigma - sigma) <= rtol * np.maximum(new_sigma, 1e-300)
        sigma = new_sigma
        if done.all():
            break
    return sigma


def _middle(lo: NDArray[np.float64], hi: NDArray[np.float64], xp: Any = NUMPY) -> NDArray:
    """Bisection point of [lo, hi]: geometric while the bracket spans more than a factor 2."""
    geometric = (lo > 0) & (hi > 2.0 * lo)
    return xp.where(geometric, xp.sqrt(lo) * xp.sqrt(hi), 0.5 * (lo + hi))


def sum_of_others(values: FloatArray, *, xp: Any = NUMPY) -> NDArray[np.float64]:
    """sum_{j != i} v_j for each entry of each row of non-negative v (S, L).

    The largest entry's is summed from the others alone: total - v_i cancels when that entry holds
    nearly all of the total (a near one-hot row). For every other entry, total - v_i >= the
    largest entry >= v_i, so the subtraction loses at most one bit.
    """
    v = xp.asarray(values, dtype=xp.float64)
    rows = xp.arange(len(v))
    top = xp.argmax(v, axis=1)
    out = v.sum(axis=1, keepdims=True) - v
    masked = xp.copy(v)
    masked[rows, top] = 0.0
    out[rows, top] = masked.sum(axis=1)
    return out


def softmax_jacobian_norm_from_weights(
    weights: FloatArray, *, iterations: int = 200, xp: Any = NUMPY
) -> NDArray[np.float64]:
    """Largest eigenvalue of J = diag(a) - a a^T (symmetric PSD, the softmax Jacobian at T = 1).

    The weights are taken to sum to one, so d_i - v_i^2 = a_i (1 - a_i) = a_i sum_{j != i} a_j:
    a near one-hot row keeps the relative accuracy of its small weights.
    """
    a = xp.asarray(weights, dtype=xp.float64)
    if a.ndim == 1:
        a = a[None, :]
    return largest_eigenvalue_diag_minus_rank_one(
        a, a, diagonal_minus_v_squared=a * sum_of_others(a, xp=xp), iterations=iterations, xp=xp
    )


def softmax_jacobian_norm(logits: FloatArray, temperature: float) -> NDArray[np.float64]:
    """Exact ||d softmax(l/T) / d l||_2 = lambda_max(diag(a) - a a^T) / T at a = softmax(l/T)."""
    return softmax_jacobian_norm_from_weights(softmax(logits, temperature)) / temperature


def corollary3_bound(temperature: float | FloatArray) -> NDArray[np.float64]:
    """The paper's bound min{1/(4T), sqrt(2)} on ||grad_l alpha||_2 (Corollary 3), as printed."""
    return np.minimum(1.0 / (4.0 * np.asarray(temperature, dtype=np.float64)), np.sqrt(2.0))


# The fewest visible keys at which a near-uniform row does not violate Corollary 3's 1/(4T) branch
# by its size alone. A uniform row of m keys has T ||J|| = 1/m: above 1/4 for m <= 3, equal to it
# at m = 4, where any perturbation raises the top eigenvalue (the perturbation restricted to the
# eigenspace has trace 0), so near-uniform 4-key rows violate too; at m = 5 it is 1/5. Below
# T = 1/(4 sqrt 2) = 0.177 the bound is sqrt 2 instead, and a uniform row violates it whenever
# m < 1/(sqrt 2 T) (m <= 7 at T = 0.1, 70 at T = 0.01): no key count removes the size effect
# there; the null of matched spread (near-uniform rows give near-uniform nulls) does.
COROLLARY3_WIDE_ROW_KEYS = 5


def matched_spread_null(logits: FloatArray, z: FloatArray) -> NDArray[np.float64]:
    """Each row's null of matched spread: Gaussian draws z standardised over the row's finite
    (visible) keys (mean 0, population standard deviation 1), times the row's own standard
    deviation s over those keys, so that every null row has exactly the row's spread (raw z
    would give s sd(z), well below s on rows of few keys: 0.56 s on average at 2 keys). Masked
    keys (-inf) stay masked; a row of one visible key, or of equal draws, is all zeros. Softmax
    ignores a row's shift, so no mean is added. A bound that such rows violate as often as the
    model's does says nothing about the model; one it violates more often says the model's rows
    are not Gaussian, not that training made them so (docs/paper-notes.md section 1)."""
    logits = np.asarray(logits, dtype=np.float64)
    z = np.asarray(z, dtype=np.float64)
    if z.shape != logits.shape:
        raise ValueError(f"z has shape {z.shape}, the logits {logits.shape}")
    visible = np.isfinite(logits)
    count = np.maximum(visible.sum(axis=-1, keepdims=True), 1)

    def standardised(values: NDArray) -> tuple[NDArray, NDArray]:
        filled = np.where(visible, values, 0.0)
        centred = np.where(visible, filled - filled.sum(axis=-1, keepdims=True) / count, 0.0)
        return centred, np.sqrt((centred**2).sum(axis=-1, keepdims=True) / count)

    _, spread = standardised(logits)
    draws, draw_spread = standardised(z)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = np.where(draw_spread > 0, draws / draw_spread, 0.0)
    return np.where(visible, spread * unit, -np.inf)


def gershgorin_bound(temperature: float | FloatArray) -> NDArray[np.float64]:
    """A bound that always holds: ||J||_2 <= max_i 2 a_i (1 - a_i) / T <= 1/(2T) (Gershgorin).

    Tight at a two-way tie, where ||J||_2 = 1/(2T) > 1/(4T): see docs/paper-notes.md.
    """
    return 1.0 / (2.0 * np.asarray(temperature, dtype=np.float64))
