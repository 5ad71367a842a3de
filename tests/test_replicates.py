"""Replicate summaries (attnlimits_workflow.assemble.replicates) against a brute-force loop that
resamples the units with explicit numpy indices, pandas- and polars-free, on hand-made tables."""

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlimits_workflow.assemble.replicates import replicate_summaries

pytestmark = pytest.mark.unit


def _brute_force(rows, by, column, how, resamples, seed, chunked):
    """{(group, replicate): statistic} from a loop: draw head indices (then chunk indices) with
    replacement exactly as attnlimits.bootstrap.resample_indices does, collect every row of each
    drawn (head, chunk) pair, reduce with numpy."""
    heads = sorted({(r["layer"], r["head"]) for r in rows})
    chunks = sorted({r["chunk"] for r in rows}) if chunked else [None]
    rng = np.random.default_rng(seed)
    head_draws = rng.integers(0, len(heads), size=(resamples, len(heads)))
    chunk_draws = rng.integers(0, len(chunks), size=(resamples, len(chunks))) if chunked else None
    reduce = {"median": np.median, "mean": np.mean, "max": np.max}[how]
    out = {}
    for group in sorted({r[by] for r in rows}):
        for rep in range(resamples):
            values = []
            for hi in head_draws[rep]:
                for ci in chunk_draws[rep] if chunked else [None]:
                    layer, head = heads[hi]
                    values += [
                        r[column]
                        for r in rows
                        if r[by] == group
                        and (r["layer"], r["head"]) == (layer, head)
                        and (ci is None or r["chunk"] == chunks[ci])
                    ]
            out[(group, rep)] = reduce(values) if values else np.nan
    return out


def _frame(rows):
    return pl.DataFrame(rows)


def test_heads_only_by_hand():
    # chunk = -1 (all-rows protocol): only heads are resampled. Two heads at one L: values 1, 3.
    rows = [
        {"layer": 0, "head": 0, "chunk": -1, "L": 8, "x": 1.0},
        {"layer": 0, "head": 1, "chunk": -1, "L": 8, "x": 3.0},
    ]
    rng = np.random.default_rng(5)
    draws = rng.integers(0, 2, size=(4, 2))
    got = replicate_summaries(_frame(rows), ("L",), {"m": ("x", "mean")}, resamples=4, seed=5)
    expected = [np.mean([[1.0, 3.0][i] for i in d]) for d in draws]
    assert got["replicate"].to_list() == [0, 1, 2, 3]
    assert got["m"].to_list() == expected
    # each replicate's mean is one of 1, 2, 3
    assert set(got["m"].to_list()) <= {1.0, 2.0, 3.0}


@pytest.mark.parametrize("how", ["median", "mean", "max"])
def test_heads_and_chunks_match_the_loop(how):
    # two layers x two heads x three chunks at two lengths, one head missing at L = 16
    rng = np.random.default_rng(0)
    rows = [
        {"layer": layer, "head": head, "chunk": chunk, "L": length, "x": float(rng.normal())}
        for length in (8, 16)
        for layer in (0, 1)
        for head in (0, 1)
        for chunk in (0, 1, 2)
        if not (length == 16 and (layer, head) == (1, 1))
    ]
    got = replicate_summaries(_frame(rows), ("L",), {"s": ("x", how)}, resamples=25, seed=3)
    ref = _brute_force(rows, "L", "x", how, 25, 3, chunked=True)
    for r in got.iter_rows(named=True):
        expected = ref[(r["L"], r["replicate"])]
        if np.isnan(expected):
            assert np.isnan(r["s"])
        else:
            assert r["s"] == pytest.approx(expected, rel=1e-12)


def test_same_heads_in_every_group():
    # a resample is the same heads at every L: a head's value at L = 16 is its value at L = 8
    # plus 10, so each replicate's L = 16 mean is its L = 8 mean plus 10 exactly
    rows = [
        {
            "layer": 0,
            "head": h,
            "chunk": -1,
            "L": length,
            "x": h * 1.5 + (10 if length == 16 else 0),
        }
        for h in range(5)
        for length in (8, 16)
    ]
    got = replicate_summaries(_frame(rows), ("L",), {"m": ("x", "mean")}, resamples=50, seed=1)
    at8 = got.filter(pl.col("L") == 8).sort("replicate")["m"].to_numpy()
    at16 = got.filter(pl.col("L") == 16).sort("replicate")["m"].to_numpy()
    np.testing.assert_allclose(at16, at8 + 10)
    assert np.unique(at8).size > 1  # the resamples differ


