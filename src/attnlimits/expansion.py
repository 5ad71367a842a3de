"""Distances by expansion, and the keys a row's statistics run over: the two pieces every
row statistic shares, plain (numpy or torch through attnlimits.arrays) and fused
(attnlimits.fused, attnlimits.sweeps) alike.

An entry ||coef_ti x_i - point_t||^2 is computed as coef^2 |x_i|^2 - 2 coef x_i . point_t +
|point_t|^2 (one matrix product for a block of rows) and recomputed directly where that expansion
could have lost digits to cancellation: where it is at most CANCELLATION times the row's largest
|coef_ti x_i|^2 + |point_t|^2.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .arrays import NUMPY, NumpyNamespace, TorchNamespace

Namespace = NumpyNamespace | TorchNamespace
MASKED_MODES = ("non_selected", "prefix")
CANCELLATION = 1e-8


def visible_lengths(rows: NDArray[np.intp], length: int, *, causal: bool, masked: str) -> NDArray:
    """Tokens that row t's statistics run over: L, or t + 1 for a causal row under ``prefix``."""
    if masked not in MASKED_MODES:
        raise ValueError(f"masked must be one of {MASKED_MODES}, got {masked!r}")
    rows = np.asarray(rows)
    if causal and masked == "prefix":
        return rows + 1
    return np.full(rows.shape, length)


def norms_by_expansion(
    coef, point, x, coef_sq_x, coef_sq_x_floor=None, *, xp: Namespace = NUMPY
) -> NDArray[np.float64]:
    """||coef_ti x_i - point_t|| (R, L) for keys x (L, d), by expansion.

    Entries whose square is small beside the row's largest |coef_ti x_i|^2 + |point_t|^2 (a
    superset of those where two nonzero, nearly equal points lose digits to cancellation) are
    recomputed directly; when either side is exactly zero (a masked key's 0 x_i, an empty
    selection's s = 0) the expansion is exact and non-negative. ``coef_sq_x_floor`` is
    CANCELLATION * the row maxima of coef_sq_x (R, 1), for callers that share it."""
    q_sq = xp.einsum("rd,rd->r", point, point)[:, None]
    d2 = coef * ((-2.0 * point) @ x.T)
    d2 += coef_sq_x
    d2 += q_sq
    if coef_sq_x_floor is None:
        coef_sq_x_floor = CANCELLATION * xp.amax(coef_sq_x, axis=1, keepdims=True, initial=0.0)
    risky = d2 <= coef_sq_x_floor + CANCELLATION * q_sq
    if bool(risky.any()):
        ri, li = xp.nonzero(risky)
        keep = (coef_sq_x[ri, li] > 0) & (q_sq[ri, 0] > 0)
        ri, li = ri[keep], li[keep]
        diff = coef[ri, li, None] * x[li] - point[ri]
        d2[ri, li] = xp.einsum("nd,nd->n", diff, diff)
        xp.clip_below(d2, 0.0)  # an exact zero side may have rounded below 0
    return xp.sqrt(d2, out=d2)
