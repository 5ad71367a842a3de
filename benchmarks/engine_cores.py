"""The row engine as Snakemake runs it on a laptop: part jobs side by side, one thread each.

Snakemake gives each ``rows_part`` job one core (threads: 1, so OPENBLAS_NUM_THREADS=1) and runs
as many side by side as ``--cores`` allows; the parts split a length's layers
(analysis.all_rows.jobs_per_length). One pass over a layer costs the same whichever layer it
is, so the whole model's analysis time at L is (the wall time of ``--side-by-side`` passes over
one layer's pack, run at once) x (the model's layers / ``--side-by-side``). This measures that
for every L of a run's packs, then the bare forward pass of the whole model at the largest L
(benchmarks/long_context.py's "floor", both cores, the same invocation; the best of
``--forward-runs``, each in a fresh process), and prints each L's seconds and the whole model's
ratio to the forward.

  python benchmarks/engine_cores.py --packs RUN --settings JSON --layers 30 --model DIR

RUN holds the packs (RUN/samples/L<L>, all-rows packs of one layer, e.g. a run of the model cut
to its first layer) and Theorem 2's tables (RUN/analysis/separation/L<L>.parquet); JSON is the
resolved analysis section (benchmarks/long_context.py --write-settings). Nothing else should run
on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ONE_THREAD = {
    name: "1"
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
}


def side_by_side(pack: Path, separation: Path, settings: str, copies: int, out: Path) -> dict:
    """``copies`` passes of benchmarks/engine_pass.py over ``pack`` at once, one thread each:
    their wall time and each one's own seconds and peak memory."""
    env = {**os.environ, **ONE_THREAD}
    started = time.perf_counter()
    procs = []
    for copy in range(copies):
        where = out / f"{pack.name}-{copy}"
        command = [
            sys.executable,
            str(HERE / "engine_pass.py"),
            "--pack",
            str(pack),
            "--settings",
            settings,
            "--out",
            str(where),
        ]
        if separation.exists():
            command += ["--separation", str(separation)]
        log = open(out / f"{pack.name}-{copy}.log", "w")  # noqa: SIM115 (closed below)
        procs.append((subprocess.Popen(command, env=env, stdout=log, stderr=log), log, where))
    timings = []
    for proc, log, where in procs:
        if proc.wait() != 0:
            sys.exit(f"engine_pass.py failed: see {log.name}")
        log.close()
        timings.append(json.loads((where / "timing.json").read_text()))
    return {"wall": time.perf_counter() - started, "passes": timings}


def forward_seconds(model: str, length: int, runs: int) -> list[float]:
    """The bare forward pass of the whole model at ``length`` (long_context.py's floor, on
    every core), each run in its own process."""
    out = []
    for _ in range(runs):
        command = [sys.executable, str(HERE / "long_context.py"), "--model", model]
        got = subprocess.run(
            [*command, "--one", "floor", str(length)], check=True, capture_output=True, text=True
        )
        out.append(float(json.loads(got.stdout.strip().splitlines()[-1])["seconds"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packs", required=True, help="a run folder: samples/L<L>, analysis/")
    parser.add_argument("--settings", required=True)
    parser.add_argument("--layers", type=int, required=True, help="the whole model's layers")
    parser.add_argument("--model", help="the whole model's folder, for the forward pass")
    parser.add_argument("--side-by-side", type=int, default=2, help="cores: passes at once")
    parser.add_argument("--lengths", type=int, nargs="+", help="default: every pack")
    parser.add_argument("--out", default="engine-cores")
    parser.add_argument("--forward-runs", type=int, default=3, help="the forward's best of")
    parser.add_argument("--forward-only", action="store_true", help="no passes: the forward")
    args = parser.parse_args()
    run, out = Path(args.packs), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lengths = args.lengths or sorted(
        int(p.name[1:]) for p in (run / "samples").glob("L*") if p.is_dir()
    )
    rows = []
    for length in [] if args.forward_only else sorted(lengths, reverse=True):
        got = side_by_side(
            run / "samples" / f"L{length}",
            run / "analysis" / "separation" / f"L{length}.parquet",
            args.settings,
            args.side_by_side,
            out,
        )
        per_layer = got["wall"] / args.side_by_side
        rows.append(
            {
                "L": length,
                "wall_s": got["wall"],
                "per_layer_s": per_layer,
                "model_s": per_layer * args.layers,
                "pass_s": [round(p["seconds"], 1) for p in got["passes"]],
                "peak_rss_mb": max(p["peak_rss_mb"] for p in got["passes"]),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    total = sum(r["model_s"] for r in rows)
    summary = {"model_s": total, "layers": args.layers, "side_by_side": args.side_by_side}
    if args.model:
        forwards = forward_seconds(args.model, max(lengths), args.forward_runs)
        summary |= {"forward_runs_s": forwards, "ratio": total / min(forwards)}
    print(json.dumps(summary), flush=True)
    (out / "engine_cores.json").write_text(json.dumps({"lengths": rows, **summary}, indent=1))


if __name__ == "__main__":
    main()
