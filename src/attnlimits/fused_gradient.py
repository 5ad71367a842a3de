"""The gradient's fused rows (Algorithm 5 and the exact Jacobian norm): the fast twin of
attnlimits.gradient's softmax_jacobian_norm_from_weights and attnlimits.protocol's
row_sensitivity, which stay the plain references (tests/test_fused_gradient.py holds them
together), compiled by numba as :mod:`attnlimits.fused`'s sweeps are.

Precision: every statistic is float64. The kernel's exp is within 1 ulp of numpy's and its sums
run in four lanes, so g and ||J|| differ from the references by rounding (relative 1e-12 at most
where g is a difference of two nearly equal softmaxes: eps = 0.001 at large T).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

from .fused import _sum

# exp(z) below this is subnormal (attnlimits.gradient.softmax sets those weights to exactly 0)
EXP_FLOOR = -708.0
# exp by 2^k e^r, r = z - k ln 2 (Cody and Waite's two-part ln 2, as fdlibm's), |r| <= ln 2 / 2
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
# adding 1.5 * 2^52 rounds z log2(e) to an integer k, left in the low bits of the sum's bits
_SHIFTER = 6755399441055744.0
_NAN_BITS = 0x7FF8000000000000


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def exp_nonpositive(values: NDArray[np.float64], out: NDArray[np.float64], count: int) -> None:
    """out[:count] = exp(values[:count]) for values <= 0, exactly 0 below EXP_FLOOR (the
    softmax's rule), NaN for NaN, within 1 ulp of np.exp (tests/test_fused_gradient.py): loops the compiler
    vectorises, where numba's scalar exp costs 5-6 ns per entry here (no vector math library
    with the pip build of llvmlite). Above EXP_FLOOR, 2^k is a normal number, so the result is
    the polynomial's value with k added to its exponent bits."""
    shifters = np.empty(count)
    for i in range(count):
        z = max(values[i], EXP_FLOOR)
        t = z * _LOG2E + _SHIFTER
        k = t - _SHIFTER
        r = (z - k * _LN2_HI) - k * _LN2_LO
        # Taylor to degree 13: the remainder is below 2^-60 of e^r on |r| <= ln 2 / 2
        p = 1.0 / 6227020800.0
        p = p * r + 1.0 / 479001600.0
        p = p * r + 1.0 / 39916800.0
        p = p * r + 1.0 / 3628800.0
        p = p * r + 1.0 / 362880.0
        p = p * r + 1.0 / 40320.0
        p = p * r + 1.0 / 5040.0
        p = p * r + 1.0 / 720.0
        p = p * r + 1.0 / 120.0
        p = p * r + 1.0 / 24.0
        p = p * r + 1.0 / 6.0
        p = p * r + 0.5
        p = p * r + 1.0
        p = p * r + 1.0
        out[i] = p
        shifters[i] = t
    bits = out.view(np.int64)
    k_bits = shifters.view(np.int64)
    for i in range(count):
        # t's low bits hold k in two's complement: shifted to the exponent field, it scales by 2^k
        scaled = bits[i] + (k_bits[i] << 52)
        below = 0 if values[i] < EXP_FLOOR else _NAN_BITS  # NaN compares false both ways
        bits[i] = scaled if values[i] >= EXP_FLOOR else below


@njit(cache=True, error_model="numpy")
def _middle(lo: float, hi: float) -> float:
    if lo > 0.0 and hi > 2.0 * lo:
        return np.sqrt(lo) * np.sqrt(hi)
    return 0.5 * (lo + hi)


@njit(cache=True, error_model="numpy", fastmath={"reassoc"})
def _secular_sums(a: NDArray[np.float64], count: int, skip: int, x: float) -> tuple[float, float]:
    """sum over i != skip of a_i^2 / (a_i - x) and of (a_i / (a_i - x))^2, over a[:count]: the
    secular function's terms, in a loop the compiler vectorises (the sums reassociated: their
    order is rounding, which the bracketed iteration absorbs)."""
    psi = 0.0
    dpsi = 0.0
    for i in range(count):
        ratio = a[i] / (a[i] - x)
        ratio = 0.0 if i == skip else ratio
        psi += a[i] * ratio
        dpsi += ratio * ratio
    return psi, dpsi


