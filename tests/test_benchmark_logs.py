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
