"""The workflow's random streams. Every seeded generator is ``stream_rng(seed, STREAM, *keys)``,
that is ``np.random.default_rng([seed, STREAM, *keys])``: the id keeps the analyses' draws apart
and says what each serves, and the keys (L, N, sample, ...) make a value independent of the order
the jobs or searches visit them. The ids are part of the results: changing one changes that
analysis's numbers, so they are never renumbered."""

from __future__ import annotations

from enum import IntEnum

import numpy as np


class Stream(IntEnum):
    DISTANCE_MONTE_CARLO = 1  # Theorem 1.2's E by Monte Carlo, per (L, N)
    CRITICAL_N_MONTE_CARLO = 2  # the critical-N search's Monte-Carlo E, per (L, N) or row block
    GRADIENT_DIRECTIONS = 3  # Algorithm 5's random unit directions, the same for every T
    NORMALIZER_SAMPLES = 6  # the samples every normalizer what-if uses, per L
    NORMALIZER_MONTE_CARLO = 7  # a normalizer's Monte-Carlo E at the fixed N
    NORMALIZER_CRITICAL_N = 8  # a normalizer's critical-N search
    HEAD_CRITICAL_N = 9  # the per-head critical N of the head report
    FIG1_ILLUSTRATION = 10  # Fig. 1's random points and logits
    CRITICAL_N_SUBSAMPLE = 11  # the heads or rows the critical-N KS test compares, per count
    QUERY_ROWS = 12  # the query rows analysed per (L, sample) under analysis.all_rows.rows
    GRADIENT_NULL = 13  # Corollary 3's null rows of matched spread, the same for every T


def stream_rng(seed: int, stream: Stream, *keys: int) -> np.random.Generator:
    """The generator of ``stream`` for these keys under the run's seed."""
    return np.random.default_rng([int(seed), int(stream), *(int(k) for k in keys)])
