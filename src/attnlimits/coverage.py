"""Multi-head coverage: how much of the heads' combined top-N set at least one head keeps
geometrically distinguishable (paper, Section 4: H independent heads cover 1 - (1 - p)^H).

Inputs are per (group, head, token) masks for one query: ``selected`` (the head's top-N set) and
``distinguishable`` (its N_s tokens inside B_r(s), :func:`attnlimits.separability.distinguishable`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class Coverage:
    """Per group (e.g. one layer and chunk); every field has shape (G,)."""

    union_selected: NDArray[np.int64]  # |U|, U = union over heads of the top-N sets
    union_distinguishable: NDArray[np.int64]  # tokens distinguishable by at least one head
    coverage: NDArray[np.float64]  # their ratio
    # mean over heads of N_s / |selected| (the paper's per-head rate; N_s/N where every top-N
    # token is selected, i.e. none has weight 0 under analysis.zero_weight "not_selected"), over
    # the heads that select something (NaN where none does)
    p: NDArray[np.float64]
    predicted_paper: NDArray[np.float64]  # 1 - (1 - p)^H, the paper's formula; H: heads selecting
    # Independence with the measured overlap: a token in h_t heads' top-N sets is kept with
    # probability 1 - (1 - p)^{h_t}; mean over U. Equals the paper's formula when every head
    # selects the same N tokens.
    predicted_overlap: NDArray[np.float64]


def head_coverage(selected: NDArray[np.bool_], distinguishable: NDArray[np.bool_]) -> Coverage:
    """``selected`` and ``distinguishable`` have shape (G, H, L); distinguishable implies selected."""
    selected = np.asarray(selected, dtype=bool)
    distinguishable = np.asarray(distinguishable, dtype=bool)
    if selected.shape != distinguishable.shape or selected.ndim != 3:
        raise ValueError(
            f"expected two (G, H, L) masks, got {selected.shape}, {distinguishable.shape}"
        )
    if (distinguishable & ~selected).any():
        raise ValueError("a distinguishable token must be selected")
    union = selected.any(axis=1)  # (G, L)
    union_selected = union.sum(axis=1)
    union_dist = distinguishable.any(axis=1).sum(axis=1)
    chosen = selected.sum(axis=2)  # (G, H)
    # a head that selects nothing (every top-N weight 0) has no rate: the mean leaves it out,
    # NaN where no head selects anything (review 32)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_head = np.where(chosen > 0, distinguishable.sum(axis=2) / chosen, np.nan)
        counted = (chosen > 0).sum(axis=1)
        p = np.where(counted > 0, np.nansum(per_head, axis=1) / np.maximum(counted, 1), np.nan)
    heads_per_token = selected.sum(axis=1)  # (G, L): h_t
    kept = 1.0 - (1.0 - p[:, None]) ** heads_per_token
    with np.errstate(invalid="ignore", divide="ignore"):
        coverage = union_dist / union_selected
        overlap = np.where(union, kept, 0.0).sum(axis=1) / union_selected
    return Coverage(
        union_selected=union_selected.astype(np.int64),
        union_distinguishable=union_dist.astype(np.int64),
        coverage=coverage,
        p=p,
        # the heads p averages: one that selects nothing covers nothing (review 33)
        predicted_paper=np.where(counted > 0, 1.0 - (1.0 - p) ** counted, np.nan),
        predicted_overlap=overlap,
    )


def heads_for_coverage(p: float, target: float) -> float:
    """Heads needed for 1 - (1 - p)^H >= target under independence (paper: ~3 for 99% at p=0.8);
    NaN for an unknown p (no head selected anything)."""
    if np.isnan(p):
        return float("nan")
    if not 0 < p < 1:
        return 1.0 if p >= 1 else float("inf")
    return float(np.ceil(np.log(1.0 - target) / np.log(1.0 - p)))
