"""Bound checks on the data: holds, violated, or not testable.

A check compares a value with a bound up to a tolerance tol = rtol (|value| + |bound|), the
rounding the two can carry. It can only fail where some value the quantity can take lies beyond
bound +- tol: a lower bound on a quantity that is never below ``floor`` (a weight, a distance, a
fraction) is not testable once bound - tol <= floor, and an upper bound once bound + tol >=
``ceiling`` or the bound is infinite. Such samples are counted as "not testable", never as
"holds": exp(-2 Delta/T)/L below an absolute slack of 1e-9 once made the Corollary 1 lower bound
pass on over half of MiniLM's samples whatever the data said.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

HOLDS = "holds"
VIOLATED = "violated"
NOT_TESTABLE = "not testable"

# Quantities computed in float64 from the dumped float32 arrays: only float64 rounding separates
# value and bound, and 1e-9 leaves six orders of magnitude of room over it.
RTOL_FLOAT64 = 1e-9
# Checks whose two sides come from different float32 computations of the model (its logits
# against norms of its q and k): float32 dot products of length d carry ~d * 6e-8 relative error.
RTOL_FLOAT32 = 1e-5


def check_bound(
    value: ArrayLike,
    bound: ArrayLike,
    *,
    upper: bool,
    rtol: float,
    floor: float | None = None,
    ceiling: float | None = None,
) -> NDArray[np.object_]:
    """Per sample: HOLDS, VIOLATED or NOT_TESTABLE for value <= bound (``upper``) or
    value >= bound, with tol = rtol (|value| + |bound|); None where either side is NaN."""
    value = np.asarray(value, dtype=np.float64)
    bound = np.asarray(bound, dtype=np.float64)
    value, bound = np.broadcast_arrays(value, bound)
    with np.errstate(invalid="ignore", over="ignore"):
        tol = rtol * (np.abs(value) + np.where(np.isfinite(bound), np.abs(bound), 0.0))
        if upper:
            ok = value <= bound + tol
            testable = np.isfinite(bound)
            if ceiling is not None:
                testable &= bound + tol < ceiling
        else:
            ok = value >= bound - tol
            testable = np.isfinite(bound)
            if floor is not None:
                testable &= bound - tol > floor
    out = np.where(ok, HOLDS, VIOLATED).astype(object)
    out[~testable & ok] = NOT_TESTABLE
    out[np.isnan(value) | np.isnan(bound)] = None
    return out


def describe_tolerance(rtol: float) -> str:
    """The tolerance as the scorecard states it."""
    return f"rtol {rtol:g} x (|value| + |bound|)"
