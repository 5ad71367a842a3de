"""The row engine's pass on one pack, on any device, without Snakemake: for a GPU machine.

Three uses, each printing one line per result:

  --pack DIR --settings JSON --out DIR
        one pass of the row engine (attnlimits_workflow.engine.run_part) over every head of the
        pack at its L, for every analysis the settings plan there, on --device (numpy, cpu,
        cuda); writes the per-sample means (``means.npz``, as rule rows_part saves them) and
        ``timing.json``. --separation: the pairwise_separation table separability reads (its
        Theorem 2 delta under delta_over: context). --part/--parts: one part of the layers.
  --synthetic HEADS HEAD_DIM LENGTH --settings JSON --out DIR
        the same pass on one layer of seeded Gaussian q, k and v of that shape (a causal
        decoder, one KV head per query head): the cost of the pass at an architecture whose
        weights are not here (its arithmetic does not depend on the values; the critical-N
        search, which does, runs in the pooling job, not in the pass).
  --compare A.npz B.npz --pack DIR --settings JSON [--separation PARQUET]
        every table the pooling job makes from A's means against B's: the largest relative
        difference per table (e.g. a GPU pass against the CPU's).

--settings is the resolved analysis section and seed that ``benchmarks/long_context.py
--write-settings`` writes.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import resource
import time
from pathlib import Path

import numpy as np


def planned_at(settings: dict, length: int) -> dict:
    from attnlimits_workflow import engine

    return engine.plan(settings["analysis"], settings["seed"], length)


def with_device(planned: dict, device: str) -> dict:
    """The plan with analysis.all_rows.device set to ``device`` in every analysis."""
    out = {}
    for name, own in planned.items():
        all_rows = {**own["settings"]["all_rows"], "device": device}
        out[name] = {**own, "settings": {**own["settings"], "all_rows": all_rows}}
    return out


def engine_inputs(pack, planned: dict, separation: str | None):
    from attnlimits_workflow import engine
    from attnlimits_workflow.analyses import separability

    if "separability" not in planned:
        return engine.Inputs()
    if separation:
        import polars as pl

        table = pl.read_parquet(separation)
        return engine.Inputs(delta=separability.context_delta(pack, table, separation))
    # a synthetic pack: delta sets the bounds' values, never the pass's cost
    return engine.Inputs(delta=np.ones(len(pack.layer)))


def synthetic_pack(heads: int, head_dim: int, length: int, seed: int = 0):
    """One causal layer of seeded Gaussian q, k, v (scaled as a trained model's logits are, of
    order 1 per key), packed as an all-rows pack."""
    from attnlimits_workflow.packs import Pack

    rng = np.random.default_rng(seed)
    shape = (heads, length, head_dim)
    q = rng.standard_normal(shape, dtype=np.float32)
    k = rng.standard_normal(shape, dtype=np.float32)
    x = rng.standard_normal(shape, dtype=np.float32)
    scale = 1.0 / np.sqrt(head_dim)
    logits = np.einsum("hd,hld->hl", q[:, -1], k) * scale
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    zeros = np.zeros(heads, dtype=np.int64)
    return Pack(
        length=length,
        layer=zeros,
        chunk=zeros,
        head=np.arange(heads),
        weights=weights.astype(np.float32),
        logits=logits.astype(np.float32),
        x=x,
        query_norm=np.linalg.norm(q[:, -1], axis=1),
        key_norm_max=np.linalg.norm(k, axis=2).max(axis=1),
        score_scale=np.full(heads, scale),
        metadata={"causal": True, "softcap": None, "head_dim": head_dim, "n_heads": heads},
        q_rows=q,
        k_rows=k,
        row_sample=None,
    )


def one_pass(pack, settings: dict, args) -> None:
    import torch

    from attnlimits_workflow import engine

    planned = with_device(planned_at(settings, pack.length), args.device)
    inputs = engine_inputs(pack, planned, args.separation)
    log = logging.getLogger("rows")
    if args.device.startswith("cuda"):  # CUDA's start, paid once per job, timed apart
        started = time.perf_counter()
        torch.zeros(1, device=args.device).sum().item()
        log.info("CUDA start %.1f s", time.perf_counter() - started)
    started = time.perf_counter()
    if args.profile:  # where the pass's time goes, by torch operator, on the host and the device
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + (
            [ProfilerActivity.CUDA] if args.device.startswith("cuda") else []
        )
        with profile(activities=activities) as profiled:
            means = engine.run_part(pack, planned, inputs, log, part=args.part, parts=args.parts)
        averages = profiled.key_averages()
        for key in ("self_cpu_time_total", "self_device_time_total"):
            print(averages.table(sort_by=key, row_limit=25, max_name_column_width=40))
    else:
        means = engine.run_part(pack, planned, inputs, log, part=args.part, parts=args.parts)
    seconds = time.perf_counter() - started
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    engine.save_part(means, out / "means.npz")
    heads = len(engine.layers_of_part(pack, args.part, args.parts)) and int(
        np.isin(pack.layer, engine.layers_of_part(pack, args.part, args.parts)).sum()
    )
    record = {
        "seconds": seconds,
        "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        "length": pack.length,
        "heads": heads,
        "seconds_per_head": seconds / max(heads, 1),
        "analyses": sorted(planned),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_gpu_mb": (
            torch.cuda.max_memory_allocated() / 2**20 if args.device.startswith("cuda") else None
        ),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "host": platform.node(),
    }
    (out / "timing.json").write_text(json.dumps(record, indent=1))
    print(json.dumps(record))


def relative_difference(a, b) -> float:
    """Largest |a - b| / |b| where they differ (NaN in the same places, or an AssertionError)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert np.array_equal(np.isnan(a), np.isnan(b)), "NaN in different places"
    ok = ~np.isnan(a) & (a != b)
    return float(np.max(np.abs(a[ok] - b[ok]) / np.abs(b[ok]))) if ok.any() else 0.0


