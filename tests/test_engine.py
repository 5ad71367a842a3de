"""The row engine (attnlimits_workflow.engine): every all-rows analysis at one L in one pass
over each head's rows gives the tables each analysis's own pass gives, bit for bit, and its plan
holds at each L only what runs there."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from dump_samples import random_pack

from attnlimits_workflow import engine
from attnlimits_workflow.analyses import critical_n, distance, gradient, separability
from attnlimits_workflow.analyses.common import settings_from
from attnlimits_workflow.config import temperature_name

pytestmark = pytest.mark.unit

LENGTH = 12
SEED = 4


def section(rows="all", zero_weight="not_selected") -> dict:
    """A model's analysis section with every row analysis at L = 12 (distance's and
    separability's grids, the gradient's T, the critical-N list) and 8 and 10 beside it."""
    return {
        "protocol": "all_rows",
        "all_rows": {
            "chunks": None,
            "rows": rows,
            "masked": "non_selected",
            "mc_draws": 2,
            "mc_rows": 5,
            "critical_n_fractions": [0.1, 0.25, 0.5],
            "critical_n_band_edges": [0.06],
            "device": "numpy",
        },
        "embedding": "value",
        "zero_weight": zero_weight,
        "bootstrap": {"resamples": 20, "level": 0.95, "seed": 1},
        "lengths": [8, LENGTH],
        "distance": {
            "n_fixed": 2,
            "length_fixed": LENGTH,
            "n_grid": [1, 3],
            "mc_draws": 4,
            "mc_strata": 1,
            "mc_max_draws": 4,
            "mc_target_rel_stderr": 0.05,
        },
        "critical_n": {
            "ks_alpha": 0.01,
            "mc_draws": 2,
            "cache_mb": 1,
            "samples": None,
            "d_fractions": [0.25],
        },
        "separability": {
            "radius": 1.0,
            "length": LENGTH,
            "n_grid": [1, 4],
            "delta_over": "context",
        },
        "gradient": {
            "length": 10,
            "temperatures": [0.1, 1.0],
            "epsilons": [0.001, 0.1],
            "directions": 2,
            "null_rows": 4,
            "temperature_on": "model_logits",
        },
    }


def alone(pack, planned, name, value, delta):
    """The table of one analysis at one value from its own pass (its job's function)."""
    s = settings_from(
        {
            "distance": distance.Settings,
            "separability": separability.Settings,
            "critical_n": critical_n.Settings,
            "gradient": gradient.Settings,
        }[name],
        type("Params", (), planned[name]["settings"]),
    )
    if name == "distance":
        return distance.all_rows(pack, value, s)
    if name == "separability":
        return separability.all_rows(pack, value, s, delta)
    if name == "critical_n":
        return critical_n.all_rows(pack, s)
    return gradient.all_rows(pack, value, s)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("rows", ["all", 6])
@pytest.mark.parametrize("zero_weight", ["not_selected", "literal"])
def test_one_pass_gives_each_analysis_own_tables(causal, rows, zero_weight):
    """distance at each N, separability at each N, the critical-N search and the gradient at
    each T, from one pass, equal each analysis's own pass, bit for bit (every row or 6 drawn,
    both zero-weight rules, a causal and a bidirectional head)."""
    pack = random_pack(causal, length=LENGTH, seed=2)
    planned = engine.plan(section(rows, zero_weight), SEED, LENGTH)
    assert set(planned) == {"distance", "separability", "critical_n"}
    delta = np.linspace(0.3, 0.5, len(pack.layer))
    tables = engine.run(pack, planned, engine.Inputs(delta=delta))
    expected = {
        **{f"distance_N{n}": ("distance", n) for n in (1, 2, 3)},
        **{f"separability_N{n}": ("separability", n) for n in (1, 4)},
        "critical_n": ("critical_n", None),
    }
    assert set(tables) == set(expected)
    for stem, (name, value) in expected.items():
        want = alone(pack, planned, name, value, delta)
        assert tables[stem].equals(want), stem


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("beside", [False, True])
def test_the_gradient_shares_directions_and_equals_its_own_pass(causal, beside):
    """At the gradient's L the engine computes every T with one draw of directions per block;
    each T's table equals the gradient's own pass (which draws them itself), alone or beside
    the kernels that read weights (its logits then come from the full rows, cut at the block's
    last visible key)."""
    length = LENGTH if beside else 10
    config = section()
    config["gradient"] = config["gradient"] | {"length": length}
    pack = random_pack(causal, length=length, seed=5)
    planned = engine.plan(config, SEED, length)
    assert ("distance" in planned) == beside
    tables = engine.run(pack, planned, engine.Inputs(delta=np.ones(len(pack.layer))))
    for t in (0.1, 1.0):
        want = alone(pack, planned, "gradient", t, None)
        assert tables[f"gradient_T{temperature_name(t)}"].equals(want)


def test_the_plan_holds_only_what_runs_at_each_length():
    """Each L's plan names the analyses with values there; distance's fixed N at every L of
    analysis.lengths, its grid only at length_fixed; a setting of an analysis that does not run
    at L leaves that L's plan unchanged (so it reruns no job there)."""
    base = section()
    assert engine.plan(base, SEED, 8) == engine.plan(
        base | {"gradient": base["gradient"] | {"epsilons": [1.0]}}, SEED, 8
    )
    # a distance N added at length_fixed changes that L's plan alone
    more = base | {"distance": base["distance"] | {"n_grid": [1, 3, 5]}}
    assert engine.plan(more, SEED, 8) == engine.plan(base, SEED, 8)
    assert engine.plan(more, SEED, LENGTH) != engine.plan(base, SEED, LENGTH)
    at_8 = engine.plan(base, SEED, 8)
    assert set(at_8) == {"distance", "critical_n"}
    assert at_8["distance"]["values"] == [2]
    assert engine.plan(base, SEED, LENGTH)["distance"]["values"] == [1, 2, 3]
    assert engine.plan(base, SEED, 9) == {}
    # a reading's run computes only what it does not take from its source
    assert set(engine.plan(base, SEED, LENGTH, ["separability"])) == {"separability"}
    # the parts' params leave out what only the tables read: a bootstrap change reruns no pass
    resampled = base | {"bootstrap": base["bootstrap"] | {"resamples": 50}}
    assert engine.kernel_plan(engine.plan(resampled, SEED, LENGTH)) == engine.kernel_plan(
        engine.plan(base, SEED, LENGTH)
    )
    assert engine.plan(resampled, SEED, LENGTH) != engine.plan(base, SEED, LENGTH)


def test_analyses_that_disagree_on_the_rows_are_refused():
    """The pass reads one set of rows for every kernel: settings that would choose other rows
    for one analysis are refused, not silently read with the others' rows."""
    pack = random_pack(False, length=LENGTH, seed=1)
    planned = engine.plan(section(), SEED, LENGTH)
    planned["distance"]["settings"] = planned["distance"]["settings"] | {"seed": SEED + 1}
    with pytest.raises(ValueError, match="disagree on the rows"):
        engine.run(pack, planned, engine.Inputs(delta=np.ones(len(pack.layer))))


def test_tables_are_polars_frames_named_for_their_rules():
    """The file stems are those the take rules read (distance_N<n>, separability_N<n>,
    critical_n, gradient_T<T>)."""
    pack = random_pack(False, length=10, seed=3)
    tables = engine.run(pack, engine.plan(section(), SEED, 10))
    assert sorted(tables) == ["gradient_T0.1", "gradient_T1"]
    assert all(isinstance(t, pl.DataFrame) for t in tables.values())


@pytest.mark.parametrize("rows", ["all", 6])
@pytest.mark.parametrize(
    ("layers", "parts", "expected"),
    [(2, 3, [[0], [1], []]), (3, 2, [[0, 2], [1]])],
)
def test_parts_by_layer_pool_to_the_one_pass_tables(rows, layers, parts, expected, tmp_path):
    """The pass split by layer (one part empty; or parts whose samples interleave, so the
    pooling must put them back in order), saved and read back as the part jobs do, with the
    part jobs' params (kernel_plan: no table-only setting), pools to the one pass's tables,
    bit for bit."""
    pack = random_pack(True, length=LENGTH, seed=7, layers=layers)
    planned = engine.plan(section(rows), SEED, LENGTH)
    inputs = engine.Inputs(delta=np.linspace(0.3, 0.5, len(pack.layer)))
    assert [engine.layers_of_part(pack, p, parts) for p in range(parts)] == expected
    saved = []
    for p in range(parts):
        means = engine.run_part(pack, engine.kernel_plan(planned), inputs, part=p, parts=parts)
        engine.save_part(means, tmp_path / f"part{p}.npz")
        saved.append(engine.read_part(tmp_path / f"part{p}.npz"))
    got = engine.tables(pack, planned, engine.merge_parts(saved))
    want = engine.run(pack, planned, inputs)
    assert set(got) == set(want)
    for stem in want:
        assert got[stem].equals(want[stem]), stem
