"""Top-N selection of attended tokens (the index set I_N of the paper)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

# How a token of weight exactly 0 inside the top-N set counts (analysis.zero_weight).
# "not_selected": it is neither selected nor distinguishable: it contributes nothing to s, so the
#   set it belongs to is the set without it, and it sits among the non-selected at ||0 - s||.
#   The paper's sets are "the tokens the attention selects"; a weight of 0 selects nothing.
# "literal": the top-N indices whatever their weights (ties to the lower index), the paper's
#   formulas read literally; a zero-weight token then ties at the radius r = ||s|| and counts as
#   distinguishable (docs/paper-notes.md, "Zero weights in the top-N set").
ZERO_WEIGHT_RULES = ("not_selected", "literal")
DEFAULT_ZERO_WEIGHT = "not_selected"
# Float32's resolution (models' weights are float32): a weight at most this times its row's
# largest moves s = sum alpha_i x_i by less than the rounding of the largest term, so a token of
# such weight sits at ||s|| from s up to rounding and ties at Theorem 2's radius as a zero weight
# does. Under "not_selected" it can no more count as distinguishable than a zero weight can.
NEGLIGIBLE_WEIGHT = float(np.finfo(np.float32).eps)


def resolvable(alpha, rule: str, xp=np):
    """Mask of the weights that may count in N_s under zero-weight ``rule``: under
    "not_selected" those above NEGLIGIBLE_WEIGHT times their row's largest, under "literal"
    every one (ties at the radius count, as the paper's Eq. 10 reads)."""
    if check_zero_weight(rule) == "literal":
        return alpha == alpha  # noqa: PLR0124 (all True, in alpha's namespace)
    return alpha > NEGLIGIBLE_WEIGHT * xp.amax(alpha, axis=1, keepdims=True)


def check_zero_weight(rule: str) -> str:
    if rule not in ZERO_WEIGHT_RULES:
        raise ValueError(f"zero_weight must be one of {ZERO_WEIGHT_RULES}, got {rule!r}")
    return rule


def selected_by_rule(
    mask: NDArray[np.bool_], alpha: NDArray[np.floating], rule: str
) -> NDArray[np.bool_]:
    """The selected set of a top-N (or any) ``mask`` under the zero-weight ``rule``: the mask
    itself ("literal") or its tokens of nonzero weight ("not_selected")."""
    if check_zero_weight(rule) == "literal":
        return mask
    return mask & (np.asarray(alpha) != 0)


def _checked_weights(alpha: NDArray[np.floating], n: int) -> NDArray[np.floating]:
    """alpha as an (S, L) array, refusing any other shape and an N outside [1, L]."""
    alpha = np.asarray(alpha)
    if alpha.ndim != 2:
        raise ValueError(f"alpha must have shape (S, L), got {alpha.shape}")
    length = alpha.shape[1]
    if not 1 <= n <= length:
        raise ValueError(f"N must satisfy 1 <= N <= L, got N={n}, L={length}")
    return alpha


def top_n_indices(alpha: NDArray[np.floating], n: int) -> NDArray[np.intp]:
    """Indices of the ``n`` largest weights of each row, ties broken towards the lower index.

    ``alpha`` has shape (S, L); the result has shape (S, n), ordered by decreasing weight.
    A stable sort of ``-alpha`` keeps equal weights in index order, which is the tie rule.
    """
    alpha = _checked_weights(alpha, n)
    order = np.argsort(-alpha, axis=1, kind="stable")
    return order[:, :n]


def top_n_mask(alpha: NDArray[np.floating], n: int) -> NDArray[np.bool_]:
    """Boolean mask (S, L) that is True on the top-``n`` set I_N of each row (same set as
    :func:`top_n_indices`, ties to the lower index).

    A partition finds each row's n-th largest weight v in O(L) instead of sorting the row: the
    set is every weight above v and then the lowest-index weights equal to v until there are n.
    Rows with a NaN (which a partition would rank as largest) take the sorting path.
    """
    alpha = _checked_weights(alpha, n)
    length = alpha.shape[1]
    if np.isnan(alpha).any():
        mask = np.zeros(alpha.shape, dtype=bool)
        np.put_along_axis(mask, top_n_indices(alpha, n), True, axis=1)
        return mask
    nth = np.partition(alpha, length - n, axis=1)[:, length - n, None]
    mask = alpha > nth
    at_nth = alpha == nth
    missing = n - mask.sum(axis=1, keepdims=True)
    mask |= at_nth & (np.cumsum(at_nth, axis=1) <= missing)
    return mask


def random_subset_indices(
    shape: tuple[int, ...], *, length: int, n: int, rng: np.random.Generator
) -> NDArray[np.intp]:
    """Uniformly random size-``n`` subsets of {0..L-1}, as indices of shape (*shape, n).

    Small n: Floyd's algorithm (n vectorised steps; each step takes a uniform t in [0, j] and
    falls back to j when t was already drawn), which gives every subset the same probability.
    Large n: the n smallest of i.i.d. uniform keys, whose cost does not grow with n^2.
    """
    if not 1 <= n <= length:
        raise ValueError(f"N must satisfy 1 <= N <= L, got N={n}, L={length}")
    if n > 48:
        keys = rng.random((*shape, length), dtype=np.float32)
        return (
            np.argpartition(keys, n - 1, axis=-1)[..., :n]
            if n < length
            else np.argsort(keys, axis=-1)
        )
    out = np.empty((*shape, n), dtype=np.intp)
    for i, j in enumerate(range(length - n, length)):
        t = rng.integers(0, j + 1, size=shape)
        seen = (out[..., :i] == t[..., None]).any(axis=-1) if i else np.zeros(shape, dtype=bool)
        out[..., i] = np.where(seen, j, t)
    return out