def compare(args, settings: dict) -> None:
    """The per-sample means of two passes, statistic by statistic; and every table pooled from
    them where they cover the pack's every sample."""
    from attnlimits_workflow import engine
    from attnlimits_workflow.packs import read_pack

    means = [engine.read_part(p) for p in args.compare]
    worst = 0.0
    for kernel, own in means[0].items():
        for name, values in own.items():
            worst = max(worst, relative_difference(values, means[1][kernel][name]))
    print(f"per-sample means: largest relative difference {worst:.2e}")
    pack = read_pack(args.pack, settings["analysis"]["embedding"])
    covered = next(iter(means[0].values()))["__samples"]
    if len(covered) != len(pack.layer):
        print(f"tables not pooled: the passes hold {len(covered)} of {len(pack.layer)} samples")
        return
    planned = planned_at(settings, pack.length)
    got = [engine.tables(pack, planned, engine.merge_parts([m])) for m in means]
    worst = 0.0
    for stem, table in got[0].items():
        other = got[1][stem]
        here = 0.0
        for column in table.columns:
            if table[column].dtype.is_numeric():
                here = max(here, relative_difference(table[column], other[column]))
            else:
                assert table[column].to_list() == other[column].to_list(), (stem, column)
        worst = max(worst, here)
        print(f"{stem:28s} largest relative difference {here:.2e}")
    print(f"all {len(got[0])} tables: largest relative difference {worst:.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack")
    parser.add_argument("--synthetic", nargs=3, type=int, metavar=("HEADS", "HEAD_DIM", "LENGTH"))
    parser.add_argument("--compare", nargs=2)
    parser.add_argument("--settings", required=True)
    parser.add_argument("--separation")
    parser.add_argument("--device", default="numpy")
    parser.add_argument("--out", default="engine-pass")
    parser.add_argument("--part", type=int, default=0)
    parser.add_argument("--parts", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="torch.profiler's operator table")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    settings = json.loads(Path(args.settings).read_text())
    if args.compare:
        compare(args, settings)
    elif args.synthetic:
        length = args.synthetic[2]
        section = settings["analysis"]
        # every analysis at the synthetic L, as the settings place them at their own L
        section["lengths"] = [length]
        section["distance"]["length_fixed"] = length
        for name in ("separability", "gradient"):
            section[name]["length"] = length
        one_pass(synthetic_pack(*args.synthetic), settings, args)
    else:
        from attnlimits_workflow.packs import read_pack

        one_pass(read_pack(args.pack, settings["analysis"]["embedding"]), settings, args)


if __name__ == "__main__":
    main()