@njit(cache=True, error_model="numpy")
def _softmax_jacobian_norm_row(
    a: NDArray[np.float64], count: int, has_zero: bool, iterations: int
) -> float:
    """attnlimits.gradient.softmax_jacobian_norm_from_weights of one row of weights: the
    largest eigenvalue of diag(a) - a a^T by the same bracketed Newton iteration on the same
    secular equation, step for step (its docstring says why each step is taken). ``a[:count]``
    are the row's positive weights in key order; ``has_zero``: the row has a key of weight 0
    besides them. The reference's sums run over every key, whose zeros add nothing, and its
    zero weights enter only as the eigenvalue 0 (``free_max``): a causal row's masked keys and,
    at small T, the keys whose weights underflow are not visited."""
    top = 0
    total = 0.0
    for i in range(count):
        total += a[i]
        if a[i] > a[top]:
            top = i
    rest = 0.0
    for i in range(count):
        if i != top:
            rest += a[i]
    free_max = 0.0 if has_zero else -np.inf
    if count == 0:
        return free_max  # no weight at all: lam = -inf
    i1 = top  # the first largest weight: the reference's scan finds the same key
    d1 = a[i1]
    c1 = a[i1] * rest
    d2 = -np.inf
    gershgorin = -np.inf
    for i in range(count):
        others = rest if i == top else total - a[i]
        bound = a[i] * others + a[i] * others
        if bound > gershgorin:
            gershgorin = bound
        if i != i1 and a[i] > d2:
            d2 = a[i]
    lo = max(d2, c1) if np.isfinite(d2) else c1
    hi = min(d1, max(gershgorin, lo))
    live = np.isfinite(d2) and d2 < d1 and lo < hi
    lam = lo if lo > d2 * (1.0 + 2.0**-10) else _middle(lo, hi)
    for _ in range(iterations):
        if not live:
            break
        x = lam
        psi, dpsi = _secular_sums(a, count, i1, x)
        gap = d1 - x
        g = (c1 - x) - gap * psi
        slope = -1.0 + psi - gap * dpsi
        left = g > 0.0 or x <= d2
        step = -g / slope if np.isfinite(g) and g != 0.0 else np.nan
        lo_t = x if left else lo
        hi_t = hi if left or g == 0.0 else x
        # np.maximum / np.minimum: a NaN step stays NaN
        from_left = x + (step if np.isnan(step) or step > 4e-16 * x else 4e-16 * x)
        from_right = x + (step if np.isnan(step) or step < -4e-16 * x else -4e-16 * x)
        if left and from_left < hi_t:
            new = from_left
        elif not left and from_right > lo_t:
            new = from_right
        else:
            new = _middle(lo_t, hi_t)
        done = g == 0.0 or hi_t - lo_t <= 8e-16 * hi_t
        if g == 0.0:
            new = x
        elif done:
            new = 0.5 * (lo_t + hi_t)
        lo, hi, lam = lo_t, hi_t, new
        if done:
            live = False
    if d2 == d1:
        lam = d1
    return max(lam, free_max)


