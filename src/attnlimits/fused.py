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


# exp(z) below this is subnormal (attnlimits.gradient.softmax sets those weights to exactly 0)
EXP_FLOOR = -708.0
# exp by 2^k e^r, r = z - k ln 2 (Cody and Waite's two-part ln 2, as fdlibm's), |r| <= ln 2 / 2
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
# adding 1.5 * 2^52 rounds z log2(e) to an integer k, left in the low bits of the sum's bits
_SHIFTER = 6755399441055744.0


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def exp_nonpositive(values: NDArray[np.float64], out: NDArray[np.float64], count: int) -> None:
    """out[:count] = exp(values[:count]) for values <= 0, exactly 0 below EXP_FLOOR (the
    softmax's rule), within 1 ulp of np.exp (tests/test_fused_gradient.py): loops the compiler
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
        bits[i] = scaled if values[i] >= EXP_FLOOR else 0


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
