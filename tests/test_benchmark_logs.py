"""benchmarks/workflow.py reads the bootstrap's share of a run from the job logs."""

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]


def test_bootstrap_seconds_sum_what_each_job_logged(tmp_path):
    spec = importlib.util.spec_from_file_location("bench", REPO / "benchmarks" / "workflow.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    (tmp_path / "m" / "summarise").mkdir(parents=True)
    (tmp_path / "m" / "summarise" / "distance.log").write_text(
        "2026 summarise bootstrap: 1000 resamples of 8 groups in 0.2s (seed 0)\n"
        "2026 summarise vanishing bootstrap: 4000 rows in 1.5s\n"
    )
    (tmp_path / "m" / "L32.log").write_text(
        "2026 critical_n   masked prefix, monte_carlo: 1000 bootstrap searches in 0.07s (0.1s)\n"
        "2026 critical_n 2000 bootstrap searches in all (3.0s since the job's start)\n"
        "2026 critical_n search done in 9.0s\n"
    )
    assert bench.bootstrap_seconds(tmp_path) == pytest.approx(0.2 + 1.5 + 0.07)


def long_context():
    spec = importlib.util.spec_from_file_location("lc", REPO / "benchmarks" / "long_context.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_all_rows_stage_table_sums_each_stage_per_length(tmp_path):
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    files = {
        "distance/L8192_N1.tsv": "10.0\t0\t300.0",
        "distance/L8192_N5.tsv": "12.5\t0\t340.0",
        "distance/L64_N1.tsv": "0.5\t0\t7.0",
        "gradient/T0.1.tsv": "3.0\t0\t100.0",
        "gradient/T1.tsv": "4.0\t0\t120.0",
    }
    for name, row in files.items():
        path = tmp_path / "benchmarks" / "analysis" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header + row + "\t0\t0\t0\t0\t0\t0\t0\n")
    table = long_context().stage_table(tmp_path)
    assert table[("distance", 8192)] == (22.5, 340.0, 2)
    assert table[("distance", 64)] == (0.5, 7.0, 1)
    assert table[("gradient", -1)] == (7.0, 120.0, 2)  # the T sweep, at its one L
    assert ("critical_n", 8192) not in table


def test_a_truncated_model_keeps_the_first_layers_weights_and_files(tmp_path):
    import json

    import numpy as np
    from safetensors.numpy import load_file, save_file

    src = tmp_path / "model"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"num_hidden_layers": 3, "hidden_size": 2}))
    (src / "tokenizer.json").write_text("{}")
    weights = {f"layers.{i}.w": np.full(2, float(i), dtype=np.float32) for i in range(3)}
    weights |= {"layers.10.w": np.zeros(2, dtype=np.float32)}  # not layer 1's prefix
    save_file(
        {**weights, "embed_tokens.weight": np.ones(2, dtype=np.float32)}, src / "model.safetensors"
    )
    out = tmp_path / "cut"
    assert long_context().truncated_model(src, 2, out) == 3
    assert json.loads((out / "config.json").read_text()) == {
        "num_hidden_layers": 2,
        "hidden_size": 2,
    }
    assert (out / "tokenizer.json").exists()
    assert sorted(load_file(out / "model.safetensors")) == [
        "embed_tokens.weight",
        "layers.0.w",
        "layers.1.w",
    ]