def test_duplicate_unit_rows_are_refused():
    rows = [
        {"layer": 0, "head": 0, "chunk": -1, "L": 8, "x": 1.0},
        {"layer": 0, "head": 0, "chunk": -1, "L": 8, "x": 2.0},
    ]
    with pytest.raises(ValueError, match="more than one row per unit"):
        replicate_summaries(_frame(rows), ("L",), {"m": ("x", "mean")}, resamples=2, seed=0)


@given(
    values=st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=12),
    how=st.sampled_from(["median", "mean", "max"]),
    seed=st.integers(0, 2**16),
)
def test_heads_only_matches_the_loop(values, how, seed):
    rows = [
        {"layer": i % 3, "head": i // 3, "chunk": -1, "T": 1.0, "x": v}
        for i, v in enumerate(values)
    ]
    got = replicate_summaries(_frame(rows), ("T",), {"s": ("x", how)}, resamples=7, seed=seed)
    ref = _brute_force(rows, "T", "x", how, 7, seed, chunked=False)
    np.testing.assert_allclose(
        got.sort("replicate")["s"].to_numpy(), [ref[(1.0, r)] for r in range(7)], rtol=1e-12
    )


def test_replicates_of_leaves_out_statistics_whose_column_is_absent():
    from attnlimits_workflow.assemble.summaries import replicates_of

    rows = [
        {"layer": 0, "head": h, "chunk": -1, "L": 8, "N": 2, "distance": float(h)} for h in range(3)
    ]
    # an encoder's table has no distance_other_masked: its statistic is left out, not NaN
    got = replicates_of(
        _frame(rows),
        ("L", "N"),
        {
            "distance_median": ("distance", "median"),
            "distance_other_masked_median": ("distance_other_masked", "median"),
        },
        {"resamples": 4, "seed": 0},
    )
    assert got.columns == ["replicate", "L", "N", "distance_median"] and got.height == 4


def test_a_nan_cell_is_left_out_of_the_point_as_of_its_resamples():
    """Cells [1, 2, NaN] of one group: median 1.5 for the point (summaries.per_group) as for a
    resample that draws every unit once."""
    from attnlimits_workflow.assemble.summaries import per_group

    table = pl.DataFrame(
        {"layer": [0, 0, 0], "head": [0, 1, 2], "chunk": [-1, -1, -1], "L": [8, 8, 8]}
    ).with_columns(x=pl.Series([1.0, 2.0, float("nan")]))
    point = per_group(table, ("L",), [pl.col("x").median().alias("m")], ("L",))
    assert point["m"].to_list() == [1.5]
    mean = per_group(table, ("L",), [pl.col("x").mean().alias("m")], ("L",))
    assert mean["m"].to_list() == [1.5]


@pytest.mark.parametrize("how", ["median", "mean", "max"])
def test_the_layer_bootstrap_draws_whole_layers_as_a_loop_does(how):
    """analysis.bootstrap.unit: layer. Three layers x two heads x two chunks: each resample draws
    three layers with replacement and takes both heads of each, then the chunks one by one, all
    from one generator; a loop over explicit indices gives the same statistics."""
    rng = np.random.default_rng(1)
    rows = [
        {"layer": layer, "head": head, "chunk": chunk, "L": 8, "x": float(rng.normal())}
        for layer in (0, 1, 2)
        for head in (0, 1)
        for chunk in (0, 1)
    ]
    got = replicate_summaries(
        _frame(rows), ("L",), {"s": ("x", how)}, resamples=20, seed=4, unit="layer"
    )
    draws = np.random.default_rng(4)
    layers = draws.integers(0, 3, size=(20, 3))
    chunk_draws = draws.integers(0, 2, size=(20, 2))
    reduce = {"median": np.median, "mean": np.mean, "max": np.max}[how]
    for rep in range(20):
        values = [
            r["x"]
            for layer in layers[rep]
            for head in (0, 1)
            for chunk in chunk_draws[rep]
            for r in rows
            if (r["layer"], r["head"], r["chunk"]) == (layer, head, chunk)
        ]
        assert got["s"][rep] == pytest.approx(reduce(values), rel=1e-12)
    # an unknown unit is refused, not read as heads
    with pytest.raises(ValueError, match="head or layer"):
        replicate_summaries(_frame(rows), ("L",), {"s": ("x", how)}, resamples=2, seed=0, unit="x")
