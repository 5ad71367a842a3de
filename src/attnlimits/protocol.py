"""The paper's protocol (its Appendix B): every query row t of a head's length-L attention, each
statistic averaged over the rows, one value per (layer, head).

A head's rows share its token vectors x (L, d); only the weights differ from row to row. So every
per-row quantity is written with products against the shared x, one block of rows at a time:

    s_t = (alpha_t * m_t) @ x           the context vector of row t's top-N set (mask m_t)
    x_i . s_t = (s @ x^T)[t, i]         one matrix product for the block
    ||alpha_ti x_i - s_t||^2 = alpha_ti^2 |x_i|^2 - 2 alpha_ti x_i.s_t + |s_t|^2

so a block of R rows costs two (R x L x d) matrix products and O(R L) elementwise work, never an
(R, L, d) array, and never the L x L matrix (rows are recomputed from q and k block by block).
Entries where the expansion could lose precision to cancellation are recomputed directly.

Causal rows: row t attends to keys 0..t. ``masked`` says how the other L - t - 1 keys enter:
``non_selected`` (the paper's L x L matrices: weight-0 tokens of an L-token context, so they count
as non-selected tokens, each adding ||s_t|| to d~) or ``prefix`` (row t is a context of its t + 1
visible tokens; rows with t + 1 <= N have no non-selected token and are left out).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .arrays import NUMPY, NumpyNamespace, TorchNamespace

# The protocol's public names kept where its readers import them: the blocks of rows and their
# rankings (attnlimits.row_blocks), Algorithm 3's search over the N list (critical_search)
from .critical_search import CriticalSearch as CriticalSearch
from .critical_search import critical_n_list as critical_n_list
from .critical_search import first_passing_n as first_passing_n
from .critical_search import fixed_fraction_ns as fixed_fraction_ns
from .critical_search import head_means as head_means
from .critical_search import max_of_head_means as max_of_head_means
from .critical_search import search_in_batches as search_in_batches
from .expansion import CANCELLATION as _CANCELLATION
from .expansion import norms_by_expansion as _norms
from .expansion import visible_lengths as visible_lengths
from .row_blocks import HeadVectors as HeadVectors
from .row_blocks import RowBlock as RowBlock
from .row_blocks import attention_rows as attention_rows
from .selection import resolvable

FloatArray = NDArray[np.floating]
Namespace = NumpyNamespace | TorchNamespace


def row_statistics(
    block: RowBlock, *, n: int, upper_bound: bool = True
) -> dict[str, NDArray[np.float64]]:
    """Per row (R,): d~ (Eq. 7) of the top-n set, Theorem 1.1's fixed-set upper bound and
    Theorem 1.2's closed-form expectation term as printed; NaN for rows with length <= n.
    ``upper_bound=False`` leaves out the bound (and its cross-distance pass, the costliest part at
    large N): the critical-N search needs only d~ and E. Arrays of the block's namespace.

    Plain reference: attnlimits.reference.distance, upper_bound and expectation_term."""
    xp = block.xp
    mask = block.top_n(n)
    selected_alpha = xp.where(mask, block.alpha, 0.0)
    s = selected_alpha @ block.x  # (R, d)
    others = block.counted & ~mask
    dist = xp.where(others, block.norms_to(block.alpha, s), 0.0).sum(axis=1)

    length = xp.astype(block.length, xp.float64)
    xbar = block.alpha @ block.x
    coef = block.alpha + n / xp.maximum(length[:, None] - 1.0, 1.0)  # length 1: invalid row
    expectation = (
        (length - n) / length * xp.where(block.counted, block.norms_to(coef, xbar), 0.0).sum(axis=1)
    )

    valid = block.length > n
    out = {
        "distance": xp.where(valid, dist, xp.nan),
        "expectation_term": xp.where(valid, expectation, xp.nan),
        "zero_weight_selected": block.zero_weight_in_top_n(n),
    }
    if upper_bound:
        out |= row_fixed_set_bound(block, n=n, mask=mask)
    else:
        out["selected_mass"] = xp.where(valid, selected_alpha.sum(axis=1), xp.nan)
    return out


def row_fixed_set_bound(
    block: RowBlock, *, n: int, mask: NDArray[np.bool_] | None = None
) -> dict[str, NDArray[np.float64]]:
    """Per row: Theorem 1.1's fixed-set upper bound on d~ as printed, (1 - m) D + max_j |x_j|
    (m (L - N) - (1 - m)) with m the top-n mass ("selected_mass") and D the largest distance
    between a selected and a non-selected key; NaN for rows with length <= n. ``mask``: the
    top-n mask when the caller has it.

    Plain reference: attnlimits.reference.upper_bound."""
    xp = block.xp
    mask = block.top_n(n) if mask is None else mask
    length = xp.astype(block.length, xp.float64)
    mass = xp.where(mask, block.alpha, 0.0).sum(axis=1)
    max_selected_norm = xp.sqrt(xp.amax(xp.where(mask, block.x_sq[None, :], 0.0), axis=1))
    d1 = _max_cross_distance(block, mask, block.counted & ~mask)
    # the theorem holds for any set of |I| tokens: the selected set's own size (N, or fewer under
    # the "not_selected" zero-weight rule)
    size = xp.count_nonzero(mask, axis=1)
    upper = (1.0 - mass) * d1 + max_selected_norm * (mass * (length - size) - (1.0 - mass))
    valid = block.length > n
    return {
        "upper_bound": xp.where(valid, upper, xp.nan),
        "selected_mass": xp.where(valid, mass, xp.nan),
    }


def row_critical_statistics(
    block: RowBlock,
    ns: Sequence[int],
    *,
    closed_form: bool = True,
    random_ranks: Sequence[NDArray[np.int32]] = (),
    random_rows: NDArray[np.intp] | None = None,
) -> dict[str, NDArray[np.float64]]:
    """What Algorithm 3 needs, per N in ``ns`` and per row, (len(ns), R) each: d~ of the top-N
    set ("distance"), the closed-form E term ("closed_form", as :func:`row_statistics`'s
    expectation_term) and, given ``random_ranks`` (from :meth:`RowBlock.random_ranks`, one per
    draw, for the block's rows ``random_rows``, default all), the Monte-Carlo E ("monte_carlo":
    mean over draws of d~ of the keys of rank < N; NaN on rows not drawn). NaN for rows with
    length <= N. Arrays of the block's namespace.

    Equal to :func:`row_statistics` and a per-N Monte Carlo on the same subsets, but everything
    that does not depend on N is computed once for the block: the top-N order of each row (one
    sort serves every N), alpha_i^2 |x_i|^2, and for the closed form u_i = alpha_i x_i - xbar,
    so that ||(alpha_i + c) x_i - xbar||^2 = |u_i|^2 + c (2 u_i . x_i + c |x_i|^2). Keys that
    no row of the block weights (a causal block's future keys) enter d~ as ||0 - s|| = ||s||
    each and are counted, not computed.

    Plain reference: attnlimits.reference.distance (of the top-N set and of each Monte-Carlo
    subset) and expectation_term."""
    xp = block.xp
    alpha, counted, length = block.alpha, block.counted, block.length
    rows = len(length)
    every_key_counts = bool(counted.all())
    # keys a set may select (the zero-weight rule): selected zero-weight keys leave the set
    selectable = block.selectable
    every_key_selectable = bool(selectable.all())
    weighted = xp.nonzero(alpha.any(axis=0))[0]
    width = int(weighted[-1]) + 1 if len(weighted) else 1
    a_sq_x = alpha[:, :width] ** 2 * block.x_sq[None, :width]
    a_sq_x_floor = _CANCELLATION * xp.amax(a_sq_x, axis=1, keepdims=True)
    x_head = block.x[:width]

    def subset_distance(selected: NDArray[np.bool_], at: slice | NDArray) -> NDArray[np.float64]:
        """d~ per row of ``at`` for its selected keys (R', L)."""
        a = alpha[at, :width]
        s = xp.where(selected[:, :width], a, 0.0) @ x_head
        norms = _norms(a, s, x_head, a_sq_x[at], a_sq_x_floor[at], xp=xp)
        xp.putmask(
            norms,
            selected[:, :width] if every_key_counts else selected[:, :width] | ~counted[at, :width],
            0.0,
        )
        total = norms.sum(axis=1)
        if width < alpha.shape[1]:
            rest = (
                ~selected[:, width:]
                if every_key_counts
                else counted[at, width:] & ~selected[:, width:]
            )
            total += xp.sqrt(xp.einsum("rd,rd->r", s, s)) * rest.sum(axis=1)
        return total

    lengths = xp.astype(length, xp.float64)
    out = {"distance": xp.empty((len(ns), rows))}
    top = block.top_ranks()
    if closed_form:
        out["closed_form"] = xp.empty_like(out["distance"])
        xbar = alpha @ block.x
        u_sq = block.norms_to(alpha, xbar)
        u_sq *= u_sq
        u_sq_floor = _CANCELLATION * xp.amax(u_sq, axis=1, keepdims=True)
        twice_u_dot_x = 2.0 * (alpha * block.x_sq[None, :] - xbar @ block.x.T)
        x_sq_max = float(xp.amax(block.x_sq, initial=0.0))
    if random_ranks:
        out["monte_carlo"] = xp.full_like(out["distance"], xp.nan)
        drawn = xp.arange(rows) if random_rows is None else xp.asarray(random_rows)
    everywhere = slice(None)
    for j, n in enumerate(ns):
        top_set = top < n
        out["distance"][j] = subset_distance(
            top_set if every_key_selectable else top_set & selectable, everywhere
        )
        if closed_form:
            c = (n / xp.maximum(lengths - 1.0, 1.0))[:, None]
            d2 = block.x_sq[None, :] * c
            d2 += twice_u_dot_x
            d2 *= c
            d2 += u_sq
            # (alpha_i + c) x_i and xbar nearly equal (|d|^2 small beside the row's largest
            # |u_i|^2 + c^2 |x_i|^2, a superset of the entries at risk): recompute them directly.
            # Every other entry is positive, so no clipping is needed before the root.
            risky = d2 <= u_sq_floor + _CANCELLATION * x_sq_max * c * c
            if bool(risky.any()):
                ri, li = xp.nonzero(risky)
                diff = (alpha[ri, li] + c[ri, 0])[:, None] * block.x[li] - xbar[ri]
                d2[ri, li] = xp.einsum("nd,nd->n", diff, diff)
            xp.sqrt(d2, out=d2)
            if not every_key_counts:
                xp.putmask(d2, ~counted, 0.0)
            out["closed_form"][j] = (lengths - n) / lengths * d2.sum(axis=1)
        if random_ranks:
            subset = selectable[drawn]
            out["monte_carlo"][j, drawn] = xp.stack(
                [
                    subset_distance(
                        rank < n if every_key_selectable else (rank < n) & subset, drawn
                    )
                    for rank in random_ranks
                ]
            ).mean(axis=0)
        for values in out.values():
            values[j, length <= n] = xp.nan
    return out


def row_critical_statistics_readings(
    block: RowBlock,
    ns: Sequence[int],
    readings: Sequence[str],
    *,
    positions: NDArray[np.intp] | None = None,
    random_ranks: dict[str, Sequence[NDArray[np.int32]]] | None = None,
    random_rows: NDArray[np.intp] | None = None,
) -> dict[str, dict[str, NDArray[np.float64]]]:
    """:func:`row_critical_statistics` (closed form, and Monte Carlo where ``random_ranks``
    gives a reading its draws) under several readings of a causal block's masked keys at once,
    by the fused kernels of :mod:`attnlimits.fused`; numpy blocks only. ``block`` is the
    block every key of which counts (reading "non_selected", or an encoder's "both");
    "prefix" reads its rows, the query ``positions`` of a causal head of the block's width, as
    contexts of their visible keys (:meth:`RowBlock.read_as`).

    One sort per row ranks both readings (a visible key's rank is the same under both: the
    masked keys, of weight 0, rank after every visible key of weight > 0 and after the visible
    ones of weight 0, which come first by index), and one sweep per N gives d~ under both:
    the prefix reading sums a row's unselected visible keys, "non_selected" adds its masked
    keys. Random ranks are a reading's own (drawn over its counted keys), as are E's closed
    form (its c = N / (length - 1)) and the lengths that leave rows out.

    Plain reference: :func:`row_critical_statistics` on each reading's block."""
    if not block.counted.all():
        raise ValueError("the block must count every key (reading non_selected or both)")
    if list(ns) != sorted(set(ns)) or (
        len(ns) and not 1 <= ns[0] <= ns[-1] <= block.alpha.shape[1]
    ):
        # the nested context vectors are read off in one increasing walk of each row's keys
        raise ValueError(f"ns must increase within 1..L without repeats, got {list(ns)}")
    rows, full = block.alpha.shape
    length = int(full)
    causal_rows = {}
    visible = {}
    selectable = {}
    for reading in readings:
        if reading == "prefix":
            if positions is None:
                raise ValueError("the prefix reading needs the block's query positions")
            prefix = block.read_as("prefix", positions, length)
            causal_rows[reading] = prefix
            visible[reading] = prefix.length
            selectable[reading] = prefix.selectable
        else:
            causal_rows[reading] = block
            visible[reading] = np.full(rows, length, dtype=np.int64)
            selectable[reading] = block.selectable
    sweeps = block.sweeps()
    sweep = sweeps.sweep
    top = block.top_ranks()

    out = {r: {"distance": np.empty((len(ns), rows))} for r in readings}
    random_ranks = random_ranks or {}
    drawn = np.arange(rows) if random_rows is None else np.asarray(random_rows)
    for reading in readings:
        out[reading]["closed_form"] = np.empty((len(ns), rows))
        if random_ranks.get(reading):
            out[reading]["monte_carlo"] = np.full((len(ns), rows), np.nan)
    # every N's context vectors in one visit of each row's keys (unselectable keys weigh 0)
    top_s = sweeps.context_vectors(top, ns)
    # every (reading, draw)'s subsets in one sweep per N: a row's sums do not depend on the
    # other rows of the call, and one call instead of four halves the per-call work of the
    # drawn rows (a product and a pass over the block's keys each)
    subsets = [
        (reading, ranks) for reading in readings for ranks in random_ranks.get(reading) or ()
    ]
    if subsets:
        subset_ranks = np.concatenate([ranks for _, ranks in subsets])
        subset_s = np.concatenate(
            [sweeps.context_vectors(ranks, ns, drawn) for _, ranks in subsets], axis=1
        )
        subset_rows = np.tile(drawn, len(subsets))
        subset_selectable = np.concatenate([selectable[r][drawn] for r, _ in subsets])
        subset_visible = np.concatenate([visible[r][drawn] for r, _ in subsets])
    for j, n in enumerate(ns):
        if subsets:
            on_visible_s, on_every_s = sweep(
                subset_s[j], subset_ranks, n, subset_rows, subset_selectable, subset_visible
            )
            m = len(drawn)
            drawn_values = {}
            for k, (reading, _) in enumerate(subsets):
                sums = on_visible_s if reading == "prefix" else on_every_s
                drawn_values.setdefault(reading, []).append(sums[k * m : (k + 1) * m])
        # the top-n set is the same under every reading on the keys a row sees
        on_visible, on_every = sweep(
            top_s[j],
            top,
            n,
            None,
            block.selectable,
            visible.get("prefix", visible[readings[0]]),
        )
        for reading in readings:
            got = out[reading]
            got["distance"][j] = on_visible if reading == "prefix" else on_every
            got["closed_form"][j] = sweeps.closed_form(n, visible[reading])
            if random_ranks.get(reading):
                got["monte_carlo"][j, drawn] = np.stack(drawn_values[reading]).mean(axis=0)
            for values in got.values():
                values[j, visible[reading] <= n] = np.nan
    return out


def row_epsilon_bound(block: RowBlock, *, n: int) -> NDArray[np.float64]:
    """Theorem 1.2's bound on epsilon per row, as printed (see distance.epsilon_bound):
    1/2 (1 - N/L) N/(L-1) sum_i sum_{j != i} alpha_j^2 |x_j|^2 / ||alpha_i x_i - N/(L-1) sum_{j != i}
    alpha_j x_j||, over the row's counted keys; +inf where a denominator is 0 and its numerator
    is not; NaN for rows with length <= n.

    Plain reference: attnlimits.reference.epsilon_bound."""
    xp = block.xp
    length = xp.astype(block.length, xp.float64)
    c = n / xp.maximum(length - 1.0, 1.0)
    scaled_sq = block.alpha**2 * block.x_sq[None, :]
    numer = scaled_sq.sum(axis=1, keepdims=True) - scaled_sq
    xbar = block.alpha @ block.x
    # alpha_i x_i - c (xbar - alpha_i x_i) = (1 + c) alpha_i x_i - c xbar
    denom = block.norms_to((1.0 + c)[:, None] * block.alpha, c[:, None] * xbar)
    with xp.errstate(divide="ignore", invalid="ignore"):
        ratio = xp.where(denom > 0, numer / denom, xp.where(numer > 0, xp.inf, 0.0))
    total = xp.where(block.counted, ratio, 0.0).sum(axis=1)
    return xp.where(block.length > n, 0.5 * (1.0 - n / length) * c * total, xp.nan)


def row_monte_carlo(
    block: RowBlock, *, n: int, draws: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """E (Eq. 8) per row by plain Monte Carlo: the mean d~ of ``draws`` uniform N-subsets of the
    row's counted keys, shape (draws, R); NaN for rows with length <= n. The subsets are drawn
    in numpy from ``rng`` whatever the block's namespace, so every namespace draws the same.

    Plain reference: attnlimits.reference.exact_expected_distance (which the mean over draws
    estimates)."""
    xp = block.xp
    rows, width = block.alpha.shape
    uncounted = ~xp.to_numpy(block.counted)
    out = xp.empty((draws, rows))
    for d in range(draws):
        key = rng.random((rows, width))
        key[uncounted] = np.inf
        drawn = np.zeros((rows, width), dtype=bool)
        np.put_along_axis(drawn, np.argpartition(key, n - 1, axis=1)[:, :n], True, axis=1)
        mask = xp.asarray(drawn) & block.selectable
        s = xp.where(mask, block.alpha, 0.0) @ block.x
        others = block.counted & ~mask
        out[d] = xp.where(others, block.norms_to(block.alpha, s), 0.0).sum(axis=1)
    out[:, block.length <= n] = xp.nan
    return out


def _max_cross_distance(block: RowBlock, mask, others) -> NDArray[np.float64]:
    """max over non-selected i, selected j of ||x_i - x_j|| per row (0 if a side is empty).

    One pass per selected position: the distances of every row's p-th selected key to all keys,
    (R, L) by one matrix product, maximised over the row's non-selected keys. Entries that the
    expansion could get wrong by cancellation are recomputed directly.
    """
    xp = block.xp
    rows, width = mask.shape
    counts = mask.sum(axis=1)
    slots = int(counts.max()) if rows else 0
    filled = xp.cumsum(mask, axis=1) - 1
    selected = xp.zeros((rows, max(slots, 1)), dtype=xp.intp)
    ri, li = xp.nonzero(mask)
    selected[ri, filled[ri, li]] = li
    out = xp.zeros(rows)
    if bool(block.counted.all()) and slots < width:
        # Every key counts: the farthest non-selected key from x_j is among x_j's slots + 1
        # farthest keys (at most slots - 1 others are selected), found once per head, farthest
        # first. For each (row, selected key) the answer is its first candidate the row did not
        # select: most are found at the first candidate, so few pairs stay for the next.
        index, dist2 = block.head.farthest(slots + 1)
        pair_row, pair_slot = xp.nonzero(counts[:, None] > xp.arange(slots)[None, :])
        keys = selected[pair_row, pair_slot]
        best = xp.zeros((rows, slots))
        todo = xp.arange(len(keys))
        for rank in range(slots + 1):
            cand = index[keys[todo], rank]
            free = ~mask[pair_row[todo], cand]
            done = todo[free]
            best[pair_row[done], pair_slot[done]] = dist2[keys[done], rank]
            todo = todo[~free]
            if not len(todo):
                break
        return xp.sqrt(xp.amax(best, axis=1, initial=0.0))
    for slot in range(slots):
        has = counts > slot
        keys = selected[:, slot]
        xs = block.x[keys]  # (R, d)
        ks = block.x_sq[keys][:, None]
        d2 = ks + block.x_sq[None, :] - 2.0 * (xs @ block.x.T)
        risky = d2 <= _CANCELLATION * (ks + block.x_sq[None, :])
        if bool(risky.any()):
            r, i = xp.nonzero(risky)
            diff = xs[r] - block.x[i]
            d2[r, i] = xp.einsum("nd,nd->n", diff, diff)
        farthest = xp.amax(xp.where(others, d2, 0.0), axis=1)
        out = xp.where(has, xp.maximum(out, farthest), out)
    return xp.sqrt(xp.maximum(out, 0.0))


def row_separability(
    block: RowBlock, *, n: int, delta: float, radius_m: float
) -> dict[str, NDArray[np.float64]]:
    """Per row: N_s/N by direct counting (r = min over non-selected i of ||s - alpha_i x_i||) and
    Theorem 2's lower and upper bounds, for x already on the sphere of radius ``radius_m``.
    NaN where the row has no non-selected token, and bounds NaN where xi^2 < 0 or r = 0.
    Under the "not_selected" zero-weight rule a top-N key of weight 0 is not selected (it joins
    the non-selected, at ||s||) and never counts in N_s; the denominator stays N. The bounds'
    xi run over the literal top-N weights (a zero weight adds only to the mean's count), so they
    are the same under both rules; "zero_weight_selected" counts those keys per row.

    Plain reference: attnlimits.reference.separability."""
    from .separability import theorem2_row_outcomes

    xp = block.xp
    mask = block.top_n(n)
    s = xp.where(mask, block.alpha, 0.0) @ block.x
    dist = block.norms_to(block.alpha, s)
    others = block.counted & ~mask
    valid = block.length > n
    radius = xp.amin(xp.where(others, dist, xp.inf), axis=1)
    # a weight at float32's resolution of the row's peak ties at r as a zero weight does
    inside = mask & (dist <= radius[:, None]) & resolvable(block.alpha, block.zero_weight, xp)
    n_s = xp.astype(inside.sum(axis=1), xp.float64)
    # selected weights in key order, (R, n); rows with fewer than n keys are invalid (padded)
    alpha_sel = xp.zeros((len(radius), n))
    filled = xp.cumsum(mask, axis=1) - 1
    ri, li = xp.nonzero(mask)
    alpha_sel[ri, filled[ri, li]] = block.alpha[ri, li]
    out = theorem2_row_outcomes(
        radius, n_s, alpha_sel, valid, n=n, delta=delta, radius_m=radius_m, xp=xp
    )
    return out | {"zero_weight_selected": block.zero_weight_in_top_n(n)}


def row_sensitivity(
    logits: FloatArray,
    directions: FloatArray,
    *,
    temperature: float,
    epsilons: Sequence[float],
    base: FloatArray | None = None,
    xp: Namespace = NUMPY,
) -> NDArray[np.float64]:
    """Algorithm 5 per row and per eps, (len(epsilons), R): ||softmax((l + eps v)/T) -
    softmax(l/T)|| / eps for the row's unit direction v; keys with logit -inf (masked) stay
    masked. softmax(l/T) is computed once for every eps (or passed in as ``base``). Arrays of
    ``xp`` (attnlimits.arrays)."""
    from .gradient import softmax

    logits = xp.asarray(logits, dtype=xp.float64)
    directions = xp.asarray(directions, dtype=xp.float64)
    if base is None:
        base = softmax(logits, temperature, xp=xp)
    out = xp.empty((len(epsilons), len(logits)))
    for j, epsilon in enumerate(epsilons):
        moved = softmax(logits + epsilon * directions, temperature, xp=xp)
        moved -= base
        out[j] = xp.row_norms(moved) / epsilon
    return out


def unit_directions(
    rng: np.random.Generator, rows: int, length: NDArray | int, width: int
) -> NDArray[np.float64]:
    """One random unit vector per row, over the row's first ``length`` keys (0 beyond them)."""
    v = rng.standard_normal((rows, width))
    v[np.arange(width)[None, :] >= np.broadcast_to(length, (rows,))[:, None]] = 0.0
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def sampled_rows(length: int, count: int) -> NDArray[np.intp]:
    """``count`` evenly spaced query rows of a length-L context, the last row (the full context)
    among them; every row when count >= L. The Monte-Carlo E is drawn on these: the per-head
    mean over them estimates the mean over every row, at count / L of the cost."""
    if count >= length:
        return np.arange(length)
    # row L - 1 - floor(i L / count): spaced L / count apart over the whole context (a fixed
    # stride L // count would leave the first rows out whenever count does not divide L)
    return (length - 1 - (np.arange(count) * length) // count)[::-1].copy()


def first_rows_kept(count: int) -> int:
    """How many of the first rows :func:`drawn_rows` always keeps when it draws ``count``: half
    of them. A causal head's first rows see a handful of keys, and their statistics lie far
    from the rest (a Jacobian norm or an N_s/N of a row with 3 visible keys): a uniform draw
    that missed them would miss the heavy tail of the mean, and its variance estimate would not
    see it either."""
    return count // 2


def drawn_rows(rng: np.random.Generator, length: int, count: int | None) -> NDArray[np.intp]:
    """``count`` query rows of a length-L context, sorted, in two strata. Kept: the first
    :func:`first_rows_kept` rows and the last row. The last row is a causal head's only row
    with every key visible, and under the prefix reading of its masked keys the only row with a
    non-selected token at N = L - 1, so every statistic has a row at every N. Drawn: the rest of
    the ``count``, uniformly without replacement from the rows between, a simple random sample
    whose mean estimates theirs without bias (standard error: :func:`sampled_mean_stderr`).
    Every row (no draw from ``rng``) when ``count`` is None or >= L."""
    if count is None or count >= length:
        return np.arange(length)
    kept = first_rows_kept(count)
    if count - kept - 1 < 2:
        raise ValueError(
            f"count must be at least 5 (half of it first rows kept, the last row, and 2 or more "
            f"drawn for a variance), got {count}"
        )
    between = kept + rng.choice(length - 1 - kept, size=count - kept - 1, replace=False)
    return np.concatenate([np.arange(kept), np.sort(between), [length - 1]]).astype(np.intp)


def sampled_mean_stderr(
    variance: ArrayLike, count: ArrayLike, population: ArrayLike
) -> NDArray[np.float64]:
    """The standard error of the mean of ``count`` values drawn uniformly without replacement
    from ``population`` values, estimated from the drawn values' ``variance`` (ddof 1):
    sqrt((1 - n / P) s^2 / n), unbiased for the variance of the mean under such a draw. 0 where
    every value was drawn (n >= P: the mean is the population's); NaN where one of several was
    (no variance to estimate) or none."""
    variance, count, population = np.broadcast_arrays(
        np.asarray(variance, dtype=np.float64),
        np.asarray(count, dtype=np.float64),
        np.asarray(population, dtype=np.float64),
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        unsampled = np.clip(1.0 - count / population, 0.0, 1.0)
        out = np.sqrt(unsampled * variance / count)
    out = np.where(count >= population, 0.0, out)
    return np.where((count < 2) & (count < population), np.nan, out)
