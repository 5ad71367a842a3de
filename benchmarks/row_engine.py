"""The all-rows protocol's cost against the extraction, and the critical-N pass by kernel.

Two measurements, printed as tables:

  --ratio RUN [RUN ...]   for each finished run folder (a workflow's --directory), the analysis
                          jobs' seconds summed from Snakemake's own benchmark files
                          (results/<model>/benchmarks/analysis/**) by stage, and their ratio to
                          the extraction jobs' seconds (benchmarks/extract/*): issue 45's
                          yardstick (benchmarks/configs/gpt2-l2048.yaml). Runs side by side are
                          compared row by row.
  --critical RUN          the critical-N pass of Algorithm 3 (every N of the list, both readings,
                          both expectations, one pass over the rows) on RUN's pack at --length,
                          with the fused kernels and with the plain reference kernels, one after
                          the other in this process (the fused ones compiled first, timed apart),
                          and the largest relative difference between their per-head means.

Usage:
  python benchmarks/row_engine.py --ratio /tmp/before /tmp/after
  python benchmarks/row_engine.py --critical /tmp/after --length 2048
"""

from __future__ import annotations

import argparse
import csv
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml


def job_seconds(run: Path) -> dict[str, dict[str, float]]:
    """model -> stage -> summed seconds of its benchmark files (first column, s)."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for tsv in sorted(run.glob("results/*/benchmarks/**/*.tsv")):
        model = tsv.relative_to(run / "results").parts[0]
        parts = tsv.relative_to(run / "results" / model / "benchmarks").parts
        stage = "/".join(parts[:2]) if parts[0] == "analysis" else parts[0]
        with tsv.open() as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        out[model][stage] += float(rows[-1]["s"])
    return out


def ratio_table(runs: list[Path]) -> None:
    seconds = [job_seconds(run) for run in runs]
    models = sorted({m for s in seconds for m in s})
    for model in models:
        stages = sorted({st for s in seconds for st in s.get(model, {})})
        print(f"\n{model}: job seconds by stage ({' | '.join(str(r) for r in runs)})")
        for stage in stages:
            values = " | ".join(f"{s.get(model, {}).get(stage, 0.0):9.2f}" for s in seconds)
            print(f"  {stage:32s} {values}")
        for label, run_seconds in zip(runs, seconds, strict=True):
            own = run_seconds.get(model, {})
            analysis = sum(v for k, v in own.items() if k.startswith("analysis/"))
            extract = own.get("extract", float("nan"))
            print(
                f"  {label}: analysis {analysis:.2f} s, extraction {extract:.2f} s, "
                f"ratio {analysis / extract:.2f}"
            )


def critical_pass(run: Path, length: int) -> None:
    from attnlimits.protocol import critical_n_list, fixed_fraction_ns
    from attnlimits_workflow.packs import read_pack
    from attnlimits_workflow.rows import _critical_rows, monte_carlo_rows, pool_chunks, row_means

    (model_dir,) = [p for p in (run / "results").iterdir() if (p / "samples").is_dir()]
    config = yaml.safe_load((model_dir / "summary" / "config.yaml").read_text())
    analysis = config["analysis"]
    rows = analysis["all_rows"]
    pack = read_pack(model_dir / "samples" / f"L{length}", analysis["embedding"])

    # a run planned before critical_n_band_edges existed has none
    grid = critical_n_list(
        length, rows["critical_n_fractions"], rows.get("critical_n_band_edges", ())
    )
    fixed = fixed_fraction_ns(length, analysis["critical_n"]["d_fractions"])
    ns = sorted(set(grid) | set(fixed.values()))
    causal = bool(pack.metadata["causal"])
    readings = ("non_selected", "prefix") if causal else ("both",)
    count = None if rows["rows"] == "all" else rows["rows"]
    mc_rows = monte_carlo_rows(length, rows["mc_rows"], count)

    def one_pass(fused: bool) -> tuple[float, dict]:
        started = time.perf_counter()
        means = row_means(
            pack,
            _critical_rows(ns, readings, config["seed"], length, mc_rows, rows["mc_draws"], fused),
            masked="non_selected",
            chunks=rows["chunks"],
            zero_weight=analysis["zero_weight"],
            row_count=count,
            row_seed=config["seed"],
        )
        return time.perf_counter() - started, pool_chunks(pack, means)

    started = time.perf_counter()
    first, _ = one_pass(True)
    print(f"first fused pass (numba compile or cache load included): {first:.2f} s")
    fast, got = one_pass(True)
    plain, want = one_pass(False)
    worst = 0.0
    for name, values in want.items():
        if name in ("layer", "head", "chunks") or name.endswith("_rows"):
            continue
        a, b = np.asarray(got[name], dtype=float), np.asarray(values, dtype=float)
        assert np.array_equal(np.isnan(a), np.isnan(b)), name
        ok = ~np.isnan(b)
        if ok.any():
            rel = float(np.max(np.abs(a[ok] - b[ok]) / np.abs(b[ok])))
            if rel > 1e-12:
                print(f"    {name}: relative difference {rel:.2e}")
            worst = max(worst, rel)
    print(f"L = {length}, {len(ns)} N x {len(readings)} readings, {len(pack.layer)} samples")
    print(f"  fused kernels      {fast:8.2f} s")
    print(f"  reference kernels  {plain:8.2f} s  ({plain / fast:.1f} x)")
    print(f"  largest relative difference of a per-head mean: {worst:.2e}")
    print(f"  (whole benchmark {time.perf_counter() - started:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ratio", nargs="+", type=Path)
    parser.add_argument("--critical", type=Path)
    parser.add_argument("--length", type=int, default=2048)
    args = parser.parse_args()
    if args.ratio:
        ratio_table(args.ratio)
    if args.critical:
        critical_pass(args.critical, args.length)


if __name__ == "__main__":
    main()