@njit(cache=True, error_model="numpy")
def gradient_rows(
    logits: NDArray[np.float64],
    directions: NDArray[np.float64],
    temperature: float,
    epsilons: NDArray[np.float64],
    iterations: int = 200,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Algorithm 5 and the exact Jacobian norm per row at T, in one visit of each row:
    (||J|| = lambda_max(diag(a) - a a^T) / T at a = softmax(l / T), (R,); g = ||softmax((l + eps
    v) / T) - a|| / eps per eps, (len(epsilons), R)), keys of logit -inf masked. The plain
    references are attnlimits.gradient.softmax_jacobian_norm_from_weights and
    attnlimits.protocol.row_sensitivity (tests/test_fused_gradient.py holds them together).

    Only the keys that can weigh anything are visited, copied together so that every loop over
    them vectorises (exp by :func:`exp_nonpositive`). A weight is exactly 0 where its shifted
    exponent is below EXP_FLOOR (the reference's softmax), and such a key enters nothing but sums
    of zeros: a row's masked tail never reaches the floor, and under the moved logits (l + eps
    v) / T a key's exponent rises by at most eps |v_i - v_top| / T <= 2 eps max|v| / T over the
    base's (the moved row's maximum is at least the base maximum's key's). At small T most keys
    stay below the floor under every eps and cost one comparison."""
    rows, width = logits.shape
    jacobian = np.empty(rows)
    g = np.empty((len(epsilons), rows))
    shifted = np.empty(width)  # the candidate keys' l / T - max, in key order
    kept_logits = np.empty(width)
    kept_directions = np.empty(width)
    base = np.empty(width)
    weights = np.empty(width)
    moved = np.empty(width)
    work = np.empty(width)
    largest_eps = 0.0
    for j in range(len(epsilons)):
        largest_eps = max(largest_eps, abs(epsilons[j]))
    for r in range(rows):
        # keys past the last finite logit are masked: -inf under every eps
        stop = width
        while stop > 0 and logits[r, stop - 1] == -np.inf:
            stop -= 1
        top = -np.inf
        spread = 0.0
        for i in range(stop):
            z = logits[r, i] / temperature
            if np.isnan(z):
                top = np.nan
                break
            if z > top:
                top = z
            spread = max(spread, abs(directions[r, i]))
        if not np.isfinite(top):
            jacobian[r] = np.nan
            g[:, r] = np.nan
            continue
        # a NaN or infinite direction entry, on any key: the reference's moved logits are NaN
        # (or its softmax is), and so is g; unit directions never have one
        steered = np.isfinite(spread)
        for i in range(stop, width):
            steered &= np.isfinite(directions[r, i])
        for i in range(stop):
            steered &= not np.isnan(directions[r, i])
        # the exponents' rounding is within ~1e-15 |top| of exact: far inside this margin
        margin = 1.0 + 1e-9 * (abs(top) + 2.0 * largest_eps * spread / temperature)
        cutoff = EXP_FLOOR - 2.0 * largest_eps * spread / temperature - margin
        count = 0
        for i in range(stop):
            s = logits[r, i] / temperature - top
            if s >= cutoff:
                shifted[count] = s
                kept_logits[count] = logits[r, i]
                kept_directions[count] = directions[r, i]
                count += 1
        exp_nonpositive(shifted, base, count)
        total = _sum(base, 0, count)
        for c in range(count):
            base[c] = base[c] / total
        positive = 0
        for c in range(count):
            if base[c] > 0.0:
                weights[positive] = base[c]
                positive += 1
        jacobian[r] = (
            _softmax_jacobian_norm_row(weights, positive, positive < width, iterations)
            / temperature
        )
        if not steered:
            g[:, r] = np.nan
            continue
        for j in range(len(epsilons)):
            eps = epsilons[j]
            own = EXP_FLOOR - 2.0 * abs(eps) * spread / temperature - margin
            moved_top = -np.inf
            for c in range(count):
                z = (kept_logits[c] + eps * kept_directions[c]) / temperature
                z = z if shifted[c] >= own else -np.inf
                work[c] = z
                moved_top = z if z > moved_top else moved_top
            if not np.isfinite(moved_top):
                g[j, r] = np.nan
                continue
            for c in range(count):
                work[c] = work[c] - moved_top
            exp_nonpositive(work, moved, count)
            moved_total = _sum(moved, 0, count)
            for c in range(count):
                diff = moved[c] / moved_total - base[c]
                work[c] = diff * diff
            g[j, r] = np.sqrt(_sum(work, 0, count)) / eps
    return jacobian, g
