"""The geometry of a selected set beside N* (the follow-up paper's Definition 1): does the set the
model keeps stand apart, as weighted values, from the keys it drops?

For one query row with weights alpha and values v, weighted values y_i = alpha_i v_i, a selected
set S of N visible keys and its aggregate s = sum_{i in S} y_i, D_i is the distance of y_i to s
(Euclidean ||y_i - s||, or cosine 1 - cos(y_i, s), with cos = 0 where either vector is 0). Then,
reading rho_max as the largest distance of a selected key and rho_min as the smallest distance
of an unselected visible one (the definition's radii; docs/effective-set.md):

- P_N = N / (N + #{unselected j : D_j <= rho_max})   (how few intruders the selected ball holds),
- R_N = #{selected i : D_i < rho_min} / N            (how many selected keys are nearer than
  every unselected one),
- F_N = 2 P_N R_N / (P_N + R_N), 0 where both are 0.

Top-N sets are the N largest weights (the lower index first on ties); random sets are drawn
uniformly among the visible keys and measured around their own aggregate. The plain reference is
:func:`attnlimits.reference.set_geometry`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

METRICS = ("euclidean", "cosine")


class SetGeometry(NamedTuple):
    precision: NDArray[np.float64]
    recall: NDArray[np.float64]
    f: NDArray[np.float64]


def top_n_sets(weights: NDArray, visible: NDArray[np.bool_], n: int) -> NDArray[np.bool_]:
    """(R, L) bool: each row's n visible keys of largest weight, the lower index first on ties
    (every visible key where a row sees at most n)."""
    score = np.where(visible, weights, -np.inf)
    order = np.argsort(-score, axis=1, kind="stable")[:, :n]
    chosen = np.zeros(weights.shape, dtype=bool)
    np.put_along_axis(chosen, order, True, axis=1)
    return chosen & visible


def random_sets(visible: NDArray[np.bool_], n: int, rng: np.random.Generator) -> NDArray[np.bool_]:
    """(R, L) bool: n keys per row drawn uniformly without replacement among the visible ones."""
    score = np.where(visible, rng.random(visible.shape), -np.inf)
    order = np.argsort(-score, axis=1, kind="stable")[:, :n]
    chosen = np.zeros(visible.shape, dtype=bool)
    np.put_along_axis(chosen, order, True, axis=1)
    return chosen & visible


def distances_to_aggregate(
    y: NDArray[np.float64], selected: NDArray[np.bool_], metric: str
) -> NDArray[np.float64]:
    """(R, L): D_i of every key's weighted value y (R, L, d) to its row's aggregate over the
    ``selected`` keys."""
    s = np.einsum("rl,rld->rd", selected.astype(np.float64), y)
    if metric == "euclidean":
        return np.linalg.norm(y - s[:, None, :], axis=2)
    if metric != "cosine":
        raise ValueError(f"metric {metric!r} is not one of {METRICS}")
    norms = np.linalg.norm(y, axis=2) * np.linalg.norm(s, axis=1)[:, None]
    dots = np.einsum("rld,rd->rl", y, s)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(norms > 0, dots / norms, 0.0)
    return 1.0 - np.clip(cos, -1.0, 1.0)


def set_geometry(
    weights: NDArray,
    values: NDArray,
    selected: NDArray[np.bool_],
    visible: NDArray[np.bool_],
    metric: str = "euclidean",
) -> SetGeometry:
    """P_N, R_N and F_N per row (module docstring) of the ``selected`` sets (R, L) among the
    ``visible`` keys, weights (R, L), values (R, L, d) or one (L, d) for every row."""
    weights = np.asarray(weights, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 2:
        values = np.broadcast_to(values, weights.shape + values.shape[1:])
    y = weights[:, :, None] * values
    distance = distances_to_aggregate(y, selected, metric)
    unselected = visible & ~selected
    n = selected.sum(axis=1)
    rho_max = np.where(selected, distance, -np.inf).max(axis=1)
    rho_min = np.where(unselected, distance, np.inf).min(axis=1)
    intruders = (unselected & (distance <= rho_max[:, None])).sum(axis=1)
    apart = (selected & (distance < rho_min[:, None])).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(n > 0, n / (n + intruders), np.nan)
        recall = np.where(n > 0, apart / np.maximum(n, 1), np.nan)
        both = precision + recall
        f = np.where(both > 0, 2.0 * precision * recall / both, 0.0)
    return SetGeometry(precision, recall, np.where(n > 0, f, np.nan))
