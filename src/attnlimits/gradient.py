"""Gradient sensitivity of softmax attention to its logits (Lemma 2, Corollary 3, Fig. 4)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.floating]


def softmax(logits: FloatArray, temperature: float = 1.0) -> NDArray[np.float64]:
    """softmax(l / T) along the last axis, shifted by the row maximum for stability."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    z = np.asarray(logits, dtype=np.float64) / temperature
    z = z - z.max(axis=-1, keepdims=True)
    # Weights below exp(-708) ~ 3e-308 are subnormal: they change no result, but arithmetic on
    # them is ~10x slower and at small T most entries are there. They are set to exactly 0.
    e = np.exp(z, where=z >= -708.0, out=np.zeros_like(z))
    return e / e.sum(axis=-1, keepdims=True)


def random_unit_directions(
    n_directions: int, length: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """``n_directions`` directions uniform on the unit sphere of R^L (normalised Gaussians)."""
    u = rng.standard_normal((n_directions, length))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


# Finite differences share the exponentials of the perturbation across samples while
# max |eps u_i / T| is at most _SHARED_EXP_LIMIT, and use expm1 instead of exp while it is at
# most _EXPM1_LIMIT (see finite_difference_sensitivity).
_SHARED_EXP_LIMIT = 30.0
_EXPM1_LIMIT = 1.0


def finite_difference_sensitivity(
    logits: FloatArray, temperature: float, eps: float, directions: FloatArray
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
    diagonal: FloatArray, v_squared: FloatArray, iterations: int = 200
) -> NDArray[np.float64]:
    """Largest eigenvalue of diag(d) - v v^T per row, without forming the matrix.

    Takes d and v**2 (S, L). Entries with v_i = 0 drop out (e_i is an eigenvector with
    eigenvalue d_i). For the others the eigenvalues interlace d, so the largest lies in
    [d_(2), d_(1)] (d_(1) at index i1, both over the v_i != 0 entries) and is the root there of
    the secular equation 1 = sum_i v_i^2 / (d_i - lam). Written as lam = d_(1) - tau with
    delta_i = d_(1) - d_i and multiplied by tau > 0, it is the root in (0, delta_(2)) of

        F(tau) = tau (1 + psi(tau)) - v_i1^2,   psi(tau) = sum_{i != i1} v_i^2 / (delta_i - tau),

    and F is increasing and convex there (psi is positive, increasing and convex). Newton's
    method started to the right of the root therefore decreases monotonically onto it, with no
    overshoot to guard against and quadratic convergence: ~5-10 O(L) steps per row instead of
    ~50 for bisection. The start is tau = v_i1^2 (F >= 0 there) when that is left of
    delta_(2)/2; otherwise halving the distance to the pole from delta_(2)/2 until F > 0 gives a
    start no closer to the pole than half the root's own distance, where Newton does not crawl. A tie of the two
    largest d gives delta_(2) = 0 and lam = d_(1); a single non-zero v_i gives the closed form
    max(d_i - v_i^2, other d).
    """
    d = np.asarray(diagonal, dtype=np.float64)
    v2 = np.asarray(v_squared, dtype=np.float64)
    if d.ndim == 1:
        d, v2 = d[None, :], v2[None, :]
    rows = np.arange(len(d))
    active = v2 > 0
    # The free eigenvalues: d_i where v_i = 0 (the answer when one of them is the largest).
    free_max = np.where(active, -np.inf, d).max(axis=1)
    d_act = np.where(active, d, -np.inf)
    i1 = np.argmax(d_act, axis=1)
    d1 = d_act[rows, i1]
    v1 = v2[rows, i1]
    delta = d1[:, None] - d  # >= 0 on the active entries
    others = active.copy()
    others[rows, i1] = False
    delta2 = np.where(others, delta, np.inf).min(axis=1)  # inf: a single non-zero v_i
    w = np.where(others, v2, 0.0)
    # Inactive entries get delta = inf so they add 0 to psi and psi' without masking each step.
    delta = np.where(others, delta, np.inf)

    def f_and_slope(idx):
        t = tau[idx]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            inv = 1.0 / (delta[idx] - t[:, None])
            w_inv = w[idx] * inv
            psi = w_inv.sum(axis=1)
            dpsi = (w_inv * inv).sum(axis=1)
        return t * (1.0 + psi) - v1[idx], 1.0 + psi + t * dpsi

    tau = v1.copy()
    tie = delta2 == 0
    # Rows whose start v_i1^2 lies in the upper half towards the pole (where Newton would crawl):
    # start at delta_(2)/2 instead, and move halfway to the pole while F <= 0 there.
    near_pole = ~tie & np.isfinite(delta2) & (v1 > 0.5 * delta2)
    lo = np.zeros_like(tau)
    settled = np.zeros(len(d), dtype=bool)
    if near_pole.any():
        # The start's distance to the pole is delta_(2) 2^-e. F <= 0 at e_lo, F > 0 at e_hi: the
        # exponent first doubles (1, 2, 4, ...) until F > 0, then is bisected until e_hi - e_lo
        # <= 1, so ~20 evaluations reach even a root 1e-300 from the pole (halving: ~1000).
        rows_np = np.nonzero(near_pole)[0]
        e_lo = np.zeros(len(rows_np))
        e_hi = np.full(len(rows_np), np.inf)
        for _ in range(64):
            open_ = np.nonzero(e_hi - e_lo > 1)[0]
            if not open_.size:
                break
            e = np.where(
                np.isinf(e_hi[open_]),
                np.maximum(2.0 * e_lo[open_], 1.0),
                np.floor(0.5 * (e_lo[open_] + e_hi[open_])),
            )
            r = rows_np[open_]
            tau[r] = delta2[r] - delta2[r] * 2.0**-e
            f, _ = f_and_slope(r)
            above = (tau[r] >= delta2[r]) | (f > 0)  # on the pole to rounding counts as above
            e_hi[open_[above]] = e[above]
            e_lo[open_[~above]] = e[~above]
        lo[rows_np] = np.where(e_lo > 0, delta2[rows_np] - delta2[rows_np] * 2.0**-e_lo, 0.0)
        tau[rows_np] = delta2[rows_np] - delta2[rows_np] * 2.0**-e_hi
        at_pole = rows_np[tau[rows_np] >= delta2[rows_np]]  # the root is at the pole to rounding
        settled[at_pole] = True
        tau[at_pole] = delta2[at_pole]
    live = ~tie & ~settled & np.isfinite(delta2)
    for _ in range(iterations):
        todo = np.nonzero(live)[0]
        if not todo.size:
            break
        f, slope = f_and_slope(todo)
        step = np.where(f > 0, f / slope, 0.0)
        new = np.maximum(tau[todo] - step, lo[todo])
        done = (step <= 4e-16 * np.maximum(np.abs(d1[todo]), np.abs(tau[todo]))) | (
            new >= tau[todo]
        )
        tau[todo] = new
        live[todo[done]] = False
    tau = np.where(tie, 0.0, tau)
    lam = d1 - tau
    single = np.isinf(delta2) & np.isfinite(d1)
    lam = np.where(single, d1 - v1, lam)  # one non-zero v_i: the closed form d_i - v_i^2
    lam = np.where(np.isfinite(d1), lam, -np.inf)  # no non-zero v_i at all
    return np.maximum(lam, free_max)


def softmax_jacobian_norm_from_weights(
    weights: FloatArray, iterations: int = 200
) -> NDArray[np.float64]:
    """Largest eigenvalue of J = diag(a) - a a^T (symmetric PSD, the softmax Jacobian at T = 1)."""
    a = np.asarray(weights, dtype=np.float64)
    return largest_eigenvalue_diag_minus_rank_one(a, a * a, iterations)


def softmax_jacobian_norm(logits: FloatArray, temperature: float) -> NDArray[np.float64]:
    """Exact ||d softmax(l/T) / d l||_2 = lambda_max(diag(a) - a a^T) / T at a = softmax(l/T)."""
    return softmax_jacobian_norm_from_weights(softmax(logits, temperature)) / temperature


def corollary3_bound(temperature: float | FloatArray) -> NDArray[np.float64]:
    """The paper's bound min{1/(4T), sqrt(2)} on ||grad_l alpha||_2 (Corollary 3), as printed."""
    return np.minimum(1.0 / (4.0 * np.asarray(temperature, dtype=np.float64)), np.sqrt(2.0))


def gershgorin_bound(temperature: float | FloatArray) -> NDArray[np.float64]:
    """A bound that always holds: ||J||_2 <= max_i 2 a_i (1 - a_i) / T <= 1/(2T) (Gershgorin).

    Tight at a two-way tie, where ||J||_2 = 1/(2T) > 1/(4T): see docs/paper-notes.md.
    """
    return 1.0 / (2.0 * np.asarray(temperature, dtype=np.float64))
