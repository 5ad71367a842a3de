"""Hypothesis strategies for attention samples: weights on the simplex and embeddings."""

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

finite = st.floats(-3, 3, allow_nan=False, allow_infinity=False, width=64)


@st.composite
def attention_samples(draw, min_len=2, max_len=9, max_samples=3, max_dim=4):
    """(alpha (S, L), x (S, L, d)) with alpha rows on the simplex (ties allowed)."""
    s = draw(st.integers(1, max_samples))
    length = draw(st.integers(min_len, max_len))
    d = draw(st.integers(1, max_dim))
    # Integer-valued logits make exact ties common, which is where selection rules break.
    logits = draw(arrays(np.float64, (s, length), elements=st.integers(-4, 4).map(float)))
    temp = draw(st.sampled_from([0.3, 1.0, 3.0]))
    z = np.exp((logits - logits.max(axis=1, keepdims=True)) / temp)
    alpha = z / z.sum(axis=1, keepdims=True)
    x = draw(arrays(np.float64, (s, length, d), elements=finite))
    return alpha, x
