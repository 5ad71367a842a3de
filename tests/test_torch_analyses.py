"""An all-rows analysis job's table is the same under analysis.all_rows.device numpy (the
default) and cpu (the row-block kernels in torch, attnlimits.arrays): every key and outcome
column equal, every float column to 1e-10 relative. The kernels one by one are held to numpy in
tests/test_torch_rows.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest
from dump_samples import random_pack

from attnlimits.arrays import namespace
from attnlimits_workflow.analyses import critical_n, distance, gradient, separability

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.integration

ALL_ROWS = {
    "chunks": None,
    "masked": "non_selected",
    "mc_draws": 3,
    "mc_rows": 5,
    "critical_n_fractions": [0.1, 0.25, 0.5],
    "critical_n_band_edges": [0.06],
    "device": "numpy",
}


def on(settings, device: str):
    return dataclasses.replace(settings, all_rows=ALL_ROWS | {"device": device})


def assert_same_table(want: pl.DataFrame, got: pl.DataFrame) -> None:
    assert got.columns == want.columns and got.height == want.height
    for name in want.columns:
        if want[name].dtype.is_float():
            np.testing.assert_allclose(
                got[name].to_numpy(), want[name].to_numpy(), rtol=1e-10, atol=1e-12, err_msg=name
            )
        else:
            assert got[name].to_list() == want[name].to_list(), name


def distance_settings(seed: int = 3, all_rows=None) -> distance.Settings:
    """The all-rows distance settings of these tests (``all_rows``: ALL_ROWS as read at the
    call, which tests may replace)."""
    return distance.Settings(
        mc_draws=8,
        mc_strata=1,
        mc_max_draws=8,
        mc_target_rel_stderr=0.05,
        seed=seed,
        protocol="all_rows",
        all_rows=ALL_ROWS if all_rows is None else all_rows,
        zero_weight="not_selected",
    )


ANALYSES = {
    "distance": lambda pack, device: distance.all_rows(pack, 2, on(distance_settings(), device)),
    "critical_n": lambda pack, device: critical_n.all_rows(
        pack,
        on(
            critical_n.Settings(
                ks_alpha=0.01,
                mc_draws=2,
                cache_mb=1,
                samples=None,
                d_fractions=[0.25],
                seed=2,
                protocol="all_rows",
                all_rows=ALL_ROWS,
                zero_weight="literal",
            ),
            device,
        ),
    ),
    "separability": lambda pack, device: separability.all_rows(
        pack,
        3,
        on(separability.Settings(1.0, "context", "all_rows", ALL_ROWS, "not_selected", 0), device),
        np.full(len(pack.layer), 0.4),
    ),
    "gradient": lambda pack, device: gradient.all_rows(
        pack,
        1.0,
        on(
            gradient.Settings(
                epsilons=[0.001, 0.1],
                directions=2,
                null_rows=256,
                temperature_on="logits",
                seed=1,
                protocol="all_rows",
                all_rows=ALL_ROWS,
            ),
            device,
        ),
    ),
}


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("analysis", sorted(ANALYSES))
def test_an_all_rows_table_is_the_same_in_torch(analysis, causal, monkeypatch):
    import attnlimits_workflow.rows as rows_module

    monkeypatch.setattr(rows_module, "ROW_BLOCK", 5)  # several blocks per head, the last short
    asked = []
    monkeypatch.setattr(
        rows_module, "namespace", lambda device: asked.append(device) or namespace(device)
    )
    pack = random_pack(causal)
    want = ANALYSES[analysis](pack, "numpy")
    assert set(asked) == {"numpy"}
    got = ANALYSES[analysis](pack, "cpu")
    assert set(asked) == {"numpy", "cpu"}  # the job asked for torch on the CPU
    assert want.height > 0
    assert_same_table(want, got)
