"""Plain-loop reference implementations, written straight from the paper's formulas, one row at a
time. The fast, vectorised routines of attnlimits.distance, .separability and .protocol name the
function here that they must equal, and the tests hold them against each other (as the entmax
package keeps each fast routine beside its plain reference). Slow by design: never call these on
real data."""

import itertools
import math

import numpy as np


def top_n(alpha_row, n):
    order = sorted(range(len(alpha_row)), key=lambda i: (-alpha_row[i], i))
    return order[:n]


def by_rule(alpha_row, selected, zero_weight="not_selected"):
    """A set's selected tokens: all of them ("literal") or those of nonzero weight."""
    if zero_weight == "literal":
        return list(selected)
    return [i for i in selected if alpha_row[i] != 0]


def distance(alpha_row, x_row, selected, zero_weight="not_selected"):
    selected = by_rule(alpha_row, selected, zero_weight)
    s = sum((alpha_row[i] * x_row[i] for i in selected), np.zeros(len(x_row[0])))
    return sum(
        float(np.linalg.norm(alpha_row[i] * x_row[i] - s))
        for i in range(len(alpha_row))
        if i not in selected
    )


def upper_bound(alpha_row, x_row, n, zero_weight="not_selected"):
    L = len(alpha_row)
    sel = by_rule(alpha_row, top_n(alpha_row, n), zero_weight)
    mass = sum(alpha_row[i] for i in sel)
    d1 = max(
        (float(np.linalg.norm(x_row[i] - x_row[j])) for i in range(L) if i not in sel for j in sel),
        default=0.0,
    )
    max_norm = max(float(np.linalg.norm(x_row[j])) for j in sel)
    return (1 - mass) * d1 + max_norm * (mass * (L - len(sel)) - (1 - mass))


def expectation_term(alpha_row, x_row, n):
    L = len(alpha_row)
    xbar = sum(alpha_row[i] * x_row[i] for i in range(L))
    return (
        (L - n)
        / L
        * sum(
            float(np.linalg.norm((alpha_row[i] + n / (L - 1)) * x_row[i] - xbar)) for i in range(L)
        )
    )


def epsilon_bound(alpha_row, x_row, n):
    L = len(alpha_row)
    c = n / (L - 1)
    total = 0.0
    for i in range(L):
        num = sum(alpha_row[j] ** 2 * float(np.dot(x_row[j], x_row[j])) for j in range(L) if j != i)
        rest = sum(alpha_row[j] * x_row[j] for j in range(L) if j != i)
        den = float(np.linalg.norm(alpha_row[i] * x_row[i] - c * rest))
        total += (math.inf if num > 0 else 0.0) if den == 0 else num / den
    return 0.5 * (1 - n / L) * c * total


def exact_expected_distance(alpha_row, x_row, n, zero_weight="not_selected"):
    """E over all C(L, N) subsets, by enumeration."""
    L = len(alpha_row)
    subsets = list(itertools.combinations(range(L), n))
    return sum(distance(alpha_row, x_row, set(s), zero_weight) for s in subsets) / len(subsets)


def separability(alpha_row, x_row, n, delta, m, zero_weight="not_selected"):
    """(N_s, r, lower, upper); N_s counts the selected tokens (by the zero-weight rule) within
    r of s, r the distance to the nearest token not selected; the bounds' xi over the top n."""
    L = len(alpha_row)
    top = top_n(alpha_row, n)
    sel = by_rule(alpha_row, top, zero_weight)
    s = sum((alpha_row[i] * x_row[i] for i in sel), np.zeros(len(x_row[0])))
    r = min(float(np.linalg.norm(s - alpha_row[i] * x_row[i])) for i in range(L) if i not in sel)
    # under "not_selected" a weight at most float32's eps times the row's peak ties at r as a
    # zero weight does, and never counts
    floor = np.finfo(np.float32).eps * max(alpha_row) if zero_weight == "not_selected" else -1.0
    n_s = sum(
        1
        for i in sel
        if float(np.linalg.norm(alpha_row[i] * x_row[i] - s)) <= r and alpha_row[i] > floor
    )
    xis = []
    for i in top:
        xi2 = m**2 * sum(alpha_row[j] ** 2 for j in top if j != i)
        xi2 += (m**2 - delta**2 / 2) * sum(
            alpha_row[j] * alpha_row[k] for j in top for k in top if j != k and j != i and k != i
        )
        xis.append(math.sqrt(xi2) if xi2 >= 0 else math.nan)
    lower = 1 - sum(xis) / (r * n) if r > 0 else math.nan
    upper = sum(math.exp(-((r - v) ** 2) / (16 * m**2)) for v in xis) / n
    return n_s, r, lower, upper


