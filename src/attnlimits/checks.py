"""Bound checks on the data: holds, violated, not testable, or vacuous.

A check compares a value with a bound up to a tolerance tol = rtol (|value| + |bound|), the
rounding the two can carry. The quantity has a range [``floor``, ``ceiling``] whatever the model
does (a weight, a distance, a fraction), and the bound has one too where the theorem forces it
(Theorem 2's upper bound is never below e^(-1/16)). Outcomes, per sample:

- "vacuous": the check cannot fail on any data: an upper bound at or above the quantity's
  ``ceiling`` (or infinite), a lower bound at or below its ``floor``; or the value already lies
  on the safe side of every value the bound can take (``bound_floor`` for an upper bound,
  ``bound_ceiling`` for a lower one), so the bound's own value decides nothing.
- "not testable": only values within the tolerance of the range's edge could fail it (the
  tolerance exceeds the bound's distance to the edge): exp(-2 Delta/T)/L below an absolute slack
  of 1e-9 once made the Corollary 1 lower bound pass on over half of MiniLM's samples.
- "violated" / "holds" otherwise.

Neither "vacuous" nor "not testable" is ever counted as "holds".
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

HOLDS = "holds"
VIOLATED = "violated"
NOT_TESTABLE = "not testable"
VACUOUS = "vacuous"
OUTCOMES = (HOLDS, VIOLATED, NOT_TESTABLE, VACUOUS)

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
    floor: float | ArrayLike | None = None,
    ceiling: float | ArrayLike | None = None,
    bound_floor: float | None = None,
    bound_ceiling: float | None = None,
) -> NDArray[np.object_]:
    """Per sample: HOLDS, VIOLATED, NOT_TESTABLE or VACUOUS for value <= bound (``upper``) or
    value >= bound, with tol = rtol (|value| + |bound|) over the finite parts (an infinite value
    against a finite bound is decided, not swallowed by its tolerance); None where either side
    is NaN.
    ``floor``/``ceiling``: the range of the value on any data (scalars or per sample);
    ``bound_floor`` (upper checks) / ``bound_ceiling`` (lower checks): the least / largest value
    the bound itself can take on any data."""
    value = np.asarray(value, dtype=np.float64)
    bound = np.asarray(bound, dtype=np.float64)
    value, bound = np.broadcast_arrays(value, bound)
    with np.errstate(invalid="ignore", over="ignore"):
        # the tolerance of the finite parts only: an infinite value against a finite bound is
        # a violation, not within an infinite tolerance
        tol = rtol * (
            np.where(np.isfinite(value), np.abs(value), 0.0)
            + np.where(np.isfinite(bound), np.abs(bound), 0.0)
        )
        if upper:
            ok = value <= bound + tol
            vacuous = ~np.isfinite(bound)
            untestable = np.zeros(value.shape, dtype=bool)
            if ceiling is not None:
                vacuous |= bound >= ceiling
                untestable |= bound + tol >= ceiling
            if bound_floor is not None:
                vacuous |= value <= bound_floor
        else:
            ok = value >= bound - tol
            vacuous = ~np.isfinite(bound)
            untestable = np.zeros(value.shape, dtype=bool)
            if floor is not None:
                vacuous |= bound <= floor
                untestable |= bound - tol <= floor
            if bound_ceiling is not None:
                vacuous |= value >= bound_ceiling
    out = np.where(ok, HOLDS, VIOLATED).astype(object)
    out[ok & untestable] = NOT_TESTABLE
    out[ok & vacuous] = VACUOUS
    out[np.isnan(value) | np.isnan(bound)] = None
    return out


def log10_slack(value: ArrayLike, bound: ArrayLike, *, upper: bool) -> NDArray[np.float64]:
    """How far the data stayed from the bound, per sample: log10(bound / value) for an upper
    bound, log10(value / bound) for a lower one (positive: on the safe side; 0: attained;
    negative: violated). NaN where either side is not positive and finite."""
    value = np.asarray(value, dtype=np.float64)
    bound = np.asarray(bound, dtype=np.float64)
    ok = (value > 0) & (bound > 0) & np.isfinite(value) & np.isfinite(bound)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = bound / value if upper else value / bound
        return np.where(ok, np.log10(np.where(ok, ratio, 1.0)), np.nan)


def describe_tolerance(rtol: float) -> str:
    """The tolerance as the scorecard states it."""
    return f"rtol {rtol:g} x (|value| + |bound|), over the finite parts (an infinite value is decided, never within it)"


def row_outcome_columns(name: str, outcome: NDArray[np.object_]) -> dict[str, NDArray]:
    """Per-row indicator columns of one check's outcomes for the all-rows protocol's row means
    ("<name>_violated", "_not_testable", "_vacuous": 1.0 or 0.0, NaN where not applicable), so
    that a head's mean times its rows counts the rows of each outcome."""
    applicable = outcome != None  # noqa: E711 (elementwise on an object array)
    return {
        f"{name}_{label}": np.where(applicable, outcome == kind, np.nan).astype(np.float64)
        for label, kind in (
            ("violated", VIOLATED),
            ("not_testable", NOT_TESTABLE),
            ("vacuous", VACUOUS),
        )
    }


def head_outcomes(pooled: dict, name: str) -> dict[str, NDArray | list]:
    """Per head, from the pooled row means of :func:`row_outcome_columns` (each with its count
    of applicable rows, "<name>_<outcome>_rows", as attnlimits_workflow.rows.pool_chunks gives
    it): the rows of each outcome ("<name>_violated_rows", ...), the applicable rows
    ("<name>_rows") and the head's outcome ("<name>_check"): violated when any row is, not
    testable when any row is, vacuous when every applicable row is, holds otherwise; None for a
    head without an applicable row. With drawn rows, the counts are of the analysed rows."""
    applicable = np.asarray(pooled[f"{name}_violated_rows"], dtype=np.int64)
    # with drawn rows (analysis.all_rows.rows) the pooled mean is weighted by the rows each
    # stands for; the count of analysed rows of an outcome reads their plain mean
    counts = {
        label: np.rint(
            np.nan_to_num(pooled.get(f"{name}_{label}_analysed", pooled[f"{name}_{label}"]))
            * applicable
        ).astype(np.int64)
        for label in ("violated", "not_testable", "vacuous")
    }
    outcome = np.where(
        counts["violated"] > 0,
        VIOLATED,
        np.where(
            counts["not_testable"] > 0,
            NOT_TESTABLE,
            np.where(counts["vacuous"] >= applicable, VACUOUS, HOLDS),
        ),
    ).astype(object)
    outcome[applicable == 0] = None
    return {
        **{f"{name}_{label}_rows": c for label, c in counts.items()},
        f"{name}_rows": applicable,
        f"{name}_check": outcome.tolist(),
    }