def min_pairwise(x_row):
    L = len(x_row)
    return min(
        float(np.linalg.norm(x_row[i] - x_row[j])) for i in range(L) for j in range(L) if i != j
    )


def top_n_attention(scores, visible, values, n, selection="attention", mode="delete", uniform=None):
    """One head's attention under the effective-set intervention (attnlimits.effective_set), row
    by row in plain numpy: softmax over each query's visible keys, keep the n of highest weight
    (``"attention"``), of highest weight x ||v_i|| (``"contribution"``) or of highest
    ``uniform`` draw (``"random"``; (queries, keys) numbers), the lower index first among equal
    scores; every visible key where a row sees at most n. ``"delete"`` keeps the kept weights,
    ``"renormalize"`` scales them back to the row's mass. scores, visible: (queries, keys);
    values: (keys, head_dim). Returns (queries, head_dim)."""
    scores = np.asarray(scores, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    out = np.zeros((scores.shape[0], values.shape[1]))
    for q in range(scores.shape[0]):
        seen = [i for i in range(scores.shape[1]) if visible[q][i]]
        top = max(scores[q][i] for i in seen)
        e = {i: np.exp(scores[q][i] - top) for i in seen}
        total = sum(e.values())
        w = {i: e[i] / total for i in seen}
        if selection == "attention":
            rank = {i: w[i] for i in seen}
        elif selection == "contribution":
            rank = {i: w[i] * np.linalg.norm(values[i]) for i in seen}
        else:
            rank = {i: uniform[q][i] for i in seen}
        chosen = sorted(seen, key=lambda i: (-rank[i], i))[:n]
        kept = {i: w[i] for i in chosen}
        if mode == "renormalize":
            mass = sum(kept.values())
            kept = {i: v * sum(w.values()) / mass for i, v in kept.items()}
        for i, v in kept.items():
            out[q] += v * values[i]
    return out


def set_geometry(weights_row, values, selected, visible, metric="euclidean"):
    """P_N, R_N, F_N of one row (attnlimits.set_geometry), by plain loops: y_i = alpha_i v_i,
    s the sum of the selected y_i, D_i = ||y_i - s|| or 1 - cos(y_i, s) (cos 0 where a vector
    is 0), rho_max the largest selected D, rho_min the smallest unselected visible D."""
    keys = range(len(weights_row))
    y = [[float(weights_row[i]) * float(c) for c in values[i]] for i in keys]
    chosen = [i for i in keys if selected[i]]
    others = [j for j in keys if visible[j] and not selected[j]]
    s = [sum(y[i][k] for i in chosen) for k in range(len(y[0]))]

    def dist(i):
        if metric == "euclidean":
            return math.sqrt(sum((a - b) ** 2 for a, b in zip(y[i], s, strict=True)))
        ny = math.sqrt(sum(a * a for a in y[i]))
        ns = math.sqrt(sum(b * b for b in s))
        cos = sum(a * b for a, b in zip(y[i], s, strict=True)) / (ny * ns) if ny * ns > 0 else 0.0
        return 1.0 - max(-1.0, min(1.0, cos))

    n = len(chosen)
    rho_max = max(dist(i) for i in chosen)
    rho_min = min((dist(j) for j in others), default=math.inf)
    p = n / (n + sum(1 for j in others if dist(j) <= rho_max))
    r = sum(1 for i in chosen if dist(i) < rho_min) / n
    f = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return p, r, f
